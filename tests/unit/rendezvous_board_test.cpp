// RendezvousBoard (src/sock/upgrade/rendezvous_board.*): claims by 4-tuple,
// renewal, expiry, a full board, release by the claimer only, canonical
// keys of requests and accepted sockets, and a claim written by a forked
// child seen by its parent through the shared mapping.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include "sock/upgrade/rendezvous_board.hpp"

namespace vsock::sock {
namespace {

ConnectionKey key(uint16_t client_port) {
  ConnectionKey k;
  k.family = wire::kFamilyIpv4;
  k.client.ip[0] = 10;
  k.client.port = client_port;
  k.server.ip[0] = 10;
  k.server.ip[3] = 2;
  k.server.port = 80;
  return k;
}

class BoardTest : public ::testing::Test {
 protected:
  BoardMemory memory_;
  std::unique_ptr<RendezvousBoard> board_ = RendezvousBoard::over(&memory_);
};

TEST_F(BoardTest, FindsTheClaimOfItsConnectionOnly) {
  ASSERT_TRUE(board_->claim(key(1000), Claim{42, 5555}, 0, 100));
  std::optional<Claim> found = board_->find(key(1000), 10, 100);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->pid, 42u);
  EXPECT_EQ(found->port, 5555);
  EXPECT_FALSE(board_->find(key(1001), 10, 100));
}

TEST_F(BoardTest, ClaimsExpireAndFreeTheirSlot) {
  ASSERT_TRUE(board_->claim(key(1000), Claim{42, 5555}, 0, 100));
  EXPECT_FALSE(board_->find(key(1000), 100, 100));
  for (uint16_t i = 0; i < kBoardSlots; ++i) ASSERT_TRUE(board_->claim(key(2000 + i), Claim{7, 1}, 200, 100));
  EXPECT_FALSE(board_->claim(key(9999), Claim{7, 1}, 250, 100)) << "full of live claims";
  EXPECT_TRUE(board_->claim(key(9999), Claim{7, 1}, 300, 100)) << "the old ones expired";
}

TEST_F(BoardTest, ASecondClaimRenewsTheFirst) {
  ASSERT_TRUE(board_->claim(key(1000), Claim{42, 5555}, 0, 100));
  ASSERT_TRUE(board_->claim(key(1000), Claim{43, 6666}, 50, 100));
  std::optional<Claim> found = board_->find(key(1000), 120, 100);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->pid, 43u);
  EXPECT_EQ(found->port, 6666);
}

TEST_F(BoardTest, OnlyTheClaimerReleases) {
  ASSERT_TRUE(board_->claim(key(1000), Claim{42, 5555}, 0, 100));
  board_->release(key(1000), 41);
  EXPECT_TRUE(board_->find(key(1000), 1, 100));
  board_->release(key(1000), 42);
  EXPECT_FALSE(board_->find(key(1000), 1, 100));
}

TEST_F(BoardTest, StartsOwnedByItsCreatorAndUnshared) {
  EXPECT_EQ(board_->owner(), static_cast<uint32_t>(getpid()));
  EXPECT_FALSE(board_->shared());
  board_->mark_shared();
  board_->set_owner(99);
  EXPECT_TRUE(board_->shared());
  EXPECT_EQ(board_->owner(), 99u);
}

TEST(ConnectionKeys, ARequestAndItsAcceptedSocketHaveOneKey) {
  sockaddr_in6 local{}, peer{};
  local.sin6_family = peer.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:192.168.77.1", &local.sin6_addr);  // a dual-stack server
  inet_pton(AF_INET6, "::ffff:192.168.77.2", &peer.sin6_addr);
  local.sin6_port = htons(80);
  peer.sin6_port = htons(40000);
  std::optional<ConnectionKey> accepted = key_of_accepted(reinterpret_cast<sockaddr*>(&local), sizeof local,
                                                          reinterpret_cast<sockaddr*>(&peer), sizeof peer);
  ASSERT_TRUE(accepted);
  sockaddr_in client{}, server{};
  client.sin_family = server.sin_family = AF_INET;
  inet_pton(AF_INET, "192.168.77.2", &client.sin_addr);
  inet_pton(AF_INET, "192.168.77.1", &server.sin_addr);
  client.sin_port = htons(40000);
  server.sin_port = htons(80);
  core::Result<wire::UpgradeRequest> request =
      wire::build_upgrade_request(reinterpret_cast<sockaddr*>(&client), sizeof client,
                                  reinterpret_cast<sockaddr*>(&server), sizeof server, 1);
  ASSERT_TRUE(request);
  EXPECT_TRUE(key_of_request(request.value()) == *accepted);
  client.sin_port = htons(40001);
  request = wire::build_upgrade_request(reinterpret_cast<sockaddr*>(&client), sizeof client,
                                        reinterpret_cast<sockaddr*>(&server), sizeof server, 1);
  EXPECT_FALSE(key_of_request(request.value()) == *accepted);
}

TEST(SharedBoard, AForkedChildsClaimReachesTheParent) {
  std::shared_ptr<RendezvousBoard> board = RendezvousBoard::create();
  ASSERT_TRUE(board);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    board->mark_shared();
    _exit(board->claim(key(1234), Claim{static_cast<uint32_t>(getpid()), 4321}, 0, 1000) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(board->shared());
  std::optional<Claim> found = board->find(key(1234), 1, 1000);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->pid, static_cast<uint32_t>(child));
  EXPECT_EQ(found->port, 4321);
}

}  // namespace
}  // namespace vsock::sock
