// select's fd sets as the kernel reads them: nfds is clamped to the
// process's fd table (never an error above FD_SETSIZE), and the bit helpers
// agree with FD_SET/FD_ISSET inside FD_SETSIZE.
#include "sock/wait/select_bits.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>

namespace vsock::sock {
namespace {

int fd_table_size_from_proc() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("FDSize:", 0) == 0) return std::stoi(line.substr(7));
  }
  return -1;
}

TEST(SelectBits, SmallNfdsIsKept) {
  EXPECT_EQ(select_fd_limit(0), 0);
  EXPECT_EQ(select_fd_limit(3), 3);
}

TEST(SelectBits, LargeNfdsIsClampedToTheFdTable) {
  int table = fd_table_size_from_proc();
  ASSERT_GT(table, 0);
  EXPECT_EQ(select_fd_limit(INT_MAX), table);
  EXPECT_EQ(select_fd_limit(table + 1), table);
  EXPECT_EQ(select_fd_limit(table), table);
}

TEST(SelectBits, BitsMatchTheMacros) {
  fd_set set;
  FD_ZERO(&set);
  for (int fd : {0, 1, 63, 64, 65, 500, FD_SETSIZE - 1}) {
    put_fd_bit(&set, fd, true);
    EXPECT_TRUE(FD_ISSET(fd, &set)) << fd;
    EXPECT_TRUE(fd_bit(&set, fd)) << fd;
  }
  EXPECT_FALSE(fd_bit(&set, 2));
  put_fd_bit(&set, 64, false);
  EXPECT_FALSE(FD_ISSET(64, &set));
  EXPECT_TRUE(fd_bit(&set, 63));
  EXPECT_TRUE(fd_bit(&set, 65));
}

TEST(SelectBits, BitsBeyondFdSetsizeInALargerBitmap) {
  unsigned long bitmap[4 * FD_SETSIZE / (8 * sizeof(unsigned long))] = {};
  auto* set = reinterpret_cast<fd_set*>(bitmap);
  put_fd_bit(set, 3 * FD_SETSIZE + 7, true);
  EXPECT_TRUE(fd_bit(set, 3 * FD_SETSIZE + 7));
  EXPECT_FALSE(fd_bit(set, 3 * FD_SETSIZE + 6));
}

}  // namespace
}  // namespace vsock::sock
