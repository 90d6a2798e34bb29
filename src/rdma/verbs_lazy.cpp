// libvsock.so's own definitions of the libibverbs and librdmacm calls the
// library makes, which load both libraries at the first call and forward
// to them (why: verbs_loader.hpp). Compiled into libvsock.so only; its
// version script keeps these names out of the dynamic symbol table, so
// they never stand in for the application's own verbs calls, and
// librdmacm's calls into libibverbs go to libibverbs itself.
//
// Each call is looked up with the symbol version the headers the library
// was built with bind to (dlvsym), as the linker would have recorded it.
// A call made before the libraries could be loaded fails as a missing
// device would: ENOSYS, a null pointer, -1.
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <new>
#include <type_traits>

#include "core/log.hpp"
#include "rdma/verbs_loader.hpp"

// Every call: result type, name, library, symbol version, parameters, arguments.
#define VSOCK_VERBS_CALLS(X)                                                                                        \
  X(int, _ibv_query_gid_ex, kVerbs, "IBVERBS_1.11",                                                                 \
    (ibv_context * a, uint32_t b, uint32_t c, ibv_gid_entry* d, uint32_t e, size_t f), (a, b, c, d, e, f))           \
  X(void, ibv_ack_cq_events, kVerbs, "IBVERBS_1.1", (ibv_cq * a, unsigned int b), (a, b))                           \
  X(ibv_pd*, ibv_alloc_pd, kVerbs, "IBVERBS_1.1", (ibv_context * a), (a))                                           \
  X(int, ibv_attach_mcast, kVerbs, "IBVERBS_1.1", (ibv_qp * a, const ibv_gid* b, uint16_t c), (a, b, c))            \
  X(int, ibv_close_device, kVerbs, "IBVERBS_1.1", (ibv_context * a), (a))                                           \
  X(ibv_ah*, ibv_create_ah, kVerbs, "IBVERBS_1.1", (ibv_pd * a, ibv_ah_attr* b), (a, b))                            \
  X(ibv_ah*, ibv_create_ah_from_wc, kVerbs, "IBVERBS_1.1", (ibv_pd * a, ibv_wc* b, ibv_grh* c, uint8_t d),           \
    (a, b, c, d))                                                                                                   \
  X(ibv_comp_channel*, ibv_create_comp_channel, kVerbs, "IBVERBS_1.0", (ibv_context * a), (a))                      \
  X(ibv_cq*, ibv_create_cq, kVerbs, "IBVERBS_1.1", (ibv_context * a, int b, void* c, ibv_comp_channel* d, int e),    \
    (a, b, c, d, e))                                                                                                \
  X(ibv_qp*, ibv_create_qp, kVerbs, "IBVERBS_1.1", (ibv_pd * a, ibv_qp_init_attr* b), (a, b))                       \
  X(int, ibv_dealloc_pd, kVerbs, "IBVERBS_1.1", (ibv_pd * a), (a))                                                  \
  X(int, ibv_dereg_mr, kVerbs, "IBVERBS_1.1", (ibv_mr * a), (a))                                                    \
  X(int, ibv_destroy_ah, kVerbs, "IBVERBS_1.1", (ibv_ah * a), (a))                                                  \
  X(int, ibv_destroy_comp_channel, kVerbs, "IBVERBS_1.0", (ibv_comp_channel * a), (a))                              \
  X(int, ibv_destroy_cq, kVerbs, "IBVERBS_1.1", (ibv_cq * a), (a))                                                  \
  X(int, ibv_destroy_qp, kVerbs, "IBVERBS_1.1", (ibv_qp * a), (a))                                                  \
  X(int, ibv_detach_mcast, kVerbs, "IBVERBS_1.1", (ibv_qp * a, const ibv_gid* b, uint16_t c), (a, b, c))            \
  X(int, ibv_fork_init, kVerbs, "IBVERBS_1.1", (void), ())                                                          \
  X(void, ibv_free_device_list, kVerbs, "IBVERBS_1.1", (ibv_device * *a), (a))                                      \
  X(int, ibv_get_cq_event, kVerbs, "IBVERBS_1.1", (ibv_comp_channel * a, ibv_cq** b, void** c), (a, b, c))          \
  X(ibv_device**, ibv_get_device_list, kVerbs, "IBVERBS_1.1", (int* a), (a))                                        \
  X(const char*, ibv_get_device_name, kVerbs, "IBVERBS_1.1", (ibv_device * a), (a))                                 \
  X(ibv_fork_status, ibv_is_fork_initialized, kVerbs, "IBVERBS_1.13", (void), ())                                   \
  X(int, ibv_modify_qp, kVerbs, "IBVERBS_1.1", (ibv_qp * a, ibv_qp_attr* b, int c), (a, b, c))                      \
  X(ibv_context*, ibv_open_device, kVerbs, "IBVERBS_1.1", (ibv_device * a), (a))                                    \
  X(int, ibv_query_device, kVerbs, "IBVERBS_1.1", (ibv_context * a, ibv_device_attr* b), (a, b))                    \
  X(int, ibv_query_gid, kVerbs, "IBVERBS_1.1", (ibv_context * a, uint8_t b, int c, ibv_gid* d), (a, b, c, d))       \
  X(int, ibv_query_port, kVerbs, "IBVERBS_1.1", (ibv_context * a, uint8_t b, _compat_ibv_port_attr* c), (a, b, c))  \
  X(int, ibv_query_qp, kVerbs, "IBVERBS_1.1", (ibv_qp * a, ibv_qp_attr* b, int c, ibv_qp_init_attr* d),             \
    (a, b, c, d))                                                                                                   \
  /* ibv_reg_mr: what verbs.h's macro of that name calls when not optimised */                                  \
  X(ibv_mr*, ibv_reg_mr, kVerbs, "IBVERBS_1.1", (ibv_pd * a, void* b, size_t c, int d), (a, b, c, d))               \
  X(ibv_mr*, ibv_reg_mr_iova2, kVerbs, "IBVERBS_1.8", (ibv_pd * a, void* b, size_t c, uint64_t d, unsigned int e),  \
    (a, b, c, d, e))                                                                                                \
  X(const char*, ibv_wc_status_str, kVerbs, "IBVERBS_1.1", (ibv_wc_status a), (a))                                  \
  X(int, rdma_accept, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, rdma_conn_param* b), (a, b))                          \
  X(int, rdma_ack_cm_event, kRdmaCm, "RDMACM_1.0", (rdma_cm_event * a), (a))                                        \
  X(int, rdma_bind_addr, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, sockaddr* b), (a, b))                              \
  X(int, rdma_connect, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, rdma_conn_param* b), (a, b))                         \
  X(rdma_event_channel*, rdma_create_event_channel, kRdmaCm, "RDMACM_1.0", (void), ())                              \
  X(int, rdma_create_id, kRdmaCm, "RDMACM_1.0", (rdma_event_channel * a, rdma_cm_id** b, void* c, rdma_port_space d), \
    (a, b, c, d))                                                                                                   \
  X(void, rdma_destroy_event_channel, kRdmaCm, "RDMACM_1.0", (rdma_event_channel * a), (a))                         \
  X(int, rdma_destroy_id, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a), (a))                                             \
  X(int, rdma_disconnect, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a), (a))                                             \
  X(int, rdma_establish, kRdmaCm, "RDMACM_1.2", (rdma_cm_id * a), (a))                                              \
  X(const char*, rdma_event_str, kRdmaCm, "RDMACM_1.0", (rdma_cm_event_type a), (a))                                \
  X(int, rdma_get_cm_event, kRdmaCm, "RDMACM_1.0", (rdma_event_channel * a, rdma_cm_event** b), (a, b))             \
  X(__be16, rdma_get_src_port, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a), (a))                                        \
  X(int, rdma_init_qp_attr, kRdmaCm, "RDMACM_1.2", (rdma_cm_id * a, ibv_qp_attr* b, int* c), (a, b, c))             \
  X(int, rdma_join_multicast_ex, kRdmaCm, "RDMACM_1.1", (rdma_cm_id * a, rdma_cm_join_mc_attr_ex* b, void* c),      \
    (a, b, c))                                                                                                      \
  X(int, rdma_leave_multicast, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, sockaddr* b), (a, b))                        \
  X(int, rdma_listen, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, int b), (a, b))                                       \
  X(int, rdma_reject, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, const void* b, uint8_t c), (a, b, c))                 \
  X(int, rdma_resolve_addr, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, sockaddr* b, sockaddr* c, int d), (a, b, c, d)) \
  X(int, rdma_resolve_route, kRdmaCm, "RDMACM_1.0", (rdma_cm_id * a, int b), (a, b))

