#include "common.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kSafetyAlarmSeconds = 20 };

static const char* g_name = "conformance";

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: safety alarm fired (a wait did not end)\n";
  ssize_t ignored = write(1, msg, sizeof msg - 1);
  ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(1);
}

void ct_start(const char* name) {
  g_name = name;
  setvbuf(stdout, NULL, _IONBF, 0);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, on_alarm);
  alarm(kSafetyAlarmSeconds);
  fprintf(stderr, "%s: libvsock %s\n", name, ct_library_loaded() ? "loaded" : "not loaded");
}

void ct_out(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
}

void ct_fail_at(const char* file, int line, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  printf("FAIL: %s\n", msg);
  fprintf(stderr, "%s: FAIL at %s:%d: %s\n", g_name, base, line, msg);
  exit(1);
}

void ct_skip(const char* why) {
  printf("SKIP: %s\n", why);
  fprintf(stderr, "%s: SKIP: %s\n", g_name, why);
  exit(CT_SKIP);
}

const char* ct_errname(int err) {
  if (err == 0) return "0";
  const char* name = strerrorname_np(err);
  if (name) return name;
  static char buf[32];
  snprintf(buf, sizeof buf, "E#%d", err);
  return buf;
}

struct flag_name {
  uint32_t bit;
  const char* name;
};

static const char* flags_str(uint32_t value, const struct flag_name* names, size_t count) {
  static char buf[256];
  buf[0] = '\0';
  for (size_t i = 0; i < count; ++i) {
    if ((value & names[i].bit) == 0) continue;
    if (buf[0]) strcat(buf, "|");
    strcat(buf, names[i].name);
    value &= ~names[i].bit;
  }
  if (value) {
    char rest[24];
    snprintf(rest, sizeof rest, "%s0x%x", buf[0] ? "|" : "", value);
    strcat(buf, rest);
  }
  if (!buf[0]) strcpy(buf, "0");
  return buf;
}

const char* ct_poll_str(short revents) {
  static const struct flag_name names[] = {
      {POLLIN, "POLLIN"},     {POLLPRI, "POLLPRI"}, {POLLOUT, "POLLOUT"},   {POLLRDHUP, "POLLRDHUP"},
      {POLLERR, "POLLERR"},   {POLLHUP, "POLLHUP"}, {POLLNVAL, "POLLNVAL"}, {POLLRDNORM, "POLLRDNORM"},
      {POLLWRNORM, "POLLWRNORM"}, {POLLRDBAND, "POLLRDBAND"}, {POLLWRBAND, "POLLWRBAND"},
  };
  return flags_str((uint16_t)revents, names, sizeof names / sizeof names[0]);
}

const char* ct_epoll_str(uint32_t events) {
  static const struct flag_name names[] = {
      {EPOLLIN, "EPOLLIN"},     {EPOLLPRI, "EPOLLPRI"},     {EPOLLOUT, "EPOLLOUT"},
      {EPOLLRDHUP, "EPOLLRDHUP"}, {EPOLLERR, "EPOLLERR"}, {EPOLLHUP, "EPOLLHUP"},
      {EPOLLRDNORM, "EPOLLRDNORM"}, {EPOLLWRNORM, "EPOLLWRNORM"},
  };
  return flags_str(events, names, sizeof names / sizeof names[0]);
}

long ct_ok_at(const char* file, int line, const char* label, long rc, int err) {
  if (rc < 0) ct_fail_at(file, line, "%s: expected success, got %ld %s", label, rc, ct_errname(err));
  ct_out("%s: ok", label);
  return rc;
}

long ct_rc_at(const char* file, int line, const char* label, long rc, int err, long want) {
  if (rc != want) {
    ct_fail_at(file, line, "%s: expected %ld, got %ld %s", label, want, rc, rc < 0 ? ct_errname(err) : "");
  }
  ct_out("%s: %ld", label, rc);
  return rc;
}

void ct_err_at(const char* file, int line, const char* label, long rc, int err, int want) {
  if (rc != -1 || err != want) {
    ct_fail_at(file, line, "%s: expected -1 %s, got %ld %s", label, ct_errname(want), rc,
               rc == -1 ? ct_errname(err) : "");
  }
  ct_out("%s: -1 %s", label, ct_errname(err));
}

struct sockaddr_in ct_addr(uint16_t port) {
  const char* text = getenv("VSOCK_TEST_ADDR");
  if (!text || !*text) text = "127.0.0.1";
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, text, &sa.sin_addr) != 1) CT_FAIL("VSOCK_TEST_ADDR=%s is not an IPv4 address", text);
  return sa;
}

uint16_t ct_port_of(int fd) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  if (getsockname(fd, (struct sockaddr*)&sa, &len) != 0) CT_FAIL("getsockname: %s", ct_errname(errno));
  return ntohs(sa.sin_port);
}

int ct_tcp_listener(struct sockaddr_in* bound) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) CT_FAIL("socket(tcp): %s", ct_errname(errno));
  struct sockaddr_in sa = ct_addr(0);
  if (bind(fd, (struct sockaddr*)&sa, sizeof sa) != 0) CT_FAIL("bind(tcp): %s", ct_errname(errno));
  if (listen(fd, 16) != 0) CT_FAIL("listen: %s", ct_errname(errno));
  if (bound) *bound = ct_addr(ct_port_of(fd));
  return fd;
}

