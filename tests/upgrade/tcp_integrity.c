/* tcp_integrity: many concurrent TCP connections, each streaming seeded
 * pseudo-random data both ways at once, every byte verified on arrival.
 * An unmodified application: plain C, pthreads, nothing from libvsock.
 *
 *   tcp_integrity server ADDR PORT CONNS BYTES SEED [--timeout S]
 *   tcp_integrity client ADDR PORT CONNS BYTES SEED [--timeout S]
 *
 * PORT 0 on the server: an ephemeral port. The server prints
 * "listening PORT" first. BYTES takes a K, M or G suffix; C2S/S2C (e.g.
 * 1M/128M) gives each direction its own count, so that one side shuts
 * down its writing long before the other (a half-closed connection).
 *
 * Per connection and direction the stream is a greeting (1 B .. 64 KiB,
 * written with one call: by the server right after accept, by the client
 * right after connect, before it reads anything) followed by BYTES bytes.
 * Both ends derive every stream from SEED and the client's port, so they
 * agree without exchanging anything. Writes and reads have random sizes
 * (1 B .. 1 MiB) and go through write/send/writev/sendmsg and
 * read/recv/readv/recvmsg, MSG_WAITALL, MSG_PEEK then read. Each writer ends
 * with shutdown(SHUT_WR); each reader then needs EOF, not one byte more.
 *
 * Output, one line per connection, the same on both ends:
 *   conn client_port=P c2s bytes=N fnv=H s2c bytes=N fnv=H
 * then "verified N connections". Exit 0 only when all verified; 1 on any
 * error, mismatch or when --timeout (default 300 s) passes. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "stream_gen.h"

enum { kMaxConns = 256, kMaxCall = 1 << 20, kMaxGreeting = 64 << 10 };

struct direction {
  const char* name;          /* "c2s" or "s2c" */
  uint64_t seed;             /* data stream */
  uint64_t total;            /* greeting + BYTES */
  uint64_t greeting;
  _Atomic uint64_t done;     /* bytes written or verified so far */
  uint64_t fnv;
  int failed;
  char error[256];
};

struct conn {
  int fd;
  unsigned client_port;
  int is_client;
  struct direction out, in;
  sem_t first_write;         /* client: posted once the greeting is written */
  pthread_t writer, reader;
};

static struct conn g_conns[kMaxConns];
static int g_nconns;
static uint64_t g_seed, g_bytes_c2s, g_bytes_s2c;
static int g_timeout_s = 300;
static atomic_int g_finished;

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tcp_integrity: FAIL: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  printf("FAIL\n");
  exit(1);
}

static void fail_dir(struct conn* c, struct direction* d, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->error, sizeof d->error, fmt, ap);
  va_end(ap);
  d->failed = 1;
  shutdown(c->fd, SHUT_RDWR);  /* unblocks the other direction */
}

/* Splits [buf, buf+len) into 1..max_parts iovecs of random lengths (some
 * may be empty). Returns the count. */
static int split_iov(uint64_t* ops, unsigned char* buf, size_t len, struct iovec* iov, int max_parts) {
  int parts = (int)sg_between(ops, 1, (uint64_t)max_parts);
  size_t left = len;
  for (int i = 0; i < parts; i++) {
    size_t n = i == parts - 1 ? left : (size_t)sg_between(ops, 0, left);
    iov[i].iov_base = buf + (len - left);
    iov[i].iov_len = n;
    left -= n;
  }
  return parts;
}

/* One write call of a random kind; the kernel may take less than len. */
static ssize_t write_some(int fd, uint64_t* ops, unsigned char* buf, size_t len) {
  struct iovec iov[4];
  struct msghdr msg;
  switch (sg_between(ops, 0, 3)) {
    case 0: return write(fd, buf, len);
    case 1: return send(fd, buf, len, MSG_NOSIGNAL);
    case 2: return writev(fd, iov, split_iov(ops, buf, len, iov, 4));
    default:
      memset(&msg, 0, sizeof msg);
      msg.msg_iov = iov;
      msg.msg_iovlen = (size_t)split_iov(ops, buf, len, iov, 4);
      return sendmsg(fd, &msg, MSG_NOSIGNAL);
  }
}

static int write_all(struct conn* c, struct direction* d, uint64_t* ops, unsigned char* buf, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t r = write_some(c->fd, ops, buf + off, len - off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      fail_dir(c, d, "write at %" PRIu64 " of %" PRIu64 ": %s", d->done + off, d->total,
               r == 0 ? "returned 0" : strerror(errno));
      return -1;
    }
    off += (size_t)r;
  }
  sg_fnv(&d->fnv, buf, len);
  d->done += len;
  return 0;
}

