#include "sock/stream/stream_handoff.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/dgram/datagram_hooks.hpp"
#include "sock/registry.hpp"
#include "sock/stream/fork_children.hpp"
#include "sock/stream/owner_inbox.hpp"
#include "sock/stream/stream_socket.hpp"
#include "sock/upgrade/listener_boards.hpp"
#include "sock/upgrade/upgrade_engine.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// The fd table's walk takes a plain function: it collects here.
thread_local std::vector<std::pair<StreamSocket*, int>>* t_found = nullptr;

void collect(int fd, const SocketRef& ref) {
  StreamSocket* stream = ref->stream.load(std::memory_order_acquire);
  // One on TCP for good has nothing to hand over and nothing a fork could
  // copy half-changed (its calls go straight to the kernel).
  if (stream == nullptr || stream->kernel_only()) return;
  for (const auto& entry : *t_found)
    if (entry.first == stream) return;  // dup'ed fds share it
  stream->retain();
  t_found->emplace_back(stream, fd);
}

}  // namespace

bool HandoffHold::keep_across_fork() {
  bool any = false;
  for (const Entry& e : entries_) any = any || e.stream->stays_across_fork_locked();
  // Without the inbox a child could not ask for its connections: then
  // they all go back to TCP before the fork, as the other kinds do.
  if (!any || !open_owner_inbox()) return false;
  fork_sequence_ = next_keeping_fork();
  owner_ = ::getpid();
  for (Entry& e : entries_) {
    if (!e.stream->stays_across_fork_locked()) continue;
    e.kept = true;
    e.stream->keep_across_fork_locked(fork_sequence_);
  }
  // Its side-band thread serves the inbox: it looks at it from now on.
  if (UpgradeEngine* engine = running_upgrade_engine()) engine->wake_side_band();
  return true;
}

void HandoffHold::hand_off(HandoffKind kind) {
  sys::ReentryGuard guard;  // verbs and rdma_cm calls; our own fds
  // One order for every lock: no other thread holds two socket locks.
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.stream < b.stream; });
  for (const Entry& e : entries_) e.stream->lock().release();  // locked until release()
  locked_ = true;
  if (kind == HandoffKind::kFork) keep_across_fork();
  // A parked socket's owner is another process: it stays parked in a
  // forked process, and is handed back by its owner before it goes to one
  // that knows nothing of the owner.
  auto stays = [kind](const Entry& e) { return e.kept || (e.stream->parked() && kind != HandoffKind::kAway); };
  bool pending = false;
  for (const Entry& e : entries_) {
    if (stays(e)) continue;
    if (e.stream->parked()) {
      e.stream->leave_parked_locked(e.fd);
      continue;
    }
    pending = e.stream->revert_begin(e.fd) || pending;
  }
  // All Reverts are posted before any is waited for: two ends of one
  // connection in this process answer each other here.
  const int64_t deadline = core::monotonic_ms() + kHandoffMs;
  while (pending && core::monotonic_ms() < deadline) {
    pending = false;
    for (const Entry& e : entries_) {
      if (stays(e) || !e.stream->revert_pending()) continue;
      e.stream->revert_poll();
      pending = pending || e.stream->revert_pending();
    }
    if (pending) sys::real().poll(nullptr, 0, 1);
  }
  const int64_t flush_deadline = core::monotonic_ms() + kHandoffFlushMs;
  for (const Entry& e : entries_)
    if (!stays(e)) e.stream->revert_finish(e.fd, flush_deadline);
}

void HandoffHold::release(bool in_child) {
  sys::ReentryGuard guard;
  for (const Entry& e : entries_) {
    if (in_child && e.kept) {
      e.stream->park_in_child(owner_);
    } else if (in_child && !e.stream->kernel_only() && !e.stream->parked()) {
      e.stream->abandon_in_child();
    }
    if (locked_) e.stream->unlock_after_handoff();
    e.stream->release();
  }
  entries_.clear();
  locked_ = false;
}

