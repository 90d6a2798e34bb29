// What the many-connection benchmarks share (vsock_fork_cost,
// vsock_idle_epoll): the address, CPU pinning, the fd limit, and an echo
// server with one thread and one epoll set holding every connection, the
// shape of an event-loop server (redis, nginx's worker).
#pragma once
#include <netinet/in.h>

#include <string>
#include <vector>

namespace bench {

// Prints "PROGRAM: WHAT: strerror(errno)" and exits 1.
[[noreturn]] void die(const char* program, const char* what);
double now_us();
// IPv4 ADDR:PORT; exits on a bad address.
sockaddr_in ipv4_address(const char* program, const std::string& addr, int port);
// cpu < 0: left as it is.
void pin_to_cpu(const char* program, int cpu);
// The soft RLIMIT_NOFILE raised to the hard one.
void raise_fd_limit();
// Listens on ADDR:PORT (0: any free port), prints "READY <port>", then one
// thread echoes whatever each connection sends (epoll_wait, then read and
// write back) until SIGTERM or SIGINT.
int run_epoll_echo_server(const char* program, const std::string& addr, int port, int cpu);
// One SIZE-byte request and its echo, checked byte for byte; false on an
// error, a timeout (the socket's) or a wrong echo.
bool echo_once(int fd, size_t size);
// socket, 5 s timeouts, TCP_NODELAY, connect, then echo_once(64 B) (so that
// under libvsock the connection is upgraded); -1 with errno on failure.
int open_echo_connection(const sockaddr_in& to);
// The q-quantile (0..1) of v; -1 when v is empty.
double percentile(std::vector<double> v, double q);

}  // namespace bench
