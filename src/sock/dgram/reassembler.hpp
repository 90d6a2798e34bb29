// Reassembly of fragmented datagrams (docs/protocol.md section 6), with
// bounded memory and bounded time: UDP may lose a datagram, so a fragment
// that never comes loses its datagram, and nothing a peer sends can make
// this hold more than the limits it was built with.
//
// A datagram is known by (source, source cookie, datagram id): `source` is
// the caller's opaque 64-bit name of the sender (e.g. its GID and QP
// number folded together), the rest comes from the header. Rules:
//   - the first fragment of a datagram reserves its whole length (the
//     header's total, so the bound holds before the last fragment comes);
//     partial datagrams together never reserve more than `byte_budget`
//     bytes, and at most `max_datagrams` are in progress. A new datagram
//     that does not fit drops the oldest partial ones until it does
//     (counted: evicted); one larger than the whole budget is dropped on
//     sight (too_large);
//   - a partial datagram whose first fragment came more than `max_age_ms`
//     ago is dropped (timed_out), checked on every call with the caller's
//     `now_ms` (no clock here; a `now_ms` below one already seen counts as
//     that one, so ages never run backwards);
//   - a fragment whose (total, count, index, length) is not a layout the
//     protocol allows is dropped (bad_layout): its offset follows from
//     those fields, so this is also the out-of-range check, and two
//     fragments can overlap only by sharing an index (duplicate). A
//     fragment whose total or count differ from the first one seen of its
//     datagram is dropped (mismatched);
//   - a complete datagram is handed out once, as one contiguous buffer, and
//     forgotten: a fragment of it arriving later starts a new partial
//     datagram, which expires unless the whole datagram comes again.
// A datagram of one fragment is handed out at once and never held. The
// budget counts datagram bytes; each partial datagram's bookkeeping (a few
// dozen bytes and one bit per fragment, at most wire::kMaxDatagramFragments)
// is bounded by max_datagrams instead.
//
// Not thread-safe: the caller (the process's UD endpoint) serialises calls.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <tuple>
#include <vector>

namespace vsock::sock::dgram {

struct ReassemblyLimits {
  size_t byte_budget = 0;    // bytes all partial datagrams may reserve together
  size_t max_datagrams = 0;  // partial datagrams in progress at once
  uint64_t max_age_ms = 0;   // a partial datagram older than this is dropped
};

struct DatagramKey {
  uint64_t source = 0;  // the caller's name of the sender; opaque here
  uint64_t source_cookie = 0;
  uint32_t datagram_id = 0;
};

// A fragment's layout fields, as the header carries them.
struct FragmentFields {
  uint32_t total_length = 0;
  uint32_t count = 1;
  uint32_t index = 0;
};

enum class FragmentVerdict : uint8_t {
  kComplete,   // the datagram is whole: it was moved into *datagram
  kHeld,       // kept; the datagram still misses fragments
  kBadLayout,  // dropped: not a layout the protocol allows
  kDuplicate,  // dropped: this index of the datagram is held already
  kMismatch,   // dropped: total or count differ from the datagram's first fragment
  kTooLarge,   // dropped: the datagram could never fit the limits
};

// What happened, in all, since construction. The drops of single fragments
// (bad_layout, duplicates, mismatched, too_large) count fragments; evicted
// and timed_out count partial datagrams.
struct ReassemblyCounters {
  uint64_t completed = 0;
  uint64_t bad_layout = 0;
  uint64_t duplicates = 0;
  uint64_t mismatched = 0;
  uint64_t too_large = 0;
  uint64_t evicted = 0;
  uint64_t timed_out = 0;
};

class Reassembler {
 public:
  explicit Reassembler(const ReassemblyLimits& limits);

  // Takes one fragment: `length` payload bytes at `payload`. On kComplete
  // the whole datagram replaces *datagram; otherwise *datagram is left
  // alone. Drops partial datagrams older than the limit first.
  FragmentVerdict add(const DatagramKey& key, const FragmentFields& fragment, const uint8_t* payload, size_t length,
                      uint64_t now_ms, std::vector<uint8_t>* datagram);

  // Drops partial datagrams older than the limit; returns how many. add()
  // does this too; call it when no fragment has come for a while, so that
  // memory held for lost datagrams is given back.
  size_t expire(uint64_t now_ms);

  size_t held_bytes() const { return held_bytes_; }  // reserved by partial datagrams
  size_t in_progress() const { return order_.size(); }
  const ReassemblyCounters& counters() const { return counters_; }

 private:
  struct Partial {
    DatagramKey key;
    uint32_t total_length = 0;
    uint32_t count = 0;
    uint32_t received = 0;
    uint64_t started_ms = 0;
    std::vector<uint8_t> data;  // total_length bytes, filled as fragments come
    std::vector<bool> have;     // one per fragment index
  };
  using KeyTuple = std::tuple<uint64_t, uint64_t, uint32_t>;
  using Order = std::list<Partial>;

  static KeyTuple tuple_of(const DatagramKey& key) {
    return KeyTuple(key.source, key.source_cookie, key.datagram_id);
  }
  void drop(Order::iterator it);
  // Makes room for a new partial datagram of `total` bytes; false if it can
  // never fit.
  bool make_room(uint32_t total);
  // A new partial datagram, the newest, reserving its total length.
  Order::iterator start(const DatagramKey& key, const FragmentFields& fragment);

  ReassemblyLimits limits_;
  uint64_t latest_ms_ = 0;  // the largest now_ms seen
  size_t held_bytes_ = 0;
  Order order_;  // oldest first: started_ms never decreases along it
  // An ordered map, not a hash: keys are the peer's choice, and the table
  // is small (max_datagrams), so O(log n) whatever they pick.
  std::map<KeyTuple, Order::iterator> index_;
  ReassemblyCounters counters_;
};

}  // namespace vsock::sock::dgram
