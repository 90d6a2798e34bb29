// RendezvousBoard: where the processes that share one TCP listener meet
// (DESIGN decision 2, revised; docs/protocol.md §1.1).
//
// The process that called listen() owns the rdma_cm listener, but after a
// fork any process holding the listener may accept a connection, and the
// process that serves it — the first to read, write or wait on it — must
// build its queue pair. That process writes a *claim* on the board: the
// connection's 4-tuple, its pid and the port of its own rdma_cm listener
// (its rendezvous listener). The owner, given a client's request for that
// connection, answers it with a redirect to that port.
//
// The board lives in a MAP_SHARED mapping made at listen(), so every
// process forked afterwards shares it. Where it can, the mapping is of a
// named file only this user may open (/dev/shm, named after the listener's
// address and port: create_named), so that two more kinds of process find
// it: one that listens on the same port with SO_REUSEPORT (it joins the
// board: the kernel lets only the same user do that), and one exec'd with
// an accepted socket as an inherited fd (inetd's handlers: open_named).
// Otherwise it is anonymous, and nothing unrelated can open it. It holds at most kBoardSlots claims; a claim older than the timeout
// passed in is free again (the upgrade it was for has settled by then).
// All calls take the board's process-shared robust mutex: a process that
// dies holding it leaves it usable.
#pragma once
#include <pthread.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sock/wire/endpoint.hpp"
#include "sock/wire/upgrade_request.hpp"

namespace vsock::sock {

inline constexpr size_t kBoardSlots = 256;

// A TCP connection in canonical wire form (IPv4-mapped addresses as IPv4).
struct ConnectionKey {
  uint8_t family = 0;
  wire::Endpoint client;
  wire::Endpoint server;
};
bool operator==(const ConnectionKey& a, const ConnectionKey& b);

// The key of an accepted socket from its getsockname() (`local`, the
// server's end) and getpeername() (`peer`); nullopt for addresses that are
// not IP or of different families.
std::optional<ConnectionKey> key_of_accepted(const sockaddr* local, socklen_t local_len, const sockaddr* peer,
                                             socklen_t peer_len);
// The key a client's request names.
ConnectionKey key_of_request(const wire::UpgradeRequest& request);

struct Claim {
  uint32_t pid = 0;
  uint16_t port = 0;  // the claimer's rendezvous listener, host order
};

// The shared memory itself: plain data, so that a test can lay it in a
// heap buffer. Use through RendezvousBoard.
struct BoardMemory {
  static constexpr uint32_t kMagic = 0x56534252;  // "VSBR", and the layout's size below
  struct Slot {
    uint32_t pid;  // 0: free
    uint16_t port;
    ConnectionKey key;
    int64_t since_ms;
  };
  uint32_t magic;
  uint32_t size;  // sizeof(BoardMemory) of the library that made it
  pthread_mutex_t lock;
  sockaddr_storage address;  // the TCP listener's getsockname(), for a new owner
  uint32_t address_len;
  uint32_t owner_pid;  // the process whose rdma_cm listener takes requests
  uint32_t shared;     // 1 once a process forked with the listener open
  Slot slots[kBoardSlots];
};

class RendezvousBoard {
 public:
  // A new board in a fresh shared mapping, owned by the calling process;
  // null if the mapping cannot be made.
  static std::shared_ptr<RendezvousBoard> create();
  // A board over memory the caller keeps (tests); initialises it.
  static std::unique_ptr<RendezvousBoard> over(BoardMemory* memory);

  // The named board of a listener bound to `listener` (docs/protocol.md
  // §1.1). A live one (its owner runs) is joined (*joined = true: another
  // process listens on the same port, SO_REUSEPORT); one whose owner is
  // gone is replaced; else a new one, owned by the calling process. Null
  // if no file can be made (the caller then makes an anonymous board).
  static std::shared_ptr<RendezvousBoard> create_named(const sockaddr* listener, socklen_t length, bool* joined);
  // The live named board of the listener that accepted a connection whose
  // server end is `local` (the listener's own address, else the wildcard of
  // its family, else IPv6's), if this user has one; else null.
  static std::shared_ptr<RendezvousBoard> open_named(const sockaddr* local, socklen_t length);
  // Removes the name (not the mapping) if it still names this board: a
  // listener nobody else can share any more (or its replacement) needs none.
  void unlink_name();
  bool named() const { return !name_.empty(); }

  ~RendezvousBoard();
  RendezvousBoard(const RendezvousBoard&) = delete;
  RendezvousBoard& operator=(const RendezvousBoard&) = delete;

  // Writes (or renews) the claim for `key`. False when every slot holds a
  // live claim: the connection then stays on TCP.
  bool claim(const ConnectionKey& key, Claim claim, int64_t now_ms, int64_t timeout_ms);
  // The live claim for `key`, if any.
  std::optional<Claim> find(const ConnectionKey& key, int64_t now_ms, int64_t timeout_ms);
  // Frees the claim for `key` if `pid` made it.
  void release(const ConnectionKey& key, uint32_t pid);

  // The listener's address (set by its first owner): where a process that
  // takes over the rdma_cm side listens. address() returns the length, 0 if unset.
  void set_address(const sockaddr* address, socklen_t length);
  socklen_t address(sockaddr_storage* out);
  uint32_t owner() const;
  void set_owner(uint32_t pid);
  // A fork happened while the listener was open: from now on an accepted
  // socket may be served by another process.
  bool shared() const;
  void mark_shared();

 private:
  RendezvousBoard(BoardMemory* memory, bool mapped) : memory_(memory), mapped_(mapped) {}
  static void init(BoardMemory* memory);
  static std::shared_ptr<RendezvousBoard> map_file(int fd, bool fresh);
  class Held;

  BoardMemory* memory_;
  bool mapped_;  // munmap at destruction (this process's view only)
  std::string name_;  // the file's path, for a named board
  uint64_t device_ = 0, inode_ = 0;  // the file's, so unlink_name() removes only ours
};

}  // namespace vsock::sock
