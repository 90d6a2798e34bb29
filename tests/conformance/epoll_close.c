/* epoll and fd lifetime: closing an fd removes it from the set only when
 * its last copy closes (a dup keeps the registration alive, yet the closed
 * number can no longer be deleted), reusing an fd number, one socket in two
 * epoll sets, an epoll fd inside another epoll fd and inside poll(). */
#include "common.h"

#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

static void wait_show(int ep, const char* what, int timeout) {
  struct epoll_event ev[4];
  int rc = epoll_wait(ep, ev, 4, timeout);
  if (rc < 0) CT_FAIL("epoll_wait: %s", ct_errname(errno));
  if (rc == 0) {
    ct_out("%s: 0", what);
    return;
  }
  if (rc > 1) CT_FAIL("%s: %d events, expected at most one", what, rc);
  ct_out("%s: 1 tag=%llu %s", what, (unsigned long long)ev[0].data.u64, ct_epoll_str(ev[0].events));
}

static void add(int ep, int fd, uint64_t tag) {
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) CT_FAIL("EPOLL_CTL_ADD: %s", ct_errname(errno));
}

static void close_removes(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, 1);
  CT_RC("send", send(client, "x", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(ep, "ready before close", 0);
  CT_RC("close the registered fd", close(server), 0);
  wait_show(ep, "after close", 0);
  CT_ERR("EPOLL_CTL_DEL of the closed fd", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), EBADF);
  int fresh = CT_OK("new socket", socket(AF_INET, SOCK_STREAM, 0));
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 2};
  CT_RC("EPOLL_CTL_ADD the new socket", epoll_ctl(ep, EPOLL_CTL_ADD, fresh, &ev), 0);
  wait_show(ep, "new unconnected socket", 0);
  close(fresh);
  close(client);
  close(ep);
}

static void dup_keeps_registration(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, 3);
  int copy = CT_OK("dup the registered fd", dup(server));
  CT_RC("close the registered fd", close(server), 0);
  CT_RC("send", send(client, "y", 1, 0), 1);
  ct_wait_readable(copy);
  wait_show(ep, "data while a dup is open", 1000);
  CT_ERR("EPOLL_CTL_DEL of the closed number", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), EBADF);
  CT_ERR("EPOLL_CTL_DEL of the dup", epoll_ctl(ep, EPOLL_CTL_DEL, copy, NULL), ENOENT);
  char c;
  CT_RC("recv through the dup", recv(copy, &c, 1, 0), 1);
  wait_show(ep, "drained", 0);
  CT_RC("close the dup", close(copy), 0);
  CT_RC("send after the last copy closed", send(client, "z", 1, 0), 1);
  wait_show(ep, "after the last copy closed", 50);
  close(client);
  close(ep);
}

static void two_sets_and_nesting(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int ep1 = CT_OK("epoll_create1 first", epoll_create1(0));
  int ep2 = CT_OK("epoll_create1 second", epoll_create1(0));
  int outer = CT_OK("epoll_create1 outer", epoll_create1(0));
  add(ep1, server, 10);
  add(ep2, server, 20);
  add(outer, ep1, 30);
  wait_show(outer, "outer, nothing ready", 0);
  struct pollfd p = {.fd = ep1, .events = POLLIN};
  CT_RC("poll on the epoll fd, nothing ready", poll(&p, 1, 0), 0);
  CT_RC("send", send(client, "n", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(ep1, "first set", 1000);
  wait_show(ep2, "second set", 1000);
  wait_show(outer, "outer sees the inner set ready", 1000);
  CT_RC("poll on the epoll fd", poll(&p, 1, 1000), 1);
  ct_out("poll revents on the epoll fd: %s", ct_poll_str(p.revents));
  CT_RC("EPOLL_CTL_DEL from the first set", epoll_ctl(ep1, EPOLL_CTL_DEL, server, NULL), 0);
  wait_show(ep1, "first set after DEL", 0);
  wait_show(ep2, "second set still reports", 0);
  wait_show(outer, "outer after DEL", 0);
  close(outer);
  close(ep1);
  close(ep2);
  close(client);
  close(server);
}

int main(void) {
  ct_start("epoll_close");
  close_removes();
  dup_keeps_registration();
  two_sets_and_nesting();
  return 0;
}
