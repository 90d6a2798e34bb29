/* udp_pair: a UDP echo server and a client that checks every echo, for
 * run_udp_pair.sh (UDP over UD, DESIGN decision 5). Plain socket calls: it
 * runs the same with and without libvsock.
 *
 *   udp_pair server ADDR WAIT       binds ADDR:0, prints "READY <port>",
 *                                   echoes each datagram to its sender
 *                                   until a datagram "QUIT"; WAIT is how it
 *                                   waits: block (recvfrom), poll or epoll.
 *   udp_pair client ADDR PORT COUNT WAIT [MAX]
 *                                   sends COUNT datagrams one at a time
 *                                   (sizes cycle 0 B .. 65,507 B, or up
 *                                   to MAX B at most; each a
 *                                   pattern of its index), waits for each
 *                                   echo (1 s), compares it byte for byte;
 *                                   a lost one is counted, not resent
 *                                   (so is one the network refused: no
 *                                   route, U of them).
 *                                   Prints "echoed E/N lost L wrong W in S s
 *                                   (unreachable U)"
 *                                   and exits 0 only when W is 0 and L is 0.
 *   udp_pair burst ADDR PORT ROUNDS BATCH
 *                                   each round sends BATCH datagrams
 *                                   (<= 64, up to 4,000 B) with one
 *                                   sendmmsg(), takes the echoes with
 *                                   recvmmsg() (2 s), matches them by index
 *                                   and compares them; prints "burst echoed
 *                                   E/N lost L wrong W in S s".
 * Every wait is bounded; the server stops after 120 s without a datagram. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kMax = 65507, kIdleMs = 120000, kEchoMs = 1000 };
static const size_t kSizes[] = {0, 1, 64, 983, 984, 985, 1400, 4000, 8000, 30000, kMax};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static uint8_t pattern(uint32_t index, size_t at) { return (uint8_t)(index * 131u + at * 7u + (at >> 8)); }

static int die(const char* what) {
  fprintf(stderr, "udp_pair: %s: %s\n", what, strerror(errno));
  return 2;
}

/* Waits until fd is readable or timeout_ms pass, the way `wait` says. */
static int wait_readable(int fd, int epfd, const char* wait, int timeout_ms) {
  if (strcmp(wait, "block") == 0) {
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return 1; /* the recvfrom itself waits, with SO_RCVTIMEO */
  }
  if (strcmp(wait, "poll") == 0) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms);
  }
  struct epoll_event e;
  return epoll_wait(epfd, &e, 1, timeout_ms);
}

static int make_epoll(int fd, const char* wait) {
  if (strcmp(wait, "epoll") != 0) return -1;
  int epfd = epoll_create1(0);
  struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
  epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
  return epfd;
}

static int server(const char* addr, const char* wait) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in me = {.sin_family = AF_INET};
  inet_pton(AF_INET, addr, &me.sin_addr);
  if (fd < 0 || bind(fd, (struct sockaddr*)&me, sizeof me) != 0) return die("bind");
  socklen_t len = sizeof me;
  getsockname(fd, (struct sockaddr*)&me, &len);
  printf("READY %u\n", ntohs(me.sin_port));
  fflush(stdout);
  int epfd = make_epoll(fd, wait);
  uint8_t* buf = malloc(kMax + 1);
  unsigned long echoed = 0;
  for (;;) {
    int ready = wait_readable(fd, epfd, wait, kIdleMs);
    if (ready == 0) break;
    struct sockaddr_in from;
    socklen_t from_len = sizeof from;
    ssize_t n = recvfrom(fd, buf, kMax + 1, 0, (struct sockaddr*)&from, &from_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return die("recvfrom");
    if (n == 4 && memcmp(buf, "QUIT", 4) == 0) break;
    if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr*)&from, from_len) != n) return die("sendto");
    ++echoed;
  }
  printf("server echoed %lu\n", echoed);
  return 0;
}

