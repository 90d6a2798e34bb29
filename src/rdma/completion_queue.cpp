#include "rdma/completion_queue.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace vsock::rdma {
namespace {

// Upper bound on events taken in one drain: one per arm, so more than a
// handful means the caller re-armed in a loop; the rest stay for next time.
constexpr int kMaxEventsPerDrain = 64;

// fcntl() is an interposed symbol; the channel fd is the library's own, so
// the raw system call is both correct and re-entry free.
int set_nonblocking(int fd) {
  long flags = ::syscall(SYS_fcntl, fd, F_GETFL);
  if (flags < 0) return errno;
  if (::syscall(SYS_fcntl, fd, F_SETFL, flags | O_NONBLOCK) < 0) return errno;
  return 0;
}

}  // namespace

core::Result<CompletionQueue> CompletionQueue::create(const Device& device, int depth, bool with_channel) {
  using R = core::Result<CompletionQueue>;
  if (!device.valid() || depth <= 0) return R::fail(report_error(EINVAL, "CompletionQueue::create: bad arguments"));
  if (depth > device.attr().max_cqe)
    return R::fail(report_error(EINVAL, "CQ depth %d > device maximum %d", depth, device.attr().max_cqe));
  CompletionQueue queue;
  if (with_channel) {
    queue.channel_ = ibv_create_comp_channel(device.context());
    if (queue.channel_ == nullptr) return R::fail(report_error(errno, "ibv_create_comp_channel"));
    int rc = set_nonblocking(queue.channel_->fd);
    if (rc != 0) return R::fail(report_error(rc, "completion channel O_NONBLOCK"));
  }
  queue.cq_ = ibv_create_cq(device.context(), depth, nullptr, queue.channel_, 0);
  if (queue.cq_ == nullptr) return R::fail(report_error(errno, "ibv_create_cq(depth %d)", depth));
  return R::ok(std::move(queue));
}

CompletionQueue::~CompletionQueue() { reset(); }

// Every event taken from the channel is acknowledged in drain_events(), so
// ibv_destroy_cq() never waits for unacknowledged events.
void CompletionQueue::reset() {
  if (cq_ != nullptr) {
    int rc = ibv_destroy_cq(cq_);
    if (rc != 0) report_error(rc, "ibv_destroy_cq");
  }
  if (channel_ != nullptr) {
    int rc = ibv_destroy_comp_channel(channel_);
    if (rc != 0) report_error(rc, "ibv_destroy_comp_channel");
  }
  cq_ = nullptr;
  channel_ = nullptr;
}

CompletionQueue::CompletionQueue(CompletionQueue&& other) noexcept
    : channel_(std::exchange(other.channel_, nullptr)),
      cq_(std::exchange(other.cq_, nullptr)),
      maybe_event_(std::exchange(other.maybe_event_, false)),
      armed_(std::exchange(other.armed_, false)),
      armed_solicited_(std::exchange(other.armed_solicited_, false)) {}

CompletionQueue& CompletionQueue::operator=(CompletionQueue&& other) noexcept {
  if (this != &other) {
    reset();
    channel_ = std::exchange(other.channel_, nullptr);
    cq_ = std::exchange(other.cq_, nullptr);
    maybe_event_ = std::exchange(other.maybe_event_, false);
    armed_ = std::exchange(other.armed_, false);
    armed_solicited_ = std::exchange(other.armed_solicited_, false);
  }
  return *this;
}

core::Result<int> CompletionQueue::poll(ibv_wc* out, int max) {
  int n = ibv_poll_cq(cq_, max, out);
  if (n < 0) return core::Result<int>::fail(report_error(EIO, "ibv_poll_cq"));
  return core::Result<int>::ok(n);
}

Status CompletionQueue::arm(bool solicited_only) {
  maybe_event_ = true;
  // A standing request for every completion covers a solicited-only one,
  // not the other way round. (ibv_req_notify_cq is a system call on some
  // providers, rxe among them.)
  if (armed_ && (solicited_only || !armed_solicited_)) return ok_status();
  int rc = ibv_req_notify_cq(cq_, solicited_only ? 1 : 0);
  if (rc != 0) return Status::fail(report_error(rc, "ibv_req_notify_cq"));
  armed_ = true;
  armed_solicited_ = solicited_only;
  return ok_status();
}

core::Result<int> CompletionQueue::drain_events() {
  if (channel_ == nullptr) return core::Result<int>::fail(report_error(EINVAL, "drain_events: CQ has no channel"));
  // Nothing armed since the channel was last empty: no event to read, and
  // no read() that fails with EAGAIN. (An arm that raced with the last
  // drain can leave one event unread; the next sleeper arms first, wakes
  // at once and drains it.)
  if (!maybe_event_) return core::Result<int>::ok(0);
  int events = 0;
  while (events < kMaxEventsPerDrain) {
    ibv_cq* event_cq = nullptr;
    void* event_context = nullptr;
    if (ibv_get_cq_event(channel_, &event_cq, &event_context) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return core::Result<int>::fail(report_error(errno, "ibv_get_cq_event"));
      maybe_event_ = false;
      break;
    }
    ++events;
  }
  if (events > 0) {
    ibv_ack_cq_events(cq_, static_cast<unsigned>(events));
    armed_ = false;  // the event disarmed the CQ
  }
  return core::Result<int>::ok(events);
}

core::Result<int> CompletionQueue::take_event() {
  if (channel_ == nullptr) return core::Result<int>::fail(report_error(EINVAL, "take_event: CQ has no channel"));
  ibv_cq* event_cq = nullptr;
  void* event_context = nullptr;
  if (ibv_get_cq_event(channel_, &event_cq, &event_context) != 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) return core::Result<int>::fail(report_error(errno, "ibv_get_cq_event"));
    return core::Result<int>::ok(0);  // another waiter read it
  }
  ibv_ack_cq_events(cq_, 1);
  armed_ = false;
  maybe_event_ = false;
  return core::Result<int>::ok(1);
}

Status CompletionQueue::moderate(uint32_t count, uint32_t period_us) {
  if (count == 0 && period_us == 0) return ok_status();
  ibv_modify_cq_attr attr{};
  attr.attr_mask = IBV_CQ_ATTR_MODERATE;
  attr.moderate.cq_count = static_cast<uint16_t>(count > 0xffff ? 0xffff : count);
  attr.moderate.cq_period = static_cast<uint16_t>(period_us > 0xffff ? 0xffff : period_us);
  int rc = ibv_modify_cq(cq_, &attr);
  // Providers without it answer EOPNOTSUPP (rxe) or ENOSYS; not an error.
  if (rc == EOPNOTSUPP || rc == ENOSYS || rc == ENOTSUP) return Status::fail(ENOTSUP);
  if (rc != 0) return Status::fail(report_error(rc, "ibv_modify_cq(count %u, period %u us)", count, period_us));
  return ok_status();
}

core::Result<int> CompletionQueue::wait_event(int timeout_ms) {
  if (channel_ == nullptr) return core::Result<int>::fail(report_error(EINVAL, "wait_event: CQ has no channel"));
  // Bounded by design: an endless wait is the wait engine's decision.
  if (timeout_ms < 0) return core::Result<int>::fail(report_error(EINVAL, "wait_event: negative timeout"));
  pollfd pfd{channel_->fd, POLLIN, 0};
  timespec timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  long n = ::syscall(SYS_ppoll, &pfd, 1, &timeout, nullptr, 0);
  if (n < 0) return core::Result<int>::fail(errno);  // EINTR: not an error worth a log line
  if (n == 0) return core::Result<int>::ok(0);
  return take_event();
}

}  // namespace vsock::rdma
