#include "sock/stream_iov.hpp"

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

}  // namespace vsock::sock
