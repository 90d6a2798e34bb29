/* tcp_faults: how TCP connections end badly, as the kernel reports it. Run
 * by run_conformance.sh with and without the library (both ends under it in
 * the preloaded run: forked children inherit it), on VSOCK_TEST_ADDR.
 *   a  peer killed with SIGKILL mid-stream (while it writes, while it reads)
 *   b  listener closed with connections still in its backlog
 *   c  connect to a port with no listener, blocking and nonblocking
 *   d  one side writes, closes and _exit()s at once, the other reads
 *      (while it writes, or only after it has exited): every byte, then EOF
 *   e  SO_LINGER {1,0} close, and close with unread data: a reset, seen by
 *      read, write, poll and SO_ERROR in the kernel's order
 * Outcomes that depend on timing (RST or FIN after a kill) are normalised:
 * "reset-or-eof" for reads, "reset-or-epipe" for writes. Every wait is
 * bounded (kBoundMs) and the whole program by an alarm per scenario.
 *
 * The two ends of every connection in a, d and e live in two processes (a
 * fork), each accepting on the listener it created, so that under the
 * library both ends upgrade; each first moves a byte each way, which
 * completes the switch in both directions. With VSOCK_FAULTS_EXPECT_RDMA=1
 * (the device test) a preloaded run also checks, from the library's
 * counters (vsock_stats_snapshot), that those connections did carry bytes
 * over RDMA; that is said on stderr only, so the transcripts stay equal.
 *   tcp_faults [SCENARIO-LETTERS]   (default: all) */
#include "common.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vsock/vsock.h"

enum { kBoundMs = 10000, kChunk = 64 << 10, kScenarioAlarmS = 40, kChildAlarmS = 60 };

static unsigned char g_buf[kChunk];

/* ---- RDMA expectations (stderr only) ---- */

/* rdma_bytes_sent + rdma_bytes_received of this process, or -1 when the
 * check is off (no library, or VSOCK_FAULTS_EXPECT_RDMA unset). */
static long long rdma_bytes(void) {
  const char* expect = getenv("VSOCK_FAULTS_EXPECT_RDMA");
  if (!expect || strcmp(expect, "1") != 0) return -1;
  size_t (*snapshot)(struct vsock_stats*, size_t) =
      (size_t (*)(struct vsock_stats*, size_t))dlsym(RTLD_DEFAULT, "vsock_stats_snapshot");
  if (!snapshot) return -1;
  struct vsock_stats stats;
  memset(&stats, 0, sizeof stats);
  snapshot(&stats, sizeof stats);
  return (long long)(stats.rdma_bytes_sent + stats.rdma_bytes_received);
}

/* Fails unless this process moved RDMA bytes since `before` (a rdma_bytes()). */
static void expect_rdma_since(const char* label, long long before) {
  if (before < 0) return;
  long long now = rdma_bytes();
  fprintf(stderr, "%s: %lld bytes over RDMA\n", label, now - before);
  if (now <= before) CT_FAIL("%s: nothing went over RDMA (the connection did not upgrade)", label);
}

/* ---- two processes, one connection ---- */

/* The child's end of a forked connection: it connected (client) or
 * accepted on its own listener (server). `ctl` is an AF_UNIX socket to the
 * parent (never offloaded), for the scenario's steps. */
typedef void (*child_fn)(int fd, int ctl, void* arg);

static void ctl_send(int ctl, char c) { CT_ASSERT(write(ctl, &c, 1) == 1); }

static char ctl_recv(int ctl) {
  char c = 0;
  if (ct_wait(ctl, POLLIN, kBoundMs) == 0 || read(ctl, &c, 1) != 1) CT_FAIL("control socket: no step within the bound");
  return c;
}

/* Moves a byte each way (the connecting side first): after this both
 * directions have switched when both ends run the library. */
