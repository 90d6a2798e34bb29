/* select and pselect edge cases beyond select_mixed, with a TCP pair that
 * carried data first (so over a verbs device the sets hold an upgraded
 * socket): nfds above FD_SETSIZE (the kernel clamps it to its fd table, it
 * is no error), a closed fd in any of the three sets (EBADF, even next to a
 * ready fd) and beyond nfds (ignored), pselect swapping the signal mask
 * atomically, pselect's invalid timespecs, urgent data in exceptfds on the
 * warmed-up pair. Built with -O2 -D_FORTIFY_SOURCE=2, so FD_SET/FD_ISSET go
 * through glibc's __fdelt_chk, which must abort for fd >= FD_SETSIZE. */
#include "common.h"
#include "warm_up.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(__OPTIMIZE__) || !defined(_FORTIFY_SOURCE) || _FORTIFY_SOURCE < 2
#error "select_edges.c must be built with -O2 -D_FORTIFY_SOURCE=2"
#endif

/* A value the optimizer cannot see through. */
static int runtime(int value) {
  volatile int v = value;
  return v;
}

static void fortified_fd_set(void) {
  ct_out("-- fortified FD_SET");
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(runtime(FD_SETSIZE - 1), &rd);
  CT_CHECK(FD_ISSET(runtime(FD_SETSIZE - 1), &rd), "FD_SET(FD_SETSIZE - 1) through __fdelt_chk");
  /* Before any socket exists: a fork would hand upgraded sockets over. */
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) {
    fd_set bad;
    FD_ZERO(&bad);
    FD_SET(runtime(FD_SETSIZE), &bad); /* __fdelt_chk: buffer overflow detected */
    _exit(0);
  }
  int status = 0;
  CT_ASSERT(waitpid(pid, &status, 0) == pid);
  CT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "FD_SET(FD_SETSIZE) aborts the process");
}

/* A bitmap of 4096 fds, for nfds above FD_SETSIZE. */
struct big_set {
  fd_set part[4];
};

static void big_zero(struct big_set* s) { memset(s, 0, sizeof *s); }
static void big_add(struct big_set* s, int fd) { FD_SET(fd, &s->part[0]); }
static int big_has(const struct big_set* s, int fd) { return FD_ISSET(fd, &s->part[0]); }

static void large_nfds(int client, int server) {
  ct_out("-- nfds above FD_SETSIZE");
  struct big_set rd, wr;
  big_zero(&rd);
  big_add(&rd, server);
  struct timeval tv = {0, 0};
  CT_RC("select nfds 4096, idle", select(4096, &rd.part[0], NULL, NULL, &tv), 0);
  CT_RC("send", send(client, "b", 1, 0), 1);
  ct_wait_readable(server);
  big_zero(&rd);
  big_add(&rd, server);
  tv.tv_sec = 2;
  CT_RC("select nfds 4096, data ready", select(4096, &rd.part[0], NULL, NULL, &tv), 1);
  CT_CHECK(big_has(&rd, server), "the socket is marked readable");
  big_zero(&rd);
  big_zero(&wr);
  big_add(&rd, server);
  big_add(&wr, server);
  struct timespec ts = {2, 0};
  CT_RC("pselect nfds FD_SETSIZE + 1, read and write sets",
        pselect(FD_SETSIZE + 1, &rd.part[0], &wr.part[0], NULL, &ts, NULL), 2);
  CT_CHECK(big_has(&rd, server) && big_has(&wr, server), "readable and writable");
  char c;
  CT_RC("recv", recv(server, &c, 1, 0), 1);
}

static void closed_fds(int client, int server) {
  ct_out("-- closed fds");
  /* A closed number above the socket's, below 64 (the kernel's fd table
   * has at least 64 entries). */
  const int closed = CT_OK("F_DUPFD 40 of stderr", fcntl(2, F_DUPFD, 40));
  CT_RC("close it", close(closed), 0);
  CT_CHECK(closed > server && closed < 64, "the closed number is above the socket's");
  CT_RC("send", send(client, "c", 1, 0), 1);
  ct_wait_readable(server);
  fd_set rd, wr, ex;
  struct timeval tv = {0, 0};
  static const char* const set_names[3] = {"readfds", "writefds", "exceptfds"};
  for (int which = 0; which < 3; ++which) {
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_ZERO(&ex);
    FD_SET(server, &rd);
    FD_SET(closed, which == 0 ? &rd : which == 1 ? &wr : &ex);
    char label[96];
    snprintf(label, sizeof label, "select, a closed fd in %s next to a ready socket", set_names[which]);
    CT_ERR(label, select(closed + 1, &rd, &wr, &ex, &tv), EBADF);
    FD_ZERO(&rd);
    FD_SET(server, &rd);
    FD_SET(closed, which == 0 ? &rd : which == 1 ? &wr : &ex);
    struct timespec ts = {0, 0};
    snprintf(label, sizeof label, "pselect, a closed fd in %s next to a ready socket", set_names[which]);
    CT_ERR(label, pselect(closed + 1, &rd, &wr, &ex, &ts, NULL), EBADF);
  }
  FD_ZERO(&rd);
  FD_SET(server, &rd);
  FD_SET(closed, &rd);
  CT_RC("select, the closed fd just beyond nfds", select(closed, &rd, NULL, NULL, &tv), 1);
  CT_CHECK(FD_ISSET(server, &rd), "the socket is marked readable");
  /* The kernel looks only at fds its fd table has room for (64 entries,
   * doubled as fds are opened): a closed fd far above is not looked at. */
  FD_ZERO(&rd);
  FD_SET(server, &rd);
  FD_SET(1000, &rd);
  CT_CHECK(fcntl(1000, F_GETFD) < 0 && errno == EBADF, "fd 1000 is closed");
  CT_RC("select, closed fd 1000 beyond the fd table", select(1001, &rd, NULL, NULL, &tv), 1);
  CT_CHECK(FD_ISSET(server, &rd), "the socket is marked readable");
  char c;
  CT_RC("recv", recv(server, &c, 1, 0), 1);
}

