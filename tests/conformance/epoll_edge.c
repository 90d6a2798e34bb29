/* Edge-triggered and one-shot epoll: EPOLLET on TCP, UDP, pipe and eventfd
 * (one event per arrival, none for leftovers), EPOLLET|EPOLLOUT on a
 * nonblocking connect, EPOLLONESHOT and re-arming with EPOLL_CTL_MOD,
 * EPOLLRDHUP/EPOLLHUP on half and full close, EPOLLERR on reset with an
 * empty interest mask, EPOLLPRI on urgent data. */
#include "common.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void add(int ep, int fd, uint32_t events, const char* label) {
  struct epoll_event ev = {.events = events, .data.fd = 0};
  CT_RC(label, epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
}

/* Waits up to timeout ms and prints the count and the events. */
static uint32_t wait_show(int ep, const char* what, int timeout) {
  struct epoll_event ev[4];
  int rc = epoll_wait(ep, ev, 4, timeout);
  if (rc < 0) CT_FAIL("epoll_wait: %s", ct_errname(errno));
  if (rc > 1) CT_FAIL("%s: %d events, one fd per epoll set here", what, rc);
  if (rc == 0) ct_out("%s: 0", what);
  else ct_out("%s: %d %s", what, rc, ct_epoll_str(ev[0].events));
  return rc ? ev[0].events : 0;
}

/* Level-triggered sets only: waits silently until `bit` shows, prints once. */
static void wait_until(int ep, uint32_t bit, const char* what) {
  struct epoll_event ev[4];
  for (int i = 0; i < 100; ++i) {
    int rc = epoll_wait(ep, ev, 4, 20);
    if (rc == 1 && (ev[0].events & bit)) {
      ct_out("%s: 1 %s", what, ct_epoll_str(ev[0].events));
      return;
    }
  }
  CT_FAIL("%s: %s never reported", what, ct_epoll_str(bit));
}

static void edge_tcp(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  fcntl(server, F_SETFL, O_NONBLOCK);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN | EPOLLET, "ADD tcp EPOLLIN|EPOLLET");
  wait_show(ep, "tcp idle", 0);
  CT_RC("send 2 bytes", send(client, "ab", 2, 0), 2);
  wait_show(ep, "tcp data", 1000);
  wait_show(ep, "tcp same data again", 0);
  char buf[8];
  CT_RC("recv 1 of 2", recv(server, buf, 1, 0), 1);
  wait_show(ep, "tcp leftover byte, no new edge", 0);
  CT_RC("send 1 more", send(client, "c", 1, 0), 1);
  wait_show(ep, "tcp new data, new edge", 1000);
  CT_RC("recv all", recv(server, buf, sizeof buf, 0), 2);
  CT_ERR("recv until EAGAIN", recv(server, buf, sizeof buf, 0), EAGAIN);
  wait_show(ep, "tcp drained", 0);
  close(ep);
  close(client);
  close(server);
}

static void edge_udp_pipe_eventfd(void) {
  struct sockaddr_in b_addr;
  int a = ct_udp_bound(NULL);
  int b = ct_udp_bound(&b_addr);
  int ep_udp = CT_OK("epoll_create1 udp", epoll_create1(0));
  add(ep_udp, b, EPOLLIN | EPOLLET, "ADD udp EPOLLIN|EPOLLET");
  sendto(a, "1", 1, 0, (struct sockaddr*)&b_addr, sizeof b_addr);
  wait_show(ep_udp, "udp first datagram", 1000);
  wait_show(ep_udp, "udp nothing new", 0);
  sendto(a, "2", 1, 0, (struct sockaddr*)&b_addr, sizeof b_addr);
  wait_show(ep_udp, "udp second datagram", 1000);
  close(ep_udp);
  close(a);
  close(b);

  int pipefd[2];
  CT_RC("pipe", pipe(pipefd), 0);
  int efd = CT_OK("eventfd", eventfd(0, EFD_NONBLOCK));
  int ep_pipe = CT_OK("epoll_create1 pipe", epoll_create1(0));
  int ep_efd = CT_OK("epoll_create1 eventfd", epoll_create1(0));
  add(ep_pipe, pipefd[0], EPOLLIN | EPOLLET, "ADD pipe EPOLLIN|EPOLLET");
  add(ep_efd, efd, EPOLLIN | EPOLLET, "ADD eventfd EPOLLIN|EPOLLET");
  CT_RC("write pipe", write(pipefd[1], "x", 1), 1);
  uint64_t one = 1;
  CT_RC("write eventfd", write(efd, &one, sizeof one), 8);
  wait_show(ep_pipe, "pipe written", 1000);
  wait_show(ep_efd, "eventfd written", 1000);
  wait_show(ep_pipe, "pipe again", 0);
  wait_show(ep_efd, "eventfd again", 0);
  CT_RC("write pipe", write(pipefd[1], "y", 1), 1);
  CT_RC("write eventfd", write(efd, &one, sizeof one), 8);
  wait_show(ep_pipe, "pipe written again", 1000);
  wait_show(ep_efd, "eventfd written again", 1000);
  close(ep_pipe);
  close(ep_efd);
  close(pipefd[0]);
  close(pipefd[1]);
  close(efd);
}