static void* writer_main(void* arg) {
  struct conn* c = arg;
  struct direction* d = &c->out;
  uint64_t ops = sg_seed(d->seed, 0x77726974, 0);
  struct sg_stream stream;
  unsigned char* buf = malloc(kMaxCall);
  if (!buf) die("out of memory");
  sg_stream_init(&stream, d->seed);
  /* The greeting: one write() right after connect/accept. */
  sg_stream_fill(&stream, buf, d->greeting);
  ssize_t r;
  do r = write(c->fd, buf, d->greeting); while (r < 0 && errno == EINTR);
  if (r < 0) {
    fail_dir(c, d, "greeting write: %s", strerror(errno));
  } else {
    sg_fnv(&d->fnv, buf, (size_t)r);
    d->done = (uint64_t)r;
    if ((uint64_t)r < d->greeting) {  /* a short write: send the rest */
      write_all(c, d, &ops, buf + r, d->greeting - (size_t)r);
    }
  }
  if (c->is_client) sem_post(&c->first_write);
  while (!d->failed && d->done < d->total) {
    uint64_t left = d->total - d->done;
    size_t n = sg_size(&ops, left < kMaxCall ? (size_t)left : kMaxCall);
    sg_stream_fill(&stream, buf, n);
    if (write_all(c, d, &ops, buf, n) < 0) break;
  }
  if (!d->failed && shutdown(c->fd, SHUT_WR) < 0) fail_dir(c, d, "shutdown(SHUT_WR): %s", strerror(errno));
  free(buf);
  return NULL;
}

/* One read call of a random kind, at most len bytes. */
static ssize_t read_some(struct conn* c, struct direction* d, uint64_t* ops, unsigned char* buf,
                         unsigned char* peek, size_t len) {
  struct iovec iov[3];
  struct msghdr msg;
  ssize_t r, r2;
  switch (sg_between(ops, 0, 5)) {
    case 0: return read(c->fd, buf, len);
    case 1: return recv(c->fd, buf, len, 0);
    case 2: return readv(c->fd, iov, split_iov(ops, buf, len, iov, 3));
    case 3:
      memset(&msg, 0, sizeof msg);
      msg.msg_iov = iov;
      msg.msg_iovlen = (size_t)split_iov(ops, buf, len, iov, 3);
      return recvmsg(c->fd, &msg, 0);
    case 4: return recv(c->fd, buf, len, MSG_WAITALL);
    default:  /* peek, then read exactly what the peek saw */
      r = recv(c->fd, peek, len, MSG_PEEK);
      if (r <= 0) return r;
      do r2 = read(c->fd, buf, (size_t)r); while (r2 < 0 && errno == EINTR);
      if (r2 != r || memcmp(peek, buf, (size_t)r) != 0) {
        fail_dir(c, d, "MSG_PEEK saw %zd bytes, the read after it got %zd%s", r, r2,
                 r2 == r ? " different bytes" : "");
        errno = EPROTO;
        return -2;
      }
      return r;
  }
}

/* After a mismatch at stream offset `at` (`got`: the `len` bytes received
 * from there): how many of them differ, and where in the stream they are
 * found, if anywhere within 8 MiB (a stale lap of a ring, bytes delivered
 * twice or skipped), into `out`. Diagnostic only. */
static void explain_mismatch(uint64_t seed, uint64_t at, const unsigned char* got, size_t len, char* out,
                             size_t size) {
  enum { kWindow = 8 << 20, kProbe = 32 };
  const uint64_t from = at > kWindow ? at - kWindow : 0;
  const size_t span = (size_t)(at - from) + kWindow;
  unsigned char* ref = malloc(span);
  if (!ref) {
    snprintf(out, size, "no memory to explain it");
    return;
  }
  struct sg_stream s;
  sg_stream_init(&s, seed);
  for (uint64_t skipped = 0; skipped < from;) {  /* to `from`, a window at a time */
    size_t n = from - skipped < span ? (size_t)(from - skipped) : span;
    sg_stream_fill(&s, ref, n);
    skipped += n;
  }
  sg_stream_fill(&s, ref, span);
  const unsigned char* expected = ref + (at - from);
  size_t differ = 0;
  for (size_t i = 0; i < len && i < kWindow; i++) differ += got[i] != expected[i];
  const size_t probe = len < kProbe ? len : kProbe;
  const unsigned char* hit = probe > 0 ? memmem(ref, span, got, probe) : NULL;
  if (hit)
    snprintf(out, size, "%zu of the %zu bytes differ; they are the stream's bytes at %" PRIu64 " (%+" PRId64 ")",
             differ, len, from + (uint64_t)(hit - ref), (int64_t)(from + (uint64_t)(hit - ref)) - (int64_t)at);
  else
    snprintf(out, size, "%zu of the %zu bytes differ; found nowhere within 8 MiB of the stream", differ, len);
  free(ref);
}

