// StreamMutex: a StreamSocket's lock, counting how often it was taken.
//
// Every member of a StreamSocket changes only under this lock, so a look
// that finds the count moved by one since its last look (its own taking)
// knows that no other call, thread or side-band round touched the socket
// in between: then only the network (a completion) can have changed what
// the last look saw (StreamSocket::poll_events' quick look). Counting in
// the mutex itself, not at the call sites, leaves no way of taking the
// lock uncounted: StreamLock and the condition_variable_any that waits on
// it both go through lock()/try_lock().
#pragma once
#include <cstdint>
#include <mutex>

namespace vsock::sock {

class StreamMutex {
 public:
  void lock() {
    mu_.lock();
    ++takes_;
  }
  bool try_lock() {
    if (!mu_.try_lock()) return false;
    ++takes_;
    return true;
  }
  void unlock() { mu_.unlock(); }
  // How often the lock was taken; read under the lock.
  uint64_t takes() const { return takes_; }

 private:
  std::mutex mu_;
  uint64_t takes_ = 0;  // changed and read under mu_
};

using StreamLock = std::unique_lock<StreamMutex>;

}  // namespace vsock::sock
