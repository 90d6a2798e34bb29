// The listener boards of one process (src/sock/upgrade/listener_boards.*):
// a later SO_REUSEPORT listener of a port finds the board a live listener
// of this process has on it (and joins it), and closing one listener of
// the port hands its rdma_cm key on to another, so the board and its
// rdma_cm side last while any listener of the port in this process does.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock/upgrade/listener_boards.hpp"

namespace vsock::sock {
namespace {

sockaddr_in address(uint16_t port) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  in.sin_addr.s_addr = htonl(0x0a000002);  // 10.0.0.2
  return in;
}

std::shared_ptr<RendezvousBoard> board_on(uint16_t port) {
  std::shared_ptr<RendezvousBoard> board = RendezvousBoard::create();
  sockaddr_in at = address(port);
  board->set_address(reinterpret_cast<sockaddr*>(&at), sizeof at);
  return board;
}

std::shared_ptr<RendezvousBoard> live_on(uint16_t port) {
  sockaddr_in at = address(port);
  return live_listener_board(reinterpret_cast<sockaddr*>(&at), sizeof at);
}

TEST(ListenerBoards, ALaterListenerOfThePortFindsTheLiveBoard) {
  SocketState first;
  first.listen_key = 7;
  std::shared_ptr<RendezvousBoard> board = board_on(8080);
  remember_listener_board(&first, board, 5);
  EXPECT_EQ(live_on(8080), board);
  EXPECT_EQ(live_on(8081), nullptr);  // another port
  ReleasedBoard released = release_listener_board(&first, 7);
  EXPECT_EQ(released.board, board);
  EXPECT_FALSE(released.still_used);
  EXPECT_EQ(live_on(8080), nullptr);  // closed: a new listen() makes a new board
}

TEST(ListenerBoards, ClosingTheRdmaCmListenerHandsItsKeyOn) {
  SocketState first, second;
  first.listen_key = 7;
  second.listen_key = kJoinedBoardKey;
  std::shared_ptr<RendezvousBoard> board = board_on(8082);
  remember_listener_board(&first, board, 5);
  remember_listener_board(&second, board, 6);
  first.listen_key = 0;  // as on_socket_released() does before
  ReleasedBoard released = release_listener_board(&first, 7);
  EXPECT_TRUE(released.still_used);
  EXPECT_EQ(released.heir_fd, 6);
  EXPECT_EQ(second.listen_key.load(), 7u);
  EXPECT_EQ(live_on(8082), board);
  second.listen_key = 0;
  released = release_listener_board(&second, 7);
  EXPECT_FALSE(released.still_used);  // the last one: its rdma_cm side stops
  EXPECT_EQ(live_on(8082), nullptr);
}

TEST(ListenerBoards, ClosingAJoinedListenerLeavesTheOthersAlone) {
  SocketState first, second;
  first.listen_key = 7;
  second.listen_key = kJoinedBoardKey;
  std::shared_ptr<RendezvousBoard> board = board_on(8083);
  remember_listener_board(&first, board, 5);
  remember_listener_board(&second, board, 6);
  second.listen_key = 0;
  ReleasedBoard released = release_listener_board(&second, kJoinedBoardKey);
  EXPECT_TRUE(released.still_used);
  EXPECT_EQ(released.heir_fd, -1);
  EXPECT_EQ(first.listen_key.load(), 7u);
  first.listen_key = 0;
  EXPECT_FALSE(release_listener_board(&first, 7).still_used);
}

TEST(ListenerBoards, AnHeirBeingClosedItselfTakesNothing) {
  SocketState first, second;
  first.listen_key = 7;
  second.listen_key = kJoinedBoardKey;
  std::shared_ptr<RendezvousBoard> board = board_on(8084);
  remember_listener_board(&first, board, 5);
  remember_listener_board(&second, board, 6);
  second.listen_key = 0;  // its close has begun: its release follows
  first.listen_key = 0;
  EXPECT_FALSE(release_listener_board(&first, 7).still_used);
  EXPECT_EQ(second.listen_key.load(), 0u);
  EXPECT_TRUE(release_listener_board(&second, kJoinedBoardKey).board != nullptr);
}

TEST(ListenerBoards, ABoardWhoseOwnerIsGoneIsNotJoined) {
  SocketState first;
  first.listen_key = kJoinedBoardKey;
  std::shared_ptr<RendezvousBoard> board = board_on(8085);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  board->set_owner(static_cast<uint32_t>(child));
  remember_listener_board(&first, board, 5);
  EXPECT_EQ(live_on(8085), nullptr);
  first.listen_key = 0;
  release_listener_board(&first, kJoinedBoardKey);
}

}  // namespace
}  // namespace vsock::sock
