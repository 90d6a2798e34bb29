// load_verbs() for programs linked with libibverbs and librdmacm (the test
// programs, the static libraries). libvsock.so defines it in verbs_lazy.cpp
// instead; this archive member is then never pulled in.
#include "rdma/verbs_loader.hpp"

namespace vsock::rdma {

bool load_verbs() { return true; }

}  // namespace vsock::rdma
