// Fuzz target: the ring arithmetic a peer's values flow into
// (src/rdma/remote_ring.hpp, ring_index.hpp). The input is a descriptor and
// a program of operations, checked step by step against a model kept here
// with 128-bit arithmetic that cannot overflow.
//
// Input format (read front to back; missing bytes read as zero):
//   byte 0: bit 0 clear = RemoteRing program, set = RingIndex program
//   then a capacity, an address (RemoteRing) or start position (RingIndex),
//   then operations: one opcode byte and a length each (see pick_* below).
//
// Invariants: create() accepts exactly the power-of-two capacities up to
// 2^31 (and, for RemoteRing, rings inside the address space); a planned
// write never leaves [base, base + capacity) and covers exactly the bytes
// asked for, starting at the tail; in_flight never exceeds the capacity;
// a refused commit/credit/produce/consume changes nothing, and a credit for
// more than is in flight is EPROTO.
#include <cerrno>
#include <cstdint>

#include "fuzz_check.hpp"
#include "rdma/remote_ring.hpp"
#include "rdma/ring_index.hpp"

using vsock::core::Result;
using vsock::rdma::RemoteRing;
using vsock::rdma::RemoteWrite;
using vsock::rdma::RingDescriptor;
using vsock::rdma::RingIndex;
using vsock::rdma::RingSpans;
using u128 = unsigned __int128;

