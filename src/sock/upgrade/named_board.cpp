// Named rendezvous boards (docs/protocol.md §1.1): a board in a file of
// /dev/shm that only this user can open, named after the listener's
// address and port, for the processes that share a port without having
// forked from its listener: SO_REUSEPORT listeners of one port, and a
// program exec'd with an accepted socket as its stdin/stdout (inetd).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <new>

#include "sock/upgrade/owner_only_file.hpp"
#include "sock/upgrade/process_liveness.hpp"
#include "sock/upgrade/rendezvous_board.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

std::string name_of(const wire::FamilyEndpoint& at) {
  char text[128];
  int n = std::snprintf(text, sizeof text, "%s/libvsock-tcp-%u-%u-", owner_only::kDirectory,
                        static_cast<unsigned>(::geteuid()), static_cast<unsigned>(at.family));
  const int bytes = at.family == wire::kFamilyIpv4 ? 4 : 16;
  for (int i = 0; i < bytes && n > 0 && n < static_cast<int>(sizeof text) - 3; ++i)
    n += std::snprintf(text + n, sizeof text - static_cast<size_t>(n), "%02x", at.endpoint.ip[i]);
  std::snprintf(text + n, sizeof text - static_cast<size_t>(n), "-%u", static_cast<unsigned>(at.endpoint.port));
  return text;
}

void close_fd(int fd) { sys::real().close(fd); }

// The board of `name` if it is a board of this user's that this library can
// read (its owner may be gone); null otherwise.
std::shared_ptr<RendezvousBoard> open_existing(const std::string& name, std::shared_ptr<RendezvousBoard> (*map)(int, bool)) {
  int fd = owner_only::open_published(name.c_str());
  if (fd < 0) return nullptr;
  std::shared_ptr<RendezvousBoard> board = map(fd, false);
  close_fd(fd);
  return board;
}

}  // namespace

std::shared_ptr<RendezvousBoard> RendezvousBoard::map_file(int fd, bool fresh) {
  struct stat st{};
  auto* memory = static_cast<BoardMemory*>(owner_only::map(fd, sizeof(BoardMemory), fresh, &st));
  if (memory == nullptr) return nullptr;
  if (fresh) {
    init(memory);
  } else if (__atomic_load_n(&memory->magic, __ATOMIC_ACQUIRE) != BoardMemory::kMagic ||
             memory->size != sizeof(BoardMemory)) {
    ::munmap(memory, sizeof(BoardMemory));  // another version's layout
    return nullptr;
  }
  std::shared_ptr<RendezvousBoard> board(new (std::nothrow) RendezvousBoard(memory, true));
  if (!board) {
    ::munmap(memory, sizeof(BoardMemory));
    return nullptr;
  }
  board->device_ = static_cast<uint64_t>(st.st_dev);
  board->inode_ = static_cast<uint64_t>(st.st_ino);
  return board;
}

std::shared_ptr<RendezvousBoard> RendezvousBoard::create_named(const sockaddr* listener, socklen_t length,
                                                               bool* joined) {
  *joined = false;
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(listener, length);
  if (!at || at.value().endpoint.port == 0) return nullptr;
  const std::string name = name_of(at.value());
  static std::atomic<unsigned> made{0};
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (std::shared_ptr<RendezvousBoard> existing = open_existing(name, map_file)) {
      uint32_t owner = existing->owner();
      if (owner != static_cast<uint32_t>(::getpid()) && process_alive(owner)) {
        existing->name_ = name;
        *joined = true;
        return existing;
      }
      // Its owner is gone, or it is this process's from a listener closed
      // since (a new listen() on the port): replaced.
      existing->name_ = name;
      existing->unlink_name();
    }
    // Made whole under a private name, then published at once (link fails
    // if another process published one meanwhile: join that one).
    char temporary[128];
    std::snprintf(temporary, sizeof temporary, "%s/.libvsock-tcp-%u-%d-%u", owner_only::kDirectory,
                  static_cast<unsigned>(::geteuid()), static_cast<int>(::getpid()), made.fetch_add(1));
    int fd = owner_only::create(temporary);
    if (fd < 0) return nullptr;  // no /dev/shm
    std::shared_ptr<RendezvousBoard> board = map_file(fd, true);
    close_fd(fd);
    if (!board) {
      ::unlink(temporary);
      return nullptr;
    }
    const int error = owner_only::publish(temporary, name.c_str());
    if (error == 0) {
      board->name_ = name;
      return board;
    }
    if (error != EEXIST) return nullptr;
  }
  return nullptr;
}

std::shared_ptr<RendezvousBoard> RendezvousBoard::open_named(const sockaddr* local, socklen_t length) {
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(local, length);
  if (!at || at.value().endpoint.port == 0) return nullptr;
  wire::FamilyEndpoint candidates[3] = {at.value(), at.value(), {}};
  candidates[1].endpoint = wire::Endpoint{};
  candidates[1].endpoint.port = at.value().endpoint.port;
  candidates[2].family = wire::kFamilyIpv6;  // a dual-stack listener on ::
  candidates[2].endpoint.port = at.value().endpoint.port;
  const int count = at.value().family == wire::kFamilyIpv4 ? 3 : 2;
  for (int i = 0; i < count; ++i) {
    const std::string name = name_of(candidates[i]);
    std::shared_ptr<RendezvousBoard> board = open_existing(name, map_file);
    if (!board || !process_alive(board->owner())) continue;
    board->name_ = name;
    return board;
  }
  return nullptr;
}

void RendezvousBoard::unlink_name() {
  if (name_.empty()) return;
  struct stat st{};
  if (::lstat(name_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_dev) == device_ &&
      static_cast<uint64_t>(st.st_ino) == inode_)
    ::unlink(name_.c_str());
}

}  // namespace vsock::sock
