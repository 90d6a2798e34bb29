/* SCM_RIGHTS over an AF_UNIX socketpair: pass a connected TCP socket, a UDP
 * socket and a pipe; the received fds work (the TCP one after the original
 * is closed), MSG_CMSG_CLOEXEC, MSG_CTRUNC with a short control buffer, and
 * SCM_CREDENTIALS. */
#include "common.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

enum { kMaxFds = 4 };

static void send_fds(int via, const int* fds, int count) {
  union {
    char buf[CMSG_SPACE(sizeof(int) * kMaxFds)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov = {"F", 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * count)};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * count);
  memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  CT_RC("sendmsg SCM_RIGHTS", sendmsg(via, &msg, 0), 1);
}

/* Returns how many fds arrived (stored in fds); prints msg_flags. */
static int recv_fds(int via, int* fds, size_t control_len, int flags) {
  union {
    char buf[CMSG_SPACE(sizeof(int) * kMaxFds)];
    struct cmsghdr align;
  } control;
  char byte;
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = control_len};
  CT_RC("recvmsg SCM_RIGHTS", recvmsg(via, &msg, flags), 1);
  ct_out("msg_flags: 0x%x", (unsigned)msg.msg_flags);
  int count = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    memcpy(fds + count, CMSG_DATA(c), sizeof(int) * n);
    count += n;
  }
  ct_out("fds received: %d", count);
  return count;
}

static const char* kind(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return "bad fd";
  return S_ISSOCK(st.st_mode) ? "socket" : S_ISFIFO(st.st_mode) ? "fifo" : "other";
}

static void pass_and_use(int sv[2]) {
  int client, server;
  ct_tcp_pair(&client, &server);
  struct sockaddr_in u_addr, peer_addr;
  int udp = ct_udp_bound(NULL);
  int udp_peer = ct_udp_bound(&peer_addr);
  int pipefd[2];
  CT_RC("pipe", pipe(pipefd), 0);

  int out[3] = {client, udp, pipefd[1]};
  send_fds(sv[0], out, 3);
  int in[kMaxFds];
  CT_RC("fd count", recv_fds(sv[1], in, CMSG_SPACE(sizeof(int) * kMaxFds), MSG_CMSG_CLOEXEC), 3);
  ct_out("kinds: %s %s %s", kind(in[0]), kind(in[1]), kind(in[2]));
  CT_CHECK(in[0] != client && in[1] != udp && in[2] != pipefd[1], "received fds are new fds");
  CT_CHECK((fcntl(in[0], F_GETFD) & FD_CLOEXEC) && (fcntl(in[2], F_GETFD) & FD_CLOEXEC),
           "MSG_CMSG_CLOEXEC set FD_CLOEXEC");

  CT_RC("close the original tcp fd", close(client), 0);
  int type = 0;
  socklen_t len = sizeof type;
  CT_RC("getsockopt SO_TYPE on passed tcp", getsockopt(in[0], SOL_SOCKET, SO_TYPE, &type, &len), 0);
  CT_CHECK(type == SOCK_STREAM, "passed tcp socket is SOCK_STREAM");
  CT_RC("send on passed tcp", send(in[0], "passed", 6, 0), 6);
  char buf[16];
  ct_wait_readable(server);
  CT_RC("peer recv", recv(server, buf, sizeof buf, 0), 6);
  CT_RC("peer reply", send(server, "reply", 5, 0), 5);
  ct_wait_readable(in[0]);
  CT_RC("recv on passed tcp", recv(in[0], buf, sizeof buf, 0), 5);
  CT_RC("close passed tcp", close(in[0]), 0);
  CT_RC("peer sees EOF", recv(server, buf, sizeof buf, 0), 0);

  close(udp);
  CT_RC("sendto on passed udp", sendto(in[1], "dg", 2, 0, (struct sockaddr*)&peer_addr, sizeof peer_addr), 2);
  ct_wait_readable(udp_peer);
  len = sizeof u_addr;
  CT_RC("udp peer recvfrom", recvfrom(udp_peer, buf, sizeof buf, 0, (struct sockaddr*)&u_addr, &len), 2);

  CT_RC("write on passed pipe", write(in[2], "p", 1), 1);
  CT_RC("read the pipe", read(pipefd[0], buf, 1), 1);
  close(in[1]);
  close(in[2]);
  close(pipefd[0]);
  close(pipefd[1]);
  close(server);
  close(udp_peer);
}

static void truncated_control(int sv[2]) {
  int pipefd[2];
  CT_RC("pipe", pipe(pipefd), 0);
  int three[3] = {pipefd[0], pipefd[1], pipefd[0]};
  send_fds(sv[0], three, 3);
  int in[kMaxFds];
  /* CMSG_SPACE rounds up: room for 2 fds on LP64, not for 3. */
  int got = recv_fds(sv[1], in, CMSG_SPACE(sizeof(int)), 0);
  CT_CHECK(got < 3, "a short control buffer receives fewer fds (MSG_CTRUNC)");
  for (int i = 0; i < got; ++i) close(in[i]);
  close(pipefd[0]);
  close(pipefd[1]);
}

static void credentials(void) {
  int sv[2];
  CT_RC("socketpair dgram", socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
  int one = 1;
  CT_RC("SO_PASSCRED", setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
  CT_RC("send", send(sv[0], "c", 1, 0), 1);
  union {
    char buf[CMSG_SPACE(sizeof(struct ucred))];
    struct cmsghdr align;
  } control;
  char byte;
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf};
  CT_RC("recvmsg", recvmsg(sv[1], &msg, 0), 1);
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  CT_CHECK(c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS, "got SCM_CREDENTIALS");
  struct ucred cred;
  memcpy(&cred, CMSG_DATA(c), sizeof cred);
  CT_CHECK(cred.pid == getpid() && cred.uid == getuid(), "credentials are ours");
  close(sv[0]);
  close(sv[1]);
}

int main(void) {
  ct_start("unix_scm_rights");
  int sv[2];
  CT_RC("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pass_and_use(sv);
  truncated_control(sv);
  close(sv[0]);
  close(sv[1]);
  credentials();
  return 0;
}
