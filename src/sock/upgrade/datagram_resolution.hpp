// DatagramResolution: the side band's UDP part (DESIGN decision 5,
// docs/protocol.md §6.1), run by the engine's thread on its rdma_cm event
// channel. Two jobs, both in RDMA_PS_UDP:
//   - a datagram socket bound to an explicit port also listens on that
//     port; a SIDR request there is answered with the process's UD QP
//     number and the socket's cookie (wire::ResolveAnswer);
//   - the first datagram to an unknown destination goes through the kernel
//     while a SIDR request to the destination's address and port asks
//     whether a libvsock socket is there. The outcome goes to the path sink
//     (the process's datagram hub, which builds the address handle): a
//     path, or a failure that keeps the destination on the kernel for a
//     while. At most one resolution per destination at a time, each
//     bounded by the upgrade timeout.
// The sink is a pair of plain callbacks so that this layer does not depend
// on the datagram code above it. Not thread-safe: the engine's mutex.
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "rdma/cm_event.hpp"
#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_udp_listener.hpp"
#include "rdma/cm_udp_resolver.hpp"

namespace vsock::sock {

// A destination that answered: how to reach its socket over UD.
struct ResolvedPath {
  sockaddr_storage destination{};
  socklen_t destination_length = 0;
  ibv_ah_attr ah_attr{};
  uint32_t qpn = 0;
  uint64_t cookie = 0;
};

struct DatagramPathSink {
  void (*resolved)(const ResolvedPath& path) = nullptr;
  // `reason`: the SIDR outcome's name, for the log and the stats.
  void (*failed)(const sockaddr* destination, socklen_t length, rdma::SidrOutcome reason) = nullptr;
};

class DatagramResolution {
 public:
  DatagramResolution(rdma::CmEventChannel& channel, int timeout_ms) : channel_(channel), timeout_ms_(timeout_ms) {}

  void set_sink(const DatagramPathSink& sink) { sink_ = sink; }
  // Listens on `address` (a datagram socket's bound address and port) for
  // the socket `cookie` of the UD QP `qpn`. False when it cannot (another
  // socket of any process listens on that port in RDMA_PS_UDP, or the
  // address is on no RDMA device): peers then reach the socket through
  // the kernel only.
  bool listen(const sockaddr* address, uint32_t qpn, uint64_t cookie);
  void stop_listening(uint64_t cookie);
  // Starts resolving `destination` unless a resolution of it is running.
  // False if it could not start (the sink is not told).
  bool resolve(const sockaddr* destination, socklen_t length);

  // Takes `event` if it is one of ours; true if it was.
  bool dispatch(const rdma::CmEvent& event);
  // Ends resolutions whose bound passed (the sink hears kTimeout).
  void check_deadlines();
  // Milliseconds until the next deadline, or -1 with none running.
  int next_timeout_ms() const;

 private:
  struct Listening {
    uint64_t cookie;
    uint32_t qpn;
    rdma::CmUdpListener cm;
  };
  struct Resolving {
    sockaddr_storage destination;
    socklen_t length;
    uint64_t nonce;
    rdma::CmUdpResolver resolver;
  };
  void answer(Listening& listening, const rdma::CmEvent& request);
  void finish(std::vector<Resolving>::iterator it, rdma::SidrOutcome outcome);

  rdma::CmEventChannel& channel_;
  int timeout_ms_;
  DatagramPathSink sink_;
  std::vector<Listening> listeners_;
  std::vector<Resolving> resolving_;
};

}  // namespace vsock::sock
