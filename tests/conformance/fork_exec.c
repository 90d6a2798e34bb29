/* Sockets across fork and exec: a forked child talks on the parent's TCP
 * and UDP sockets; the parent's copies keep working after the child exits;
 * a child closing its copy does not end the connection but its shutdown()
 * does; an exec'd child (this program again, with --child) uses the
 * inherited sockets, and a SOCK_CLOEXEC socket is gone in it. */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void echo(int fd, const char* msg, int peer) {
  size_t len = strlen(msg);
  ct_send_all(fd, msg, len);
  char buf[64];
  ct_recv_all(peer, buf, len);
  if (memcmp(buf, msg, len) != 0) CT_FAIL("echo: got other bytes");
}

/* The exec'd child: argv = --child TCP_FD CLOEXEC_FD UDP_FD UDP_PORT */
static int child_main(char** argv) {
  ct_start("fork_exec child");
  int tcp = atoi(argv[2]), gone = atoi(argv[3]), udp = atoi(argv[4]);
  struct sockaddr_in to = ct_addr((uint16_t)atoi(argv[5]));
  CT_ERR("child: F_GETFD on the SOCK_CLOEXEC socket", fcntl(gone, F_GETFD), EBADF);
  int type = 0;
  socklen_t len = sizeof type;
  CT_RC("child: SO_TYPE of the inherited tcp socket", getsockopt(tcp, SOL_SOCKET, SO_TYPE, &type, &len), 0);
  CT_CHECK(type == SOCK_STREAM, "child: inherited tcp socket is a stream");
  CT_RC("child: send on inherited tcp", send(tcp, "exec", 4, 0), 4);
  char buf[8];
  ct_wait_readable(tcp);
  CT_RC("child: recv on inherited tcp", recv(tcp, buf, sizeof buf, 0), 2);
  CT_CHECK(memcmp(buf, "ok", 2) == 0, "child: got 'ok'");
  CT_RC("child: sendto on inherited udp", sendto(udp, "dgram", 5, 0, (struct sockaddr*)&to, sizeof to), 5);
  return 0;
}

static void plain_fork(int client, int server, int udp, const struct sockaddr_in* peer_addr, int peer) {
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) {
    /* Child: no transcript lines (the parent reports); exit status tells. */
    if (send(client, "kid", 3, 0) != 3) _exit(2);
    char buf[8];
    if (recv(client, buf, 3, MSG_WAITALL) != 3 || memcmp(buf, "mom", 3) != 0) _exit(3);
    if (sendto(udp, "u", 1, 0, (const struct sockaddr*)peer_addr, sizeof *peer_addr) != 1) _exit(4);
    _exit(0);
  }
  char buf[8];
  ct_recv_all(server, buf, 3);
  int got_kid = memcmp(buf, "kid", 3) == 0;
  ct_send_all(server, "mom", 3);
  ct_expect_child_ok(pid, "forked child used tcp and udp");
  CT_CHECK(got_kid, "parent got 'kid' from the forked child");
  ct_wait_readable(peer);
  CT_RC("parent recv the child's datagram", recv(peer, buf, sizeof buf, 0), 1);
  echo(client, "still here", server);
  ct_out("parent tcp works after the child exited");
}

static void child_close_vs_shutdown(int client, int server) {
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) _exit(close(client) == 0 ? 0 : 1);
  ct_expect_child_ok(pid, "child closed its copy");
  ct_out("peer poll after the child's close: %s", ct_poll_str(ct_wait(server, POLLIN, 50)));
  echo(client, "alive", server);
  pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) _exit(shutdown(client, SHUT_WR) == 0 ? 0 : 1);
  ct_expect_child_ok(pid, "child shut down its copy");
  ct_wait_readable(server);
  char c;
  CT_RC("peer sees EOF after the child's shutdown", recv(server, &c, 1, 0), 0);
  CT_ERR("parent send after the child's shutdown", send(client, "x", 1, 0), EPIPE);
}

static void fork_and_exec(int client, int server, int udp, const struct sockaddr_in* peer_addr, int peer) {
  int gone = CT_OK("socket SOCK_CLOEXEC", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  char a[16], b[16], c[16], d[16];
  snprintf(a, sizeof a, "%d", client);
  snprintf(b, sizeof b, "%d", gone);
  snprintf(c, sizeof c, "%d", udp);
  snprintf(d, sizeof d, "%u", (unsigned)ntohs(peer_addr->sin_port));
  char* args[] = {"fork_exec", "--child", a, b, c, d, NULL};
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) {
    execv("/proc/self/exe", args);
    _exit(127);
  }
  /* The child prints too: stay silent until it has exited. */
  char buf[8];
  ct_recv_all(server, buf, 4);
  int got_exec = memcmp(buf, "exec", 4) == 0;
  ct_send_all(server, "ok", 2);
  ct_expect_child_ok(pid, "exec'd child");
  CT_CHECK(got_exec, "parent got 'exec' from the exec'd child");
  ct_wait_readable(peer);
  CT_RC("parent recv the exec'd child's datagram", recv(peer, buf, sizeof buf, 0), 5);
  echo(client, "after exec", server);
  ct_out("parent tcp works after the exec'd child exited");
  close(gone);
}

int main(int argc, char** argv) {
  if (argc == 6 && strcmp(argv[1], "--child") == 0) return child_main(argv);
  ct_start("fork_exec");
  int client, server;
  ct_tcp_pair(&client, &server);
  struct sockaddr_in peer_addr;
  int udp = ct_udp_bound(NULL);
  int peer = ct_udp_bound(&peer_addr);
  plain_fork(client, server, udp, &peer_addr, peer);
  fork_and_exec(client, server, udp, &peer_addr, peer);
  child_close_vs_shutdown(client, server);
  close(client);
  close(server);
  close(udp);
  close(peer);
  return 0;
}
