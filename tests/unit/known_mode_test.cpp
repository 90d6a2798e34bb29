// SocketState::known_mode as the option hooks keep it: what a setsockopt
// makes stale, and TCP_NODELAY, whose value the setsockopt itself tells
// (copy_kernel_options then need not ask the kernel at connect()).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "sock/socket_state.hpp"
#include "sock/stream/stream_hooks.hpp"

namespace vsock::sock {
namespace {

uint8_t after_set(uint8_t mode, int level, int name, int value) {
  SocketState state;
  state.known_mode.store(mode);
  on_option_set(&state, level, name, &value, sizeof value);
  return state.known_mode.load();
}

TEST(KnownMode, NoDelayTakesTheValueSet) {
  const uint8_t fresh = known_mode_when_made(SOCK_STREAM, kModeNewSocket);
  EXPECT_EQ(fresh & (kModeNoDelayKnown | kModeNoDelay), kModeNoDelayKnown);  // the kernel's default: off
  const uint8_t on = after_set(fresh, IPPROTO_TCP, TCP_NODELAY, 1);
  EXPECT_EQ(on & (kModeNoDelayKnown | kModeNoDelay), kModeNoDelayKnown | kModeNoDelay);
  const uint8_t off = after_set(on, IPPROTO_TCP, TCP_NODELAY, 0);
  EXPECT_EQ(off & (kModeNoDelayKnown | kModeNoDelay), kModeNoDelayKnown);
  // The other bits stay.
  EXPECT_EQ(on & ~(kModeNoDelayKnown | kModeNoDelay), fresh & ~(kModeNoDelayKnown | kModeNoDelay));
}

TEST(KnownMode, NoDelayWithoutAnIntIsNoLongerKnown) {
  SocketState state;
  state.known_mode.store(kModeNewSocket | kModeNoDelay);
  const char one_byte = 1;
  on_option_set(&state, IPPROTO_TCP, TCP_NODELAY, &one_byte, sizeof one_byte);
  EXPECT_EQ(state.known_mode.load() & (kModeNoDelayKnown | kModeNoDelay), 0);
}

TEST(KnownMode, EachOptionMakesItsOwnBitStale) {
  const uint8_t fresh = known_mode_when_made(SOCK_STREAM, kModeNewSocket);
  EXPECT_EQ(after_set(fresh, SOL_SOCKET, SO_RCVLOWAT, 100), fresh & ~kModeRcvLowatOne);
  EXPECT_EQ(after_set(fresh, SOL_SOCKET, SO_RCVTIMEO, 0), fresh & ~kModeTimeoutsZero);
  EXPECT_EQ(after_set(fresh, SOL_SOCKET, SO_KEEPALIVE, 1), fresh);  // not followed
}

TEST(KnownMode, AnAcceptedSocketInheritsItsListenersNoDelay) {
  const uint8_t listener = after_set(known_mode_when_made(SOCK_STREAM, kModeNewSocket), IPPROTO_TCP, TCP_NODELAY, 1);
  const uint8_t accepted = known_mode_when_made(SOCK_NONBLOCK, listener & kModeInherited);
  EXPECT_EQ(accepted & (kModeNoDelayKnown | kModeNoDelay), kModeNoDelayKnown | kModeNoDelay);
  EXPECT_TRUE(accepted & kModeNonblocking);
}

}  // namespace
}  // namespace vsock::sock