int ct_tcp_connect(const struct sockaddr_in* to) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) CT_FAIL("socket(tcp): %s", ct_errname(errno));
  if (connect(fd, (const struct sockaddr*)to, sizeof *to) != 0) CT_FAIL("connect: %s", ct_errname(errno));
  return fd;
}

void ct_tcp_pair(int* client, int* server) {
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  *client = ct_tcp_connect(&addr);
  *server = accept(listener, NULL, NULL);
  if (*server < 0) CT_FAIL("accept: %s", ct_errname(errno));
  close(listener);
}

int ct_udp_bound(struct sockaddr_in* bound) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) CT_FAIL("socket(udp): %s", ct_errname(errno));
  struct sockaddr_in sa = ct_addr(0);
  if (bind(fd, (struct sockaddr*)&sa, sizeof sa) != 0) CT_FAIL("bind(udp): %s", ct_errname(errno));
  if (bound) *bound = ct_addr(ct_port_of(fd));
  return fd;
}

void ct_mixed_fds(int* client, int* server, int* udp_a, int* udp_b, struct sockaddr_in* b_addr, int pipefd[2],
                  int* efd) {
  ct_tcp_pair(client, server);
  *udp_a = ct_udp_bound(NULL);
  *udp_b = ct_udp_bound(b_addr);
  CT_RC("pipe", pipe(pipefd), 0);
  *efd = CT_OK("eventfd", eventfd(0, EFD_NONBLOCK));
}

short ct_wait(int fd, short events, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = events};
  int rc;
  do {
    rc = poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) CT_FAIL("poll: %s", ct_errname(errno));
  return rc == 0 ? 0 : p.revents;
}

void ct_wait_readable(int fd) {
  if ((ct_wait(fd, POLLIN, 2000) & POLLIN) == 0) CT_FAIL("fd did not become readable within 2 s");
}

void ct_echo_byte(int from, int to, const char* what) {
  char c = 'e';
  if (send(from, &c, 1, 0) != 1) CT_FAIL("%s: send: %s", what, ct_errname(errno));
  ct_wait_readable(to);
  char got = 0;
  if (recv(to, &got, 1, 0) != 1 || got != c) CT_FAIL("%s: recv: %s", what, ct_errname(errno));
  ct_out("%s: works", what);
}

void ct_send_all(int fd, const void* buf, size_t len) {
  const char* p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) CT_FAIL("send_all: %zd %s", n, ct_errname(errno));
    p += n;
    len -= (size_t)n;
  }
}

void ct_recv_all(int fd, void* buf, size_t len) {
  char* p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) CT_FAIL("recv_all: %zd %s with %zu bytes missing", n, ct_errname(errno), len);
    p += n;
    len -= (size_t)n;
  }
}

static unsigned char pattern_byte(unsigned seed, size_t offset) {
  uint32_t x = (uint32_t)offset * 2654435761u + seed * 40503u;
  return (unsigned char)(x >> 13 ^ x >> 24);
}

void ct_pattern(unsigned char* buf, size_t len, unsigned seed, size_t offset) {
  for (size_t i = 0; i < len; ++i) buf[i] = pattern_byte(seed, offset + i);
}

int ct_pattern_ok(const unsigned char* buf, size_t len, unsigned seed, size_t offset) {
  for (size_t i = 0; i < len; ++i)
    if (buf[i] != pattern_byte(seed, offset + i)) return 0;
  return 1;
}

int ct_recv_pattern_ok(int fd, size_t len, unsigned seed, size_t offset) {
  unsigned char* buf = malloc(len);
  if (buf == NULL) return 0;
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv(fd, buf + got, len - got, 0);
    if (n <= 0) break;
    got += (size_t)n;
  }
  int ok = got == len && ct_pattern_ok(buf, len, seed, offset);
  free(buf);
  return ok;
}

void ct_expect_child_ok(pid_t pid, const char* what) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) CT_FAIL("waitpid: %s", ct_errname(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) CT_FAIL("%s: child status 0x%x", what, status);
  ct_out("%s: child exited 0", what);
}

long ct_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void ct_sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int ct_library_loaded(void) { return dlsym(RTLD_DEFAULT, "vsock_version") != NULL; }

static atomic_int ct_usr1_handled;

static void ct_on_usr1(int sig) {
  (void)sig;
  atomic_fetch_add(&ct_usr1_handled, 1);
}

void ct_usr1_block_counted(sigset_t* usr1, sigset_t* saved) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = ct_on_usr1;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  sigemptyset(usr1);
  sigaddset(usr1, SIGUSR1);
  CT_RC("block SIGUSR1", sigprocmask(SIG_BLOCK, usr1, saved), 0);
}

int ct_usr1_count(void) { return atomic_load(&ct_usr1_handled); }

void ct_usr1_reset(void) { atomic_store(&ct_usr1_handled, 0); }
