/* churn: many short connections, each a small echo checked byte for byte
 * (issue 10's churn test; run_churn.sh runs it both ends preloaded in the
 * Soft-RoCE VM and checks that the library's resources come back).
 *
 *   churn server ADDR PORTFILE
 *     A thread per accepted connection echoes until the client's end of
 *     stream, then closes. Writes "PORT PID" to PORTFILE; on SIGTERM prints
 *     "SERVER accepted=N finished=N active=N bytes=N errors=N" and exits
 *     (through exit(), so the library prints its stats).
 *
 *   churn client ADDR PORT SEQ CONC CONC_CYCLES SEED MAX_S [PAUSEDIR]
 *     warmup: one cycle. seq: SEQ cycles one after another. conc: CONC
 *     threads share CONC_CYCLES cycles, so CONC connections are open at
 *     once. A cycle: socket, connect, write a request of 64 B - 4 KiB
 *     (size and bytes from SEED and the cycle's number), read it back and
 *     compare, close; every other cycle shuts down its writing after the
 *     request and must then read the echo and the server's end of stream,
 *     not one byte more. Every call is bounded (SO_RCVTIMEO/SO_SNDTIMEO
 *     10 s), every phase by MAX_S. Per phase one line:
 *       MEASURED phase=P cycles=N done=N failures=N wrong_bytes=N
 *                mean_ms=.. p50_ms=.. p99_ms=.. max_ms=.. wall_s=..
 *     With PAUSEDIR, after each phase it prints "PHASE P done" and waits
 *     (up to 300 s) for the file PAUSEDIR/P before it goes on, so the
 *     script can count resources while the process is still alive.
 *     Exit 0 only if every cycle of every phase succeeded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <dlfcn.h>
#include <stddef.h>
#include <unistd.h>

#include "vsock/vsock.h"

#define MIN_REQUEST 64
#define MAX_REQUEST 4096
#define MAX_THREADS 256
#define CALL_TIMEOUT_S 10

static void die(const char* what) {
  fprintf(stderr, "churn: %s: %s\n", what, strerror(errno));
  exit(2);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* ---- the library's counters, when it is loaded ---- */

#define FIELD(name) {#name, offsetof(struct vsock_stats, name)}
static const struct {
  const char* name;
  size_t offset;
} stat_fields[] = {
    FIELD(tcp_sockets),          FIELD(upgrade_attempts),        FIELD(upgrades_done),
    FIELD(upgrade_resets),       FIELD(fallback_declined),       FIELD(fallback_cached_peer),
    FIELD(fallback_rejected),    FIELD(fallback_no_listener),    FIELD(fallback_unreachable),
    FIELD(fallback_timeout),     FIELD(fallback_local_error),    FIELD(fallback_peer_closed),
    FIELD(fallback_transport_error), FIELD(fallback_refused),    FIELD(fallback_no_request),
    FIELD(fallback_no_resources), FIELD(stream_resumes),         FIELD(stream_violations),
    FIELD(reverts_sent),         FIELD(reverts_received),        FIELD(upgrade_redirects),
    FIELD(rdma_bytes_sent),      FIELD(rdma_bytes_received),     FIELD(tcp_bytes_sent),
    FIELD(tcp_bytes_received),   FIELD(registered_bytes),        FIELD(channels_parked),
    FIELD(upgrade_attached),     FIELD(attach_refused),          FIELD(attach_failed),
};

/* Prints "STATS WHO PHASE name=delta ..." (registered_bytes: the value),
 * the counters since *prev, and keeps them in *prev. Nothing without the
 * library. */
