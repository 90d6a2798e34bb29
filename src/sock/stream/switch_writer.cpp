#include "sock/stream/switch_writer.hpp"

#include <cerrno>
#include <cstdint>

namespace vsock::sock {

core::Result<bool> SwitchWriter::on_tcp_written(uint64_t bytes) {
  if (!tcp_allowed()) return core::Result<bool>::fail(EPIPE);
  // 2^64 bytes cannot be written in a connection's life; saturating keeps a
  // buggy report from wrapping the count into something small all the same.
  tcp_written_ = bytes > UINT64_MAX - tcp_written_ ? UINT64_MAX : tcp_written_ + bytes;
  return core::Result<bool>::ok(true);
}

core::Result<uint64_t> SwitchWriter::switch_now() {
  if (reverted_) return core::Result<uint64_t>::fail(ECANCELED);
  if (switched_) return core::Result<uint64_t>::fail(EALREADY);
  switched_ = true;
  return core::Result<uint64_t>::ok(tcp_written_);
}

core::Result<bool> SwitchWriter::revert() {
  if (reverted_) return core::Result<bool>::fail(EALREADY);
  reverted_ = true;
  return core::Result<bool>::ok(true);
}

}  // namespace vsock::sock
