// SocketState: what the library knows of one kernel socket that could be
// offloaded (an AF_INET/AF_INET6 stream or datagram socket). Every fd that
// refers to the same open socket (after dup) points to the same state.
//
// Lifetime: states live in a type-stable pool and are recycled, never freed,
// so a reader that loaded a pointer from the fd table can always touch its
// reference count; it then re-checks the table (see registry.cpp).
#pragma once
#include <atomic>
#include <cstdint>

#include <sys/socket.h>

namespace vsock::sock {

class StreamSocket;
namespace dgram {
class DatagramSocket;
}

enum class SocketRole : uint8_t { kUnknown, kClient, kListener, kAccepted };

// Why a socket is on the kernel path (kUndecided: it may still upgrade).
// Why a socket stays on the kernel for good, decided before any upgrade
// began (kCachedPeer: its peer failed an upgrade lately, peer_fail_cache_s).
enum class KernelReason : uint8_t { kUndecided, kRule, kNoDevice, kOption, kCachedPeer };

// SocketState::known_mode bits: what decides whether a call may block or
// how the ring path behaves, as far as the library knows it without asking
// the kernel (BlockingMode, copy_kernel_options, close()).
inline constexpr uint8_t kModeFlagsKnown = 1;   // O_NONBLOCK is kModeNonblocking
inline constexpr uint8_t kModeNonblocking = 2;
inline constexpr uint8_t kModeTimeoutsZero = 4;  // SO_RCVTIMEO and SO_SNDTIMEO are 0
inline constexpr uint8_t kModeLingerOff = 8;     // SO_LINGER is off (close() need not ask)
inline constexpr uint8_t kModeRcvLowatOne = 16;    // SO_RCVLOWAT is 1
inline constexpr uint8_t kModeNoDelayKnown = 32;   // TCP_NODELAY is kModeNoDelay (a
inline constexpr uint8_t kModeNoDelay = 64;        // setsockopt tells its value)
// What a socket() call makes, apart from O_NONBLOCK (TCP_NODELAY off).
inline constexpr uint8_t kModeNewSocket = kModeTimeoutsZero | kModeLingerOff | kModeRcvLowatOne | kModeNoDelayKnown;
// What an accepted socket takes from its listener (the kernel copies the
// socket's options).
inline constexpr uint8_t kModeInherited = kModeNewSocket | kModeNoDelay;
// The known_mode of a socket made by a call with `sock_flags` (socket()'s
// type, accept4()'s flags: SOCK_NONBLOCK) and those of `options` known.
inline uint8_t known_mode_when_made(int sock_flags, uint8_t options) {
  return static_cast<uint8_t>(kModeFlagsKnown | options | ((sock_flags & SOCK_NONBLOCK) ? kModeNonblocking : 0));
}

struct SocketState {
  int domain = 0;
  int type = 0;  // SOCK_STREAM or SOCK_DGRAM, flags removed
  int protocol = 0;
  std::atomic<SocketRole> role{SocketRole::kUnknown};
  std::atomic<KernelReason> kernel_reason{KernelReason::kUndecided};
  // A TCP connection that may be (or is) upgraded; owns one reference.
  std::atomic<StreamSocket*> stream{nullptr};
  // A UDP socket the library serves (its datagrams may go over UD); owns
  // one reference.
  std::atomic<dgram::DatagramSocket*> datagram{nullptr};
  // kMode* bits: set where the library saw the socket made (socket() with
  // its flags and the kernel's defaults; accept4() with its flags, the
  // listener's options), cleared by every change it sees (fcntl F_SETFL,
  // FIONBIO, SO_RCVTIMEO / SO_SNDTIMEO, SO_LINGER, SO_RCVLOWAT), except
  // TCP_NODELAY, whose new value a setsockopt says (two threads setting it
  // at once may leave the other value here: Nagle's coalescing then
  // follows it, nothing else). 0 for a socket it did not see made.
  std::atomic<uint8_t> known_mode{0};
  // A TCP listener that also listens in rdma_cm: its UpgradeEngine key.
  std::atomic<uint64_t> listen_key{0};

  // Bumped each time the state is taken from the pool for a new socket: a
  // (state, generation) pair names one socket even after recycling.
  std::atomic<uint64_t> generation{0};
  // Number of fd-table slots pointing here (fds open on the socket).
  std::atomic<uint32_t> fds{0};
  // Number of fd-table slots plus live SocketRefs pointing here; 0 = in pool.
  std::atomic<uint32_t> refs{0};
  SocketState* next_free = nullptr;  // pool link, guarded by the pool lock
};

}  // namespace vsock::sock
