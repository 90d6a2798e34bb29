/* An epoll fd inside another epoll fd, inside poll() and inside select(),
 * watching a TCP pair that carried data first (so over a verbs device the
 * watched socket is upgraded and its readiness no longer the kernel
 * socket's): readiness seen through one and two levels of nesting,
 * level-triggered and edge-triggered outer sets, a blocked outer wait woken
 * by data arriving later, EPOLLOUT and hang-ups seen as the inner set's
 * EPOLLIN, a one-shot inner entry that fired no longer making the inner set
 * ready, and ELOOP for a cycle. */
#include "common.h"
#include "warm_up.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

static void add(int ep, int fd, uint32_t events, uint64_t data) {
  struct epoll_event ev = {.events = events, .data.u64 = data};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) CT_FAIL("EPOLL_CTL_ADD: %s", ct_errname(errno));
}

/* One epoll_wait; prints count and, per event sorted by data, "data:EVENTS". */
static int wait_show(int ep, const char* what, int timeout) {
  struct epoll_event ev[4];
  int rc = epoll_wait(ep, ev, 4, timeout);
  if (rc < 0) CT_FAIL("%s: epoll_wait: %s", what, ct_errname(errno));
  if (rc == 2 && ev[0].data.u64 > ev[1].data.u64) {
    struct epoll_event t = ev[0];
    ev[0] = ev[1];
    ev[1] = t;
  }
  char line[256];
  int len = snprintf(line, sizeof line, "%s: %d", what, rc);
  for (int i = 0; i < rc && i < 2 && len < (int)sizeof line; ++i)
    len += snprintf(line + len, sizeof line - len, " %llu:%s", (unsigned long long)ev[i].data.u64,
                    ct_epoll_str(ev[i].events));
  ct_out("%s", line);
  return rc;
}

static void poll_show(int fd, const char* what, int timeout) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int rc = poll(&p, 1, timeout);
  if (rc < 0) CT_FAIL("%s: poll: %s", what, ct_errname(errno));
  ct_out("%s: poll=%d %s", what, rc, ct_poll_str(p.revents));
}

static void select_show(int fd, const char* what, int timeout_ms) {
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(fd, &rd);
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  int rc = select(fd + 1, &rd, NULL, NULL, &tv);
  if (rc < 0) CT_FAIL("%s: select: %s", what, ct_errname(errno));
  ct_out("%s: select=%d %s", what, rc, FD_ISSET(fd, &rd) ? "r" : "-");
}

/* All three views of one epoll fd at once (timeout 0). */
static void show_all(int inner, const char* what) {
  char label[160];
  snprintf(label, sizeof label, "%s, poll on the inner set", what);
  poll_show(inner, label, 0);
  snprintf(label, sizeof label, "%s, select on the inner set", what);
  select_show(inner, label, 0);
}

/* A helper thread that sends one byte after a delay, so a wait blocks first. */
struct late_send {
  int fd;
  long delay_ms;
  pthread_t thread;
};

static void* late_send_main(void* arg) {
  struct late_send* ls = arg;
  ct_sleep_ms(ls->delay_ms);
  if (send(ls->fd, "L", 1, 0) != 1) CT_FAIL("late send: %s", ct_errname(errno));
  return NULL;
}

static void late_send_start(struct late_send* ls, int fd) {
  ls->fd = fd;
  ls->delay_ms = 100;
  if (pthread_create(&ls->thread, NULL, late_send_main, ls) != 0) CT_FAIL("pthread_create");
}

static void drain(int fd, size_t want) {
  char buf[2048];
  size_t got = 0;
  while (got < want) {
    ssize_t n = recv(fd, buf, sizeof buf < want - got ? sizeof buf : want - got, 0);
    if (n <= 0) CT_FAIL("drain: %zd %s", n, ct_errname(errno));
    got += (size_t)n;
  }
}

