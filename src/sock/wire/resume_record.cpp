#include "sock/wire/resume_record.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/message_header.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 5.1, after the shared header.
constexpr size_t kOffResendFrom = kMessageHeaderSize;
constexpr size_t kOffRingWritten = 24;
static_assert(kOffRingWritten + 8 == kResumeRecordSize);

}  // namespace

bool operator==(const ResumeRecord& a, const ResumeRecord& b) {
  return a.nonce == b.nonce && a.resend_from == b.resend_from && a.ring_written == b.ring_written;
}

void encode(const ResumeRecord& record, uint8_t out[kResumeRecordSize]) {
  std::memset(out, 0, kResumeRecordSize);
  encode_message_header(out, kResumeMagic, record.nonce);
  store_be64(out + kOffResendFrom, record.resend_from);
  store_be64(out + kOffRingWritten, record.ring_written);
}

core::Result<ResumeRecord> parse_resume_record(const void* data, size_t len) {
  using R = core::Result<ResumeRecord>;
  if (data == nullptr || len < kResumeRecordSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  ResumeRecord record;
  if (!parse_message_header(in, kResumeMagic, &record.nonce)) return R::fail(EPROTO);
  record.resend_from = load_be64(in + kOffResendFrom);
  record.ring_written = load_be64(in + kOffRingWritten);
  if (record.resend_from > record.ring_written) return R::fail(EPROTO);
  return R::ok(record);
}

bool begins_resume_record(const void* data, size_t len, uint64_t nonce) {
  uint64_t theirs = 0;
  return data != nullptr && len >= kMessageHeaderSize &&
         parse_message_header(static_cast<const uint8_t*>(data), kResumeMagic, &theirs) && theirs == nonce;
}

}  // namespace vsock::sock::wire
