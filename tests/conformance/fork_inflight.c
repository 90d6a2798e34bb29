/* Sockets handed to a forked child while data is in flight both ways and
 * partly read: the child must read exactly the rest, in order, and what it
 * writes must follow what the parent wrote. Once with both ends of the
 * connection in the forking process, once with the peer in another
 * process (which reads what the parent wrote before the fork only after
 * it). Over RDMA this is the Revert of docs/protocol.md §5. */
#include "common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kAhead = 48 * 1024, kReadBefore = 10 * 1024, kBack = 20 * 1024 };

static void send_pattern(int fd, size_t len, unsigned seed, size_t offset) {
  unsigned char* buf = malloc(len);
  CT_ASSERT(buf != NULL);
  ct_pattern(buf, len, seed, offset);
  ct_send_all(fd, buf, len);
  free(buf);
}

static void ping(int a, int b) {
  char c;
  ct_send_all(a, "p", 1);
  ct_recv_all(b, &c, 1);
  ct_send_all(b, "q", 1);
  ct_recv_all(a, &c, 1);
}

/* Both ends here: each has unread bytes of the other when we fork. */
static void both_ends_here(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  ping(client, server);
  ct_sleep_ms(200);  /* over RDMA: the upgrade has settled */
  send_pattern(client, kAhead, 1, 0);
  send_pattern(server, kAhead, 2, 0);
  CT_CHECK(ct_recv_pattern_ok(server, kReadBefore, 1, 0), "server read the first part before the fork");
  CT_CHECK(ct_recv_pattern_ok(client, kReadBefore, 2, 0), "client read the first part before the fork");
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) {
    if (!ct_recv_pattern_ok(server, kAhead - kReadBefore, 1, kReadBefore)) _exit(2);
    if (!ct_recv_pattern_ok(client, kAhead - kReadBefore, 2, kReadBefore)) _exit(3);
    unsigned char buf[kBack];
    ct_pattern(buf, sizeof buf, 3, kAhead);
    if (send(client, buf, sizeof buf, 0) != (ssize_t)sizeof buf) _exit(4);
    _exit(0);
  }
  ct_expect_child_ok(pid, "child read the rest both ways");
  CT_CHECK(ct_recv_pattern_ok(server, kBack, 3, kAhead), "parent read what the child wrote after the parent's bytes");
  ping(client, server);
  ct_out("parent's sockets work after the child exited");
  close(client);
  close(server);
}

/* The peer in another process: it learns of the handover only from the
 * connection, and reads what we wrote before the fork only after it. */
static void peer_elsewhere(void) {
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  int go[2];
  CT_OK("pipe", pipe(go));
  pid_t peer = fork();
  if (peer < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (peer == 0) {
    close(listener);
    int fd = ct_tcp_connect(&addr);
    char c;
    if (recv(fd, &c, 1, MSG_WAITALL) != 1 || send(fd, "q", 1, 0) != 1) _exit(2);
    unsigned char* buf = malloc(kAhead);
    if (buf == NULL) _exit(3);
    ct_pattern(buf, kAhead, 4, 0);
    if (send(fd, buf, kAhead, 0) != kAhead) _exit(4);
    if (read(go[0], &c, 1) != 1) _exit(5);  /* the parent has forked */
    if (!ct_recv_pattern_ok(fd, kAhead, 5, 0)) _exit(6);      /* written before the fork */
    if (!ct_recv_pattern_ok(fd, kBack, 6, kAhead)) _exit(7);  /* by the parent's child */
    if (send(fd, "bye", 3, 0) != 3) _exit(8);
    _exit(0);
  }
  close(go[0]);
  int fd = CT_OK("accept", accept(listener, NULL, NULL));
  char c;
  ct_send_all(fd, "p", 1);
  ct_recv_all(fd, &c, 1);
  ct_sleep_ms(200);
  send_pattern(fd, kAhead, 5, 0);
  CT_CHECK(ct_recv_pattern_ok(fd, kReadBefore, 4, 0), "read the first part before the fork");
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) {
    if (!ct_recv_pattern_ok(fd, kAhead - kReadBefore, 4, kReadBefore)) _exit(2);
    unsigned char buf[kBack];
    ct_pattern(buf, sizeof buf, 6, kAhead);
    if (send(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) _exit(3);
    char bye[3];
    if (recv(fd, bye, 3, MSG_WAITALL) != 3 || memcmp(bye, "bye", 3) != 0) _exit(4);
    _exit(0);
  }
  CT_RC("tell the peer we forked", write(go[1], "g", 1), 1);
  ct_expect_child_ok(pid, "child read the rest and talked to the peer");
  ct_expect_child_ok(peer, "peer read everything in order");
  close(go[1]);
  close(fd);
  close(listener);
}

int main(void) {
  ct_start("fork_inflight");
  both_ends_here();
  peer_elsewhere();
  return 0;
}
