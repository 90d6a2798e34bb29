/* udp_flood: a receiver that does not read while a burst arrives, then
 * counts what it got — the kernel keeps every datagram its SO_RCVBUF holds
 * for a socket nobody reads, and so must libvsock's UD path.
 *
 *   udp_flood recv ADDR COUNT SIZE RCVBUF GO_FILE
 *       binds ADDR (port 0), sets SO_RCVBUF to RCVBUF (SO_RCVBUFFORCE when
 *       the limit cuts it and we may), prints "READY port buffer", makes no
 *       socket call until GO_FILE exists (checked every 10 ms, at most 120
 *       s), then takes datagrams until COUNT distinct ones came or none
 *       came for 1 s; prints "received N/COUNT duplicates D wrong W" and
 *       exits 0 only when all COUNT came, each once and intact.
 *   udp_flood send ADDR PORT COUNT SIZE
 *       sends one 4-byte probe (all ones, which the receiver skips), waits
 *       500 ms, or, under libvsock (vsock_stats_snapshot found with dlsym),
 *       until the library has resolved the destination or given up (its
 *       udp_resolutions or udp_resolution_failures moved; 10 s at most:
 *       datagrams go through the kernel until then, and a slow guest may
 *       need more than 500 ms), then sends COUNT datagrams of SIZE bytes as
 *       fast as sendto() takes them (each: its index in 4 bytes, then a
 *       pattern of it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "vsock/vsock.h"

static unsigned char pattern_byte(uint32_t index, size_t at) { return (unsigned char)(index * 7u + at); }

static const unsigned char kProbe[4] = {0xff, 0xff, 0xff, 0xff};

static void fill(unsigned char* buffer, size_t size, uint32_t index) {
  uint32_t be = htonl(index);
  memcpy(buffer, &be, 4);
  for (size_t i = 4; i < size; ++i) buffer[i] = pattern_byte(index, i);
}

/* The datagram's index, or -1 when it is not one of ours intact. */
static long check(const unsigned char* buffer, size_t got, size_t size, long count) {
  if (got != size) return -1;
  uint32_t be;
  memcpy(&be, buffer, 4);
  uint32_t index = ntohl(be);
  if ((long)index >= count) return -1;
  for (size_t i = 4; i < size; ++i)
    if (buffer[i] != pattern_byte(index, i)) return -1;
  return (long)index;
}

static int make_socket(const char* addr, struct sockaddr_in* sin, int port) {
  memset(sin, 0, sizeof *sin);
  sin->sin_family = AF_INET;
  sin->sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, addr, &sin->sin_addr) != 1) {
    fprintf(stderr, "udp_flood: bad address %s\n", addr);
    exit(2);
  }
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) {
    perror("udp_flood: socket");
    exit(1);
  }
  return fd;
}

static int receiver(const char* addr, long count, size_t size, int rcvbuf, const char* go_file) {
  struct sockaddr_in sin;
  int fd = make_socket(addr, &sin, 0);
  if (bind(fd, (struct sockaddr*)&sin, sizeof sin) != 0) {
    perror("udp_flood: bind");
    return 1;
  }
  /* After bind, as some programs do: the limit applies from the call on. */
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0) perror("udp_flood: SO_RCVBUF");
  int effective = 0;
  socklen_t length = sizeof effective;
  getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &effective, &length);
  if (effective < rcvbuf && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) == 0)
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &effective, &length);
  socklen_t sin_length = sizeof sin;
  getsockname(fd, (struct sockaddr*)&sin, &sin_length);
  printf("READY %d %d\n", ntohs(sin.sin_port), effective);
  fflush(stdout);

  struct stat st;
  for (int waited = 0; stat(go_file, &st) != 0; waited += 10) {
    if (waited >= 120000) {
      fprintf(stderr, "udp_flood: %s never came\n", go_file);
      return 1;
    }
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }

  struct timeval timeout = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  unsigned char* seen = calloc((size_t)count, 1);
  unsigned char* buffer = malloc(size + 1);
  long received = 0, duplicates = 0, wrong = 0;
  while (received < count) {
    ssize_t got = recv(fd, buffer, size + 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) perror("udp_flood: recv");
      break;
    }
    if (got == (ssize_t)sizeof kProbe && memcmp(buffer, kProbe, sizeof kProbe) == 0) continue;
    long index = check(buffer, (size_t)got, size, count);
    if (index < 0) {
      ++wrong;
    } else if (seen[index]) {
      ++duplicates;
    } else {
      seen[index] = 1;
      ++received;
    }
  }
  long first_missing = -1, last_missing = -1;
  for (long i = 0; i < count; ++i)
    if (!seen[i]) {
      if (first_missing < 0) first_missing = i;
      last_missing = i;
    }
  if (first_missing >= 0) printf("missing: indexes %ld to %ld\n", first_missing, last_missing);
  printf("received %ld/%ld duplicates %ld wrong %ld\n", received, count, duplicates, wrong);
  return received == count && duplicates == 0 && wrong == 0 ? 0 : 1;
}