static void ping(int fd, int first) {
  char c = 'p';
  if (first) {
    CT_ASSERT(send(fd, &c, 1, MSG_NOSIGNAL) == 1);
    CT_ASSERT(recv(fd, &c, 1, MSG_WAITALL) == 1 && c == 'q');
  } else {
    CT_ASSERT(recv(fd, &c, 1, MSG_WAITALL) == 1 && c == 'p');
    c = 'q';
    CT_ASSERT(send(fd, &c, 1, MSG_NOSIGNAL) == 1);
  }
}

/* Forks a child that runs `fn` on its end; returns the parent's end in *fd
 * and the control socket in *ctl. child_connects: the child is the client
 * (the parent listens and accepts); else the child listens and accepts. */
/* Under the library, closing a listener drops the upgrade of an accepted
 * connection whose rdma_cm request has not come yet (it stays on TCP): the
 * listeners stay open until the next connection is made. */
static int g_listener = -1;

static pid_t fork_connection(int child_connects, int ping_first, child_fn fn, void* arg, int* fd, int* ctl) {
  int pair[2];
  CT_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  struct sockaddr_in addr;
  if (g_listener >= 0) close(g_listener);
  g_listener = -1;
  int listener = child_connects ? ct_tcp_listener(&addr) : -1;
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) {
    alarm(kChildAlarmS);
    close(pair[0]);
    int mine;
    if (child_connects) {
      close(listener);
      mine = ct_tcp_connect(&addr);
    } else {
      listener = ct_tcp_listener(&addr);
      uint16_t port = ct_port_of(listener);
      CT_ASSERT(write(pair[1], &port, sizeof port) == (ssize_t)sizeof port);
      mine = accept(listener, NULL, NULL);
      if (mine < 0) _exit(3);
    }
    if (ping_first) ping(mine, child_connects);
    fn(mine, pair[1], arg);
    _exit(0);
  }
  close(pair[1]);
  if (child_connects) {
    *fd = CT_OK("accept", accept(listener, NULL, NULL));
    g_listener = listener;
  } else {
    uint16_t port = 0;
    CT_ASSERT(ct_wait(pair[0], POLLIN, kBoundMs) && read(pair[0], &port, sizeof port) == (ssize_t)sizeof port);
    struct sockaddr_in to = ct_addr(port);
    *fd = ct_tcp_connect(&to);
  }
  if (ping_first) ping(*fd, !child_connects);
  *ctl = pair[0];
  return pid;
}

static int wait_child(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void set_nonblocking(int fd, int on) {
  int fl = fcntl(fd, F_GETFL);
  CT_ASSERT(fl >= 0 && fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0);
}

/* Reads until EOF or ECONNRESET, within kBoundMs; prints the normalised end. */
static void read_to_end(const char* label, int fd) {
  long deadline = ct_now_ms() + kBoundMs;
  for (;;) {
    long left = deadline - ct_now_ms();
    if (left <= 0) CT_FAIL("%s: neither EOF nor ECONNRESET within %d ms", label, kBoundMs);
    ct_wait(fd, POLLIN, (int)left);
    ssize_t r = recv(fd, g_buf, sizeof g_buf, MSG_DONTWAIT);
    if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) continue;
    if (r == 0 || errno == ECONNRESET) {
      fprintf(stderr, "%s: %s at %ld ms\n", label, r == 0 ? "EOF" : "ECONNRESET", ct_now_ms());
      break;
    }
    CT_FAIL("%s: read failed with %s", label, ct_errname(errno));
  }
  ct_out("%s: reset-or-eof", label);
}

/* Writes small pieces until EPIPE or ECONNRESET, within kBoundMs. */
static void write_to_error(const char* label, int fd) {
  long deadline = ct_now_ms() + kBoundMs;
  for (;;) {
    if (ct_now_ms() > deadline) CT_FAIL("%s: no EPIPE or ECONNRESET within %d ms", label, kBoundMs);
    ssize_t r = send(fd, g_buf, 1024, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r < 0 && (errno == EPIPE || errno == ECONNRESET)) break;
    if (r < 0 && errno != EAGAIN && errno != EINTR) CT_FAIL("%s: write failed with %s", label, ct_errname(errno));
    ct_sleep_ms(5);
  }
  ct_out("%s: reset-or-epipe", label);
}