static void* reader_main(void* arg) {
  struct conn* c = arg;
  struct direction* d = &c->in;
  uint64_t ops = sg_seed(d->seed, 0x72656164, 0);
  struct sg_stream stream;
  unsigned char* buf = malloc(kMaxCall);
  unsigned char* peek = malloc(kMaxCall);
  if (!buf || !peek) die("out of memory");
  sg_stream_init(&stream, d->seed);
  if (c->is_client) sem_wait(&c->first_write);  /* write first, read after */
  while (!d->failed && d->done < d->total) {
    uint64_t left = d->total - d->done;
    size_t n = sg_size(&ops, left < kMaxCall ? (size_t)left : kMaxCall);
    ssize_t r = read_some(c, d, &ops, buf, peek, n);
    if (r == -2) break;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      fail_dir(c, d, "read at %" PRIu64 " of %" PRIu64 ": %s", d->done, d->total,
               r == 0 ? "early EOF" : strerror(errno));
      break;
    }
    size_t ok = sg_stream_check(&stream, buf, (size_t)r);
    if (ok != (size_t)r) {
      char why[160];
      explain_mismatch(d->seed, d->done + ok, buf + ok, (size_t)r - ok, why, sizeof why);
      fail_dir(c, d, "byte %" PRIu64 " differs (read of %zd at %" PRIu64 "): %s", d->done + ok, r, d->done, why);
      break;
    }
    sg_fnv(&d->fnv, buf, (size_t)r);
    d->done += (uint64_t)r;
  }
  if (!d->failed) {  /* the peer's shutdown(SHUT_WR): EOF, nothing more */
    ssize_t r;
    do r = read(c->fd, buf, 4096); while (r < 0 && errno == EINTR);
    if (r != 0) fail_dir(c, d, "after %" PRIu64 " bytes: %s", d->total, r > 0 ? "extra bytes instead of EOF" : strerror(errno));
  }
  free(buf);
  free(peek);
  return NULL;
}

static void start_conn(struct conn* c, int fd, unsigned client_port, int is_client) {
  c->fd = fd;
  c->client_port = client_port;
  c->is_client = is_client;
  struct direction* c2s = is_client ? &c->out : &c->in;
  struct direction* s2c = is_client ? &c->in : &c->out;
  c2s->name = "c2s";
  s2c->name = "s2c";
  c2s->seed = sg_seed(g_seed, client_port, 1);
  s2c->seed = sg_seed(g_seed, client_port, 2);
  uint64_t g = sg_seed(g_seed, client_port, 3);
  c2s->greeting = sg_between(&g, 1, kMaxGreeting);
  s2c->greeting = sg_between(&g, 1, kMaxGreeting);
  c2s->total = c2s->greeting + g_bytes_c2s;
  s2c->total = s2c->greeting + g_bytes_s2c;
  c->out.fnv = c->in.fnv = SG_FNV_INIT;
  sem_init(&c->first_write, 0, 0);
  if (pthread_create(&c->writer, NULL, writer_main, c) != 0 || pthread_create(&c->reader, NULL, reader_main, c) != 0)
    die("pthread_create failed");
}

static unsigned port_of(const struct sockaddr_in* a) { return ntohs(a->sin_port); }

static struct sockaddr_in parse_addr(const char* ip, const char* port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)atoi(port));
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) die("bad IPv4 address %s", ip);
  return a;
}

static void run_server(struct sockaddr_in addr) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  if (lfd < 0) die("socket: %s", strerror(errno));
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(lfd, (struct sockaddr*)&addr, sizeof addr) < 0) die("bind: %s", strerror(errno));
  if (listen(lfd, g_nconns) < 0) die("listen: %s", strerror(errno));
  socklen_t len = sizeof addr;
  getsockname(lfd, (struct sockaddr*)&addr, &len);
  printf("listening %u\n", port_of(&addr));
  fflush(stdout);
  for (int i = 0; i < g_nconns; i++) {
    struct sockaddr_in peer;
    len = sizeof peer;
    int fd = accept(lfd, (struct sockaddr*)&peer, &len);
    if (fd < 0 && errno == EINTR) { i--; continue; }
    if (fd < 0) die("accept: %s", strerror(errno));
    start_conn(&g_conns[i], fd, port_of(&peer), 0);
  }
  close(lfd);
  /* (run_peer_killed.sh kills a side only once every connection exists.) */
  printf("accepted %d\n", g_nconns);
  fflush(stdout);
}

