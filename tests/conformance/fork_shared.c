/* A connected socket shared by a parent and its fork() child, with the
 * peer in a third process. Over RDMA the parent keeps the connection on its
 * queue pair across the fork, and a child's first use asks the parent to
 * hand it back to TCP (docs/protocol.md §5.2); the kernel's behaviour is the
 * expected one in every case:
 *  - a child that never touches the socket: the parent goes on both ways;
 *  - the parent closes its fd while the child lives: the connection stays
 *    open, the child writes and reads after the parent's bytes;
 *  - parent and child write in turn: the peer reads the blocks in order;
 *  - a grandchild is the first to use it: it reads what the peer sent and
 *    the parent had not read, and writes after the parent's bytes. */
#include "common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kBlock = 64 * 1024, kBig = 256 * 1024 };

static int send_pattern_ok(int fd, size_t len, unsigned seed, size_t offset) {
  unsigned char* buf = malloc(len);
  if (buf == NULL) return 0;
  ct_pattern(buf, len, seed, offset);
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL);
    if (n <= 0) break;
    done += (size_t)n;
  }
  free(buf);
  return done == len;
}

static int at_eof(int fd) {
  char c;
  return recv(fd, &c, 1, 0) == 0;
}

static void wait_byte(int fd) {
  char c;
  if (read(fd, &c, 1) != 1) _exit(90);
}

static void post_byte(int fd) {
  if (write(fd, "g", 1) != 1) _exit(91);
}

/* The peer runs `script` on its connection in a process of its own; the
 * server side is accepted here and warmed up (one ping each way, then time
 * for an upgrade to settle). */
typedef int (*PeerScript)(int fd);

