#include "rdma/memory_region.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include "core/log.hpp"
#include "rdma/fork_guard.hpp"
#include "rdma/memory_budget.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {
namespace {

size_t page_size() {
  long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

}  // namespace

core::Result<MemoryRegion> MemoryRegion::allocate(const ProtectionDomain& pd, size_t size, int access) {
  using R = core::Result<MemoryRegion>;
  const size_t page = page_size();
  if (!pd.valid() || size == 0 || size > SIZE_MAX - page)
    return R::fail(report_error(EINVAL, "MemoryRegion::allocate: bad arguments (size %zu)", size));
  size_t rounded = (size + page - 1) / page * page;
  // A mapping of its own, not the heap: page-aligned, zero-filled, and no
  // other allocation shares its pages (registration and MADV_DONTFORK work on
  // whole pages, so a neighbour would be pinned and hidden from a child too).
  void* base = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return R::fail(report_error(errno, "mmap(%zu) for a memory region", rounded));
  // Never copied into a fork() child: the child never uses the parent's
  // queue pairs. Needed where libibverbs skips its own MADV_DONTFORK (a
  // kernel that is fork-safe on its own, as here); it also spares the fork
  // these mappings (bench/fork_cost.sh: a fork with 1,000 connections on
  // RDMA took half the time with it).
  if (::madvise(base, rounded, MADV_DONTFORK) != 0)
    report_error(errno, "madvise(MADV_DONTFORK) on a memory region (a fork() copies it)");
  MemoryRegion region;
  region.base_ = base;
  region.size_ = rounded;
  region.access_ = access;
  {
    ForkGuard no_fork_now;
    region.mr_ = ibv_reg_mr(pd.get(), base, rounded, access);
  }
  if (region.mr_ == nullptr) {
    const int error = errno;
    // ENOMEM is usually RLIMIT_MEMLOCK: the connection stays on TCP, and
    // the user learns once what to raise (every further one: debug).
    if (error != ENOMEM)
      return R::fail(report_error(error, "ibv_reg_mr(%zu bytes, access 0x%x)", rounded, access));
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VSOCK_LOG(kWarn, "rdma: cannot register %zu more bytes (ENOMEM: locked memory, ulimit -l, at %llu registered): "
                "connections stay on TCP while it lasts (fallback_no_resources)", rounded,
                static_cast<unsigned long long>(registered_bytes()));
    else
      VSOCK_LOG(kDebug, "rdma: ibv_reg_mr(%zu bytes): ENOMEM", rounded);
    return R::fail(ENOMEM);
  }
  note_registered(static_cast<int64_t>(rounded));
  return R::ok(std::move(region));
}

MemoryRegion::~MemoryRegion() { reset(); }

void MemoryRegion::reset() {
  if (mr_ != nullptr) {
    ForkGuard no_fork_now;
    int rc = ibv_dereg_mr(mr_);
    if (rc != 0) report_error(rc, "ibv_dereg_mr");
    note_registered(-static_cast<int64_t>(size_));
  }
  if (base_ != nullptr) ::munmap(base_, size_);
  mr_ = nullptr;
  base_ = nullptr;
  size_ = 0;
  access_ = 0;
}

MemoryRegion::MemoryRegion(MemoryRegion&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      access_(std::exchange(other.access_, 0)),
      mr_(std::exchange(other.mr_, nullptr)) {}

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    access_ = std::exchange(other.access_, 0);
    mr_ = std::exchange(other.mr_, nullptr);
  }
  return *this;
}

}  // namespace vsock::rdma