static void print_stats(const char* who, const char* phase, struct vsock_stats* prev) {
  size_t (*snapshot)(struct vsock_stats*, size_t) =
      (size_t(*)(struct vsock_stats*, size_t))dlsym(RTLD_DEFAULT, "vsock_stats_snapshot");
  if (snapshot == NULL) return;
  struct vsock_stats now;
  memset(&now, 0, sizeof now);
  snapshot(&now, sizeof now);
  printf("STATS %s %s", who, phase);
  for (size_t i = 0; i < sizeof stat_fields / sizeof stat_fields[0]; ++i) {
    uint64_t v = *(const uint64_t*)((const char*)&now + stat_fields[i].offset);
    uint64_t p = *(const uint64_t*)((const char*)prev + stat_fields[i].offset);
    int absolute = strcmp(stat_fields[i].name, "registered_bytes") == 0;
    printf(" %s=%llu", stat_fields[i].name, (unsigned long long)(absolute ? v : v - p));
  }
  printf("\n");
  fflush(stdout);
  *prev = now;
}

/* ---- server ---- */

static atomic_long accepted, finished, active, echoed, errors;

static void* serve(void* arg) {
  int fd = (int)(intptr_t)arg;
  char buf[MAX_REQUEST];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) atomic_fetch_add(&errors, 1);
    if (n <= 0) break;
    if (write_all(fd, buf, (size_t)n) != 0) {
      atomic_fetch_add(&errors, 1);
      break;
    }
    atomic_fetch_add(&echoed, n);
  }
  close(fd);
  atomic_fetch_sub(&active, 1);
  atomic_fetch_add(&finished, 1);
  return NULL;
}

static volatile sig_atomic_t stopping, stats_asked;
static void on_signal(int sig) {
  if (sig == SIGTERM) stopping = 1;
  else stats_asked = 1;
}

static int run_server(const char* addr, const char* portfile) {
  /* SIGTERM ends the server, SIGUSR1 prints its counters since the last
   * SIGUSR1 ("STATS server N"): both taken by the accepting thread only
   * (no SA_RESTART: accept() returns EINTR). */
  struct sigaction sa_sig;
  memset(&sa_sig, 0, sizeof sa_sig);
  sa_sig.sa_handler = on_signal;
  sigaction(SIGTERM, &sa_sig, NULL);
  sigaction(SIGUSR1, &sa_sig, NULL);
  sigset_t ours, old;
  sigemptyset(&ours);
  sigaddset(&ours, SIGTERM);
  sigaddset(&ours, SIGUSR1);
  struct vsock_stats prev;
  memset(&prev, 0, sizeof prev);
  int asked = 0;
  signal(SIGPIPE, SIG_IGN);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) die("address");
  if (bind(listener, (struct sockaddr*)&sa, sizeof sa) != 0) die("bind");
  if (listen(listener, 128) != 0) die("listen");
  socklen_t len = sizeof sa;
  if (getsockname(listener, (struct sockaddr*)&sa, &len) != 0) die("getsockname");
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) die("portfile");
  fprintf(f, "%d %d\n", ntohs(sa.sin_port), (int)getpid());
  fclose(f);
  if (rename(tmp, portfile) != 0) die("rename portfile");

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  while (!stopping) {
    if (stats_asked) {
      stats_asked = 0;
      char phase[32];
      snprintf(phase, sizeof phase, "%d", ++asked);
      print_stats("server", phase, &prev);
    }
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      fprintf(stderr, "churn server: accept: %s\n", strerror(errno));
      atomic_fetch_add(&errors, 1);
      usleep(10000);
      continue;
    }
    struct timeval tv = {CALL_TIMEOUT_S * 3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    atomic_fetch_add(&accepted, 1);
    atomic_fetch_add(&active, 1);
    pthread_t t;
    pthread_sigmask(SIG_BLOCK, &ours, &old); /* the thread starts with them blocked */
    int failed = pthread_create(&t, &attr, serve, (void*)(intptr_t)fd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed != 0) {
      fprintf(stderr, "churn server: pthread_create failed\n");
      atomic_fetch_add(&errors, 1);
      atomic_fetch_sub(&active, 1);
      close(fd);
    }
  }
  printf("SERVER accepted=%ld finished=%ld active=%ld bytes=%ld errors=%ld\n", atomic_load(&accepted),
         atomic_load(&finished), atomic_load(&active), atomic_load(&echoed), atomic_load(&errors));
  fflush(stdout);
  exit(0);
}