static pid_t start_peer(PeerScript script, int* server) {
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  pid_t peer = fork();
  if (peer < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (peer == 0) {
    close(listener);
    int fd = ct_tcp_connect(&addr);
    char c;
    if (recv(fd, &c, 1, MSG_WAITALL) != 1 || send(fd, "q", 1, 0) != 1) _exit(80);
    _exit(script(fd));
  }
  *server = CT_OK("accept", accept(listener, NULL, NULL));
  close(listener);
  char c;
  ct_send_all(*server, "p", 1);
  ct_recv_all(*server, &c, 1);
  ct_sleep_ms(200);
  return peer;
}

/* 1. The child exits without using the socket. */
static int peer_untouched(int fd) {
  if (!send_pattern_ok(fd, kBig, 11, 0)) return 2;
  if (!ct_recv_pattern_ok(fd, kBig, 12, 0)) return 3;
  return at_eof(fd) ? 0 : 4;
}

static void child_never_uses(void) {
  int fd;
  pid_t peer = start_peer(peer_untouched, &fd);
  pid_t child = fork();
  if (child < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (child == 0) _exit(0);
  ct_expect_child_ok(child, "untouched: child");
  CT_CHECK(ct_recv_pattern_ok(fd, kBig, 11, 0), "untouched: parent read the peer's 256 KiB after the fork");
  CT_CHECK(send_pattern_ok(fd, kBig, 12, 0), "untouched: parent wrote 256 KiB after the fork");
  close(fd);
  ct_expect_child_ok(peer, "untouched: peer read them and the end");
}

/* 2. The parent closes its fd while the child lives. */
static int peer_parent_closes(int fd) {
  if (!ct_recv_pattern_ok(fd, kBlock, 21, 0)) return 2;          /* the parent's */
  if (!ct_recv_pattern_ok(fd, kBlock / 4, 21, kBlock)) return 3;  /* the child's, after */
  if (!send_pattern_ok(fd, 8192, 22, 0)) return 4;
  return at_eof(fd) ? 0 : 5;
}

static void parent_closes_first(void) {
  int fd;
  pid_t peer = start_peer(peer_parent_closes, &fd);
  int go[2];
  CT_OK("pipe", pipe(go));
  CT_CHECK(send_pattern_ok(fd, kBlock, 21, 0), "close: parent wrote 64 KiB");
  pid_t child = fork();
  if (child < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (child == 0) {
    close(go[1]);
    wait_byte(go[0]);  /* the parent has closed its fd */
    if (!send_pattern_ok(fd, kBlock / 4, 21, kBlock)) _exit(2);
    if (!ct_recv_pattern_ok(fd, 8192, 22, 0)) _exit(3);
    close(fd);
    _exit(0);
  }
  close(go[0]);
  CT_OK("parent closes its fd", close(fd));
  post_byte(go[1]);
  close(go[1]);
  ct_expect_child_ok(child, "close: child wrote and read after the parent's close");
  ct_expect_child_ok(peer, "close: peer read both in order, then the end");
}

/* 3. Parent, child, parent write in turn. */
static int peer_in_turn(int fd) {
  for (unsigned i = 0; i < 3; ++i)
    if (!ct_recv_pattern_ok(fd, kBlock, 31, i * kBlock)) return 2 + (int)i;
  if (send(fd, "k", 1, 0) != 1) return 6;
  return at_eof(fd) ? 0 : 7;
}

static void write_in_turn(void) {
  int fd;
  pid_t peer = start_peer(peer_in_turn, &fd);
  int to_child[2], to_parent[2];
  CT_OK("pipe", pipe(to_child));
  CT_OK("pipe", pipe(to_parent));
  pid_t child = fork();
  if (child < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (child == 0) {
    wait_byte(to_child[0]);
    if (!send_pattern_ok(fd, kBlock, 31, kBlock)) _exit(2);
    post_byte(to_parent[1]);
    close(fd);
    _exit(0);
  }
  CT_CHECK(send_pattern_ok(fd, kBlock, 31, 0), "turns: parent wrote block 1");
  post_byte(to_child[1]);
  wait_byte(to_parent[0]);
  CT_CHECK(send_pattern_ok(fd, kBlock, 31, 2 * kBlock), "turns: parent wrote block 3 after the child's block 2");
  char c;
  CT_RC("turns: the peer's answer", recv(fd, &c, 1, MSG_WAITALL), 1);
  ct_expect_child_ok(child, "turns: child");
  close(fd);
  for (int i = 0; i < 2; ++i) {
    close(to_child[i]);
    close(to_parent[i]);
  }
  ct_expect_child_ok(peer, "turns: peer read blocks 1, 2, 3 in order");
}

/* 4. A grandchild uses it first: the peer's bytes the parent had not read,
 * then its own write after the parent's. */
static int peer_grandchild(int fd) {
  if (!send_pattern_ok(fd, kBlock, 41, 0)) return 2;
  if (!ct_recv_pattern_ok(fd, 4096, 42, 0)) return 3;     /* the parent's */
  if (!ct_recv_pattern_ok(fd, 4096, 42, 4096)) return 4;  /* the grandchild's */
  return at_eof(fd) ? 0 : 5;
}

static void grandchild_first(void) {
  int fd;
  pid_t peer = start_peer(peer_grandchild, &fd);
  CT_CHECK(ct_recv_pattern_ok(fd, 1000, 41, 0), "grandchild: parent read the first 1000 bytes");
  CT_CHECK(send_pattern_ok(fd, 4096, 42, 0), "grandchild: parent wrote 4 KiB");
  pid_t child = fork();
  if (child < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (child == 0) {
    pid_t grandchild = fork();
    if (grandchild < 0) _exit(2);
    if (grandchild == 0) {
      if (!ct_recv_pattern_ok(fd, kBlock - 1000, 41, 1000)) _exit(3);
      if (!send_pattern_ok(fd, 4096, 42, 4096)) _exit(4);
      _exit(0);
    }
    int status = 0;
    if (waitpid(grandchild, &status, 0) != grandchild || !WIFEXITED(status)) _exit(5);
    _exit(WEXITSTATUS(status));
  }
  ct_expect_child_ok(child, "grandchild: read the rest and wrote after the parent");
  close(fd);
  ct_expect_child_ok(peer, "grandchild: peer read both in order");
}

int main(void) {
  ct_start("fork_shared");
  child_never_uses();
  parent_closes_first();
  write_in_turn();
  grandchild_first();
  return 0;
}
