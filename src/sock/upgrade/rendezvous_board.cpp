#include "sock/upgrade/rendezvous_board.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace vsock::sock {

bool operator==(const ConnectionKey& a, const ConnectionKey& b) {
  return a.family == b.family && a.client == b.client && a.server == b.server;
}

std::optional<ConnectionKey> key_of_accepted(const sockaddr* local, socklen_t local_len, const sockaddr* peer,
                                             socklen_t peer_len) {
  core::Result<wire::FamilyEndpoint> server = wire::endpoint_from_sockaddr(local, local_len);
  core::Result<wire::FamilyEndpoint> client = wire::endpoint_from_sockaddr(peer, peer_len);
  if (!server || !client || server.value().family != client.value().family) return std::nullopt;
  ConnectionKey key;
  key.family = server.value().family;
  key.server = server.value().endpoint;
  key.client = client.value().endpoint;
  return key;
}

ConnectionKey key_of_request(const wire::UpgradeRequest& request) {
  wire::FamilyEndpoint server = wire::canonical_endpoint(request.family, request.server);
  wire::FamilyEndpoint client = wire::canonical_endpoint(request.family, request.client);
  ConnectionKey key;
  // Both ends of one connection reduce alike; a request mixing a mapped
  // and a plain IPv6 end names no connection and matches nothing.
  key.family = server.family == client.family ? server.family : 0;
  key.server = server.endpoint;
  key.client = client.endpoint;
  return key;
}

// The board's lock for one call. A previous holder that died leaves the
// mutex EOWNERDEAD: the slots are plain values written whole under the
// lock, so the board is consistent enough to go on with.
class RendezvousBoard::Held {
 public:
  explicit Held(BoardMemory* memory) : lock_(&memory->lock) {
    if (pthread_mutex_lock(lock_) == EOWNERDEAD) pthread_mutex_consistent(lock_);
  }
  ~Held() { pthread_mutex_unlock(lock_); }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

 private:
  pthread_mutex_t* lock_;
};

void RendezvousBoard::init(BoardMemory* memory) {
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
  memory->magic = BoardMemory::kMagic;
  memory->size = sizeof(BoardMemory);
  pthread_mutex_init(&memory->lock, &attributes);
  pthread_mutexattr_destroy(&attributes);
  memory->address = sockaddr_storage{};
  memory->address_len = 0;
  memory->owner_pid = static_cast<uint32_t>(::getpid());
  memory->shared = 0;
  for (BoardMemory::Slot& slot : memory->slots) slot = BoardMemory::Slot{};
}

std::shared_ptr<RendezvousBoard> RendezvousBoard::create() {
  void* mapped = ::mmap(nullptr, sizeof(BoardMemory), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  auto* memory = static_cast<BoardMemory*>(mapped);
  init(memory);
  std::shared_ptr<RendezvousBoard> board(new (std::nothrow) RendezvousBoard(memory, true));
  if (!board) ::munmap(mapped, sizeof(BoardMemory));
  return board;
}

std::unique_ptr<RendezvousBoard> RendezvousBoard::over(BoardMemory* memory) {
  init(memory);
  return std::unique_ptr<RendezvousBoard>(new RendezvousBoard(memory, false));
}

RendezvousBoard::~RendezvousBoard() {
  if (mapped_) ::munmap(memory_, sizeof(BoardMemory));
}

bool RendezvousBoard::claim(const ConnectionKey& key, Claim claim, int64_t now_ms, int64_t timeout_ms) {
  Held held(memory_);
  BoardMemory::Slot* free_slot = nullptr;
  for (BoardMemory::Slot& slot : memory_->slots) {
    bool live = slot.pid != 0 && now_ms - slot.since_ms < timeout_ms;
    if (live && slot.key == key) {
      free_slot = &slot;  // renew (a second claim of one connection: the latest wins)
      break;
    }
    if (!live && free_slot == nullptr) free_slot = &slot;
  }
  if (free_slot == nullptr) return false;
  *free_slot = BoardMemory::Slot{claim.pid, claim.port, key, now_ms};
  return true;
}

std::optional<Claim> RendezvousBoard::find(const ConnectionKey& key, int64_t now_ms, int64_t timeout_ms) {
  Held held(memory_);
  for (const BoardMemory::Slot& slot : memory_->slots) {
    if (slot.pid != 0 && slot.key == key && now_ms - slot.since_ms < timeout_ms) return Claim{slot.pid, slot.port};
  }
  return std::nullopt;
}

void RendezvousBoard::release(const ConnectionKey& key, uint32_t pid) {
  Held held(memory_);
  for (BoardMemory::Slot& slot : memory_->slots) {
    if (slot.pid == pid && slot.key == key) slot.pid = 0;
  }
}

void RendezvousBoard::set_address(const sockaddr* address, socklen_t length) {
  if (address == nullptr || length > sizeof(sockaddr_storage)) return;
  Held held(memory_);
  std::memcpy(&memory_->address, address, length);
  memory_->address_len = length;
}

socklen_t RendezvousBoard::address(sockaddr_storage* out) {
  Held held(memory_);
  *out = memory_->address;
  return memory_->address_len;
}

// owner_pid and shared are single words read without the lock: each is
// written whole, and a stale read only delays a redirect to the next look.
uint32_t RendezvousBoard::owner() const { return __atomic_load_n(&memory_->owner_pid, __ATOMIC_ACQUIRE); }
void RendezvousBoard::set_owner(uint32_t pid) { __atomic_store_n(&memory_->owner_pid, pid, __ATOMIC_RELEASE); }
bool RendezvousBoard::shared() const { return __atomic_load_n(&memory_->shared, __ATOMIC_ACQUIRE) != 0; }
void RendezvousBoard::mark_shared() { __atomic_store_n(&memory_->shared, 1u, __ATOMIC_RELEASE); }

}  // namespace vsock::sock
