// Log lines and the application's streams: a stderr that is a network
// connection (an inetd service's) gets no log line; a unix socket
// (journald's) and anything else do.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/log.hpp"

namespace vsock::core {
namespace {

// Runs `body` with fd 2 replaced by `fd`, then puts stderr back.
template <typename Body>
void with_stderr(int fd, Body body) {
  int saved = ::dup(2);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(::dup2(fd, 2), 2);
  body();
  ASSERT_EQ(::dup2(saved, 2), 2);
  ::close(saved);
}

TEST(Log, NoLineIntoAnInetConnectionOnStderr) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  socklen_t len = sizeof at;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  int client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  int server = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);

  with_stderr(client, [] {
    static const char kLine[] = "libvsock: a stats line\n";
    log_write_line(kLine, sizeof kLine - 1);
    log_message(LogLevel::kError, "an error line");
  });
  // Nothing came: the peer's stream is the application's alone.
  ASSERT_EQ(::shutdown(client, SHUT_WR), 0);
  char buf[256];
  ssize_t n = ::recv(server, buf, sizeof buf, 0);
  EXPECT_EQ(n, 0) << "the log wrote into the connection: " << std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  ::close(server);
  ::close(client);
  ::close(listener);
}

TEST(Log, LinesGoToAUnixSocketOnStderr) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  with_stderr(pair[0], [] {
    static const char kLine[] = "libvsock: a stats line\n";
    log_write_line(kLine, sizeof kLine - 1);
  });
  char buf[256];
  ssize_t n = ::recv(pair[1], buf, sizeof buf, MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "libvsock: a stats line\n");
  ::close(pair[0]);
  ::close(pair[1]);
}

}  // namespace
}  // namespace vsock::core