// Each name is written in parentheses (ibv_query_port is also a
// function-like macro of verbs.h), which GCC finds unnecessary for the others.
#pragma GCC diagnostic ignored "-Wparentheses"

namespace vsock::rdma {
namespace {

enum Library { kVerbs, kRdmaCm };

// The looked-up calls.
struct Calls {
#define VSOCK_VERBS_MEMBER(result, name, library, version, params, args) result(*(name)) params = nullptr;
  VSOCK_VERBS_CALLS(VSOCK_VERBS_MEMBER)
#undef VSOCK_VERBS_MEMBER
};

Calls g_calls;
// 0 not tried yet, 1 loaded, -1 not usable. Written under g_load_lock.
std::atomic<int> g_state{0};
std::mutex g_load_lock;

void forget_lock_in_child() {
  new (&g_load_lock) std::mutex();  // another thread may have held it at fork
}

__attribute__((constructor)) void install_verbs_fork_handler() {
  pthread_atfork(nullptr, nullptr, forget_lock_in_child);
}

bool load_all() {
  // RTLD_LOCAL: nothing of theirs becomes visible to the application's
  // own symbol lookups. Never closed.
  void* libraries[2] = {::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL),
                        ::dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL)};
  if (libraries[kVerbs] == nullptr || libraries[kRdmaCm] == nullptr) {
    VSOCK_LOG(kInfo, "libibverbs or librdmacm cannot be loaded (%s): every socket stays on the kernel", dlerror());
    return false;
  }
  bool complete = true;
#define VSOCK_VERBS_LOOKUP(result, name, library, version, params, args)                                 \
  (g_calls.name) = reinterpret_cast<result(*) params>(::dlvsym(libraries[library], #name, version));    \
  if ((g_calls.name) == nullptr) {                                                                       \
    VSOCK_LOG(kInfo, "%s@%s not found: every socket stays on the kernel", #name, version);               \
    complete = false;                                                                                    \
  }
  VSOCK_VERBS_CALLS(VSOCK_VERBS_LOOKUP)
#undef VSOCK_VERBS_LOOKUP
  return complete;
}

// What a call answers when the libraries are not usable.
template <class T>
T unavailable() {
  errno = ENOSYS;
  if constexpr (std::is_void_v<T>) {
    return;
  } else if constexpr (std::is_same_v<T, const char*>) {
    return "unknown";
  } else if constexpr (std::is_pointer_v<T> || std::is_enum_v<T>) {
    return T{};
  } else {
    return static_cast<T>(-1);
  }
}

}  // namespace

bool load_verbs() {
  int state = g_state.load(std::memory_order_acquire);
  if (state != 0) return state > 0;
  std::lock_guard<std::mutex> held(g_load_lock);
  state = g_state.load(std::memory_order_relaxed);
  if (state == 0) {
    state = load_all() ? 1 : -1;
    g_state.store(state, std::memory_order_release);
  }
  return state > 0;
}

}  // namespace vsock::rdma

// The definitions the library's calls bind to.
#define VSOCK_VERBS_DEFINE(result, name, library, version, params, args) \
  extern "C" result(name) params {                                      \
    if (!vsock::rdma::load_verbs()) return vsock::rdma::unavailable<result>(); \
    return (vsock::rdma::g_calls.name) args;                           \
  }
VSOCK_VERBS_CALLS(VSOCK_VERBS_DEFINE)
#undef VSOCK_VERBS_DEFINE
