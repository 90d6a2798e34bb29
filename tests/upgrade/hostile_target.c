// hostile_target: the server (and the well-behaved client) of the hostile
// peer test (run_hostile.sh). Plain C, nothing from libvsock: run under
// LD_PRELOAD so that its connections upgrade.
//
// hostile_target server ADDR [--timeout S]
//   Listens on ADDR, port 0; prints "listening PORT". A thread per
//   connection reads the first line, a command, then:
//     echo                 writes back everything it reads;
//     read NAME [HOLD_MS]  sleeps HOLD_MS, then reads to the end;
//     push NAME N          writes N bytes ('P') without blocking; if a write
//                          finds no room and poll() shows no POLLOUT for
//                          3 s it stops (stalled), then reads to the end.
//   The server answers each command with "ok\n" once it has read it.
//   "The end" is end of stream or an error. After end of stream it reads
//   once more 300 ms later (a violation behind a FIN shows there). Each
//   connection ends with one line, then close():
//     conn ID CMD NAME: bytes=B foreign=F end=E then=T [pushed=X stalled=S] rss_kb=R
//   B: bytes read after the command line; F: how many of them were not
//   'A' (the hostile peer only writes 'A' through the protocol, and other
//   bytes where nothing may deliver them); E/T: eof, or the errno's name.
//   SIGTERM: exit(0), so the library prints its stats.
//
// hostile_target client ADDR PORT STOPFILE MAX_S
//   The well-behaved client: sends "echo", then rounds of 32 KiB of seeded
//   data 10 ms apart, reading each round's echo back and checking every
//   byte, until STOPFILE exists (or MAX_S seconds); then shutdown(SHUT_WR)
//   and end of stream. Prints "good client: rounds=R bytes=B verified"; exit 0 only
//   if every byte matched.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

static volatile sig_atomic_t g_stop = 0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char* end_name(int err) {
  switch (err) {
    case 0: return "eof";
    case ECONNRESET: return "ECONNRESET";
    case EPIPE: return "EPIPE";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EPROTO: return "EPROTO";
    case EIO: return "EIO";
    default: return strerror(err);
  }
}

static long rss_kb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
  fclose(f);
  return kb;
}

struct conn {
  int fd;
  int id;
};

// Reads to the end: returns 0 for end of stream, else the errno. Counts
// the bytes and those that are not 'A'.
static int read_to_end(int fd, long* bytes, long* foreign) {
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  // non-blocking after a push
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 1000);
        continue;
      }
      return errno;
    }
    *bytes += n;
    for (ssize_t i = 0; i < n; ++i) *foreign += buf[i] != 'A';
  }
}

static void* serve(void* arg) {
  struct conn* c = arg;
  char line[160];
  size_t len = 0;
  int err = 0;
  while (len + 1 < sizeof line) {
    ssize_t n = recv(c->fd, line + len, 1, 0);
    if (n <= 0) {
      err = n == 0 ? 0 : errno;
      break;
    }
    if (line[len] == '\n') break;
    ++len;
  }
  line[len] = 0;
  char cmd[16] = "", name[64] = "-";
  long arg_n = 0;
  int fields = sscanf(line, "%15s %63s %ld", cmd, name, &arg_n);
  long bytes = 0, foreign = 0, pushed = -1;
  int stalled = 0, then = 0;
  // The command has been read: say so (the hostile peer waits for it
  // before it misbehaves, or its violation would drop the command too).
  if (fields >= 1 && send(c->fd, "ok\n", 3, MSG_NOSIGNAL) != 3) err = errno;
  if (fields < 1 || err) {
    printf("conn %d ?: no command (%s)\n", c->id, end_name(err));
    close(c->fd);
    free(c);
    return NULL;
  }
  if (strcmp(cmd, "echo") == 0) {
    char buf[65536];
    for (;;) {
      ssize_t n = recv(c->fd, buf, sizeof buf, 0);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      bytes += n;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = send(c->fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0) {
          if (errno == EINTR) continue;
          err = errno;
          break;
        }
        off += w;
      }
      if (err) break;
    }
    printf("conn %d echo %s: bytes=%ld foreign=0 end=%s then=- rss_kb=%ld\n", c->id, name, bytes, end_name(err),
           rss_kb());
  } else {
    if (strcmp(cmd, "push") == 0) {
      static char pattern[65536];
      memset(pattern, 'P', sizeof pattern);
      fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
      pushed = 0;
      while (pushed < arg_n && !err) {
        long want = arg_n - pushed < (long)sizeof pattern ? arg_n - pushed : (long)sizeof pattern;
        ssize_t w = send(c->fd, pattern, (size_t)want, MSG_NOSIGNAL);
        if (w > 0) {
          pushed += w;
        } else if (w < 0 && errno == EAGAIN) {
          struct pollfd p = {c->fd, POLLOUT, 0};
          if (poll(&p, 1, 3000) == 0) {
            stalled = 1;
            break;
          }
        } else if (w < 0 && errno != EINTR) {
          err = errno;
        }
      }
    } else if (strcmp(cmd, "read") == 0 && arg_n > 0) {
      usleep((useconds_t)arg_n * 1000);
    }
    if (!err) err = read_to_end(c->fd, &bytes, &foreign);
    if (err == 0) {
      usleep(300 * 1000);
      char b[256];
      ssize_t n = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
      then = n == 0 ? 0 : n > 0 ? -1 : errno;
    }
    char extra[64] = "";
    if (pushed >= 0) snprintf(extra, sizeof extra, " pushed=%ld stalled=%d", pushed, stalled);
    printf("conn %d %s %s: bytes=%ld foreign=%ld end=%s then=%s%s rss_kb=%ld\n", c->id, cmd, name, bytes, foreign,
           end_name(err), err ? "-" : then == -1 ? "data" : end_name(then), extra, rss_kb());
  }
  close(c->fd);
  free(c);
  return NULL;
}

