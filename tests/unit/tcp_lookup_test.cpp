// tcp_connection_in_backlog (src/sock/upgrade/tcp_lookup.*): real loopback
// connections, found by their 4-tuple while still in the listener's backlog
// and not after accept(); a 4-tuple with no connection is not found.
#include "sock/upgrade/tcp_lookup.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace vsock::sock {
namespace {

struct Pair {
  int listener = -1, client = -1;
  sockaddr_in server_addr{}, client_addr{};
  ~Pair() {
    if (client >= 0) close(client);
    if (listener >= 0) close(listener);
  }
};

void make_pair(Pair& p, int family) {
  p.listener = socket(family, SOCK_STREAM, 0);
  ASSERT_GE(p.listener, 0);
  sockaddr_storage bind_addr{};
  socklen_t len;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&bind_addr);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&bind_addr);
    a->sin6_family = AF_INET6;  // dual stack, any: IPv4 clients appear mapped
    len = sizeof *a;
  }
  ASSERT_EQ(bind(p.listener, reinterpret_cast<sockaddr*>(&bind_addr), len), 0);
  ASSERT_EQ(listen(p.listener, 4), 0);
  sockaddr_storage bound{};
  len = sizeof bound;
  ASSERT_EQ(getsockname(p.listener, reinterpret_cast<sockaddr*>(&bound), &len), 0);
  p.server_addr.sin_family = AF_INET;
  p.server_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  p.server_addr.sin_port = family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port;
  p.client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(p.client, 0);
  ASSERT_EQ(connect(p.client, reinterpret_cast<sockaddr*>(&p.server_addr), sizeof p.server_addr), 0);
  len = sizeof p.client_addr;
  ASSERT_EQ(getsockname(p.client, reinterpret_cast<sockaddr*>(&p.client_addr), &len), 0);
}

core::Result<wire::UpgradeRequest> request_for(const Pair& p) {
  return wire::build_upgrade_request(reinterpret_cast<const sockaddr*>(&p.client_addr), sizeof p.client_addr,
                                     reinterpret_cast<const sockaddr*>(&p.server_addr), sizeof p.server_addr, 1);
}

TEST(TcpLookup, FindsAConnectionInTheBacklogNotAfterAccept) {
  Pair p;
  make_pair(p, AF_INET);
  core::Result<wire::UpgradeRequest> request = request_for(p);
  ASSERT_TRUE(request);
  EXPECT_TRUE(tcp_connection_in_backlog(request.value()));  // not accepted yet
  int accepted = accept(p.listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  EXPECT_FALSE(tcp_connection_in_backlog(request.value()));  // a process has it
  close(accepted);
}

TEST(TcpLookup, FindsAnIpv4ConnectionOnADualStackListener) {
  Pair p;
  make_pair(p, AF_INET6);
  core::Result<wire::UpgradeRequest> request = request_for(p);
  ASSERT_TRUE(request);
  EXPECT_TRUE(tcp_connection_in_backlog(request.value()));
}

TEST(TcpLookup, DoesNotFindAConnectionThatDoesNotExist) {
  Pair p;
  make_pair(p, AF_INET);
  core::Result<wire::UpgradeRequest> request = request_for(p);
  ASSERT_TRUE(request);
  wire::UpgradeRequest forged = request.value();
  forged.client.port = static_cast<uint16_t>(forged.client.port + 1);
  EXPECT_FALSE(tcp_connection_in_backlog(forged));
}

}  // namespace
}  // namespace vsock::sock
