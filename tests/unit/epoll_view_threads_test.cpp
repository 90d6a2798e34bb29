// The epoll views (src/sock/wait/epoll_view.hpp) under threads, called directly
// rather than through the interposed libc names, so that ThreadSanitizer
// sees the library's locks (label threads). TCP pairs on loopback that the
// registry tracks, as the entry points would register them: several
// threads wait on one set and on a set nested in another while others
// write, modify the set and close dups of registered sockets. Nothing may
// be lost: every byte written is read by some waiter. Bounded in count and
// time.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "sock/registry.hpp"
#include "sock/wait/wait_engine.hpp"

namespace vsock::sock {
namespace {

constexpr int kPairs = 6;
constexpr int kBytesPerPair = 200;

struct Pair {
  int reader;  // registered in the epoll set
  int writer;
};

// A connected loopback TCP pair; the reader registered as the entry points
// register an accepted socket.
Pair tcp_pair() {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(listener, 1), 0);
  EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int writer = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(::connect(writer, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  int reader = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK);
  ::close(listener);
  register_socket(reader, AF_INET, SOCK_STREAM, 0, SocketRole::kAccepted);
  return Pair{reader, writer};
}

void close_tracked(int fd) {
  epoll_closing(fd);
  forget_fd(fd);
  epoll_forget(fd);
  ::close(fd);
}

TEST(EpollViewThreads, WaitersOnSharedAndNestedSetsLoseNothing) {
  const int ep = ::epoll_create1(0);
  const int outer = ::epoll_create1(0);
  ASSERT_GE(ep, 0);
  ASSERT_GE(outer, 0);
  epoll_created(ep);
  epoll_created(outer);
  std::vector<Pair> pairs;
  for (int i = 0; i < kPairs; ++i) {
    pairs.push_back(tcp_pair());
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u32 = static_cast<uint32_t>(i);
    ASSERT_EQ(epoll_control(ep, EPOLL_CTL_ADD, pairs.back().reader, &event), 0);
  }
  epoll_event nested{};
  nested.events = EPOLLIN;
  ASSERT_EQ(epoll_control(outer, EPOLL_CTL_ADD, ep, &nested), 0);
  ASSERT_TRUE(epoll_has_view(ep));
  ASSERT_TRUE(epoll_has_view(outer));

  std::atomic<int> read_total{0};
  std::atomic<bool> stop{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // The fds the waiters read from. Pair 1's is a dup that stays open, so
  // that the churn thread can close the number registered in the set.
  std::vector<int> readers;
  for (const Pair& p : pairs) readers.push_back(p.reader);
  readers[1] = ::dup(pairs[1].reader);
  share_fd(pairs[1].reader, readers[1]);
  auto drain = [&](int index) {
    char buffer[64];
    for (;;) {
      ssize_t n = ::recv(readers[index], buffer, sizeof buffer, MSG_DONTWAIT);
      if (n <= 0) return;
      read_total += static_cast<int>(n);
    }
  };
  // Waiters in the set itself.
  auto set_waiter = [&] {
    while (!stop && std::chrono::steady_clock::now() < deadline) {
      epoll_event events[4];
      const timespec slice{0, 5 * 1000000L};
      int n = epoll_wait_all(ep, events, 4, &slice, nullptr);
      for (int i = 0; i < n; ++i) drain(static_cast<int>(events[i].data.u32));
    }
  };
  // A waiter on the outer set, then on the inner one through poll.
  auto nested_waiter = [&] {
    while (!stop && std::chrono::steady_clock::now() < deadline) {
      epoll_event event;
      const timespec slice{0, 5 * 1000000L};
      if (epoll_wait_all(outer, &event, 1, &slice, nullptr) > 0) {
        pollfd p{ep, POLLIN, 0};
        const timespec zero{0, 0};
        if (wait_poll(&p, 1, &zero, nullptr) == 1) {
          for (int i = 0; i < kPairs; ++i) drain(i);
        }
      }
    }
  };
  // A thread that keeps modifying one entry and moving another to a new
  // number, closing the registered one: the registration lives on through
  // the dups, as the kernel's.
  auto churn = [&] {
    int registered = pairs[1].reader;
    for (int round = 0; round < 100 && !stop && std::chrono::steady_clock::now() < deadline; ++round) {
      epoll_event event{};
      event.events = EPOLLIN | (round % 2 ? static_cast<uint32_t>(EPOLLET) : 0u);
      event.data.u32 = 0;
      EXPECT_EQ(epoll_control(ep, EPOLL_CTL_MOD, pairs[0].reader, &event), 0);
      int copy = ::dup(registered);
      share_fd(registered, copy);
      close_tracked(registered);
      registered = copy;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    close_tracked(registered);
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back(set_waiter);
  threads.emplace_back(nested_waiter);
  threads.emplace_back(churn);
  for (int byte = 0; byte < kBytesPerPair; ++byte) {
    for (const Pair& p : pairs) ASSERT_EQ(::send(p.writer, "x", 1, 0), 1);
    if (byte % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // overlap the churn
  }
  while (read_total < kPairs * kBytesPerPair && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(read_total.load(), kPairs * kBytesPerPair);

  for (int i = 0; i < kPairs; ++i) {
    close_tracked(readers[i]);
    ::close(pairs[i].writer);
  }
  close_tracked(outer);
  close_tracked(ep);
}

TEST(EpollViewThreads, SetsCreatedAndClosedWhileOthersWait) {
  Pair pair = tcp_pair();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto cycle = [&] {
    for (int round = 0; round < 100 && std::chrono::steady_clock::now() < deadline; ++round) {
      int ep = ::epoll_create1(0);
      ASSERT_GE(ep, 0);
      epoll_created(ep);
      epoll_event event{};
      event.events = EPOLLOUT;
      ASSERT_EQ(epoll_control(ep, EPOLL_CTL_ADD, pair.reader, &event), 0);
      epoll_event out;
      const timespec zero{0, 0};
      EXPECT_EQ(epoll_wait_all(ep, &out, 1, &zero, nullptr), 1);  // writable
      close_tracked(ep);
    }
  };
  std::thread a(cycle), b(cycle), c(cycle);
  a.join();
  b.join();
  c.join();
  close_tracked(pair.reader);
  ::close(pair.writer);
}

}  // namespace
}  // namespace vsock::sock