void hand_off_all_streams(HandoffHold* hold, HandoffKind kind) {
  note_fork_starting();
  std::vector<std::pair<StreamSocket*, int>> found;
  t_found = &found;
  for_each_socket(collect);
  t_found = nullptr;
  for (const auto& [stream, fd] : found) hold->add(stream, fd);
  hold->hand_off(kind);
}

void hand_off_stream_fd(int fd) {
  SocketRef ref = lookup_socket(fd);
  if (!ref) return;
  StreamSocket* stream = ref->stream.load(std::memory_order_acquire);
  if (stream == nullptr || stream->kernel_only()) return;
  HandoffHold hold;
  stream->retain();
  hold.add(stream, fd);
  hold.hand_off(HandoffKind::kAway);
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

namespace {

// Streams of the connection `nonce` (both ends, if both are here), each with
// the fd it was found through (the application may have moved the socket
// to another number than the stream remembers, or close it meanwhile).
thread_local uint64_t t_nonce = 0;
thread_local std::vector<std::pair<StreamSocket*, int>>* t_matching = nullptr;

void collect_nonce(int fd, const SocketRef& ref) {
  StreamSocket* stream = ref->stream.load(std::memory_order_acquire);
  if (stream == nullptr || stream->kernel_only() || stream->parked() || stream->nonce() != t_nonce) return;
  for (const auto& entry : *t_matching)
    if (entry.first == stream) return;  // dup'ed fds share it
  stream->retain();
  t_matching->emplace_back(stream, fd);
}

// Hands `streams` back to TCP (kAway) through dups of their fds (each
// pair's fd: one to try too, or -1); takes over their references. False
// if one is still on RDMA with no fd of its socket left here to hand it
// back through (closed by a path that could not hand back first, e.g.
// close_range): its last close then resets the peer's RDMA side, as
// nothing byte-exact is left to do.
bool hand_back(std::vector<std::pair<StreamSocket*, int>>& streams) {
  HandoffHold hold;
  bool all_back = true;
  for (auto& [stream, fd] : streams) {
    {
      StreamLock held = stream->lock();
      fd = stream->dup_own_fd(fd);
      if (fd < 0 && !stream->kernel_only()) {
        stream->set_abort_on_close();
        all_back = false;
      }
    }
    if (fd < 0) {
      stream->release();
      continue;
    }
    hold.add(stream, fd);
  }
  hold.hand_off(HandoffKind::kAway);
  hold.release(false);
  for (const auto& [stream, fd] : streams)
    if (fd >= 0) sys::real().close(fd);
  return all_back;
}

}  // namespace

wire::OwnerAnswer hand_back_for_child(uint64_t nonce) {
  std::vector<std::pair<StreamSocket*, int>> matching;
  t_nonce = nonce;
  t_matching = &matching;
  for_each_socket(collect_nonce);
  t_matching = nullptr;
  if (matching.empty()) return wire::OwnerAnswer::kNotHere;
  VSOCK_LOG(kDebug, "a fork child uses connection %016llx: handing it back to TCP",
            static_cast<unsigned long long>(nonce));
  core::stat_add(core::Stat::fork_handbacks);
  if (hand_back(matching)) return wire::OwnerAnswer::kOnTcp;
  VSOCK_LOG(kInfo, "connection %016llx: no fd of it is left here to hand it back through: reset",
            static_cast<unsigned long long>(nonce));
  return wire::OwnerAnswer::kReset;
}

void hand_back_before_close(StreamSocket* stream, int fd) {
  if (stream->kernel_only() || stream->parked()) return;
  {
    StreamLock held = stream->lock();
    stream->mark_handback_at_close_locked();
  }
  stream->retain();
  std::vector<std::pair<StreamSocket*, int>> one{{stream, fd}};
  hand_back(one);
}

}  // namespace vsock::sock
