#include "rdma/cm_event_channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/clock.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {
namespace {

// A readable channel fd may still yield no event (librdmacm silently drops
// events for ids it no longer knows, or another thread took it); the wait
// is bounded by time, and this bounds the loop as well.
constexpr int kMaxWaitRounds = 64;

// Raw fcntl: the channel fd is the library's own, and fcntl() is interposed.
int set_nonblocking(int fd) {
  long flags = ::syscall(SYS_fcntl, fd, F_GETFL);
  if (flags < 0) return errno;
  if (::syscall(SYS_fcntl, fd, F_SETFL, flags | O_NONBLOCK) < 0) return errno;
  return 0;
}

void copy_private_data(const void* data, size_t length, CmPrivateData* out) {
  if (data == nullptr) length = 0;
  if (length > CmPrivateData::kCapacity) length = CmPrivateData::kCapacity;
  if (length > 0) std::memcpy(out->bytes, data, length);
  out->length = length;
}

CmEvent copy_event(const rdma_cm_event& event) {
  CmEvent out;
  out.type = event.event;
  out.status = event.status;
  out.id = event.id;
  out.listen_id = event.listen_id;
  // The union member in use follows the id's QP type: UD ids (RDMA_PS_UDP)
  // carry param.ud, connected ones param.conn (librdmacm fills param.conn
  // for a REJECTED even on a UD id; both start with the same two fields,
  // the private data pointer and length).
  if (event.id != nullptr && event.id->qp_type == IBV_QPT_UD) {
    // For a multicast event librdmacm puts the join's context where the
    // private data would be; the event carries no private data.
    if (event.event == RDMA_CM_EVENT_MULTICAST_JOIN || event.event == RDMA_CM_EVENT_MULTICAST_ERROR)
      out.join_context = event.param.ud.private_data;
    else
      copy_private_data(event.param.ud.private_data, event.param.ud.private_data_len, &out.private_data);
    if (event.event == RDMA_CM_EVENT_ESTABLISHED || event.event == RDMA_CM_EVENT_MULTICAST_JOIN) {
      out.ud.has = true;
      out.ud.ah_attr = event.param.ud.ah_attr;
      out.ud.qpn = event.param.ud.qp_num;
      out.ud.qkey = event.param.ud.qkey;
    }
  } else {
    copy_private_data(event.param.conn.private_data, event.param.conn.private_data_len, &out.private_data);
  }
  return out;
}

}  // namespace

const char* cm_event_name(rdma_cm_event_type type) { return rdma_event_str(type); }

core::Result<CmEventChannel> CmEventChannel::create() {
  using R = core::Result<CmEventChannel>;
  CmEventChannel channel;
  channel.channel_ = rdma_create_event_channel();
  if (channel.channel_ == nullptr) return R::fail(report_error(errno, "rdma_create_event_channel"));
  int rc = set_nonblocking(channel.channel_->fd);
  if (rc != 0) return R::fail(report_error(rc, "rdma_cm event channel O_NONBLOCK"));
  return R::ok(std::move(channel));
}

CmEventChannel::~CmEventChannel() { reset(); }

void CmEventChannel::reset() {
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
  channel_ = nullptr;
}

CmEventChannel::CmEventChannel(CmEventChannel&& other) noexcept : channel_(std::exchange(other.channel_, nullptr)) {}

CmEventChannel& CmEventChannel::operator=(CmEventChannel&& other) noexcept {
  if (this != &other) {
    reset();
    channel_ = std::exchange(other.channel_, nullptr);
  }
  return *this;
}

core::Result<CmEvent> CmEventChannel::next_event(int timeout_ms) {
  using R = core::Result<CmEvent>;
  if (channel_ == nullptr || timeout_ms < 0)
    return R::fail(report_error(EINVAL, "CmEventChannel::next_event: no channel or negative timeout"));
  const int64_t deadline = core::monotonic_ms() + timeout_ms;
  for (int round = 0; round < kMaxWaitRounds; ++round) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel_, &event) == 0) {
      CmEvent copy = copy_event(*event);
      // Acknowledged before anyone looks at it, so that rdma_destroy_id()
      // of this id never waits for us.
      rdma_ack_cm_event(event);
      return R::ok(copy);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) return R::fail(report_error(errno, "rdma_get_cm_event"));
    int64_t left = deadline - core::monotonic_ms();
    if (left <= 0) return R::fail(EAGAIN);
    pollfd pfd{channel_->fd, POLLIN, 0};
    timespec timeout{static_cast<time_t>(left / 1000), static_cast<long>(left % 1000) * 1000000L};
    long n = ::syscall(SYS_ppoll, &pfd, 1, &timeout, nullptr, 0);
    if (n < 0 && errno == EINTR) return R::fail(EINTR);
    if (n < 0) return R::fail(report_error(errno, "ppoll(rdma_cm channel)"));
    if (n == 0) return R::fail(EAGAIN);
  }
  return R::fail(EAGAIN);
}

}  // namespace vsock::rdma