namespace {

// Reads the fuzz input front to back (FuzzedDataProvider reads integers
// from the back, which makes hand-written seeds hard to read).
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t bytes(int n) {  // little-endian
    uint64_t value = 0;
    for (int i = 0; i < n; ++i) value |= uint64_t{u8()} << (8 * i);
    return value;
  }
  uint64_t u16() { return bytes(2); }
  uint64_t u32() { return bytes(4); }
  uint64_t u64() { return bytes(8); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

bool power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// Mostly powers of two (up to 2^max_shift, past the limit), sometimes raw.
uint64_t pick_capacity(Input& in, int max_shift, int raw_bytes) {
  uint8_t selector = in.u8();
  if (selector & 0x80) return in.bytes(raw_bytes);
  return uint64_t{1} << (selector % (max_shift + 1));
}

// Lengths near the edges that matter: small, the space left, what is used,
// the capacity, and anything at all.
uint64_t pick_length(Input& in, uint64_t capacity, uint64_t space, uint64_t used) {
  uint8_t selector = in.u8();
  int64_t delta = static_cast<int8_t>(in.u8()) % 4;
  switch (selector % 6) {
    case 0: return in.u8();
    case 1: return in.u32();
    case 2: return in.u64();
    case 3: return space + static_cast<uint64_t>(delta);
    case 4: return used + static_cast<uint64_t>(delta);
    default: return capacity + static_cast<uint64_t>(delta);
  }
}

// A planned or readable piece must lie inside [0, capacity) of the ring.
void check_span_inside(uint64_t offset, uint64_t length, uint64_t capacity) {
  if (length == 0) return;
  FUZZ_CHECK(offset < capacity);
  FUZZ_CHECK(u128{offset} + length <= capacity);
}

// The spans of `length` bytes at `position`: the first starts at the
// position's offset, the second (if any) at 0, right after the first
// reached the end, and together they are `length` bytes.
void check_spans(const RingSpans& spans, uint64_t position, uint64_t length, uint64_t capacity) {
  FUZZ_CHECK(u128{spans.first.length} + spans.second.length == length);
  check_span_inside(spans.first.offset, spans.first.length, capacity);
  check_span_inside(spans.second.offset, spans.second.length, capacity);
  if (length == 0) return;
  FUZZ_CHECK(spans.first.offset == position % capacity);
  FUZZ_CHECK(spans.first.length > 0);
  if (spans.second.length > 0) {
    FUZZ_CHECK(spans.second.offset == 0);
    FUZZ_CHECK(spans.first.offset + spans.first.length == capacity);
  }
}

void run_remote_ring(Input& in) {
  RingDescriptor descriptor;
  descriptor.capacity = static_cast<uint32_t>(pick_capacity(in, 32, 4));  // 2^32 truncates to 0
  descriptor.rkey = static_cast<uint32_t>(in.u32());
  uint8_t where = in.u8();
  switch (where % 4) {
    case 0: descriptor.address = in.u64(); break;
    case 1: descriptor.address = UINT64_MAX - descriptor.capacity + 2 - in.u8() % 4; break;  // the top edge
    case 2: descriptor.address = in.u16() << 12; break;
    default: descriptor.address = 0; break;
  }
  uint64_t capacity = descriptor.capacity;
  bool valid = power_of_two(capacity) && capacity <= RingIndex::kMaxCapacity &&
               u128{descriptor.address} + capacity <= UINT64_MAX;
  Result<RemoteRing> created = RemoteRing::create(descriptor);
  FUZZ_CHECK(created.has_value() == valid);
  if (!valid) {
    FUZZ_CHECK(created.error() == EPROTO);
    return;
  }
  RemoteRing ring = created.value();
  FUZZ_CHECK(ring.capacity() == capacity && ring.rkey() == descriptor.rkey && ring.in_flight() == 0);
  const uint64_t base = descriptor.address;

  // The model: bytes ever written and ever credited.
  uint64_t tail = 0, head = 0;
  for (int steps = 0; steps < 4096 && !in.empty(); ++steps) {
    uint8_t op = in.u8();
    uint64_t length = pick_length(in, capacity, ring.space(), ring.in_flight());
    uint64_t in_flight = tail - head;
    switch (op % 4) {
      case 0: {  // plan, then maybe commit
        Result<RemoteWrite> plan = ring.plan(length);
        if (length > capacity) {
          FUZZ_CHECK(!plan && plan.error() == EMSGSIZE);
        } else if (length > capacity - in_flight) {
          FUZZ_CHECK(!plan && plan.error() == EAGAIN);
        } else {
          FUZZ_CHECK(plan.has_value());
          const RemoteWrite& w = plan.value();
          for (const vsock::rdma::RemoteSpan& span : {w.first, w.second}) {
            if (span.length == 0) continue;
            FUZZ_CHECK(span.address >= base);
            check_span_inside(span.address - base, span.length, capacity);
          }
          RingSpans spans;
          spans.first = {w.first.address - base, w.first.length};
          spans.second = {w.second.length ? w.second.address - base : 0, w.second.length};
          check_spans(spans, tail, length, capacity);
          if (op & 0x80) {
            FUZZ_CHECK(ring.commit(length).has_value());
            tail += length;
          }
        }
        break;
      }
      case 1: {  // commit without a plan
        bool fits = length <= capacity - in_flight;
        FUZZ_CHECK(ring.commit(length).has_value() == fits);
        if (fits) tail += length;
        break;
      }
      case 2: {  // a peer's credit, honest or not
        Result<bool> credited = ring.on_credit(length);
        FUZZ_CHECK(credited.has_value() == (length <= in_flight));
        if (credited) {
          head += length;
        } else {
          FUZZ_CHECK(credited.error() == EPROTO);
        }
        break;
      }
      default:  // everything consumed
        FUZZ_CHECK(ring.on_credit(in_flight).has_value());
        head = tail;
        break;
    }
    FUZZ_CHECK(ring.in_flight() == tail - head);
    FUZZ_CHECK(ring.in_flight() <= capacity);
    FUZZ_CHECK(ring.space() == capacity - ring.in_flight());
    FUZZ_CHECK(ring.index().tail() == tail && ring.index().head() == head);
  }
}

void run_ring_index(Input& in) {
  uint64_t capacity = pick_capacity(in, 40, 8);
  uint8_t where = in.u8();
  // Starts near 2^64 make the free-running counters wrap.
  uint64_t start = (where & 1) ? UINT64_MAX - in.u16() : in.u64();
  bool valid = power_of_two(capacity) && capacity <= RingIndex::kMaxCapacity;
  Result<RingIndex> created = RingIndex::create(capacity, start);
  FUZZ_CHECK(created.has_value() == valid);
  RingIndex ring;  // capacity 0: refuses everything, so run the program anyway
  if (valid) {
    ring = created.value();
  } else {
    FUZZ_CHECK(created.error() == EINVAL);
    capacity = 0;
    start = 0;
  }
  uint64_t head = start, tail = start;
  for (int steps = 0; steps < 4096 && !in.empty(); ++steps) {
    uint8_t op = in.u8();
    uint64_t used = tail - head;
    uint64_t length = pick_length(in, capacity, capacity - used, used);
    switch (op % 6) {
      case 0: {
        Result<RingSpans> spans = ring.writable(length);
        if (length > capacity) {
          FUZZ_CHECK(!spans && spans.error() == EMSGSIZE);
        } else if (length > capacity - used) {
          FUZZ_CHECK(!spans && spans.error() == EAGAIN);
        } else {
          FUZZ_CHECK(spans.has_value());
          check_spans(spans.value(), tail, length, capacity);
        }
        break;
      }
      case 1: {
        Result<RingSpans> spans = ring.readable(length);
        FUZZ_CHECK(spans.has_value() == (length <= used));
        if (spans) {
          check_spans(spans.value(), head, length, capacity);
        } else {
          FUZZ_CHECK(spans.error() == ERANGE);
        }
        break;
      }
      case 2: {
        bool fits = length <= capacity - used;
        FUZZ_CHECK(ring.produce(length).has_value() == fits);
        if (fits) tail += length;
        break;
      }
      case 3: {
        bool fits = length <= used;
        FUZZ_CHECK(ring.consume(length).has_value() == fits);
        if (fits) head += length;
        break;
      }
      case 4: {
        uint64_t offset = pick_length(in, capacity, capacity - used, used);
        bool inside = offset < capacity && u128{offset} + length <= capacity;
        FUZZ_CHECK(ring.contains(offset, length) == inside);
        if (capacity) FUZZ_CHECK(ring.offset_of(length) == length % capacity);
        break;
      }
      default: {
        RingSpans all = ring.readable_all();
        if (capacity) {
          check_spans(all, head, used, capacity);
        } else {
          FUZZ_CHECK(all.total() == 0);
        }
        break;
      }
    }
    FUZZ_CHECK(ring.head() == head && ring.tail() == tail);
    FUZZ_CHECK(ring.used() == tail - head && ring.used() <= capacity);
    FUZZ_CHECK(ring.space() == capacity - ring.used());
    FUZZ_CHECK(ring.empty() == (ring.used() == 0));
    FUZZ_CHECK(ring.full() == (capacity != 0 && ring.used() == capacity));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  if (in.u8() & 1)
    run_ring_index(in);
  else
    run_remote_ring(in);
  return 0;
}
