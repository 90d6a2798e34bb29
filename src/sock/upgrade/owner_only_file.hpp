// Files in /dev/shm that this user's processes share and nobody else may
// open (the named rendezvous boards, the table of plain peers): checked
// before they are mapped, made whole under a private name, then published
// under their real name with link(), which fails if another process
// published one first.
#pragma once
#include <sys/stat.h>

#include <cstddef>

namespace vsock::sock::owner_only {

constexpr const char* kDirectory = "/dev/shm";

// Maps `size` bytes of fd, shared, if it is a regular file of our
// effective uid that no other user may open, of exactly that size
// (`fresh`: sized here first). Null otherwise. *status, if given, gets
// the file's stat.
void* map(int fd, size_t size, bool fresh, struct stat* status = nullptr);

// Opens the published file `name` (never through a symlink). Returns its
// fd, or -1 with errno; map() says whether it may be used.
int open_published(const char* name);

// Creates the private file `temporary` (it must not exist; mode 0600).
// Returns its fd, or -1.
int create(const char* temporary);

// Links `temporary` to `name`, then removes `temporary`. Returns 0, or
// the errno of link() (EEXIST: another process published `name` first).
int publish(const char* temporary, const char* name);

}  // namespace vsock::sock::owner_only