static void run_client(struct sockaddr_in addr) {
  for (int i = 0; i < g_nconns; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr*)&addr, sizeof addr) < 0) die("connect %d: %s", i, strerror(errno));
    struct sockaddr_in self;
    socklen_t len = sizeof self;
    getsockname(fd, (struct sockaddr*)&self, &len);
    start_conn(&g_conns[i], fd, port_of(&self), 1);
  }
}

/* Fails the whole run, loudly, when the deadline passes. */
static void* watchdog_main(void* arg) {
  (void)arg;
  struct timespec step = {0, 100 * 1000 * 1000};
  for (long i = 0; i < (long)g_timeout_s * 10; i++) {
    if (atomic_load(&g_finished)) return NULL;
    nanosleep(&step, NULL);
  }
  fprintf(stderr, "tcp_integrity: FAIL: not done after %d s (--timeout)\n", g_timeout_s);
  for (int i = 0; i < g_nconns; i++) {
    struct conn* c = &g_conns[i];
    fprintf(stderr, "  conn %d client_port=%u: %s %" PRIu64 "/%" PRIu64 " written, %s %" PRIu64 "/%" PRIu64 " read\n", i,
            c->client_port, c->out.name ? c->out.name : "-", (uint64_t)c->out.done, c->out.total,
            c->in.name ? c->in.name : "-", (uint64_t)c->in.done, c->in.total);
  }
  printf("FAIL: timeout\n");
  fflush(stdout);
  _exit(1);
}

/* A count with an optional K/M/G suffix; *rest is where it stopped. */
static uint64_t parse_bytes(const char* s, const char** rest) {
  char* end;
  uint64_t v = strtoull(s, &end, 10);
  switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
  }
  if (end == s) die("bad byte count %s", s);
  *rest = end;
  return v;
}

/* BYTES, or C2S/S2C. */
static void parse_directions(const char* s) {
  const char* rest;
  g_bytes_c2s = g_bytes_s2c = parse_bytes(s, &rest);
  if (*rest == '/') g_bytes_s2c = parse_bytes(rest + 1, &rest);
  if (*rest != '\0') die("bad byte count %s (BYTES or C2S/S2C)", s);
}

int main(int argc, char** argv) {
  if (argc != 7 && !(argc == 9 && strcmp(argv[7], "--timeout") == 0)) {
    fprintf(stderr, "usage: %s server|client ADDR PORT CONNS BYTES SEED [--timeout S]\n", argv[0]);
    return 2;
  }
  int is_client = strcmp(argv[1], "client") == 0;
  if (!is_client && strcmp(argv[1], "server") != 0) die("role must be server or client");
  struct sockaddr_in addr = parse_addr(argv[2], argv[3]);
  g_nconns = atoi(argv[4]);
  parse_directions(argv[5]);
  g_seed = strtoull(argv[6], NULL, 0);
  if (argc == 9) g_timeout_s = atoi(argv[8]);
  if (g_nconns < 1 || g_nconns > kMaxConns) die("CONNS must be 1..%d", kMaxConns);
  if (g_timeout_s < 1) die("--timeout must be >= 1");
  signal(SIGPIPE, SIG_IGN);

  pthread_t watchdog;
  if (pthread_create(&watchdog, NULL, watchdog_main, NULL) != 0) die("pthread_create failed");
  if (is_client) run_client(addr); else run_server(addr);

  int failures = 0;
  for (int i = 0; i < g_nconns; i++) {
    struct conn* c = &g_conns[i];
    pthread_join(c->writer, NULL);
    pthread_join(c->reader, NULL);
    close(c->fd);
    struct direction* c2s = is_client ? &c->out : &c->in;
    struct direction* s2c = is_client ? &c->in : &c->out;
    for (struct direction* d = c2s; d; d = d == c2s ? s2c : NULL) {
      if (d->failed) {
        fprintf(stderr, "tcp_integrity: FAIL: conn %d client_port=%u %s: %s\n", i, c->client_port, d->name, d->error);
        failures++;
      }
    }
    printf("conn client_port=%u c2s bytes=%" PRIu64 " fnv=%016" PRIx64 " s2c bytes=%" PRIu64 " fnv=%016" PRIx64 "\n",
           c->client_port, (uint64_t)c2s->done, c2s->fnv, (uint64_t)s2c->done, s2c->fnv);
  }
  atomic_store(&g_finished, 1);
  pthread_join(watchdog, NULL);
  if (failures) {
    printf("FAIL: %d direction(s) failed\n", failures);
    return 1;
  }
  printf("verified %d connections\n", g_nconns);
  return 0;
}
