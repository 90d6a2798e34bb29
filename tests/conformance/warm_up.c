#include "warm_up.h"

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "vsock/vsock.h"

enum { kChunk = 4096, kMinRounds = 8, kMaxRounds = 200, kMaxMs = 5000 };

/* The library's counters now (all zero without the library). */
static struct vsock_stats library_stats(void) {
  struct vsock_stats stats;
  memset(&stats, 0, sizeof stats);
  size_t (*snapshot)(struct vsock_stats*, size_t) =
      (size_t(*)(struct vsock_stats*, size_t))dlsym(RTLD_DEFAULT, "vsock_stats_snapshot");
  if (snapshot != NULL) snapshot(&stats, sizeof stats);
  return stats;
}

uint64_t ct_rdma_bytes_sent(void) { return library_stats().rdma_bytes_sent; }

uint64_t ct_udp_ud_sends(void) { return library_stats().udp_ud_sends; }

void ct_warm_up(int a, int b) {
  static unsigned char out[kChunk], in[kChunk];
  const int loaded = ct_library_loaded();
  const long start = ct_now_ms();
  int rounds = 0, on_rdma = 0;
  while (rounds < kMaxRounds) {
    uint64_t before = ct_rdma_bytes_sent();
    ct_pattern(out, sizeof out, (unsigned)rounds, 0);
    ct_send_all(a, out, sizeof out);
    ct_recv_all(b, in, sizeof in);
    CT_ASSERT(memcmp(in, out, sizeof in) == 0);
    ct_send_all(b, in, sizeof in);
    ct_recv_all(a, out, sizeof out);
    CT_ASSERT(ct_pattern_ok(out, sizeof out, (unsigned)rounds, 0));
    ++rounds;
    on_rdma = loaded && ct_rdma_bytes_sent() - before >= 2 * kChunk;
    if (rounds >= kMinRounds && (on_rdma || !loaded || ct_now_ms() - start > kMaxMs)) break;
  }
  ct_out("warm-up: round trips of 4 KiB, byte-exact");
  fprintf(stderr, "warm-up: %d round trips, %s\n", rounds,
          on_rdma ? "both directions over RDMA" : "not over RDMA");
}

void ct_tcp_pair_warm(int* client, int* server) {
  ct_tcp_pair(client, server);
  ct_warm_up(*client, *server);
}

void ct_udp_warm_up(int a, const struct sockaddr_in* a_addr, int b, const struct sockaddr_in* b_addr) {
  char out[64], in[64];
  const int loaded = ct_library_loaded();
  const long start = ct_now_ms();
  int rounds = 0, on_ud = 0;
  while (rounds < 400) {
    uint64_t before = ct_udp_ud_sends();
    snprintf(out, sizeof out, "warm %d", rounds);
    size_t length = strlen(out);
    CT_ASSERT(sendto(a, out, length, 0, (const struct sockaddr*)b_addr, sizeof *b_addr) == (ssize_t)length);
    ct_wait_readable(b);
    CT_ASSERT(recv(b, in, sizeof in, 0) == (ssize_t)length && memcmp(in, out, length) == 0);
    CT_ASSERT(sendto(b, in, length, 0, (const struct sockaddr*)a_addr, sizeof *a_addr) == (ssize_t)length);
    ct_wait_readable(a);
    CT_ASSERT(recv(a, out, sizeof out, 0) == (ssize_t)length && memcmp(in, out, length) == 0);
    ++rounds;
    on_ud = loaded && ct_udp_ud_sends() - before >= 2;
    if (on_ud || !loaded || ct_now_ms() - start > 5000) break;
    if (rounds > 2) usleep(2000);  /* the resolution runs on another thread */
  }
  ct_out("warm-up: datagrams both ways, each received once");
  fprintf(stderr, "udp warm-up: %d round trips, %s\n", rounds, on_ud ? "both directions over UD" : "not over UD");
}