/* The child of a1/a2: writes (arg != NULL) or reads forever. */
static void stream_forever(int fd, int ctl, void* writer) {
  (void)ctl;
  for (;;) {
    ssize_t r = writer ? send(fd, g_buf, sizeof g_buf, MSG_NOSIGNAL) : recv(fd, g_buf, sizeof g_buf, 0);
    if (r <= 0 && errno != EINTR) _exit(4);
  }
}

static pid_t start_peer(int writer, int* fd) {
  int ctl;
  static int yes = 1;
  pid_t pid = fork_connection(1, 1, stream_forever, writer ? &yes : NULL, fd, &ctl);
  close(ctl);
  return pid;
}

static void kill_peer(pid_t pid) {
  CT_RC("kill -9 peer", kill(pid, SIGKILL), 0);
  fprintf(stderr, "kill -9 at %ld ms\n", ct_now_ms());
  int status = 0;
  CT_RC("waitpid peer", waitpid(pid, &status, 0) == pid, 1);
  CT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "peer died of SIGKILL");
}

static void scenario_killed_peer(void) {
  int fd;
  ct_out("a1: peer killed while it writes");
  long long rdma = rdma_bytes();
  pid_t pid = start_peer(1, &fd);
  size_t got = 0;
  while (got < 4 * kChunk) {  /* the stream is flowing */
    ct_wait_readable(fd);
    ssize_t r = recv(fd, g_buf, sizeof g_buf, 0);
    if (r <= 0) CT_FAIL("a1: read before the kill: %s", r == 0 ? "EOF" : ct_errname(errno));
    got += (size_t)r;
  }
  expect_rdma_since("a1", rdma);
  kill_peer(pid);
  read_to_end("a1 survivor read", fd);
  write_to_error("a1 survivor write", fd);
  close(fd);

  ct_out("a2: peer killed while it reads");
  rdma = rdma_bytes();
  pid = start_peer(0, &fd);
  set_nonblocking(fd, 1);
  size_t sent = 0;
  long deadline = ct_now_ms() + kBoundMs;
  while (sent < 4 * kChunk) {
    if (ct_now_ms() > deadline) CT_FAIL("a2: the reader does not read");
    ct_wait(fd, POLLOUT, 1000);
    ssize_t r = send(fd, g_buf, sizeof g_buf, MSG_NOSIGNAL);
    if (r > 0) sent += (size_t)r;
    else if (errno != EAGAIN) CT_FAIL("a2: write before the kill: %s", ct_errname(errno));
  }
  expect_rdma_since("a2", rdma);
  kill_peer(pid);
  write_to_error("a2 survivor write", fd);
  read_to_end("a2 survivor read", fd);
  close(fd);
}

