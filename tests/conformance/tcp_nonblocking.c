/* Nonblocking TCP: EINPROGRESS, POLLOUT and SO_ERROR on connect (success and
 * refusal), EAGAIN from accept/recv/read/send, accept4 flags, filling the send
 * buffer until EAGAIN and getting POLLOUT back once the peer drains it. */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kChunk = 65536, kMaxChunks = 1024 };

static int so_error(int fd) {
  int err = -1;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) CT_FAIL("getsockopt SO_ERROR: %s", ct_errname(errno));
  return err;
}

static void connect_ok(const struct sockaddr_in* addr, int* client_out, int listener) {
  int client = CT_OK("socket nonblocking", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
  CT_ERR("connect", connect(client, (const struct sockaddr*)addr, sizeof *addr), EINPROGRESS);
  short rev = ct_wait(client, POLLOUT, 2000);
  ct_out("poll POLLOUT after connect: %s", ct_poll_str(rev));
  CT_CHECK(rev == POLLOUT, "connect completes with POLLOUT only");
  ct_out("SO_ERROR after connect: %s", ct_errname(so_error(client)));
  /* Linux reports the completed connect once more (0), then EISCONN. */
  CT_RC("connect again", connect(client, (const struct sockaddr*)addr, sizeof *addr), 0);
  CT_ERR("connect a third time", connect(client, (const struct sockaddr*)addr, sizeof *addr), EISCONN);
  rev = ct_wait(listener, POLLIN, 2000);
  ct_out("listener poll: %s", ct_poll_str(rev));
  *client_out = client;
}

static void connect_refused(void) {
  /* A bound socket that does not listen: nobody can take its port meanwhile. */
  struct sockaddr_in closed_addr;
  int holder = CT_OK("socket port holder", socket(AF_INET, SOCK_STREAM, 0));
  struct sockaddr_in any = ct_addr(0);
  CT_RC("bind port holder", bind(holder, (struct sockaddr*)&any, sizeof any), 0);
  closed_addr = ct_addr(ct_port_of(holder));

  int fd = CT_OK("socket nonblocking (refused)", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
  CT_ERR("connect to closed port", connect(fd, (struct sockaddr*)&closed_addr, sizeof closed_addr), EINPROGRESS);
  short rev = ct_wait(fd, POLLOUT, 2000);
  ct_out("poll POLLOUT after refused connect: %s", ct_poll_str(rev));
  CT_CHECK(rev & POLLERR, "refused connect reports POLLERR");
  int err = so_error(fd);
  ct_out("SO_ERROR after refused connect: %s", ct_errname(err));
  CT_CHECK(err == ECONNREFUSED, "SO_ERROR is ECONNREFUSED");
  ct_out("SO_ERROR read again: %s", ct_errname(so_error(fd)));
  char c;
  CT_RC("recv on refused socket (reads as EOF)", recv(fd, &c, 1, 0), 0);
  close(fd);
  close(holder);
}

/* Fills client's send path until EAGAIN, then drains it at the server. */
static void fill_and_drain(int client, int server) {
  unsigned char* chunk = malloc(kChunk);
  size_t sent = 0;
  int saw_eagain = 0;
  for (int i = 0; i < kMaxChunks && !saw_eagain; ++i) {
    ct_pattern(chunk, kChunk, 7, sent);
    ssize_t n = send(client, chunk, kChunk, 0);
    if (n < 0 && errno == EAGAIN) saw_eagain = 1;
    else if (n <= 0) CT_FAIL("send while filling: %zd %s", n, ct_errname(errno));
    else sent += (size_t)n;
  }
  CT_CHECK(saw_eagain, "send on a full socket fails with EAGAIN");
  ct_out("poll POLLOUT on full socket: %s", ct_poll_str(ct_wait(client, POLLOUT, 0)));

  size_t got = 0;
  int intact = 1;
  for (int i = 0; i < 100000 && got < sent; ++i) {
    ssize_t n = recv(server, chunk, kChunk, 0);
    if (n > 0) {
      if (!ct_pattern_ok(chunk, (size_t)n, 7, got)) intact = 0;
      got += (size_t)n;
    } else if (n < 0 && errno == EAGAIN) {
      if (!(ct_wait(server, POLLIN, 2000) & POLLIN)) break;
    } else {
      CT_FAIL("recv while draining: %zd %s", n, ct_errname(errno));
    }
  }
  CT_CHECK(got == sent && intact, "the receiver drains every byte sent, intact");
  short rev = ct_wait(client, POLLOUT, 2000);
  ct_out("poll POLLOUT after drain: %s", ct_poll_str(rev));
  CT_ERR("recv on drained socket", recv(server, chunk, kChunk, 0), EAGAIN);
  free(chunk);
}

int main(void) {
  ct_start("tcp_nonblocking");
  int listener = CT_OK("socket listener nonblocking", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
  struct sockaddr_in addr = ct_addr(0);
  CT_RC("bind", bind(listener, (struct sockaddr*)&addr, sizeof addr), 0);
  CT_RC("listen", listen(listener, 8), 0);
  addr = ct_addr(ct_port_of(listener));
  CT_ERR("accept with no pending connection", accept(listener, NULL, NULL), EAGAIN);
  ct_out("poll listener with no pending connection: %s", ct_poll_str(ct_wait(listener, POLLIN, 0)));

  int client;
  connect_ok(&addr, &client, listener);
  int server = CT_OK("accept4 NONBLOCK|CLOEXEC", accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
  CT_CHECK(fcntl(server, F_GETFL) & O_NONBLOCK, "accept4 set O_NONBLOCK");
  CT_CHECK(fcntl(server, F_GETFD) & FD_CLOEXEC, "accept4 set FD_CLOEXEC");
  CT_ERR("accept again", accept(listener, NULL, NULL), EAGAIN);

  char buf[16];
  CT_ERR("recv on empty socket", recv(server, buf, sizeof buf, 0), EAGAIN);
  CT_ERR("read on empty socket", read(server, buf, sizeof buf), EAGAIN);
  ct_out("poll idle connection: %s", ct_poll_str(ct_wait(server, POLLIN | POLLOUT, 0)));
  CT_RC("send", send(client, "ping", 4, 0), 4);
  ct_wait_readable(server);
  CT_RC("recv", recv(server, buf, sizeof buf, 0), 4);
  CT_CHECK(memcmp(buf, "ping", 4) == 0, "got 'ping'");
  CT_ERR("recv once empty again", recv(server, buf, sizeof buf, 0), EAGAIN);

  fill_and_drain(client, server);
  close(client);
  close(server);
  close(listener);

  connect_refused();
  return 0;
}