typedef size_t (*snapshot_fn)(struct vsock_stats*, size_t);

/* Resolutions ended (resolved or failed) so far; -1 without the library. */
static long resolutions_ended(snapshot_fn snapshot) {
  if (snapshot == NULL) return -1;
  struct vsock_stats stats;
  memset(&stats, 0, sizeof stats);
  snapshot(&stats, sizeof stats);
  return (long)(stats.udp_resolutions + stats.udp_resolution_failures);
}

/* After the probe: until the library's resolution of the destination
 * ended (10 s at most), else 500 ms. */
static void settle_after_probe(snapshot_fn snapshot, long ended_before) {
  const struct timespec step = {0, 20 * 1000 * 1000};
  if (snapshot == NULL) {
    const struct timespec settle = {0, 500 * 1000 * 1000};
    nanosleep(&settle, NULL);
    return;
  }
  for (int i = 0; i < 500 && resolutions_ended(snapshot) == ended_before; ++i) nanosleep(&step, NULL);
  if (resolutions_ended(snapshot) == ended_before)
    fprintf(stderr, "udp_flood: the destination was not resolved in 10 s\n");
}

static int sender(const char* addr, int port, long count, size_t size) {
  struct sockaddr_in to;
  int fd = make_socket(addr, &to, port);
  snapshot_fn snapshot = (snapshot_fn)dlsym(RTLD_DEFAULT, "vsock_stats_snapshot");
  const long ended_before = resolutions_ended(snapshot);
  if (sendto(fd, kProbe, sizeof kProbe, 0, (struct sockaddr*)&to, sizeof to) != (ssize_t)sizeof kProbe) {
    perror("udp_flood: sendto probe");
    return 1;
  }
  settle_after_probe(snapshot, ended_before);
  unsigned char* buffer = malloc(size);
  long retries = 0;
  for (long i = 0; i < count; ++i) {
    fill(buffer, size, (uint32_t)i);
    if (sendto(fd, buffer, size, 0, (struct sockaddr*)&to, sizeof to) != (ssize_t)size) {
      /* The device's queue is full: once more, a little later (bounded). */
      if ((errno == ENOBUFS || errno == EAGAIN) && ++retries < 100000) {
        struct timespec pause = {0, 10 * 1000};
        nanosleep(&pause, NULL);
        --i;
        continue;
      }
      perror("udp_flood: sendto");
      return 1;
    }
  }
  printf("sent %ld\n", count);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 7 && strcmp(argv[1], "recv") == 0) {
    long count = atol(argv[3]);
    size_t size = (size_t)atol(argv[4]);
    if (count <= 0 || size < 4) return 2;
    return receiver(argv[2], count, size, atoi(argv[5]), argv[6]);
  }
  if (argc == 6 && strcmp(argv[1], "send") == 0) {
    long count = atol(argv[4]);
    size_t size = (size_t)atol(argv[5]);
    if (count <= 0 || size < 4) return 2;
    return sender(argv[2], atoi(argv[3]), count, size);
  }
  fprintf(stderr, "usage: udp_flood recv ADDR COUNT SIZE RCVBUF GO_FILE | send ADDR PORT COUNT SIZE\n");
  return 2;
}
