/* tcp_faults: how TCP connections end badly, as the kernel reports it. Run
 * by run_conformance.sh with and without the library (both ends under it in
 * the preloaded run: forked children inherit it), on VSOCK_TEST_ADDR.
 *   a  peer killed with SIGKILL mid-stream (while it writes, while it reads)
 *   b  listener closed with connections still in its backlog
 *   c  connect to a port with no listener, blocking and nonblocking
 *   d  a server writes then closes (and exits) before the client reads
 *   e  SO_LINGER {1,0} close, and close with unread data: a reset
 * Outcomes that depend on timing (RST or FIN after a kill) are normalised:
 * "reset-or-eof" for reads, "reset-or-epipe" for writes. Every wait is
 * bounded (kBoundMs) and the whole program by an alarm per scenario.
 *   tcp_faults [SCENARIO-LETTERS]   (default: all) */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kBoundMs = 10000, kChunk = 64 << 10, kScenarioAlarmS = 40, kChildAlarmS = 60 };

static unsigned char g_buf[kChunk];

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
    if (r == 0 || errno == ECONNRESET) break;
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

/* A child that connects to `to` and writes (writer=1) or reads forever. */
static pid_t start_peer(const struct sockaddr_in* to, int writer) {
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid > 0) return pid;
  alarm(kChildAlarmS);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr*)to, sizeof *to) != 0) _exit(3);
  for (;;) {
    ssize_t r = writer ? send(fd, g_buf, sizeof g_buf, MSG_NOSIGNAL) : recv(fd, g_buf, sizeof g_buf, 0);
    if (r <= 0 && errno != EINTR) _exit(4);
  }
}

static void kill_peer(pid_t pid) {
  CT_RC("kill -9 peer", kill(pid, SIGKILL), 0);
  int status = 0;
  CT_RC("waitpid peer", waitpid(pid, &status, 0) == pid, 1);
  CT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "peer died of SIGKILL");
}

static void scenario_killed_peer(void) {
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);

  ct_out("a1: peer killed while it writes");
  pid_t pid = start_peer(&addr, 1);
  int fd = CT_OK("a1 accept", accept(listener, NULL, NULL));
  size_t got = 0;
  while (got < 4 * kChunk) {  /* the stream is flowing */
    ct_wait_readable(fd);
    ssize_t r = recv(fd, g_buf, sizeof g_buf, 0);
    if (r <= 0) CT_FAIL("a1: read before the kill: %s", r == 0 ? "EOF" : ct_errname(errno));
    got += (size_t)r;
  }
  kill_peer(pid);
  read_to_end("a1 survivor read", fd);
  write_to_error("a1 survivor write", fd);
  close(fd);

  ct_out("a2: peer killed while it reads");
  pid = start_peer(&addr, 0);
  fd = CT_OK("a2 accept", accept(listener, NULL, NULL));
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
  kill_peer(pid);
  write_to_error("a2 survivor write", fd);
  read_to_end("a2 survivor read", fd);
  close(fd);
  close(listener);
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

/* A child that accepts one connection, writes `len` pattern bytes, closes
 * and exits at once (_exit: nothing of the process runs after close). */
static pid_t start_write_close_server(int listener, size_t len) {
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid > 0) return pid;
  alarm(kChildAlarmS);
  int fd = accept(listener, NULL, NULL);
  if (fd < 0) _exit(3);
  unsigned char* buf = malloc(len);
  if (!buf) _exit(4);
  ct_pattern(buf, len, 7, 0);
  for (size_t off = 0; off < len;) {
    ssize_t r = send(fd, buf + off, len - off, MSG_NOSIGNAL);
    if (r <= 0) _exit(5);
    off += (size_t)r;
  }
  _exit(close(fd) == 0 ? 0 : 6);
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

static void scenario_write_close(void) {
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  int status = 0;

  ct_out("d1: server writes 1 MiB and closes while the client reads");
  pid_t pid = start_write_close_server(listener, 1 << 20);
  int fd = ct_tcp_connect(&addr);
  read_pattern_then_eof("d1 client", fd, 1 << 20);
  CT_RC("d1 server exit status", waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
  close(fd);

  ct_out("d2: server writes 48 KiB, closes and exits before the client reads");
  pid = start_write_close_server(listener, 48 << 10);
  fd = ct_tcp_connect(&addr);
  CT_RC("d2 server exit status", waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
  read_pattern_then_eof("d2 client", fd, 48 << 10);
  close(fd);
  close(listener);
}

static void linger_zero(int fd) {
  struct linger lg = {1, 0};
  CT_RC("e setsockopt SO_LINGER {1,0}", setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
}

static void expect_reset(const char* what, int fd) {
  char label[80];
  short rev = ct_wait(fd, POLLIN, kBoundMs);
  ct_out("%s poll POLLIN: %s", what, ct_poll_str(rev));
  snprintf(label, sizeof label, "%s read", what);
  CT_ERR(label, recv(fd, g_buf, sizeof g_buf, 0), ECONNRESET);
  snprintf(label, sizeof label, "%s read again", what);
  CT_RC(label, recv(fd, g_buf, sizeof g_buf, 0), 0);
  snprintf(label, sizeof label, "%s write", what);
  CT_ERR(label, send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
}

static void scenario_linger(void) {
  int client, server;
  ct_out("e1: SO_LINGER {1,0} close");
  ct_tcp_pair(&client, &server);
  linger_zero(server);
  CT_RC("e1 close", close(server), 0);
  expect_reset("e1 peer", client);
  close(client);

  ct_out("e2: SO_LINGER {1,0} close after data the peer has received, unread");
  ct_tcp_pair(&client, &server);
  ct_send_all(server, "0123456789", 10);
  ct_wait_readable(client);
  linger_zero(server);
  CT_RC("e2 close", close(server), 0);
  ct_sleep_ms(100);  /* let the reset arrive behind the data */
  CT_RC("e2 peer reads the data first", recv(client, g_buf, sizeof g_buf, 0), 10);
  expect_reset("e2 peer", client);
  close(client);

  ct_out("e3: close with unread received data");
  ct_tcp_pair(&client, &server);
  ct_send_all(client, "abc", 3);
  ct_wait_readable(server);
  CT_RC("e3 close (3 bytes unread)", close(server), 0);
  expect_reset("e3 peer", client);
  close(client);
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