static int client(const char* addr, int port, long count, const char* wait, size_t max_size) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, addr, &to.sin_addr);
  if (fd < 0) return die("socket");
  int epfd = make_epoll(fd, wait);
  uint8_t* out = malloc(kMax);
  uint8_t* in = malloc(kMax + 1);
  long echoed = 0, lost = 0, wrong = 0, unreachable = 0;
  double start = now_s();
  for (long i = 0; i < count; ++i) {
    size_t size = kSizes[i % (sizeof kSizes / sizeof kSizes[0])];
    if (size > max_size) size = max_size;
    for (size_t at = 0; at < size; ++at) out[at] = pattern((uint32_t)i, at);
    if (size >= 4) memcpy(out, &i, 4); /* the index, to tell a late echo from the one awaited */
    if (sendto(fd, out, size, 0, (struct sockaddr*)&to, sizeof to) != (ssize_t)size) {
      /* The route is gone while this host's link is down (two-host link
       * flap): the datagram is lost, as UDP may; a moment, then on. */
      if (errno != ENETUNREACH && errno != ENETDOWN && errno != EHOSTUNREACH) return die("sendto");
      ++lost;
      ++unreachable;
      usleep(100 * 1000);
      continue;
    }
    double deadline = now_s() + kEchoMs / 1000.0;
    int got = 0;
    while (!got && now_s() < deadline) {
      int left = (int)((deadline - now_s()) * 1000) + 1;
      if (wait_readable(fd, epfd, wait, left) <= 0) break;
      ssize_t n = recv(fd, in, kMax + 1, strcmp(wait, "block") == 0 ? 0 : MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n < 0) return die("recv");
      if (size >= 4 && n >= 4 && memcmp(in, out, 4) != 0) continue; /* a late echo of an earlier one */
      got = 1;
      if ((size_t)n != size || memcmp(in, out, size) != 0) {
        ++wrong;
        fprintf(stderr, "udp_pair: datagram %ld (%zu B): echo of %zd B differs\n", i, size, n);
      } else {
        ++echoed;
      }
    }
    if (!got) ++lost;
  }
  double secs = now_s() - start;
  sendto(fd, "QUIT", 4, 0, (struct sockaddr*)&to, sizeof to);
  printf("echoed %ld/%ld lost %ld wrong %ld in %.3f s (unreachable %ld)\n", echoed, count, lost, wrong, secs,
         unreachable);
  return wrong == 0 && lost == 0 ? 0 : 1;
}

/* Bursts: each round sends `batch` datagrams with one sendmmsg() (sizes
 * cycle up to 4,000 B, each a pattern of its index, the index in its first
 * 4 bytes), then takes the echoes with recvmmsg() until all came or 2 s
 * passed; each echo is matched by its index and compared byte for byte. */
enum { kBurstMax = 64, kBurstSize = 4000, kBurstMs = 2000 };
/* Seconds of single probes before the bursts (burst()), and at most this
 * many probes: each is a post of its own, and a quick host sent 2,200 in
 * the second, more posts than the bursts' datagrams allow (the check of
 * run_udp_pair.sh: 4 datagrams a post at least). */
static const double kBurstWarmUpS = 1.0;
enum { kBurstWarmUpProbes = 500 };

static size_t burst_size(long index) {
  size_t size = kSizes[index % (sizeof kSizes / sizeof kSizes[0])];
  return size > kBurstSize ? kBurstSize : size < 4 ? 4 : size;
}

