// The working lists of one wait call (poll/select, epoll), kept per thread
// so that a call allocates nothing once its thread has waited on a set that
// large.
#pragma once

namespace vsock::sock {

// Lists: a struct with clear() (empties them: the socket and view
// references they hold go, their memory stays). A call made while the
// thread's lists are in use (a signal handler that waits inside a wait)
// gets its own.
template <class Lists>
class ThreadScratch {
 public:
  ThreadScratch() : lists_(t_lists.in_use ? own_ : t_lists.lists) {
    if (&lists_ == &t_lists.lists) t_lists.in_use = true;
  }
  ~ThreadScratch() {
    lists_.clear();
    if (&lists_ == &t_lists.lists) t_lists.in_use = false;
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  Lists& operator*() { return lists_; }

 private:
  struct Kept {
    Lists lists;
    bool in_use = false;
  };
  static thread_local Kept t_lists;
  Lists own_;
  Lists& lists_;
};

template <class Lists>
thread_local typename ThreadScratch<Lists>::Kept ThreadScratch<Lists>::t_lists;

}  // namespace vsock::sock
