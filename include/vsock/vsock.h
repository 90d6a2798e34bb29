/* libvsock public C API: what a program (or a tool) may ask the preloaded
 * library directly. Everything else libvsock exports is an interposed libc
 * call. Look these up with dlsym(RTLD_DEFAULT, "vsock_version") so a program
 * runs with or without the library. */
#ifndef VSOCK_VSOCK_H
#define VSOCK_VSOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VSOCK_VERSION_MAJOR 0
#define VSOCK_VERSION_MINOR 1
#define VSOCK_VERSION_PATCH 0

/* "0.1.0" */
const char* vsock_version(void);

/* Process-wide counters. Fields are only ever appended. */
struct vsock_stats {
  uint64_t tcp_sockets;        /* TCP sockets created or accepted */
  uint64_t udp_sockets;        /* UDP sockets created */
  uint64_t other_sockets;      /* any other family or type: always kernel */
  uint64_t kernel_by_rule;     /* inet sockets kept on the kernel by a rule or setting */
  uint64_t kernel_no_device;   /* inet sockets kept on the kernel: no verbs device */
  uint64_t device_opened;      /* 1 once a verbs device was opened */
  uint64_t forks;              /* fork()/daemon() calls that created a child */
};

/* Copies at most `size` bytes of the counters into `out`; returns the number
 * of bytes the library's struct has (so a caller can tell what it got). */
size_t vsock_stats_snapshot(struct vsock_stats* out, size_t size);

#ifdef __cplusplus
}
#endif
#endif
