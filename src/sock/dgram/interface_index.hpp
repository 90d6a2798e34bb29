// The index of the network interface that holds a local address: what
// IP_PKTINFO / IPV6_PKTINFO report for a datagram that came over UD (the
// GRH names the destination address, not the interface). Looked up with
// getifaddrs() once per address and cached; 0 when no interface has it.
#pragma once
#include <sys/socket.h>

namespace vsock::sock::dgram {

// `address`: AF_INET or AF_INET6, port ignored. Thread-safe.
int interface_index_of(const sockaddr_storage& address);

}  // namespace vsock::sock::dgram
