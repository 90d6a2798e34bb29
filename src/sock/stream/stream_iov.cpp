#include "sock/stream/stream_iov.hpp"

#include <cstdint>
#include <cstring>

namespace vsock::sock {

size_t iov_total(const iovec* iov, int count) {
  if (iov == nullptr || count <= 0) return 0;
  size_t total = 0;
  for (int i = 0; i < count; ++i) {
    if (iov[i].iov_len > SIZE_MAX - total) return SIZE_MAX;
    total += iov[i].iov_len;
  }
  return total;
}

IovCursor::IovCursor(const iovec* iov, int count) : iov_(iov), count_(iov != nullptr && count > 0 ? count : 0) {}

bool IovCursor::settle() {
  while (index_ < count_ && offset_ >= iov_[index_].iov_len) {
    ++index_;
    offset_ = 0;
  }
  return index_ < count_;
}

size_t IovCursor::gather(uint8_t* out, size_t n) {
  size_t copied = 0;
  while (copied < n && settle()) {
    size_t left = iov_[index_].iov_len - offset_;
    size_t take = left < n - copied ? left : n - copied;
    std::memcpy(out + copied, static_cast<const uint8_t*>(iov_[index_].iov_base) + offset_, take);
    copied += take;
    offset_ += take;
  }
  return copied;
}

size_t IovCursor::scatter(const uint8_t* in, size_t n) {
  size_t copied = 0;
  while (copied < n && settle()) {
    size_t left = iov_[index_].iov_len - offset_;
    size_t take = left < n - copied ? left : n - copied;
    std::memcpy(static_cast<uint8_t*>(iov_[index_].iov_base) + offset_, in + copied, take);
    copied += take;
    offset_ += take;
  }
  return copied;
}

IovWindow::IovWindow(const iovec* iov, int count, size_t skip, size_t limit) {
  if (count <= 0 || iov == nullptr) return;
  if (skip == 0 && limit >= iov_total(iov, count)) {
    data_ = iov;  // the common case: the call's own array
    count_ = count;
    return;
  }
  iovec* out = inline_;
  int room = kInline;
  for (int i = 0; i < count && limit > 0; ++i) {
    size_t length = iov[i].iov_len;
    if (skip >= length) {
      skip -= length;
      continue;
    }
    iovec piece{static_cast<char*>(iov[i].iov_base) + skip, length - skip};
    skip = 0;
    if (piece.iov_len > limit) piece.iov_len = limit;
    limit -= piece.iov_len;
    if (count_ == room) {
      // Past kInline pieces: move to the heap (rare; at most count entries).
      heap_.reserve(static_cast<size_t>(count));
      heap_.assign(inline_, inline_ + count_);
      heap_.resize(static_cast<size_t>(count));
      out = heap_.data();
      room = count;
    }
    out[count_++] = piece;
  }
  data_ = out;
}

}  // namespace vsock::sock