static int burst(const char* addr, int port, long rounds, int batch) {
  if (batch < 1 || batch > kBurstMax) batch = kBurstMax;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, addr, &to.sin_addr);
  if (fd < 0) return die("socket");
  static uint8_t out[kBurstMax][kBurstSize], in[kBurstMax][kBurstSize + 1];
  struct iovec out_iov[kBurstMax], in_iov[kBurstMax];
  struct mmsghdr out_msgs[kBurstMax], in_msgs[kBurstMax];
  long echoed = 0, lost = 0, wrong = 0, sent_total = 0;
  /* A second of probes first (echoed, then dropped: their index is no
   * round's): a libvsock destination is resolved off the application's
   * thread while its first datagrams go through the kernel, and on a
   * loaded host that took longer than the bursts (a CI rehearsal sent all
   * 3,200 through the kernel). */
  int probes = 0;
  for (double until = now_s() + kBurstWarmUpS; now_s() < until && probes < kBurstWarmUpProbes; ++probes) {
    uint32_t probe = 0xffffffffu;
    sendto(fd, &probe, sizeof probe, 0, (struct sockaddr*)&to, sizeof to);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) (void)recv(fd, in[0], sizeof in[0], MSG_DONTWAIT);
  }
  double start = now_s();
  for (long r = 0; r < rounds; ++r) {
    for (int k = 0; k < batch; ++k) {
      long index = r * batch + k;
      size_t size = burst_size(index);
      for (size_t at = 0; at < size; ++at) out[k][at] = pattern((uint32_t)index, at);
      memcpy(out[k], &index, 4);
      out_iov[k] = (struct iovec){out[k], size};
      out_msgs[k] = (struct mmsghdr){.msg_hdr = {.msg_name = &to, .msg_namelen = sizeof to, .msg_iov = &out_iov[k],
                                                 .msg_iovlen = 1}};
    }
    int sent = 0;
    while (sent < batch) {
      int n = sendmmsg(fd, out_msgs + sent, (unsigned)(batch - sent), 0);
      if (n < 0) return die("sendmmsg");
      for (int k = sent; k < sent + n; ++k)
        if (out_msgs[k].msg_len != out_iov[k].iov_len) return die("sendmmsg msg_len");
      sent += n;
    }
    sent_total += sent;
    char seen[kBurstMax] = {0};
    int got = 0;
    double deadline = now_s() + kBurstMs / 1000.0;
    while (got < batch && now_s() < deadline) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, (int)((deadline - now_s()) * 1000) + 1) <= 0) break;
      for (int k = 0; k < batch; ++k) {
        in_iov[k] = (struct iovec){in[k], sizeof in[k]};
        in_msgs[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &in_iov[k], .msg_iovlen = 1}};
      }
      int n = recvmmsg(fd, in_msgs, (unsigned)batch, MSG_DONTWAIT, NULL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n < 0) return die("recvmmsg");
      for (int m = 0; m < n; ++m) {
        long index;
        if (in_msgs[m].msg_len < 4) continue;
        memcpy(&index, in[m], 4);
        index &= 0xffffffffL;
        int k = (int)(index - r * batch);
        if (k < 0 || k >= batch || seen[k]) continue; /* a late echo of an earlier round */
        seen[k] = 1;
        ++got;
        if (in_msgs[m].msg_len != out_iov[k].iov_len || memcmp(in[m], out[k], out_iov[k].iov_len) != 0) {
          ++wrong;
          fprintf(stderr, "udp_pair: burst datagram %ld: echo of %u B differs\n", index, in_msgs[m].msg_len);
        } else {
          ++echoed;
        }
      }
    }
    lost += batch - got;
  }
  double secs = now_s() - start;
  sendto(fd, "QUIT", 4, 0, (struct sockaddr*)&to, sizeof to);
  printf("burst echoed %ld/%ld lost %ld wrong %ld in %.3f s\n", echoed, sent_total, lost, wrong, secs);
  return wrong == 0 && lost == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "server") == 0) return server(argv[2], argv[3]);
  if ((argc == 6 || argc == 7) && strcmp(argv[1], "client") == 0)
    return client(argv[2], atoi(argv[3]), atol(argv[4]), argv[5], argc == 7 ? (size_t)atol(argv[6]) : kMax);
  if (argc == 6 && strcmp(argv[1], "burst") == 0) return burst(argv[2], atoi(argv[3]), atol(argv[4]), atoi(argv[5]));
  fprintf(stderr, "usage: udp_pair server ADDR block|poll|epoll | client ADDR PORT COUNT block|poll|epoll\n");
  return 2;
}
