// Helpers shared by the rdma test programs: a two-process harness over a
// socketpair, bounded waits, byte patterns, and the device/skip policy.
// Test code, not library code: it calls libc freely.
#pragma once
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/result.hpp"
#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"

namespace vsock::test {

constexpr int kExitSkip = 77;
// How long wait_completion() busy-polls before it sleeps: 50 us, or
// VSOCK_TEST_SPIN_US (0 .. 10 s) to compare polling with sleeping.
double spin_budget_seconds();

double now_seconds();

class Deadline {
 public:
  explicit Deadline(double seconds) : end_(now_seconds() + seconds) {}
  bool expired() const { return now_seconds() > end_; }
  // Milliseconds left, at least 0 and at most `cap`.
  int remaining_ms(int cap) const;

 private:
  double end_;
};

// Whole-buffer transfers on a (blocking) socket, each bounded by timeout_ms.
bool send_all(int fd, const void* data, size_t len, int timeout_ms);
bool recv_all(int fd, void* data, size_t len, int timeout_ms);
// Both sides call it: returns once the peer has called it too.
bool barrier(int fd, int timeout_ms);

// A byte pattern that differs per stream (seed) and per position, so that
// a misplaced, stale or duplicated byte is caught.
uint8_t pattern_byte(uint64_t seed, uint64_t position);
void fill_pattern(uint8_t* data, size_t len, uint64_t seed, uint64_t position);
// Index of the first byte that differs from the pattern, or len if none.
size_t find_mismatch(const uint8_t* data, size_t len, uint64_t seed, uint64_t position);

// Opens VSOCK_DEVICE (or the first ACTIVE device). Prints why not and sets
// *exit_code: 77 when there is no device and none was required
// (VSOCK_REQUIRE_DEVICE=1 or inside the Soft-RoCE VM, RXE_VM=1), else 1.
// Inside the VM, also checks the GID the device picked against the one
// the VM found (RXE_VM_GID_INDEX).
core::Result<rdma::Device> open_test_device(const char* program, int* exit_code);

// Waits for one completion on `cq` until the deadline: busy-polls for
// spin_budget_seconds(), then sleeps on the CQ's completion channel (or yields,
// without one). False on timeout, on a poll error or on a completion that
// is not IBV_WC_SUCCESS (printed with `what`).
bool wait_completion(rdma::CompletionQueue& cq, ibv_wc* out, const Deadline& deadline, const char* what);

// Runs `first` in this process and `second` in a forked child, connected by
// a socketpair (each gets its end). The child is killed (by its PID) if it
// has not finished `timeout_s` seconds after `first` returned. Returns 0 if
// both returned 0, 77 if either skipped and neither failed, else 1.
int run_pair(const std::function<int(int)>& first, const std::function<int(int)>& second, int timeout_s);

}  // namespace vsock::test