static void on_term(int sig) {
  (void)sig;
  g_stop = 1;
}

static int server(const char* addr, int timeout_s) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) return 2;
  if (bind(lfd, (struct sockaddr*)&sa, sizeof sa) != 0 || listen(lfd, 64) != 0) {
    perror("bind/listen");
    return 1;
  }
  socklen_t sl = sizeof sa;
  getsockname(lfd, (struct sockaddr*)&sa, &sl);
  struct sigaction act = {0};
  act.sa_handler = on_term;
  sigaction(SIGTERM, &act, NULL);
  signal(SIGPIPE, SIG_IGN);
  printf("listening %d\n", ntohs(sa.sin_port));
  double deadline = now_s() + timeout_s;
  int next_id = 0;
  while (!g_stop && now_s() < deadline) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) continue;
    struct conn* c = malloc(sizeof *c);
    c->fd = fd;
    c->id = next_id++;
    pthread_t t;
    pthread_create(&t, NULL, serve, c);
    pthread_detach(t);
  }
  printf("server exits (%s)\n", g_stop ? "SIGTERM" : "timeout");
  exit(g_stop ? 0 : 1);
}

static uint8_t pattern_byte(uint64_t i) {
  uint64_t x = i * 0x9e3779b97f4a7c15ULL;
  x ^= x >> 29;
  return (uint8_t)(x * 0xbf58476d1ce4e5b9ULL >> 56);
}

static int client(const char* addr, int port, const char* stopfile, int max_s) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, addr, &sa.sin_addr);
  if (connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0) {
    perror("connect");
    return 1;
  }
  const char* hello = "echo good\n";
  if (send(fd, hello, strlen(hello), MSG_NOSIGNAL) != (ssize_t)strlen(hello)) return 1;
  char ok[3];
  if (recv(fd, ok, 3, MSG_WAITALL) != 3 || memcmp(ok, "ok\n", 3) != 0) {
    printf("good client: no ok from the server\n");
    return 1;
  }
  enum { kRound = 32768 };
  static uint8_t out[kRound], in[kRound];
  uint64_t offset = 0;
  long rounds = 0;
  double deadline = now_s() + max_s;
  while (access(stopfile, F_OK) != 0 && now_s() < deadline) {
    for (int i = 0; i < kRound; ++i) out[i] = pattern_byte(offset + (uint64_t)i);
    for (size_t off = 0; off < kRound;) {
      ssize_t w = send(fd, out + off, kRound - off, MSG_NOSIGNAL);
      if (w <= 0) {
        printf("good client: send failed after %ld rounds: %s\n", rounds, strerror(errno));
        return 1;
      }
      off += (size_t)w;
    }
    for (size_t got = 0; got < kRound;) {
      ssize_t r = recv(fd, in + got, kRound - got, 0);
      if (r <= 0) {
        printf("good client: recv %s after %ld rounds\n", r == 0 ? "eof" : strerror(errno), rounds);
        return 1;
      }
      got += (size_t)r;
    }
    if (memcmp(in, out, kRound) != 0) {
      printf("good client: echo differs in round %ld\n", rounds);
      return 1;
    }
    offset += kRound;
    ++rounds;
    // A pause between rounds: the echo runs through every attack, but
    // flat out it took the guest's CPUs from the attacks (under TCG the
    // test ran twice as long).
    usleep(10 * 1000);
  }
  shutdown(fd, SHUT_WR);
  char b[16];
  ssize_t r = recv(fd, b, sizeof b, 0);
  if (r != 0) {
    printf("good client: no end of stream after the echo (%zd, %s)\n", r, r < 0 ? strerror(errno) : "data");
    return 1;
  }
  close(fd);
  printf("good client: rounds=%ld bytes=%llu verified\n", rounds, (unsigned long long)offset);
  return rounds > 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 3 && strcmp(argv[1], "server") == 0) {
    int timeout_s = 600;
    if (argc == 5 && strcmp(argv[3], "--timeout") == 0) timeout_s = atoi(argv[4]);
    return server(argv[2], timeout_s);
  }
  if (argc == 6 && strcmp(argv[1], "client") == 0) return client(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]));
  fprintf(stderr, "usage: %s server ADDR [--timeout S] | client ADDR PORT STOPFILE MAX_S\n", argv[0]);
  return 2;
}
