// Where libibverbs and librdmacm come from.
//
// libvsock.so does not link them: every process the library is preloaded
// into would map them at start (with libnl-3 and libnl-route-3, whose
// constructors run too), about 20 ms under the Soft-RoCE bed's emulation,
// though most processes never upgrade a socket (docs/performance.md,
// "Process start and fork cost"). It carries its own definitions of the
// verbs and rdma_cm calls it makes (verbs_lazy.cpp, hidden by the version
// script), which load both libraries at the first call — in practice the
// device probe — and forward to them. The library's static parts
// (vsock_rdma and above) and the test programs link the two libraries as
// usual (verbs_linked.cpp), and there load_verbs() has nothing to do.
#pragma once

namespace vsock::rdma {

// True once libibverbs and librdmacm are usable (loaded, every call the
// library makes found); false if they are not installed or lack a call
// (then no device is ever opened and every socket stays on the kernel).
// Thread-safe; decided once per process.
bool load_verbs();

}  // namespace vsock::rdma
