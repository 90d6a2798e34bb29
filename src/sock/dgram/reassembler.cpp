#include "sock/dgram/reassembler.hpp"

#include <algorithm>
#include <cstring>

#include "sock/wire/fragment_layout.hpp"

namespace vsock::sock::dgram {

Reassembler::Reassembler(const ReassemblyLimits& limits) : limits_(limits) {}

void Reassembler::drop(Order::iterator it) {
  held_bytes_ -= it->total_length;
  index_.erase(tuple_of(it->key));
  order_.erase(it);
}

size_t Reassembler::expire(uint64_t now_ms) {
  latest_ms_ = std::max(latest_ms_, now_ms);
  size_t dropped = 0;
  // Starts never decrease along order_, so the expired ones are a prefix.
  while (!order_.empty() && latest_ms_ - order_.front().started_ms > limits_.max_age_ms) {
    drop(order_.begin());
    ++dropped;
  }
  counters_.timed_out += dropped;
  return dropped;
}

bool Reassembler::make_room(uint32_t total) {
  if (limits_.max_datagrams == 0 || total > limits_.byte_budget) return false;
  while (order_.size() >= limits_.max_datagrams || held_bytes_ + total > limits_.byte_budget) {
    drop(order_.begin());  // not empty: otherwise both conditions are false
    ++counters_.evicted;
  }
  return true;
}

Reassembler::Order::iterator Reassembler::start(const DatagramKey& key, const FragmentFields& fragment) {
  Partial partial;
  partial.key = key;
  partial.total_length = fragment.total_length;
  partial.count = fragment.count;
  partial.started_ms = latest_ms_;
  partial.data.resize(fragment.total_length);
  partial.have.assign(fragment.count, false);
  Order::iterator it = order_.insert(order_.end(), std::move(partial));
  index_.emplace(tuple_of(key), it);
  held_bytes_ += fragment.total_length;
  return it;
}

FragmentVerdict Reassembler::add(const DatagramKey& key, const FragmentFields& fragment, const uint8_t* payload,
                                 size_t length, uint64_t now_ms, std::vector<uint8_t>* datagram) {
  expire(now_ms);
  // The offset is derived, never taken from the peer; the length must be
  // exactly the one the layout gives this index.
  core::Result<wire::FragmentSpan> span = wire::fragment_span(fragment.total_length, fragment.count, fragment.index);
  if (!span || span.value().length != length || (payload == nullptr && length != 0)) {
    ++counters_.bad_layout;
    return FragmentVerdict::kBadLayout;
  }

  auto found = index_.find(tuple_of(key));
  if (found == index_.end() && fragment.count == 1) {
    datagram->assign(payload, payload + length);
    ++counters_.completed;
    return FragmentVerdict::kComplete;
  }

  Order::iterator it;
  if (found != index_.end()) {
    it = found->second;
    if (it->total_length != fragment.total_length || it->count != fragment.count) {
      ++counters_.mismatched;
      return FragmentVerdict::kMismatch;
    }
    if (it->have[fragment.index]) {
      ++counters_.duplicates;
      return FragmentVerdict::kDuplicate;
    }
  } else {
    if (!make_room(fragment.total_length)) {
      ++counters_.too_large;
      return FragmentVerdict::kTooLarge;
    }
    it = start(key, fragment);
  }

  if (length != 0) std::memcpy(it->data.data() + span.value().offset, payload, length);
  it->have[fragment.index] = true;
  if (++it->received < it->count) return FragmentVerdict::kHeld;
  *datagram = std::move(it->data);
  drop(it);
  ++counters_.completed;
  return FragmentVerdict::kComplete;
}

}  // namespace vsock::sock::dgram