static void levels(void) {
  ct_out("-- one and two levels, level and edge-triggered outer sets");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int inner = CT_OK("epoll_create1 inner", epoll_create1(0));
  int outer = CT_OK("epoll_create1 outer (level)", epoll_create1(0));
  int outer_et = CT_OK("epoll_create1 outer (edge)", epoll_create1(0));
  int top = CT_OK("epoll_create1 top (holds the outer set)", epoll_create1(0));
  add(inner, server, EPOLLIN, 1);
  add(outer, inner, EPOLLIN, 2);
  add(outer_et, inner, EPOLLIN | EPOLLET, 3);
  add(top, outer, EPOLLIN, 4);
  ct_out("sets built: inner(tcp) in outer, inner in outer-edge, outer in top");

  wait_show(inner, "idle, inner", 0);
  wait_show(outer, "idle, outer", 0);
  wait_show(outer_et, "idle, outer-edge", 0);
  wait_show(top, "idle, top", 0);
  show_all(inner, "idle");

  static unsigned char block[1024];
  ct_pattern(block, sizeof block, 5, 0);
  ct_send_all(client, block, sizeof block);
  ct_wait_readable(server);
  wait_show(outer, "1 KiB sent, outer", 2000);
  wait_show(outer, "outer again (level)", 0);
  wait_show(outer_et, "outer-edge", 2000);
  wait_show(outer_et, "outer-edge again, no new edge", 0);
  wait_show(top, "top", 2000);
  poll_show(inner, "poll on the inner set", 2000);
  select_show(inner, "select on the inner set", 2000);
  wait_show(inner, "inner itself", 0);
  wait_show(outer, "outer after the inner wait (level)", 0);

  drain(server, sizeof block);
  wait_show(inner, "drained, inner", 0);
  wait_show(outer, "drained, outer", 0);
  wait_show(outer_et, "drained, outer-edge", 0);
  wait_show(top, "drained, top", 0);
  show_all(inner, "drained");

  CT_RC("send 1 byte", send(client, "n", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(outer_et, "new data, outer-edge: a new edge", 2000);
  wait_show(top, "new data, top", 2000);
  drain(server, 1);

  /* Blocked waits woken by data that arrives later. */
  struct late_send ls;
  late_send_start(&ls, client);
  wait_show(outer, "outer blocked, woken by late data", 5000);
  pthread_join(ls.thread, NULL);
  drain(server, 1);
  late_send_start(&ls, client);
  wait_show(outer_et, "outer-edge blocked, woken by late data", 5000);
  pthread_join(ls.thread, NULL);
  drain(server, 1);
  late_send_start(&ls, client);
  wait_show(top, "top blocked, woken by late data", 5000);
  pthread_join(ls.thread, NULL);
  drain(server, 1);
  late_send_start(&ls, client);
  poll_show(inner, "poll on the inner set blocked, woken by late data", 5000);
  pthread_join(ls.thread, NULL);
  drain(server, 1);
  late_send_start(&ls, client);
  select_show(inner, "select on the inner set blocked, woken by late data", 5000);
  pthread_join(ls.thread, NULL);
  drain(server, 1);
  wait_show(outer, "all drained, outer", 0);
  wait_show(top, "all drained, top", 0);

  struct epoll_event ev = {.events = EPOLLIN};
  CT_ERR("ADD the outer set into the inner set (a cycle)", epoll_ctl(inner, EPOLL_CTL_ADD, outer, &ev), ELOOP);
  CT_ERR("ADD the top set into the inner set (a cycle)", epoll_ctl(inner, EPOLL_CTL_ADD, top, &ev), ELOOP);

  close(top);
  close(outer_et);
  close(outer);
  close(inner);
  close(client);
  close(server);
}

static void other_events(void) {
  ct_out("-- EPOLLOUT, hang-ups and one-shot through nesting");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int inner_out = CT_OK("epoll_create1 inner (EPOLLOUT)", epoll_create1(0));
  int inner_once = CT_OK("epoll_create1 inner (one-shot)", epoll_create1(0));
  int inner_hup = CT_OK("epoll_create1 inner (EPOLLRDHUP)", epoll_create1(0));
  int outer = CT_OK("epoll_create1 outer", epoll_create1(0));
  add(inner_out, client, EPOLLOUT, 1);
  add(inner_once, server, EPOLLIN | EPOLLONESHOT, 2);
  add(inner_hup, server, EPOLLRDHUP, 3);
  add(outer, inner_out, EPOLLIN, 10);
  add(outer, inner_once, EPOLLIN, 20);
  add(outer, inner_hup, EPOLLIN, 30);
  wait_show(outer, "writable client: outer", 2000);
  poll_show(inner_out, "poll on the EPOLLOUT set", 0);

  CT_RC("send", send(client, "o", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(outer, "data: outer", 2000);
  wait_show(inner_once, "one-shot inner fires", 0);
  wait_show(outer, "one-shot fired: outer", 0);
  poll_show(inner_once, "poll on the fired one-shot set", 0);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = 2};
  CT_RC("MOD re-arm the one-shot entry", epoll_ctl(inner_once, EPOLL_CTL_MOD, server, &ev), 0);
  wait_show(outer, "re-armed: outer", 2000);
  drain(server, 1);
  CT_RC("DEL the EPOLLOUT set from the outer set", epoll_ctl(outer, EPOLL_CTL_DEL, inner_out, NULL), 0);
  wait_show(outer, "drained: outer", 0);

  CT_RC("peer SHUT_WR", shutdown(client, SHUT_WR), 0);
  wait_show(outer, "peer SHUT_WR: outer", 2000);
  wait_show(inner_hup, "peer SHUT_WR: EPOLLRDHUP set", 0);
  poll_show(inner_hup, "poll on the EPOLLRDHUP set", 0);

  close(outer);
  close(inner_out);
  close(inner_once);
  close(inner_hup);
  close(client);
  close(server);
}

/* An inner set that holds both an upgraded socket and a pipe. */
static void mixed_inner(void) {
  ct_out("-- inner set with a TCP socket and a pipe");
  int client, server, pipefd[2];
  ct_tcp_pair_warm(&client, &server);
  CT_RC("pipe", pipe(pipefd), 0);
  int inner = CT_OK("epoll_create1 inner", epoll_create1(0));
  int outer = CT_OK("epoll_create1 outer (edge)", epoll_create1(0));
  add(inner, server, EPOLLIN, 1);
  add(inner, pipefd[0], EPOLLIN, 2);
  add(outer, inner, EPOLLIN | EPOLLET, 10);
  wait_show(outer, "idle", 0);
  CT_RC("write pipe", write(pipefd[1], "p", 1), 1);
  wait_show(outer, "pipe written", 2000);
  wait_show(outer, "no new edge", 0);
  CT_RC("send tcp", send(client, "t", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(outer, "tcp data: a new edge", 2000);
  wait_show(inner, "inner", 0);
  char c;
  CT_RC("read pipe", read(pipefd[0], &c, 1), 1);
  drain(server, 1);
  wait_show(inner, "inner drained", 0);
  poll_show(inner, "poll on the drained inner set", 0);
  close(outer);
  close(inner);
  close(pipefd[0]);
  close(pipefd[1]);
  close(client);
  close(server);
}

int main(void) {
  ct_start("epoll_nested");
  levels();
  other_events();
  mixed_inner();
  return 0;
}
