#include "sock/stream/stream_handoff.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "core/clock.hpp"
#include "sock/dgram/datagram_hooks.hpp"
#include "sock/registry.hpp"
#include "sock/stream/stream_socket.hpp"
#include "sock/upgrade/listener_boards.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// The fd table's walk takes a plain function: it collects here.
thread_local std::vector<std::pair<StreamSocket*, int>>* t_found = nullptr;

void collect(int fd, const SocketRef& ref) {
  StreamSocket* stream = ref->stream.load(std::memory_order_acquire);
  if (stream == nullptr) return;
  for (const auto& entry : *t_found)
    if (entry.first == stream) return;  // dup'ed fds share it
  stream->retain();
  t_found->emplace_back(stream, fd);
}

}  // namespace

void HandoffHold::hand_off() {
  sys::ReentryGuard guard;  // verbs and rdma_cm calls; our own fds
  // One order for every lock: no other thread holds two socket locks.
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.stream < b.stream; });
  for (const Entry& e : entries_) e.stream->lock().release();  // locked until release()
  locked_ = true;
  bool pending = false;
  for (const Entry& e : entries_) pending = e.stream->revert_begin(e.fd) || pending;
  // All Reverts are posted before any is waited for: two ends of one
  // connection in this process answer each other here.
  const int64_t deadline = core::monotonic_ms() + kHandoffMs;
  while (pending && core::monotonic_ms() < deadline) {
    pending = false;
    for (const Entry& e : entries_) {
      if (!e.stream->revert_pending()) continue;
      e.stream->revert_poll();
      pending = pending || e.stream->revert_pending();
    }
    if (pending) sys::real().poll(nullptr, 0, 1);
  }
  const int64_t flush_deadline = core::monotonic_ms() + kHandoffFlushMs;
  for (const Entry& e : entries_) e.stream->revert_finish(e.fd, flush_deadline);
}

void HandoffHold::release(bool in_child) {
  sys::ReentryGuard guard;
  for (const Entry& e : entries_) {
    if (in_child && !e.stream->kernel_only()) e.stream->abandon_in_child();
    if (locked_) e.stream->unlock_after_handoff();
    e.stream->release();
  }
  entries_.clear();
  locked_ = false;
}

void hand_off_all_streams(HandoffHold* hold) {
  note_fork_starting();
  std::vector<std::pair<StreamSocket*, int>> found;
  t_found = &found;
  for_each_socket(collect);
  t_found = nullptr;
  for (const auto& [stream, fd] : found) hold->entries_.push_back({stream, fd});
  hold->hand_off();
}

void hand_off_stream_fd(int fd) {
  SocketRef ref = lookup_socket(fd);
  if (!ref) return;
  StreamSocket* stream = ref->stream.load(std::memory_order_acquire);
  if (stream == nullptr || stream->kernel_only()) return;
  HandoffHold hold;
  stream->retain();
  hold.entries_.push_back({stream, fd});
  hold.hand_off();
  hold.release(false);
}

void hand_off_passed_fds(const void* control, unsigned long control_length) {
  if (control == nullptr || control_length < sizeof(cmsghdr)) return;
  msghdr message{};
  message.msg_control = const_cast<void*>(control);
  message.msg_controllen = control_length;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      hand_off_stream_fd(fd);
      dgram::leave_datagram_fd(fd);
    }
  }
}

}  // namespace vsock::sock
