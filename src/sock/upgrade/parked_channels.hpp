// The process's parked channels (docs/protocol.md §1.2): queue pairs whose
// connection ended cleanly on both sides, kept connected so that the next
// connection between the same two processes upgrades with one message
// (Attach) instead of an rdma_cm round trip, a new queue pair and new
// registrations. The bookkeeping only; the engine moves the channels in and
// out (engine_parking.cpp). Bounded in number, per peer and in time.
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "rdma/cm_connection.hpp"
#include "sock/stream/stream_channel.hpp"
#include "sock/wire/endpoint.hpp"

namespace vsock::sock::side_band {

struct ParkedChannel {
  // Declared first, destroyed last: the connection (its disconnect) goes
  // before the channel's queue pair and memory.
  std::unique_ptr<StreamChannel> channel;
  rdma::CmConnection connection;
  // We connected: we attach, once the server's Park came (ready). The
  // server's side is ready as soon as it is parked.
  bool client = false;
  bool ready = false;
  // Client: the server's address and rdma_cm port (the TCP port, unless
  // the request was redirected). Server: the client's address (port 0).
  wire::FamilyEndpoint peer;
  int64_t since_ms = 0;  // parked (server), or Park came (client)
};

class ParkedChannels {
 public:
  // At most `max_parked` parked in the process, `max_per_peer` per peer
  // address (settings park_max, park_per_peer).
  ParkedChannels(size_t max_parked, size_t max_per_peer) : max_parked_(max_parked), max_per_peer_(max_per_peer) {}
  // A client's side waits this long for the server's Park; a ready one is
  // kept this long unused. The server keeps its side longer, so that a
  // client never attaches to a channel the server has just dropped.
  static constexpr int64_t kParkWaitMs = 1000;
  static constexpr int64_t kClientIdleMs = 5000;
  static constexpr int64_t kServerIdleMs = 10000;

  // Room for one more to `peer` (a channel that does not fit is torn down).
  bool has_room(const wire::FamilyEndpoint& peer) const;
  void add(std::unique_ptr<ParkedChannel> parked);
  // The oldest ready client channel to `server` (address and port), taken out; null if none.
  std::unique_ptr<ParkedChannel> take_ready(const wire::FamilyEndpoint& server);
  // Takes out the entry at `index` (for a failure, a message it broke, an
  // Attach that makes it a connection's).
  std::unique_ptr<ParkedChannel> take(size_t index);
  // Those past their time, taken out (the caller drops them).
  std::vector<std::unique_ptr<ParkedChannel>> expire(int64_t now_ms);
  // Milliseconds until the next expiry (-1: none parked).
  int64_t next_expiry_ms(int64_t now_ms) const;

  size_t size() const { return entries_.size(); }
  ParkedChannel& at(size_t index) { return *entries_[index]; }

 private:
  int64_t deadline_of(const ParkedChannel& parked) const;
  size_t max_parked_;
  size_t max_per_peer_;
  std::vector<std::unique_ptr<ParkedChannel>> entries_;  // oldest first
};

// Same family, address and port, in canonical form (IPv4-mapped = IPv4).
bool same_endpoint(const wire::FamilyEndpoint& a, const wire::FamilyEndpoint& b);
bool same_address(const wire::FamilyEndpoint& a, const wire::FamilyEndpoint& b);

}  // namespace vsock::sock::side_band