static void scenario_backlog(void) {
  ct_out("b: listener closed with 3 connections in its backlog");
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  int fds[3];
  for (int i = 0; i < 3; i++) fds[i] = ct_tcp_connect(&addr);
  CT_RC("b client 1 writes before the close", send(fds[1], "hello", 5, MSG_NOSIGNAL), 5);
  CT_RC("b close listener", close(listener), 0);
  for (int i = 0; i < 3; i++) {
    char label[64];
    short rev = ct_wait(fds[i], POLLIN, kBoundMs);
    ct_out("b client %d poll POLLIN: %s", i, ct_poll_str(rev));
    CT_CHECK(rev != 0, "the client learns of the close within the bound");
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &err, &len);
    ct_out("b client %d SO_ERROR: %s", i, ct_errname(err));
    if (i == 2) {  /* the read path: SO_ERROR above consumed the error */
      snprintf(label, sizeof label, "b client %d read", i);
      CT_RC(label, read(fds[i], g_buf, 16), 0);
    }
    snprintf(label, sizeof label, "b client %d write", i);
    CT_ERR(label, send(fds[i], "x", 1, MSG_NOSIGNAL), EPIPE);
    snprintf(label, sizeof label, "b client %d read after write", i);
    CT_RC(label, read(fds[i], g_buf, 16), 0);
    close(fds[i]);
  }
  /* Again, reading first (no SO_ERROR): the reset is the read's error. */
  listener = ct_tcp_listener(&addr);
  int fd = ct_tcp_connect(&addr);
  CT_RC("b close listener (again)", close(listener), 0);
  ct_wait(fd, POLLIN, kBoundMs);
  CT_ERR("b read first", read(fd, g_buf, 16), ECONNRESET);
  CT_RC("b read again", read(fd, g_buf, 16), 0);
  CT_ERR("b write", send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
  close(fd);
}

