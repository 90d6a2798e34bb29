// tcp_connection_in_backlog (src/sock/upgrade/tcp_lookup.*): real loopback
// connections, found by their 4-tuple while still in the listener's backlog
// and not after accept(); a 4-tuple with no connection is not found;
// tcp_listening_on sees a listening socket, also another process's copy.
#include "sock/upgrade/tcp_lookup.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

// tcp_listening_on: a listening socket of the address and port, in any
// process (here: a forked child's copy after ours is closed).
TEST(TcpLookup, SeesAListeningSocketOfTheAddressAndPortOnly) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  socklen_t len = sizeof at;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len), 0);
  EXPECT_FALSE(tcp_listening_on(reinterpret_cast<sockaddr*>(&at), sizeof at));  // bound, not listening
  ASSERT_EQ(listen(fd, 4), 0);
  EXPECT_TRUE(tcp_listening_on(reinterpret_cast<sockaddr*>(&at), sizeof at));
  sockaddr_in other = at;
  other.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2: another address, same port
  EXPECT_FALSE(tcp_listening_on(reinterpret_cast<sockaddr*>(&other), sizeof other));
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds its copy of the listener until told
    char c = 'r';
    (void)!write(ready[1], &c, 1);
    (void)!read(go[0], &c, 1);
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(fd);
  EXPECT_TRUE(tcp_listening_on(reinterpret_cast<sockaddr*>(&at), sizeof at));  // the child's copy
  ASSERT_EQ(write(go[1], "g", 1), 1);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(tcp_listening_on(reinterpret_cast<sockaddr*>(&at), sizeof at));
  for (int p : {ready[0], ready[1], go[0], go[1]}) close(p);
}

}  // namespace
}  // namespace vsock::sock