/* Resets a set to hold just fd. */
static fd_set* only(fd_set* set, int fd) {
  FD_ZERO(set);
  FD_SET(fd, set);
  return set;
}

static void pselect_sigmask(int client, int server) {
  ct_out("-- pselect signal mask");
  sigset_t blocked, open_mask, saved;
  ct_usr1_block_counted(&blocked, &saved);
  sigemptyset(&open_mask);
  fd_set rd;
  struct timespec ts50 = {0, 50 * 1000000L}, ts0 = {0, 0}, ts2s = {2, 0};
#define RD() only(&rd, server)
  CT_RC("raise SIGUSR1 (blocked: pending)", raise(SIGUSR1), 0);
  CT_RC("pselect, mask keeps it blocked, 50 ms", pselect(server + 1, RD(), NULL, NULL, &ts50, &blocked), 0);
  CT_RC("pselect, NULL mask, 50 ms", pselect(server + 1, RD(), NULL, NULL, &ts50, NULL), 0);
  struct timeval tv = {0, 50000};
  CT_RC("select, 50 ms", select(server + 1, RD(), NULL, NULL, &tv), 0);
  CT_CHECK(ct_usr1_count() == 0, "the handler did not run");
  CT_ERR("pselect, mask unblocks it, 2 s", pselect(server + 1, RD(), NULL, NULL, &ts2s, &open_mask), EINTR);
  CT_CHECK(ct_usr1_count() == 1, "the handler ran once, inside the call");
  CT_RC("raise SIGUSR1 again", raise(SIGUSR1), 0);
  CT_ERR("pselect, mask unblocks it, timeout 0", pselect(server + 1, RD(), NULL, NULL, &ts0, &open_mask), EINTR);
  CT_CHECK(ct_usr1_count() == 2, "a zero timeout still delivers the pending signal");
  CT_RC("raise SIGUSR1 again", raise(SIGUSR1), 0);
  CT_RC("send", send(client, "s", 1, 0), 1);
  ct_wait_readable(server);
  CT_RC("pselect, mask unblocks it, data ready", pselect(server + 1, RD(), NULL, NULL, &ts2s, &open_mask), 1);
  CT_CHECK(ct_usr1_count() == 2, "ready fds win: the signal stays pending");
  CT_RC("unblock SIGUSR1", sigprocmask(SIG_UNBLOCK, &blocked, NULL), 0);
  CT_CHECK(ct_usr1_count() == 3, "the handler ran on unblocking");
  sigprocmask(SIG_SETMASK, &saved, NULL);

  struct timespec bad = {0, 1000000000L};
  CT_ERR("pselect tv_nsec 1e9, data ready", pselect(server + 1, RD(), NULL, NULL, &bad, NULL), EINVAL);
  bad.tv_sec = -1;
  bad.tv_nsec = 0;
  CT_ERR("pselect negative tv_sec, data ready", pselect(server + 1, RD(), NULL, NULL, &bad, NULL), EINVAL);
  tv.tv_sec = -1;
  tv.tv_usec = 0;
  CT_ERR("select negative tv_sec, data ready", select(server + 1, RD(), NULL, NULL, &tv), EINVAL);
#undef RD
  char c;
  CT_RC("recv", recv(server, &c, 1, 0), 1);
}

static void urgent(int client, int server) {
  ct_out("-- urgent data on the warmed-up pair");
  fd_set rd, ex;
  struct timeval tv = {0, 0};
  CT_RC("send ordinary data", send(client, "ab", 2, 0), 2);
  ct_wait_readable(server);
  FD_ZERO(&rd);
  FD_ZERO(&ex);
  FD_SET(server, &rd);
  FD_SET(server, &ex);
  CT_RC("select, ordinary data only", select(server + 1, &rd, NULL, &ex, &tv), 1);
  ct_out("readfds=%d exceptfds=%d", FD_ISSET(server, &rd) ? 1 : 0, FD_ISSET(server, &ex) ? 1 : 0);
  char buf[8];
  CT_RC("recv ordinary data", recv(server, buf, sizeof buf, 0), 2);
  CT_RC("send MSG_OOB", send(client, "!", 1, MSG_OOB), 1);
  FD_ZERO(&ex);
  FD_SET(server, &ex);
  tv.tv_sec = 2;
  CT_RC("select exceptfds, urgent byte sent", select(server + 1, NULL, NULL, &ex, &tv), 1);
  CT_CHECK(FD_ISSET(server, &ex), "exceptfds marked");
  CT_RC("recv MSG_OOB", recv(server, buf, 1, MSG_OOB), 1);
  CT_CHECK(buf[0] == '!', "urgent byte is '!'");
  FD_ZERO(&ex);
  FD_SET(server, &ex);
  tv.tv_sec = 0;
  CT_RC("select exceptfds after the urgent byte was read", select(server + 1, NULL, NULL, &ex, &tv), 0);
  CT_RC("send after the urgent byte", send(client, "z", 1, 0), 1);
  CT_RC("recv", recv(server, buf, 1, 0), 1);
  CT_CHECK(buf[0] == 'z', "ordinary byte is 'z'");
}

int main(void) {
  ct_start("select_edges");
  fortified_fd_set();
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  large_nfds(client, server);
  closed_fds(client, server);
  pselect_sigmask(client, server);
  urgent(client, server);
  close(client);
  close(server);
  return 0;
}
