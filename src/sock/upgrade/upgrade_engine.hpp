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
#include <memory>
#include <vector>

#include "sock/socket_state.hpp"
#include "sock/upgrade/datagram_resolution.hpp"
#include "sock/upgrade/rendezvous_board.hpp"
#include "sock/stream/stream_socket.hpp"

namespace vsock::sock {

class UpgradeEngine;

// The engine, started on first use; null when the process has no device
// or the engine cannot start (every socket then stays on TCP).
UpgradeEngine* upgrade_engine();
// The engine if this process has started one (never starts it).
UpgradeEngine* running_upgrade_engine();

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
  // `board` (may be null) is where processes that inherit the listener
  // claim the connections they serve. Returns a key for the listener (0:
  // none, its connections stay on TCP); keys are unique across processes.
  virtual uint64_t listen(int fd, std::shared_ptr<RendezvousBoard> board) = 0;
  // The listener `key` (or, in a process that took it over, the one of
  // `board`) was closed.
  virtual void stop_listening(uint64_t key, const RendezvousBoard* board = nullptr) = 0;
  // The listener `key`'s TCP socket was closed, but another listener of
  // this process on the same port (SO_REUSEPORT) goes on with its rdma_cm
  // side: `fd` is that one's.
  virtual void listener_moved(uint64_t key, int fd) = 0;
  // listen() on `local` in a process whose rdma_cm listener there was kept
  // after it closed its own listeners (others still listen on the port,
  // docs/protocol.md §1.1): `fd` takes it back. Its key (0: none kept),
  // and its board in *board.
  virtual uint64_t take_kept_listener(int fd, const sockaddr* local, socklen_t length,
                                      std::shared_ptr<RendezvousBoard>* board) = 0;
  // This process goes on with listeners whose owner is on its way out (the
  // child of daemon()): take their rdma_cm side over once the owner is gone.
  virtual void adopt_listeners(const std::vector<std::shared_ptr<RendezvousBoard>>& boards) = 0;
  // accept() on the listener `key` returned `fd`, tracked as `stream`, and
  // this process serves it now (a listener without a board).
  virtual void on_accepted(uint64_t key, int fd, StreamSocket* stream) = 0;
  // The first use, in this process, of an accepted socket
  // (stream->rendezvous()): the listener's owner binds its early upgrade
  // or matches it as on_accepted() does; another process (the listener is
  // shared) claims it on the board and takes the redirected request on its
  // own rendezvous listener.
  virtual void claim(int fd, StreamSocket* stream) = 0;
  // accept() here returned `fd` (it awaits its claim: its first use, in
  // whichever process; docs/protocol.md §1.1). If this process owns the
  // listener and nobody has used the socket within a short window (longer
  // unless it accepted another since), with no fork since, this process
  // claims it: a server that accepts and then waits (the client blocked in
  // connect() waits for the upgrade) is served as if nobody else could.
  // `claim_follows`: the caller claims it right away (claim()).
  virtual void on_accepted_unclaimed(int fd, StreamSocket* stream, bool claim_follows) = 0;

  // Makes the side-band thread look at once (e.g. at the owner inbox a fork
  // just opened: owner_inbox.hpp, which it serves).
  virtual void wake_side_band() = 0;

  // The last fd of `stream` was closed; StreamSocket::on_last_close() said
  // whether there is a close to finish (`drain`).
  virtual void on_closed(StreamSocket* stream, bool drain) = 0;
  // The process exits: waits (until deadline_ms at most) for the closed
  // connections still draining (StreamSocket::finish_closed_at_exit).
  virtual void finish_closing_at_exit(int64_t deadline_ms) = 0;

  // --- UDP over UD: resolution (DatagramResolution says how) ---
  // Where resolutions' outcomes go (the process's datagram hub).
  virtual void set_datagram_sink(const DatagramPathSink& sink) = 0;
  // A datagram socket bound to `address` (explicit port) answers SIDR
  // requests there with `qpn` and `cookie`. False if it cannot.
  virtual bool listen_datagrams(const sockaddr* address, uint32_t qpn, uint64_t cookie) = 0;
  virtual void stop_listening_datagrams(uint64_t cookie) = 0;
  // Resolves `destination` off the caller's thread (the sink hears how it
  // ended). False if it could not start.
  virtual bool resolve_datagram_path(const sockaddr* destination, socklen_t length) = 0;
};

}  // namespace vsock::sock
