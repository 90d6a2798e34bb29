// IovCursor: walks an application's iovec array while bytes are copied into
// or out of a ring, so write()/read() handle writev/readv the same way as a
// plain buffer. IovWindow: the part of such an array a call passes on.
// Pure; unit-tested.
#pragma once
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vsock::sock {

// Sum of the lengths, saturating at SIZE_MAX (the caller checks the
// kernel's own limits; a stream never takes more than its space anyway).
size_t iov_total(const iovec* iov, int count);

class IovCursor {
 public:
  // count < 0 or a null iov with count > 0 is an empty cursor.
  IovCursor(const iovec* iov, int count);

  bool done() const { return index_ >= count_; }
  // Copies up to `n` bytes from the iovecs to `out`; returns how many.
  size_t gather(uint8_t* out, size_t n);
  // Copies up to `n` bytes from `in` into the iovecs; returns how many.
  size_t scatter(const uint8_t* in, size_t n);

 private:
  // Skips empty entries; true while there is a byte under the cursor.
  bool settle();
  const iovec* iov_ = nullptr;
  int count_ = 0;
  int index_ = 0;
  size_t offset_ = 0;  // into iov_[index_]
};

// The part of an iovec array that starts `skip` bytes in and is at most
// `limit` bytes long, as an iovec array. Allocates nothing on the paths a
// call takes every time: the whole array is passed through as it is, and
// a window of up to kInline entries is built in place; only a partial
// window over a longer array (a writev of many pieces cut short) goes to
// the heap.
class IovWindow {
 public:
  static constexpr int kInline = 8;
  IovWindow(const iovec* iov, int count, size_t skip, size_t limit);
  IovWindow(const IovWindow&) = delete;
  IovWindow& operator=(const IovWindow&) = delete;
  const iovec* data() const { return data_; }
  int count() const { return count_; }

 private:
  const iovec* data_ = nullptr;
  int count_ = 0;
  iovec inline_[kInline];
  std::vector<iovec> heap_;
};

}  // namespace vsock::sock
