/* Duplicated socket fds: dup/dup2/dup3/F_DUPFD/F_DUPFD_CLOEXEC; the copy
 * keeps working after the original is closed, the peer sees EOF only when
 * the last copy closes, file status flags (O_NONBLOCK) are shared, FD_CLOEXEC
 * is not, and dup2 over a live socket closes that socket. */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

static const char* kind(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return ct_errname(errno);
  return S_ISSOCK(st.st_mode) ? "socket" : S_ISFIFO(st.st_mode) ? "fifo" : "other";
}

static void dup_keeps_socket_alive(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int d = CT_OK("dup", dup(client));
  ct_out("dup is a %s", kind(d));
  ct_echo_byte(d, server, "send through dup");
  CT_RC("close original", close(client), 0);
  ct_echo_byte(d, server, "dup after closing the original");
  ct_echo_byte(server, d, "recv through dup");
  ct_out("peer poll while a copy is open: %s", ct_poll_str(ct_wait(server, POLLIN, 50)));
  CT_RC("close dup", close(d), 0);
  char c;
  CT_RC("peer recv after last copy closed", recv(server, &c, 1, 0), 0);
  close(server);
}

static void shared_status_flags(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int d = CT_OK("F_DUPFD min 100", fcntl(client, F_DUPFD, 100));
  CT_CHECK(d >= 100, "F_DUPFD returned an fd >= 100");
  CT_CHECK((fcntl(d, F_GETFD) & FD_CLOEXEC) == 0, "F_DUPFD copy has no FD_CLOEXEC");
  CT_RC("F_SETFL O_NONBLOCK on the copy", fcntl(d, F_SETFL, O_NONBLOCK), 0);
  CT_CHECK(fcntl(client, F_GETFL) & O_NONBLOCK, "the original is nonblocking too");
  char c;
  CT_ERR("recv on the original", recv(client, &c, 1, 0), EAGAIN);
  CT_RC("shutdown SHUT_WR through the copy", shutdown(d, SHUT_WR), 0);
  CT_ERR("send on the original after shutdown", send(client, "x", 1, 0), EPIPE);
  ct_wait_readable(server);
  CT_RC("peer sees EOF", recv(server, &c, 1, 0), 0);
  int e = CT_OK("F_DUPFD_CLOEXEC", fcntl(client, F_DUPFD_CLOEXEC, 0));
  CT_CHECK(fcntl(e, F_GETFD) & FD_CLOEXEC, "F_DUPFD_CLOEXEC copy has FD_CLOEXEC");
  close(e);
  close(d);
  close(client);
  close(server);
}

static void dup2_and_dup3(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  int cloexec_sock = CT_OK("socket SOCK_CLOEXEC", socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  int pipefd[2];
  CT_RC("pipe", pipe(pipefd), 0);

  int target = pipefd[1];
  CT_CHECK(dup2(client, target) == target, "dup2 onto an open pipe fd returns that fd");
  ct_out("dup2 target is now a %s", kind(target));
  ct_echo_byte(target, server, "send through dup2 copy");
  CT_CHECK(dup2(client, client) == client, "dup2 onto itself returns the fd");
  CT_ERR("dup3 onto itself", dup3(client, client, 0), EINVAL);
  CT_ERR("dup3 with bad flags", dup3(client, target, 12345), EINVAL);

  int d2 = dup2(cloexec_sock, target);
  CT_CHECK(d2 == target, "dup2 of a CLOEXEC socket");
  CT_CHECK((fcntl(d2, F_GETFD) & FD_CLOEXEC) == 0, "dup2 copy has no FD_CLOEXEC");
  int d3 = dup3(cloexec_sock, target, O_CLOEXEC);
  CT_CHECK(d3 == target && (fcntl(d3, F_GETFD) & FD_CLOEXEC), "dup3 O_CLOEXEC copy has FD_CLOEXEC");
  ct_out("target is now a %s", kind(target));

  /* dup2 over the live client socket: that socket (its last fd) closes. */
  CT_CHECK(dup2(pipefd[0], client) == client, "dup2 a pipe over the client socket fd");
  ct_out("client fd is now a %s", kind(client));
  ct_wait_readable(server);
  char c;
  CT_RC("peer sees EOF after dup2 replaced the socket", recv(server, &c, 1, 0), 0);

  CT_RC("close", close(cloexec_sock), 0);
  CT_ERR("dup of a closed fd", dup(cloexec_sock), EBADF);
  CT_ERR("dup2 of a closed fd", dup2(cloexec_sock, target), EBADF);
  CT_ERR("dup3 of a closed fd", dup3(cloexec_sock, target, 0), EBADF);
  CT_ERR("F_DUPFD of a closed fd", fcntl(cloexec_sock, F_DUPFD, 0), EBADF);
  ct_out("target after failed dup2: %s", kind(target));
  close(target);
  close(client);
  close(pipefd[0]);
  close(server);
}

int main(void) {
  ct_start("fd_dup");
  dup_keeps_socket_alive();
  shared_status_flags();
  dup2_and_dup3();
  return 0;
}
