#include "warm_up.h"

#include <dlfcn.h>
#include <string.h>

#include "vsock/vsock.h"

enum { kChunk = 4096, kMinRounds = 8, kMaxRounds = 200, kMaxMs = 5000 };

uint64_t ct_rdma_bytes_sent(void) {
  size_t (*snapshot)(struct vsock_stats*, size_t) =
      (size_t(*)(struct vsock_stats*, size_t))dlsym(RTLD_DEFAULT, "vsock_stats_snapshot");
  if (snapshot == NULL) return 0;
  struct vsock_stats stats;
  memset(&stats, 0, sizeof stats);
  snapshot(&stats, sizeof stats);
  return stats.rdma_bytes_sent;
}

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
