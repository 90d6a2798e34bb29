// What the entry points do to UDP sockets (DESIGN decision 5): the moments
// of a datagram socket's life where the library steps in. The calls that
// move data go through the ManagedSocket interface (socket_route.hpp).
#pragma once
#include <sys/socket.h>

#include "sock/socket_state.hpp"

namespace vsock::sock::dgram {

// A UDP socket was created (socket()): it gets its DatagramSocket unless
// it stays on the kernel for good (settings, no device).
void on_datagram_created(SocketState* state);
// bind() succeeded: an explicit port makes it reachable over UD, if the
// rules let UDP on that address and port leave the kernel.
void on_datagram_bound(int fd, SocketState* state);
// connect() succeeded (AF_UNSPEC included).
void on_datagram_connected(int fd, SocketState* state, const sockaddr* peer, socklen_t length);
// setsockopt() went through. Options that ask for control messages on
// receive are answered for UD datagrams too (receive_controls.hpp); one
// that shapes what is sent (IP_TOS, IP_TTL, ...) sends the socket's
// datagrams through the kernel; one UD cannot honour at all makes the
// socket leave UD.
bool is_datagram_option(int level, int name);
void on_datagram_option(int fd, SocketState* state, int level, int name);
// The multicast options (memberships, source filters, IP_MULTICAST_LOOP,
// _TTL, _IF, _ALL) setsockopt() set on the kernel socket: the socket stays
// on UD; for groups in udp_mcast_offload the process joins over UD too
// (multicast_offload.hpp). `value` is what the application passed.
bool is_datagram_multicast_option(int level, int name);
void on_datagram_multicast_option(int fd, SocketState* state, int level, int name, const void* value,
                                  socklen_t length);
// The socket goes to another process (fork, vfork, daemon, SCM_RIGHTS):
// every socket / the one of `fd` leaves UD in this process.
void leave_all_datagram_sockets();
void leave_datagram_fd(int fd);
// In a fork() child: the inherited sockets are the kernel's alone.
void abandon_datagram_sockets_in_child();
// At exit: waits (bounded) until the datagrams sent over UD have left.
void finish_datagrams_at_exit();
// The registry dropped the last reference (the socket is closed).
void on_datagram_released(SocketState* state);

}  // namespace vsock::sock::dgram
