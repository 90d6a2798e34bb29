// Result<T>: a value or an errno, the only way internals report failure.
// Only the extern "C" entry points turn a failed Result into -1 and errno
// (DESIGN decision 7); nothing here throws.
#pragma once
#include <utility>

namespace vsock::core {

template <class T>
class Result {
 public:
  static Result ok(T value) { return Result(std::move(value), 0); }
  static Result fail(int error) { return Result(T{}, error); }

  bool has_value() const { return error_ == 0; }
  explicit operator bool() const { return has_value(); }
  int error() const { return error_; }
  const T& value() const { return value_; }
  T& value() { return value_; }
  T value_or(T other) const { return has_value() ? value_ : other; }

 private:
  Result(T value, int error) : value_(std::move(value)), error_(error) {}
  T value_;
  int error_;
};

}  // namespace vsock::core
