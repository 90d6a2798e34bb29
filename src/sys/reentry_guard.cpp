#include "sys/reentry_guard.hpp"

namespace vsock::sys {

__thread int t_library_depth __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace vsock::sys
