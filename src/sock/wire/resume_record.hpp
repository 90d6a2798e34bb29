// Resume: the record each side writes on the kernel TCP socket when its
// queue pair fails under a switched connection (docs/protocol.md §5.1:
// link down, device removed, retry exceeded). After the Switch no
// application byte travels on TCP, so the library owns that stream: the
// record is the first thing there after the switch point, followed by
// every byte of this direction from `resend_from` on (taken from the send
// buffer, which mirrors the peer's ring), then the application's new
// writes. The receiver has read its ring up to some count R with
// resend_from <= R <= ring_written: it skips R - resend_from bytes after
// the record and reads on from there, so nothing is lost or doubled
// whichever ring writes the failure let through.
// Layout: the 16-byte message header ("VSKF"), then the two counts.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kResumeRecordSize = 32;

struct ResumeRecord {
  uint64_t nonce = 0;         // the request's nonce
  uint64_t resend_from = 0;   // stream position (ring bytes) of the first byte after the record
  uint64_t ring_written = 0;  // bytes this side had taken for the peer's ring, in all
};

bool operator==(const ResumeRecord& a, const ResumeRecord& b);

void encode(const ResumeRecord& record, uint8_t out[kResumeRecordSize]);

// Reads a record of `len` bytes; bytes past kResumeRecordSize are ignored,
// fewer are EPROTO. EPROTO also for a magic other than "VSKF", a version
// other than ours, nonzero reserved bytes, or resend_from > ring_written.
// Whether the counts fit what the receiver read, and the nonce, are the
// caller's checks.
core::Result<ResumeRecord> parse_resume_record(const void* data, size_t len);

// Whether `len` bytes (at least the 16-byte header) start a Resume record
// of the connection with `nonce`: how a side whose queue pair still works
// recognises, in what TCP holds, that the peer resumed.
bool begins_resume_record(const void* data, size_t len, uint64_t nonce);

}  // namespace vsock::sock::wire
