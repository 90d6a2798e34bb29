// Status and the one failure path of the verbs layer.
//
// core::Result<T> has no void form, so operations that only succeed or fail
// return Status (a Result<bool> whose value means nothing). report_error() is
// where a failure is logged: each failure is logged once, where it starts,
// and callers only pass the errno up.
#pragma once
#include "core/result.hpp"

namespace vsock::rdma {

using Status = core::Result<bool>;

inline Status ok_status() { return Status::ok(true); }

// Logs "rdma: <formatted text>: <errno text>" at error level and returns
// the errno to put in a failed Result. Some verbs calls fail without setting
// errno; an error <= 0 becomes EIO so a failure never looks like success.
int report_error(int error, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace vsock::rdma
