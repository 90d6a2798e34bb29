#include "sock/stream/held_data_watch.hpp"

#include <atomic>

namespace vsock::sock {
namespace {

std::atomic<HeldDataWaker> g_waker{nullptr};
std::atomic<void*> g_context{nullptr};
std::atomic<bool> g_noted{false};

}  // namespace

void set_held_data_waker(HeldDataWaker waker, void* context) {
  g_context.store(context, std::memory_order_release);
  g_waker.store(waker, std::memory_order_release);
  g_noted.store(false, std::memory_order_release);
}

void note_held_data() {
  if (g_noted.load(std::memory_order_relaxed) || g_noted.exchange(true, std::memory_order_acq_rel)) return;
  HeldDataWaker waker = g_waker.load(std::memory_order_acquire);
  if (waker != nullptr) waker(g_context.load(std::memory_order_acquire));
}

void clear_held_data_note() { g_noted.store(false, std::memory_order_release); }

}  // namespace vsock::sock
