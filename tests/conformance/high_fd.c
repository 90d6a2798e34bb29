/* Sockets on high fd numbers: raise RLIMIT_NOFILE to its hard limit, open
 * over a thousand sockets so new ones land above 1024 (FD_SETSIZE), connect,
 * accept, send and epoll on them; dup2 sockets to fds 5000 and, if the limit
 * allows, 70000 (past 64K) and use them there. */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

enum { kFiller = 1100, kHigh = 5000, kHigher = 70000 };

static void use_tcp_pair(int client, int server, const char* what) {
  char buf[8];
  if (send(client, "hi", 2, 0) != 2) CT_FAIL("%s: send: %s", what, ct_errname(errno));
  ct_wait_readable(server);
  if (recv(server, buf, sizeof buf, 0) != 2) CT_FAIL("%s: recv: %s", what, ct_errname(errno));
  if (send(server, "yo", 2, 0) != 2) CT_FAIL("%s: send back: %s", what, ct_errname(errno));
  ct_wait_readable(client);
  if (recv(client, buf, sizeof buf, 0) != 2) CT_FAIL("%s: recv back: %s", what, ct_errname(errno));
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = client};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, client, &ev) != 0) CT_FAIL("%s: epoll_ctl: %s", what, ct_errname(errno));
  send(server, "!", 1, 0);
  struct epoll_event out;
  int n = epoll_wait(ep, &out, 1, 2000);
  if (n != 1 || out.data.fd != client) CT_FAIL("%s: epoll_wait returned %d", what, n);
  recv(client, buf, sizeof buf, 0);
  close(ep);
  ct_out("%s: send, recv, poll and epoll work", what);
}

/* Moves fd to number `target`, closes the old number, and uses it. */
static void move_and_use(int client, int server, int target, const char* what) {
  if (dup2(client, target) != target) CT_FAIL("%s: dup2: %s", what, ct_errname(errno));
  close(client);
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(target, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    CT_FAIL("%s: SO_TYPE: %s", what, ct_errname(errno));
  CT_CHECK(fcntl(target, F_GETFD) == 0, "the moved socket has no FD_CLOEXEC");
  use_tcp_pair(target, server, what);
  CT_RC("close the moved socket", close(target), 0);
  char c;
  ct_wait_readable(server);
  CT_RC("peer sees EOF", recv(server, &c, 1, 0), 0);
}

int main(void) {
  ct_start("high_fd");
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) CT_FAIL("getrlimit: %s", ct_errname(errno));
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) CT_FAIL("setrlimit: %s", ct_errname(errno));
  if (lim.rlim_cur <= kHigh) ct_skip("RLIMIT_NOFILE hard limit is too low for fd 5000");
  ct_out("RLIMIT_NOFILE raised to the hard limit");

  static int filler[kFiller];
  int opened = 0;
  for (; opened < kFiller; ++opened) {
    filler[opened] = socket(AF_INET, SOCK_DGRAM, 0);
    if (filler[opened] < 0) CT_FAIL("socket #%d: %s", opened, ct_errname(errno));
  }
  ct_out("opened %d udp sockets", opened);

  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  int client, server;
  client = ct_tcp_connect(&addr);
  server = CT_OK("accept", accept(listener, NULL, NULL));
  CT_CHECK(listener >= 1024 && client >= 1024 && server >= 1024, "listener, client and accepted fds are above 1024");
  use_tcp_pair(client, server, "tcp above 1024");

  struct sockaddr_in u_addr;
  int u1 = ct_udp_bound(NULL);
  int u2 = ct_udp_bound(&u_addr);
  CT_CHECK(u1 >= 1024 && u2 >= 1024, "udp fds are above 1024");
  CT_RC("sendto between high udp fds", sendto(u1, "d", 1, 0, (struct sockaddr*)&u_addr, sizeof u_addr), 1);
  ct_wait_readable(u2);
  char c;
  CT_RC("recv on high udp fd", recv(u2, &c, 1, 0), 1);

  for (int i = 0; i < opened; ++i) close(filler[i]);
  ct_out("closed the filler sockets");

  move_and_use(client, server, kHigh, "tcp moved to fd 5000");
  close(server);
  if (lim.rlim_cur > kHigher) {
    client = ct_tcp_connect(&addr);
    server = CT_OK("accept", accept(listener, NULL, NULL));
    move_and_use(client, server, kHigher, "tcp moved to fd 70000");
    close(server);
  } else {
    ct_out("fd 70000: beyond RLIMIT_NOFILE, not tried");
  }
  close(u1);
  close(u2);
  close(listener);
  return 0;
}