/* ---- client ---- */

static struct sockaddr_in target;
static uint64_t seed;

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct phase {
  const char* name;
  long cycles;
  int threads;
  double deadline;
  atomic_long next;     /* the next cycle number to take */
  atomic_long done;     /* cycles that ended (well or not) */
  atomic_long failures; /* cycles that did not end well */
  atomic_long wrong;    /* bytes that came back different */
  atomic_int reported;  /* failures printed so far */
  double* times_ms;     /* per cycle */
};

static void report_failure(struct phase* ph, long cycle, const char* what, int err) {
  if (atomic_fetch_add(&ph->reported, 1) < 20)
    fprintf(stderr, "churn client: %s cycle %ld: %s%s%s\n", ph->name, cycle, what, err ? ": " : "",
            err ? strerror(err) : "");
}

/* One cycle; 0 when every byte came back and the connection ended right. */
static int one_cycle(struct phase* ph, long cycle) {
  uint64_t r = mix(seed ^ ((uint64_t)cycle << 20) ^ (uint64_t)(uintptr_t)ph->name[0]);
  size_t size = MIN_REQUEST + (size_t)(r % (MAX_REQUEST - MIN_REQUEST + 1));
  int half_close = (int)(cycle & 1);
  char out[MAX_REQUEST], in[MAX_REQUEST + 1];
  uint64_t x = r;
  for (size_t i = 0; i < size; ++i) {
    if (i % 8 == 0) x = mix(x);
    out[i] = (char)(x >> (8 * (i % 8)));
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    report_failure(ph, cycle, "socket", errno);
    return -1;
  }
  struct timeval tv = {CALL_TIMEOUT_S, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc = -1;
  if (connect(fd, (const struct sockaddr*)&target, sizeof target) != 0) {
    report_failure(ph, cycle, "connect", errno);
    goto out;
  }
  if (write_all(fd, out, size) != 0) {
    report_failure(ph, cycle, "write", errno);
    goto out;
  }
  if (half_close && shutdown(fd, SHUT_WR) != 0) {
    report_failure(ph, cycle, "shutdown", errno);
    goto out;
  }
  size_t got = 0;
  /* A half-closed cycle reads one byte past the echo: it must see the end. */
  size_t want = half_close ? size + 1 : size;
  while (got < want) {
    ssize_t n = read(fd, in + got, want - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      report_failure(ph, cycle, "read", errno);
      goto out;
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  if (got < size) {
    report_failure(ph, cycle, "end of stream before the whole echo", 0);
    goto out;
  }
  if (got > size) {
    report_failure(ph, cycle, "bytes after the echo", 0);
    atomic_fetch_add(&ph->wrong, (long)(got - size));
    goto out;
  }
  long wrong = 0;
  for (size_t i = 0; i < size; ++i) wrong += in[i] != out[i];
  if (wrong != 0) {
    atomic_fetch_add(&ph->wrong, wrong);
    report_failure(ph, cycle, "wrong bytes in the echo", 0);
    goto out;
  }
  rc = 0;
out:
  if (close(fd) != 0 && rc == 0) {
    report_failure(ph, cycle, "close", errno);
    rc = -1;
  }
  return rc;
}

static void* phase_thread(void* arg) {
  struct phase* ph = arg;
  for (;;) {
    long cycle = atomic_fetch_add(&ph->next, 1);
    if (cycle >= ph->cycles) break;
    if (now_s() > ph->deadline) {
      report_failure(ph, cycle, "phase out of time", 0);
      break;
    }
    double t0 = now_s();
    int rc = one_cycle(ph, cycle);
    ph->times_ms[cycle] = (now_s() - t0) * 1000.0;
    if (rc != 0) atomic_fetch_add(&ph->failures, 1);
    atomic_fetch_add(&ph->done, 1);
  }
  return NULL;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void pause_after(const char* dir, const char* name) {
  printf("PHASE %s done\n", name);
  fflush(stdout);
  if (dir == NULL) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  for (int i = 0; i < 3000; ++i) {
    if (access(path, F_OK) == 0) return;
    usleep(100000);
  }
  fprintf(stderr, "churn client: no %s after 300 s: going on\n", path);
}

/* Runs a phase; 0 when every cycle succeeded. */
static int run_phase(const char* name, long cycles, int threads, double max_s, const char* pausedir) {
  struct phase ph;
  memset(&ph, 0, sizeof ph);
  ph.name = name;
  ph.cycles = cycles;
  ph.threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
  ph.times_ms = calloc((size_t)(cycles > 0 ? cycles : 1), sizeof(double));
  if (ph.times_ms == NULL) die("calloc");
  double t0 = now_s();
  ph.deadline = t0 + max_s;
  if (ph.threads == 1) {
    phase_thread(&ph);
  } else {
    pthread_t t[MAX_THREADS];
    int started = 0;
    for (int i = 0; i < ph.threads; ++i) {
      if (pthread_create(&t[i], NULL, phase_thread, &ph) != 0) break;
      ++started;
    }
    if (started == 0) phase_thread(&ph);
    for (int i = 0; i < started; ++i) pthread_join(t[i], NULL);
  }
  double wall = now_s() - t0;
  long done = atomic_load(&ph.done);
  double sum = 0;
  for (long i = 0; i < done; ++i) sum += ph.times_ms[i];
  qsort(ph.times_ms, (size_t)done, sizeof(double), cmp_double);
  long failures = atomic_load(&ph.failures) + (cycles - done); /* not run = failed */
  printf("MEASURED phase=%s cycles=%ld threads=%d done=%ld failures=%ld wrong_bytes=%ld mean_ms=%.2f p50_ms=%.2f "
         "p99_ms=%.2f max_ms=%.2f wall_s=%.1f\n",
         name, cycles, ph.threads, done, failures, atomic_load(&ph.wrong), done ? sum / (double)done : 0.0,
         done ? ph.times_ms[done / 2] : 0.0, done ? ph.times_ms[(done * 99) / 100] : 0.0,
         done ? ph.times_ms[done - 1] : 0.0, wall);
  fflush(stdout);
  free(ph.times_ms);
  static struct vsock_stats prev;
  print_stats("client", name, &prev);
  pause_after(pausedir, name);
  return failures == 0 && atomic_load(&ph.wrong) == 0 ? 0 : 1;
}

static int run_client(char** argv, int argc) {
  signal(SIGPIPE, SIG_IGN);
  memset(&target, 0, sizeof target);
  target.sin_family = AF_INET;
  target.sin_port = htons((uint16_t)atoi(argv[3]));
  if (inet_pton(AF_INET, argv[2], &target.sin_addr) != 1) die("address");
  long seq = atol(argv[4]);
  int conc = atoi(argv[5]);
  long conc_cycles = atol(argv[6]);
  seed = strtoull(argv[7], NULL, 0);
  double max_s = atof(argv[8]);
  const char* pausedir = argc > 9 ? argv[9] : NULL;
  int bad = 0;
  bad |= run_phase("warmup", 1, 1, max_s, pausedir);
  if (seq > 0) bad |= run_phase("seq", seq, 1, max_s, pausedir);
  if (conc_cycles > 0) bad |= run_phase("conc", conc_cycles, conc, max_s, pausedir);
  return bad;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "server") == 0) return run_server(argv[2], argv[3]);
  if ((argc == 9 || argc == 10) && strcmp(argv[1], "client") == 0) return run_client(argv, argc);
  fprintf(stderr,
          "usage: churn server ADDR PORTFILE\n"
          "       churn client ADDR PORT SEQ CONC CONC_CYCLES SEED MAX_S [PAUSEDIR]\n");
  return 2;
}
