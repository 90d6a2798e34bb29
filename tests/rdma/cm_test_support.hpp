// Helpers of the rdma_cm tests: addresses in the Soft-RoCE VM, the verbs
// objects one side of a connection needs, bounded waits for rdma_cm events
// and completions, and counts of what a process holds in the kernel (for
// leak checks). Test code: it calls libc freely.
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_qp.hpp"
#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/protection_domain.hpp"
#include "test_support.hpp"

namespace vsock::test {

// The address rdma_cm can reach itself at: RXE_VM_IPADDR in the VM, else
// VSOCK_TEST_RDMA_ADDR (a real RDMA NIC's address). Empty: neither is set.
std::string rdma_test_address();
// AF_INET sockaddr for "a.b.c.d" and port (host order); false if unparsable.
bool make_address(const std::string& ip, uint16_t port, sockaddr_storage* out);

// One side's verbs objects, in teardown order (reverse of declaration).
struct CmSide {
  rdma::Device device;
  rdma::ProtectionDomain pd;
  rdma::CompletionQueue cq;
  rdma::CmEventChannel channel;
  rdma::CmQpSetup setup() const;
};
// Opens the device, a PD, a CQ with a channel and an rdma_cm channel.
// 0, or the exit code (77: no device).
int open_cm_side(const char* program, CmSide* side);

// Waits (bounded) for the next event on `channel`; false (and a message)
// on timeout or error. Does not filter.
bool next_cm_event(rdma::CmEventChannel& channel, int timeout_ms, rdma::CmEvent* out, const char* what);
// Waits for an event of `type` about `id`, skipping (and printing) others;
// false on timeout, error or after 64 other events.
bool wait_cm_event(rdma::CmEventChannel& channel, rdma_cm_id* id, rdma_cm_event_type type, int timeout_ms,
                   rdma::CmEvent* out);

// Kernel RDMA resources of this process, from `rdma resource show`
// (iproute2): cm ids, QPs. -1 when the tool cannot tell.
int count_rdma_resources(const char* kind);
// Open file descriptors of this process.
int count_open_fds();

// Milliseconds, for the printed measurements.
double elapsed_ms(double since_seconds);
// min / median / max of `samples` as "a / b / c ms".
std::string summarize_ms(std::vector<double> samples);

}  // namespace vsock::test
