/* Sockets closed many at a time: close_range() and closefrom(). A socket
 * closes only when every fd of it is in the range (the peer then sees EOF);
 * one with a copy outside the range goes on working; CLOSE_RANGE_CLOEXEC
 * only marks the fds; a range with first > last or an unknown flag fails
 * with EINVAL and closes nothing. Each case moves data first, so that under
 * the library on a device the sockets are on RDMA when they are closed. */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

static void peer_sees_eof(int server, const char* what) {
  ct_wait_readable(server);
  char c;
  CT_RC(what, recv(server, &c, 1, 0), 0);
}

/* A TCP pair whose client is fd `number` (a fixed high number, so that a
 * range names exactly it), with data moved once: returns the client. */
static int pair_at(int number, int* server, const char* what) {
  int client;
  ct_tcp_pair(&client, server);
  int moved = fcntl(client, F_DUPFD, number);
  if (moved != number) CT_FAIL("F_DUPFD %d gave %d (%s)", number, moved, ct_errname(errno));
  close(client);
  ct_echo_byte(moved, *server, what);
  return moved;
}

static void copy_outside_the_range(void) {
  int server;
  int client = pair_at(700, &server, "before close_range");
  int copy = CT_OK("dup to 710", fcntl(client, F_DUPFD, 710));
  CT_RC("close_range of the socket's first fd only", close_range(700, 705, 0), 0);
  CT_ERR("the closed fd", fcntl(700, F_GETFD), EBADF);
  ct_out("peer while a copy is open: %s", ct_poll_str(ct_wait(server, POLLIN, 50)));
  ct_echo_byte(copy, server, "the copy outside the range");
  ct_echo_byte(server, copy, "the copy receives");
  CT_RC("close_range of the copy", close_range(706, 720, 0), 0);
  peer_sees_eof(server, "peer sees EOF once the last fd is closed");
  close(server);
}

static void every_fd_in_the_range(void) {
  int server;
  int client = pair_at(730, &server, "before close_range");
  CT_RC("dup2 to 733", dup2(client, 733), 733);
  CT_RC("close_range over both fds", close_range(730, 735, 0), 0);
  CT_ERR("the first fd", fcntl(730, F_GETFD), EBADF);
  CT_ERR("the second fd", fcntl(733, F_GETFD), EBADF);
  peer_sees_eof(server, "peer sees EOF");
  close(server);
}

static void cloexec_only_marks(void) {
  int server;
  int client = pair_at(760, &server, "before CLOSE_RANGE_CLOEXEC");
  CT_RC("close_range CLOSE_RANGE_CLOEXEC", close_range(760, 760, CLOSE_RANGE_CLOEXEC), 0);
  CT_CHECK(fcntl(760, F_GETFD) & FD_CLOEXEC, "the fd has FD_CLOEXEC");
  ct_echo_byte(client, server, "still open");
  ct_echo_byte(server, client, "still receives");
  close(client);
  peer_sees_eof(server, "peer sees EOF after close");
  close(server);
}

static void bad_ranges_close_nothing(void) {
  int server;
  int client = pair_at(790, &server, "before the bad calls");
  CT_ERR("close_range with first > last", close_range(795, 785, 0), EINVAL);
  CT_ERR("close_range with an unknown flag", close_range(785, 795, 1u << 30), EINVAL);
  ct_echo_byte(client, server, "after the bad calls");
  close(client);
  close(server);
}

static void closefrom_closes_the_rest(void) {
  int server;
  int client = pair_at(900, &server, "before closefrom");
  CT_RC("dup2 to 950", dup2(client, 950), 950);
  closefrom(900);
  CT_ERR("fd 900 after closefrom", fcntl(900, F_GETFD), EBADF);
  CT_ERR("fd 950 after closefrom", fcntl(950, F_GETFD), EBADF);
  peer_sees_eof(server, "peer sees EOF after closefrom");
  close(server);
}

int main(void) {
  ct_start("fd_close_range");
  copy_outside_the_range();
  every_fd_in_the_range();
  cloexec_only_marks();
  bad_ranges_close_nothing();
  closefrom_closes_the_rest();
  return 0;
}
