// UpgradeEngine: the process's rdma_cm side band (DESIGN decision 2,
// docs/protocol.md §1). One engine per process, started at the first
// socket that could upgrade. It owns the rdma_cm event channel and one
// thread that waits on it: connect requests are matched to accepted
// sockets and answered, connect attempts are driven to their outcome, and
// closed connections are drained and disconnected — so an upgrade
// completes even while the application sleeps in a call the library does
// not see. The data path never goes through this thread: application
// threads progress their own channels (decision 6).
//
// Locking: the engine's mutex may be held while a StreamSocket's lock is
// taken, never the other way round; callers hold no socket lock.
#pragma once
#include <sys/socket.h>

#include <cstdint>

#include "sock/socket_state.hpp"
#include "sock/stream_socket.hpp"

namespace vsock::sock {

class UpgradeEngine;

// The engine, started on first use; null when the process has no device
// or the engine cannot start (every socket then stays on TCP).
UpgradeEngine* upgrade_engine();

// A fresh random nonce for a connect request (never 0).
uint64_t new_nonce();

class UpgradeEngine {
 public:
  virtual ~UpgradeEngine() = default;

  // Client: `fd` is connected (or connecting) to `peer`; starts the upgrade
  // of `stream` (which the engine retains). False if it could not start:
  // the stream has fallen back.
  virtual bool start_connect(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) = 0;
  // Whether the peer failed to upgrade recently (PeerFailureCache).
  virtual bool peer_failed_recently(const sockaddr* peer, socklen_t peer_len) = 0;

  // Server: `fd` listens; also listen in rdma_cm on its address and port.
  // Returns a key for the listener (0: none, its connections stay on TCP).
  virtual uint64_t listen(int fd) = 0;
  virtual void stop_listening(uint64_t key) = 0;
  // accept() on the listener `key` returned `fd`, tracked as `stream`.
  virtual void on_accepted(uint64_t key, int fd, StreamSocket* stream) = 0;

  // The last fd of `stream` was closed; StreamSocket::on_last_close() said
  // whether there is a close to finish (`drain`).
  virtual void on_closed(StreamSocket* stream, bool drain) = 0;
};

}  // namespace vsock::sock
