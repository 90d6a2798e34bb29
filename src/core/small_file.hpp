// Reading a small file (a configuration file, a sysfs attribute) whole.
#pragma once
#include <string>

namespace vsock::core {

// Appends the file's bytes (at most about 1 MiB) to *out, with raw system
// calls: read() and close() are the library's own interposed calls, and
// this runs from constructors and the device probe alike. False if the
// file cannot be opened or a read fails.
bool read_small_file(const char* path, std::string* out);

}  // namespace vsock::core