static void scenario_refused(void) {
  ct_out("c: connect to a port with no listener");
  int holder = CT_OK("c port holder", socket(AF_INET, SOCK_STREAM, 0));
  struct sockaddr_in any = ct_addr(0);
  CT_RC("c bind port holder", bind(holder, (struct sockaddr*)&any, sizeof any), 0);
  struct sockaddr_in closed = ct_addr(ct_port_of(holder));

  int fd = CT_OK("c socket (blocking)", socket(AF_INET, SOCK_STREAM, 0));
  CT_ERR("c blocking connect", connect(fd, (struct sockaddr*)&closed, sizeof closed), ECONNREFUSED);
  CT_ERR("c blocking connect again", connect(fd, (struct sockaddr*)&closed, sizeof closed), ECONNREFUSED);
  close(fd);

  fd = CT_OK("c socket (nonblocking)", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
  CT_ERR("c nonblocking connect", connect(fd, (struct sockaddr*)&closed, sizeof closed), EINPROGRESS);
  short rev = ct_wait(fd, POLLOUT, kBoundMs);
  ct_out("c poll POLLOUT: %s", ct_poll_str(rev));
  int err = 0;
  socklen_t len = sizeof err;
  CT_RC("c getsockopt SO_ERROR", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  ct_out("c SO_ERROR: %s", ct_errname(err));
  CT_CHECK(err == ECONNREFUSED, "SO_ERROR is ECONNREFUSED");
  CT_ERR("c send after refusal", send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
  close(fd);
  close(holder);
}

/* The writer of d: writes `len` pattern bytes, closes and exits at once
 * (_exit: nothing of the process runs after close, no exit handler). With
 * wait_go, it first waits for a byte from the reader. */
struct write_close_args {
  size_t len;
  int wait_go;
};

static void write_close_exit(int fd, int ctl, void* arg) {
  const struct write_close_args* a = arg;
  (void)ctl;
  char go;
  if (a->wait_go && recv(fd, &go, 1, MSG_WAITALL) != 1) _exit(7);
  long long rdma = rdma_bytes();
  unsigned char* buf = malloc(a->len);
  if (!buf) _exit(4);
  ct_pattern(buf, a->len, 7, 0);
  for (size_t off = 0; off < a->len;) {
    ssize_t r = send(fd, buf + off, a->len - off, MSG_NOSIGNAL);
    if (r <= 0) _exit(5);
    off += (size_t)r;
  }
  /* The writer's own counters: the bytes went over RDMA, the close must
   * deliver them. */
  if (rdma >= 0 && rdma_bytes() <= rdma) _exit(9);
  long start = ct_now_ms();
  int rc = close(fd);
  fprintf(stderr, "writer of %zu bytes: close took %ld ms\n", a->len, ct_now_ms() - start);
  _exit(rc == 0 ? 0 : 6);
}

static void read_pattern_then_eof(const char* label, int fd, size_t len) {
  unsigned char* buf = malloc(len);
  CT_ASSERT(buf != NULL);
  size_t got = 0;
  long deadline = ct_now_ms() + kBoundMs;
  while (got < len) {
    if (ct_now_ms() > deadline) CT_FAIL("%s: %zu of %zu bytes within the bound", label, got, len);
    ct_wait(fd, POLLIN, 1000);
    ssize_t r = recv(fd, buf + got, len - got, MSG_DONTWAIT);
    if (r == 0) CT_FAIL("%s: EOF after %zu of %zu bytes", label, got, len);
    if (r < 0 && errno != EAGAIN && errno != EINTR) CT_FAIL("%s: %s after %zu bytes", label, ct_errname(errno), got);
    if (r > 0) got += (size_t)r;
  }
  ct_out("%s: %zu bytes, pattern %s", label, got, ct_pattern_ok(buf, len, 7, 0) ? "ok" : "WRONG");
  CT_ASSERT(ct_pattern_ok(buf, len, 7, 0));
  ct_wait(fd, POLLIN, kBoundMs);
  char eof_label[80];
  snprintf(eof_label, sizeof eof_label, "%s: then EOF", label);
  CT_RC(eof_label, recv(fd, buf, len, 0), 0);
  snprintf(eof_label, sizeof eof_label, "%s: EOF again", label);
  CT_RC(eof_label, recv(fd, buf, len, 0), 0);
  free(buf);
}

/* One d case: the child writes and closes; the parent reads while it does
 * (read_after_exit 0) or only after the child has exited. */
static void write_close_case(const char* label, int child_connects, size_t len, int read_after_exit) {
  char text[64];
  int fd, ctl;
  long long rdma = rdma_bytes();
  /* The server side's first bytes would go on TCP while its Switch is
   * not due yet: it waits for a byte from the client, which completes
   * the switch before it writes. */
  struct write_close_args args = {len, !child_connects};
  pid_t pid = fork_connection(child_connects, 0, write_close_exit, &args, &fd, &ctl);
  if (args.wait_go) ct_send_all(fd, "g", 1);
  snprintf(text, sizeof text, "%s writer exit status", label);
  if (read_after_exit) CT_RC(text, wait_child(pid), 0);
  snprintf(text, sizeof text, "%s reader", label);
  read_pattern_then_eof(text, fd, len);
  snprintf(text, sizeof text, "%s writer exit status", label);
  if (!read_after_exit) CT_RC(text, wait_child(pid), 0);
  expect_rdma_since(label, rdma);
  close(ctl);
  close(fd);
}

static void scenario_write_close(void) {
  ct_out("d1: client writes 1 MiB, closes and exits while the server reads");
  write_close_case("d1", 1, 1 << 20, 0);
  ct_out("d2: server writes 48 KiB, closes and exits before the client reads");
  write_close_case("d2", 0, 48 << 10, 1);
  ct_out("d3: server writes 4 MiB, closes and exits while the client reads");
  write_close_case("d3", 0, 4 << 20, 0);
  ct_out("d4: client writes 100 KiB, closes and exits before the server reads");
  write_close_case("d4", 1, 100 << 10, 1);
}

static volatile sig_atomic_t g_sigpipes;
static void on_sigpipe(int sig) {
  (void)sig;
  g_sigpipes++;
}

/* A write without MSG_NOSIGNAL: EPIPE and one SIGPIPE. */
static void expect_epipe_signal(const char* what, int fd) {
  char label[80];
  g_sigpipes = 0;
  signal(SIGPIPE, on_sigpipe);
  snprintf(label, sizeof label, "%s write (signals)", what);
  CT_ERR(label, send(fd, "x", 1, 0), EPIPE);
  signal(SIGPIPE, SIG_IGN);
  ct_out("%s SIGPIPE raised: %d", what, (int)g_sigpipes);
}

static void print_poll(const char* what, int fd) {
  struct pollfd p = {fd, POLLIN | POLLOUT, 0};
  CT_ASSERT(poll(&p, 1, 0) >= 0);
  ct_out("%s poll POLLIN|POLLOUT: %s", what, ct_poll_str(p.revents));
}

static void print_so_error(const char* what, int fd) {
  int err = -1;
  socklen_t len = sizeof err;
  CT_ASSERT(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
  ct_out("%s SO_ERROR: %s", what, ct_errname(err));
}

/* After a reset the kernel reports ECONNRESET once (to whichever of read,
 * write and SO_ERROR asks first), then end of stream and EPIPE. */
static void expect_reset(const char* what, int fd) {
  char label[80];
  short rev = ct_wait(fd, POLLIN, kBoundMs);
  ct_out("%s poll POLLIN: %s", what, ct_poll_str(rev));
  print_poll(what, fd);
  snprintf(label, sizeof label, "%s read", what);
  CT_ERR(label, recv(fd, g_buf, sizeof g_buf, 0), ECONNRESET);
  print_poll(what, fd);
  snprintf(label, sizeof label, "%s read again", what);
  CT_RC(label, recv(fd, g_buf, sizeof g_buf, 0), 0);
  print_so_error(what, fd);
  snprintf(label, sizeof label, "%s write", what);
  CT_ERR(label, send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
  expect_epipe_signal(what, fd);
  snprintf(label, sizeof label, "%s read after write", what);
  CT_RC(label, recv(fd, g_buf, sizeof g_buf, 0), 0);
}

/* The same, SO_ERROR asking first. */
static void expect_reset_so_error(const char* what, int fd) {
  char label[80];
  short rev = ct_wait(fd, POLLIN, kBoundMs);
  ct_out("%s poll POLLIN: %s", what, ct_poll_str(rev));
  print_so_error(what, fd);
  print_so_error(what, fd);
  print_poll(what, fd);
  snprintf(label, sizeof label, "%s read", what);
  CT_RC(label, recv(fd, g_buf, sizeof g_buf, 0), 0);
  expect_epipe_signal(what, fd);
}

/* The same, a write asking first: ECONNRESET without a signal. */
static void expect_reset_write_first(const char* what, int fd) {
  char label[80];
  short rev = ct_wait(fd, POLLIN, kBoundMs);
  ct_out("%s poll POLLIN: %s", what, ct_poll_str(rev));
  g_sigpipes = 0;
  signal(SIGPIPE, on_sigpipe);
  snprintf(label, sizeof label, "%s write", what);
  CT_ERR(label, send(fd, "x", 1, 0), ECONNRESET);
  signal(SIGPIPE, SIG_IGN);
  ct_out("%s SIGPIPE raised: %d", what, (int)g_sigpipes);
  expect_epipe_signal(what, fd);
  snprintf(label, sizeof label, "%s read", what);
  CT_RC(label, recv(fd, g_buf, sizeof g_buf, 0), 0);
}

/* The children of e. Each tells the parent 'c' once it has closed, then
 * stays until the parent is done ('x'): the peer's end goes away by the
 * close alone, not by the process's exit. */
static void close_linger(int fd, int ctl, void* arg) {
  (void)arg;
  struct linger lg = {1, 0};
  if (ctl_recv(ctl) != 'g') _exit(5);
  if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0 || close(fd) != 0) _exit(6);
  ctl_send(ctl, 'c');
  ctl_recv(ctl);
}

static void send_then_close_linger(int fd, int ctl, void* arg) {
  ct_send_all(fd, "0123456789", 10);
  close_linger(fd, ctl, arg);
}

static void close_unread(int fd, int ctl, void* arg) {
  (void)arg;
  if (ctl_recv(ctl) != 'g') _exit(5);
  if (ct_wait(fd, POLLIN, kBoundMs) == 0 || close(fd) != 0) _exit(6);
  ctl_send(ctl, 'c');
  ctl_recv(ctl);
}

/* A connection to a child running `fn` (the child connects); both
 * directions switched before the scenario goes on. */
static pid_t reset_peer(const char* label, child_fn fn, int* fd, int* ctl) {
  long long rdma = rdma_bytes();
  pid_t pid = fork_connection(1, 1, fn, NULL, fd, ctl);
  expect_rdma_since(label, rdma);
  return pid;
}

static void wait_peer_closed(const char* label, int ctl) {
  if (ctl_recv(ctl) != 'c') CT_FAIL("%s: the peer did not close", label);
  ct_out("%s: peer closed", label);
}

static void end_reset_case(const char* label, pid_t pid, int fd, int ctl) {
  char text[80];
  ctl_send(ctl, 'x');
  snprintf(text, sizeof text, "%s peer exit status", label);
  CT_RC(text, wait_child(pid), 0);
  close(ctl);
  close(fd);
}

static void scenario_linger(void) {
  int fd, ctl;
  pid_t pid;
  ct_out("e1: SO_LINGER {1,0} close");
  pid = reset_peer("e1", close_linger, &fd, &ctl);
  ctl_send(ctl, 'g');
  wait_peer_closed("e1", ctl);
  expect_reset("e1 peer", fd);
  end_reset_case("e1", pid, fd, ctl);

  ct_out("e2: SO_LINGER {1,0} close after data the peer has received, unread");
  pid = reset_peer("e2", send_then_close_linger, &fd, &ctl);
  ct_wait_readable(fd);
  ctl_send(ctl, 'g');
  wait_peer_closed("e2", ctl);
  ct_sleep_ms(100);  /* let the reset arrive behind the data */
  CT_RC("e2 peer reads the data first", recv(fd, g_buf, sizeof g_buf, 0), 10);
  expect_reset("e2 peer", fd);
  end_reset_case("e2", pid, fd, ctl);

  ct_out("e3: close with unread received data");
  pid = reset_peer("e3", close_unread, &fd, &ctl);
  ct_send_all(fd, "abc", 3);
  ctl_send(ctl, 'g');
  wait_peer_closed("e3 (3 bytes unread)", ctl);
  expect_reset("e3 peer", fd);
  end_reset_case("e3", pid, fd, ctl);

  ct_out("e4: SO_LINGER {1,0} close; SO_ERROR asks first");
  pid = reset_peer("e4", close_linger, &fd, &ctl);
  ctl_send(ctl, 'g');
  wait_peer_closed("e4", ctl);
  expect_reset_so_error("e4 peer", fd);
  end_reset_case("e4", pid, fd, ctl);

  ct_out("e5: SO_LINGER {1,0} close; a write asks first");
  pid = reset_peer("e5", close_linger, &fd, &ctl);
  ctl_send(ctl, 'g');
  wait_peer_closed("e5", ctl);
  expect_reset_write_first("e5 peer", fd);
  end_reset_case("e5", pid, fd, ctl);
}

int main(int argc, char** argv) {
  ct_start("tcp_faults");
  const char* which = argc > 1 ? argv[1] : "abcde";
  for (int i = 0; i < kChunk; i++) g_buf[i] = (unsigned char)(i * 31 + 7);
  for (const char* s = which; *s; s++) {
    alarm(kScenarioAlarmS);  /* ct_start's handler: fail loudly */
    switch (*s) {
      case 'a': scenario_killed_peer(); break;
      case 'b': scenario_backlog(); break;
      case 'c': scenario_refused(); break;
      case 'd': scenario_write_close(); break;
      case 'e': scenario_linger(); break;
      default: CT_FAIL("unknown scenario %c", *s);
    }
  }
  ct_out("tcp_faults: all scenarios done");
  return 0;
}