static void edge_connect(void) {
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  int fd = CT_OK("socket nonblocking", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
  CT_ERR("connect", connect(fd, (struct sockaddr*)&addr, sizeof addr), EINPROGRESS);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, fd, EPOLLOUT | EPOLLET, "ADD connecting socket EPOLLOUT|EPOLLET");
  wait_show(ep, "connect completed", 2000);
  wait_show(ep, "no second edge", 0);
  close(ep);
  close(fd);
  close(listener);
}

static void oneshot(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN | EPOLLONESHOT, "ADD tcp EPOLLIN|EPOLLONESHOT");
  CT_RC("send", send(client, "1", 1, 0), 1);
  wait_show(ep, "oneshot fires", 1000);
  CT_RC("send more", send(client, "2", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(ep, "oneshot disabled", 50);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT};
  CT_RC("MOD re-arm", epoll_ctl(ep, EPOLL_CTL_MOD, server, &ev), 0);
  wait_show(ep, "re-armed, data pending", 1000);
  wait_show(ep, "disabled again", 0);
  struct epoll_event dup_add = {.events = EPOLLIN};
  CT_ERR("ADD while disarmed still EEXIST", epoll_ctl(ep, EPOLL_CTL_ADD, server, &dup_add), EEXIST);
  close(ep);
  close(client);
  close(server);
}

static void hangups(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN | EPOLLRDHUP | EPOLLPRI, "ADD tcp EPOLLIN|EPOLLRDHUP|EPOLLPRI");
  CT_RC("send MSG_OOB", send(client, "!", 1, MSG_OOB), 1);
  wait_show(ep, "urgent data", 1000);
  char c;
  CT_RC("recv MSG_OOB", recv(server, &c, 1, MSG_OOB), 1);
  CT_RC("peer SHUT_WR", shutdown(client, SHUT_WR), 0);
  wait_until(ep, EPOLLRDHUP, "after peer SHUT_WR");
  CT_RC("own SHUT_WR", shutdown(server, SHUT_WR), 0);
  wait_until(ep, EPOLLHUP, "after both SHUT_WR");
  close(ep);
  close(client);
  close(server);

  ct_tcp_pair(&client, &server);
  ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, client, 0, "ADD tcp with no events");
  CT_RC("send", send(client, "unread", 6, 0), 6);
  ct_wait_readable(server);
  CT_RC("peer closes with unread data (reset)", close(server), 0);
  wait_until(ep, EPOLLERR, "after reset");
  close(ep);
  close(client);

  // The same with the bytes written before accept(): over libvsock they go
  // on TCP ahead of the upgrade (protocol.md §2, "Until Bound"). The server
  // works a little (the client takes Bound and sends its Switch meanwhile),
  // then closes before it took that Switch: its TCP socket resets.
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  client = ct_tcp_connect(&addr);
  ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, client, 0, "ADD early writer with no events");
  CT_RC("send before accept()", send(client, "early", 5, 0), 5);
  server = accept(listener, NULL, NULL);
  if (server < 0) CT_FAIL("accept: %s", ct_errname(errno));
  ct_wait_readable(server);
  usleep(10000);
  CT_RC("peer closes with the early bytes unread (reset)", close(server), 0);
  wait_until(ep, EPOLLERR, "after reset of an early writer");
  close(ep);
  close(client);
  close(listener);
}

int main(void) {
  ct_start("epoll_edge");
  edge_tcp();
  edge_udp_pipe_eventfd();
  edge_connect();
  oneshot();
  hangups();
  return 0;
}
