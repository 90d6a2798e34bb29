/* What an accepted socket takes from its listener, and a new socket from its
 * flags: how long a blocking call waits and what close() does. SO_RCVTIMEO
 * and SO_LINGER set on the listener hold on the accepted socket (the kernel
 * copies them); accept4(SOCK_NONBLOCK) makes only that socket non-blocking;
 * a listener without them gives a socket that blocks and closes in order.
 * Each pair is warmed up first (over a device, onto RDMA), so that the
 * library's cached copy of those settings is what decides. */
#include "common.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "warm_up.h"

enum { kTimeoutMs = 80 };

/* A listener on the test address with `setup` applied before listen(). */
static int listener_with(void (*setup)(int), struct sockaddr_in* bound) {
  int listener = CT_OK("socket listener", socket(AF_INET, SOCK_STREAM, 0));
  if (setup != NULL) setup(listener);
  struct sockaddr_in any = ct_addr(0);
  CT_RC("bind port 0", bind(listener, (struct sockaddr*)&any, sizeof any), 0);
  CT_RC("listen", listen(listener, 4), 0);
  socklen_t len = sizeof *bound;
  CT_RC("getsockname listener", getsockname(listener, (struct sockaddr*)bound, &len), 0);
  return listener;
}

/* A connected pair through `listener`, accepted with accept4(flags), warmed
 * up (the echo of the warm-up blocks: the non-blocking end only sends). */
static void pair_through(int listener, const struct sockaddr_in* bound, int flags, int* client, int* server) {
  *client = CT_OK("socket client", socket(AF_INET, SOCK_STREAM, 0));
  CT_RC("connect", connect(*client, (const struct sockaddr*)bound, sizeof *bound), 0);
  *server = CT_OK("accept4", accept4(listener, NULL, NULL, flags));
  if (flags & SOCK_NONBLOCK) {
    /* Blocking for the warm-up, as an application may do, then back. */
    CT_RC("fcntl clear O_NONBLOCK", fcntl(*server, F_SETFL, 0), 0);
    ct_warm_up(*client, *server);
    CT_RC("fcntl set O_NONBLOCK", fcntl(*server, F_SETFL, O_NONBLOCK), 0);
  } else {
    ct_warm_up(*client, *server);
  }
}

/* recv of one byte on a socket with nothing to read: what it returned and
 * whether it waited about kTimeoutMs, at once, or (not expected) longer. */
static void show_idle_recv(int fd, const char* what) {
  char c;
  long start = ct_now_ms();
  ssize_t n = recv(fd, &c, 1, 0);
  int err = errno;
  long elapsed = ct_now_ms() - start;
  const char* waited = elapsed < kTimeoutMs - 20 ? "at once" : elapsed < 2000 ? "after the timeout" : "too late";
  ct_out("%s: recv %zd %s, %s", what, n, n < 0 ? ct_errname(err) : "", waited);
  if (elapsed >= 2000) CT_FAIL("%s: recv waited %ld ms", what, elapsed);
}

static void receive_timeout(int fd) {
  struct timeval tv = {0, kTimeoutMs * 1000};
  CT_RC("setsockopt SO_RCVTIMEO", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
}

static void abortive_linger(int fd) {
  struct linger lg = {1, 0};
  CT_RC("setsockopt SO_LINGER {1, 0}", setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
}

/* The end of the stream as the client sees it after the server's close. */
static void show_end(int client, const char* what) {
  char c;
  ssize_t n = recv(client, &c, 1, 0);
  ct_out("%s: client recv %zd %s", what, n, n < 0 ? ct_errname(errno) : "");
}

int main(void) {
  ct_start("tcp_inherited_options");
  struct sockaddr_in bound;
  int client, server;

  /* SO_RCVTIMEO on the listener: the accepted socket's recv times out. */
  int listener = listener_with(receive_timeout, &bound);
  pair_through(listener, &bound, 0, &client, &server);
  show_idle_recv(server, "accepted from a listener with SO_RCVTIMEO");
  CT_RC("close server", close(server), 0);
  CT_RC("close client", close(client), 0);
  CT_RC("close listener", close(listener), 0);

  /* accept4(SOCK_NONBLOCK) on a listener without options: EAGAIN at once,
   * and the client, made by socket() without flags, still blocks until the
   * timeout it sets itself afterwards. */
  listener = listener_with(NULL, &bound);
  pair_through(listener, &bound, SOCK_NONBLOCK, &client, &server);
  show_idle_recv(server, "accept4(SOCK_NONBLOCK), blocking and back");
  CT_RC("close server", close(server), 0);
  CT_RC("close client", close(client), 0);
  /* The same with nothing changed since accept4(): its flag alone decides. */
  client = CT_OK("socket client", socket(AF_INET, SOCK_STREAM, 0));
  CT_RC("connect", connect(client, (const struct sockaddr*)&bound, sizeof bound), 0);
  server = CT_OK("accept4", accept4(listener, NULL, NULL, SOCK_NONBLOCK));
  show_idle_recv(server, "accept4(SOCK_NONBLOCK)");
  CT_RC("send client", send(client, "x", 1, 0), 1);
  ct_wait_readable(server);
  char c;
  CT_RC("recv server", recv(server, &c, 1, 0), 1);
  show_idle_recv(server, "accept4(SOCK_NONBLOCK), after a byte");
  receive_timeout(client);
  show_idle_recv(client, "client with its own SO_RCVTIMEO");
  CT_RC("close server", close(server), 0);
  show_end(client, "accepted without linger, closed");
  CT_RC("close client", close(client), 0);
  CT_RC("close listener", close(listener), 0);

  /* SO_LINGER {1, 0} on the listener: the accepted socket's close resets. */
  listener = listener_with(abortive_linger, &bound);
  pair_through(listener, &bound, 0, &client, &server);
  CT_RC("close server", close(server), 0);
  show_end(client, "accepted from a listener with SO_LINGER {1, 0}, closed");
  CT_RC("close client", close(client), 0);
  CT_RC("close listener", close(listener), 0);
  ct_out("done");
  return 0;
}
