/* udp_threads: several UDP sockets of one process, each waited on by a
 * thread of its own without a timeout, for run_udp_threads.sh. With
 * libvsock every socket of the process is fed by one UD endpoint whose one
 * completion channel all the sleepers watch: the thread that takes its
 * event may take another socket's datagram, and that socket's sleeper must
 * still wake (src/sock/dgram/sleeper_wake.hpp). Plain socket calls: it
 * runs the same with and without libvsock.
 *
 *   udp_threads server ADDR WAIT N  N sockets bound to ADDR:0, one thread
 *                                   each waiting the WAIT way (block:
 *                                   recvfrom, poll, epoll) with no
 *                                   timeout; prints "READY p1 .. pN";
 *                                   echoes each datagram to its sender; a
 *                                   datagram "QUIT" ends that thread.
 *   udp_threads client ADDR COUNT P1 .. PN
 *                                   COUNT rounds; in each, one 64 B
 *                                   datagram to every port in turn, each
 *                                   echo awaited (10 s) and compared; then
 *                                   QUIT to every port. Prints "echoed E/T
 *                                   lost L wrong W slowest S ms over_100ms
 *                                   O" and exits 0 only when L and W are 0.
 * Every wait of the client is bounded; the server's are not (that is the
 * point): the script bounds the whole run. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* An echo is awaited this long: what the test catches is a sleeper that
 * is never woken (it would sleep for good). Slow ones are counted. */
enum { kMaxSockets = 8, kSize = 64, kEchoMs = 10000, kSlowMs = 100 };

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int die(const char* what) {
  fprintf(stderr, "udp_threads: %s: %s\n", what, strerror(errno));
  return 2;
}

struct worker {
  int fd;
  const char* wait;
  unsigned long echoed;
};

static void* serve(void* arg) {
  struct worker* w = arg;
  int epfd = -1;
  if (strcmp(w->wait, "epoll") == 0) {
    epfd = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN, .data.fd = w->fd};
    epoll_ctl(epfd, EPOLL_CTL_ADD, w->fd, &e);
  }
  uint8_t buf[kSize + 1];
  for (;;) {
    if (strcmp(w->wait, "poll") == 0) {
      struct pollfd p = {w->fd, POLLIN, 0};
      if (poll(&p, 1, -1) < 0 && errno != EINTR) break;
    } else if (epfd >= 0) {
      struct epoll_event e;
      if (epoll_wait(epfd, &e, 1, -1) < 0 && errno != EINTR) break;
    }
    struct sockaddr_in from;
    socklen_t from_len = sizeof from;
    int flags = strcmp(w->wait, "block") == 0 ? 0 : MSG_DONTWAIT;
    ssize_t n = recvfrom(w->fd, buf, sizeof buf, flags, (struct sockaddr*)&from, &from_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) break;
    if (n == 4 && memcmp(buf, "QUIT", 4) == 0) break;
    if (sendto(w->fd, buf, (size_t)n, 0, (struct sockaddr*)&from, from_len) == n) ++w->echoed;
  }
  return NULL;
}

static int server(const char* addr, const char* wait, int count) {
  struct worker workers[kMaxSockets];
  pthread_t threads[kMaxSockets];
  printf("READY");
  for (int i = 0; i < count; ++i) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, addr, &me.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr*)&me, sizeof me) != 0) return die("bind");
    socklen_t len = sizeof me;
    getsockname(fd, (struct sockaddr*)&me, &len);
    printf(" %u", ntohs(me.sin_port));
    workers[i] = (struct worker){fd, wait, 0};
  }
  printf("\n");
  fflush(stdout);
  for (int i = 0; i < count; ++i) pthread_create(&threads[i], NULL, serve, &workers[i]);
  unsigned long echoed = 0;
  for (int i = 0; i < count; ++i) {
    pthread_join(threads[i], NULL);
    echoed += workers[i].echoed;
  }
  printf("server echoed %lu\n", echoed);
  return 0;
}

static int client(const char* addr, long rounds, int count, char** ports) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return die("socket");
  struct sockaddr_in to[kMaxSockets];
  for (int i = 0; i < count; ++i) {
    to[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(ports[i]))};
    inet_pton(AF_INET, addr, &to[i].sin_addr);
  }
  long echoed = 0, lost = 0, wrong = 0;
  int reported = 0;
  long slow = 0;
  double slowest = 0;
  uint8_t out[kSize], in[kSize + 1];
  for (long r = 0; r < rounds; ++r) {
    for (int i = 0; i < count; ++i) {
      long index = r * count + i;
      for (int at = 0; at < kSize; ++at) out[at] = (uint8_t)(index * 31 + at);
      memcpy(out, &index, sizeof index);
      double sent = now_ms();
      if (sendto(fd, out, kSize, 0, (struct sockaddr*)&to[i], sizeof to[i]) != kSize) return die("sendto");
      int got = 0;
      while (!got && now_ms() < sent + kEchoMs) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(sent + kEchoMs - now_ms()) + 1) <= 0) break;
        ssize_t n = recv(fd, in, sizeof in, MSG_DONTWAIT);
        if (n < 0) continue;
        long echo_index;
        memcpy(&echo_index, in, sizeof echo_index);
        if (n != kSize || echo_index != index) {
          if (echo_index < index) continue; /* a late echo of one counted lost */
          ++wrong;
          break;
        }
        got = memcmp(in, out, kSize) == 0;
        if (!got) {
          ++wrong;
          break;
        }
      }
      double took = now_ms() - sent;
      if (got) {
        ++echoed;
        if (took > slowest) slowest = took;
        if (took > kSlowMs) ++slow;
      } else {
        ++lost;
      }
      /* For whoever reads a failure: which echoes were slow, to which socket. */
      if ((!got || took > kSlowMs) && ++reported <= 20)
        fprintf(stderr, "udp_threads: echo %ld (socket %d) %s after %.1f ms\n", index, i, got ? "came" : "lost", took);
    }
  }
  for (int i = 0; i < count; ++i) sendto(fd, "QUIT", 4, 0, (struct sockaddr*)&to[i], sizeof to[i]);
  printf("echoed %ld/%ld lost %ld wrong %ld slowest %.1f ms over_100ms %ld\n", echoed, rounds * count, lost, wrong,
         slowest, slow);
  return lost == 0 && wrong == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 5 && strcmp(argv[1], "server") == 0) {
    int count = atoi(argv[4]);
    if (count < 1 || count > kMaxSockets) return 2;
    return server(argv[2], argv[3], count);
  }
  if (argc >= 5 && argc - 4 <= kMaxSockets && strcmp(argv[1], "client") == 0)
    return client(argv[2], atol(argv[3]), argc - 4, argv + 4);
  fprintf(stderr, "usage: udp_threads server ADDR block|poll|epoll N | client ADDR COUNT PORT...\n");
  return 2;
}
