/* Shared helpers of the conformance programs.
 *
 * Each program runs once on the kernel and once under LD_PRELOAD=libvsock.so;
 * run_conformance.sh compares the two stdout transcripts. So a program prints
 * only what is deterministic: return values that do not depend on fd numbers
 * or ports, errno names, byte counts, revents. It also checks its own
 * expectations and exits 1 on the first failed check (CT_FAIL), 77 to skip.
 *
 * The address the programs talk to is VSOCK_TEST_ADDR (IPv4, default
 * 127.0.0.1); every port is ephemeral (bind port 0 + getsockname). */
#ifndef VSOCK_CONFORMANCE_COMMON_H
#define VSOCK_CONFORMANCE_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#define CT_SKIP 77

/* Start a program: unbuffered stdout, a safety-net alarm, SIGPIPE ignored. */
void ct_start(const char* name);
/* One transcript line (a newline is added). */
void ct_out(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* Report a failed check on stdout and stderr and exit 1. */
_Noreturn void ct_fail_at(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define CT_FAIL(...) ct_fail_at(__FILE__, __LINE__, __VA_ARGS__)
/* Exit 77 with a reason on stdout. */
_Noreturn void ct_skip(const char* why);

const char* ct_errname(int err);
/* "POLLIN|POLLOUT" (static buffer, valid until the next call). */
const char* ct_poll_str(short revents);
const char* ct_epoll_str(uint32_t events);

/* Result checks. Each prints "label: <result>" and fails unless it matches.
 * CT_OK: the call must return >= 0; prints "ok" (never the value: fd numbers
 * and ports differ from run to run). CT_RC: the call must return exactly
 * `want`. CT_ERR: the call must fail with -1 and errno `want`. */
long ct_ok_at(const char* file, int line, const char* label, long rc, int err);
long ct_rc_at(const char* file, int line, const char* label, long rc, int err, long want);
void ct_err_at(const char* file, int line, const char* label, long rc, int err, int want);
#define CT_OK(label, expr) \
  ({ errno = 0; long ct_r_ = (long)(expr); ct_ok_at(__FILE__, __LINE__, (label), ct_r_, errno); })
#define CT_RC(label, expr, want) \
  ({ errno = 0; long ct_r_ = (long)(expr); ct_rc_at(__FILE__, __LINE__, (label), ct_r_, errno, (want)); })
#define CT_ERR(label, expr, want) \
  do { errno = 0; long ct_r_ = (long)(expr); ct_err_at(__FILE__, __LINE__, (label), ct_r_, errno, (want)); } while (0)
/* A boolean check: prints "check: text" when it holds, fails otherwise. */
#define CT_CHECK(cond, text) \
  do { if (!(cond)) CT_FAIL("check failed: %s (%s)", (text), #cond); ct_out("check: %s", (text)); } while (0)
/* Same, silent: for checks inside loops or whose wording is not stable. */
#define CT_ASSERT(cond) \
  do { if (!(cond)) CT_FAIL("assertion failed: %s (errno %s)", #cond, ct_errname(errno)); } while (0)

/* The test address with the given port (host order). */
struct sockaddr_in ct_addr(uint16_t port);
/* The port of a bound socket (host order). */
uint16_t ct_port_of(int fd);

/* Blocking sockets on the test address; each fails the test on error. */
int ct_tcp_listener(struct sockaddr_in* bound);
int ct_tcp_connect(const struct sockaddr_in* to);
/* A connected TCP pair through a fresh listener (closed before returning). */
void ct_tcp_pair(int* client, int* server);
int ct_udp_bound(struct sockaddr_in* bound);
/* The mixed set the poll/select/epoll programs watch: a connected TCP pair,
 * two bound UDP sockets (b_addr: where udp_b is bound), a pipe and a
 * nonblocking eventfd. Prints the pipe and eventfd steps. */
void ct_mixed_fds(int* client, int* server, int* udp_a, int* udp_b, struct sockaddr_in* b_addr, int pipefd[2],
                  int* efd);

/* poll() one fd for `events`, up to timeout_ms; returns revents (0 on timeout). */
short ct_wait(int fd, short events, int timeout_ms);
/* Fail unless fd becomes readable within 2 s. */
void ct_wait_readable(int fd);

/* One byte from `from` to `to` (waited for, checked); prints "WHAT: works". */
void ct_echo_byte(int from, int to, const char* what);

/* Blocking all-or-fail transfers on a stream. */
void ct_send_all(int fd, const void* buf, size_t len);
void ct_recv_all(int fd, void* buf, size_t len);
/* Fill with a deterministic pattern that depends on seed and offset. */
/* The sigmask tests' signal: installs a handler on SIGUSR1 that counts
 * (ct_usr1_count, ct_usr1_reset), sets *usr1 to {SIGUSR1} and blocks it
 * ("block SIGUSR1: 0"), leaving the mask before in *saved. */
void ct_usr1_block_counted(sigset_t* usr1, sigset_t* saved);
int ct_usr1_count(void);
void ct_usr1_reset(void);

void ct_pattern(unsigned char* buf, size_t len, unsigned seed, size_t offset);
int ct_pattern_ok(const unsigned char* buf, size_t len, unsigned seed, size_t offset);
/* Receives exactly `len` bytes and checks them against the pattern: 1 if
 * all came and match. Silent (usable in a child: its exit status tells). */
int ct_recv_pattern_ok(int fd, size_t len, unsigned seed, size_t offset);
/* Waits for the child `pid`; fails unless it exited 0, then prints
 * "<what>: child exited 0". */
void ct_expect_child_ok(pid_t pid, const char* what);

/* Milliseconds on CLOCK_MONOTONIC. */
long ct_now_ms(void);
void ct_sleep_ms(long ms);
/* 1 when libvsock is loaded in this process (reported on stderr only). */
int ct_library_loaded(void);

#endif
