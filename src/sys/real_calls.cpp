#include "sys/real_calls.hpp"

#include <dlfcn.h>

namespace vsock::sys {
namespace {

RealCalls resolve_all() {
  RealCalls calls{};
#define VSOCK_REAL_RESOLVE(name, ret, params) \
  calls.name = reinterpret_cast<ret(*) params>(::dlsym(RTLD_NEXT, #name));
  VSOCK_REAL_CALLS(VSOCK_REAL_RESOLVE)
#undef VSOCK_REAL_RESOLVE
  return calls;
}

}  // namespace

const RealCalls& real() {
  // A function-local static: initialised on the first call from whichever
  // thread gets here first, even before this library's constructors.
  static const RealCalls calls = resolve_all();
  return calls;
}

}  // namespace vsock::sys
