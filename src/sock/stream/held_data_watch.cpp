#include "sock/stream/held_data_watch.hpp"

#include <atomic>

namespace vsock::sock {
namespace {

std::atomic<HeldDataWaker> g_waker{nullptr};
std::atomic<void*> g_context{nullptr};

}  // namespace

void set_held_data_waker(HeldDataWaker waker, void* context) {
  g_context.store(context, std::memory_order_release);
  g_waker.store(waker, std::memory_order_release);
}

void note_held_data(StreamSocket* stream) {
  HeldDataWaker waker = g_waker.load(std::memory_order_acquire);
  if (waker != nullptr) waker(g_context.load(std::memory_order_acquire), stream);
}

}  // namespace vsock::sock
