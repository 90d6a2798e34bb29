/* poll and ppoll edge cases beyond poll_mixed, with a TCP pair that carried
 * data first (so over a verbs device the set holds an upgraded socket):
 * events = 0 (nothing but POLLHUP/POLLERR/POLLNVAL is reported), negative
 * fds (ignored, revents cleared, not counted), a closed fd (POLLNVAL, even
 * with events = 0, counted), ppoll swapping the signal mask atomically,
 * timeouts (0 returns at once, 50 ms is honoured, negative = forever),
 * ppoll's invalid timespecs and poll's nfds above RLIMIT_NOFILE. */
#include "common.h"
#include "warm_up.h"

#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void show(const char* what, int rc, const struct pollfd* p, int n, const char* const* names) {
  char line[256];
  int len;
  if (rc < 0) len = snprintf(line, sizeof line, "%s: poll=-1 %s", what, ct_errname(errno));
  else len = snprintf(line, sizeof line, "%s: poll=%d", what, rc);
  for (int i = 0; rc >= 0 && i < n && len < (int)sizeof line; ++i)
    len += snprintf(line + len, sizeof line - len, " %s=%s", names[i], ct_poll_str(p[i].revents));
  ct_out("%s", line);
}

/* Sets every revents to garbage first: the call must overwrite each one. */
static int poll_dirty(struct pollfd* p, int n, int timeout) {
  for (int i = 0; i < n; ++i) p[i].revents = (short)0x7fff;
  return poll(p, (nfds_t)n, timeout);
}

static int ppoll_dirty(struct pollfd* p, int n, const struct timespec* ts, const sigset_t* mask) {
  for (int i = 0; i < n; ++i) p[i].revents = (short)0x7fff;
  return ppoll(p, (nfds_t)n, ts, mask);
}

static void zero_events(void) {
  ct_out("-- events = 0, negative and closed fds");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int closed = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  close(closed);
  static const char* const names[4] = {"tcp-no-events", "negative", "negated-tcp", "closed-no-events"};
  struct pollfd p[4] = {{server, 0, 0}, {-1, POLLIN, 0}, {-server, POLLIN | POLLOUT, 0}, {closed, 0, 0}};
  show("idle", poll_dirty(p, 4, 0), p, 4, names);
  CT_RC("send", send(client, "z", 1, 0), 1);
  ct_wait_readable(server);
  show("data pending", poll_dirty(p, 4, 0), p, 4, names);
  struct timespec ts = {0, 0};
  show("data pending, ppoll", ppoll_dirty(p, 4, &ts, NULL), p, 4, names);
  p[0].events = POLLIN;
  show("POLLIN asked again", poll_dirty(p, 4, 0), p, 4, names);
  p[0].events = 0;

  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  CT_RC("peer SO_LINGER 0", setsockopt(client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  CT_RC("peer close (reset)", close(client), 0);
  short seen = 0;
  for (int i = 0; i < 100 && !(seen & POLLERR); ++i) {
    struct pollfd one = {server, 0, 0};
    if (poll(&one, 1, 20) == 1) seen = one.revents;
  }
  CT_CHECK(seen & POLLERR, "the reset shows with events = 0");
  show("after the reset", poll_dirty(p, 4, 0), p, 4, names);
  show("after the reset, ppoll", ppoll_dirty(p, 4, &ts, NULL), p, 4, names);
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(server, SOL_SOCKET, SO_ERROR, &err, &len);
  ct_out("SO_ERROR: %s", ct_errname(err));
  show("after SO_ERROR was read", poll_dirty(p, 4, 0), p, 4, names);
  close(server);

  /* Both directions shut locally. */
  ct_tcp_pair_warm(&client, &server);
  CT_RC("own SHUT_RDWR", shutdown(server, SHUT_RDWR), 0);
  struct pollfd q[2] = {{server, 0, 0}, {server, POLLIN | POLLOUT | POLLRDHUP, 0}};
  static const char* const qnames[2] = {"tcp-no-events", "tcp-all"};
  show("own SHUT_RDWR", poll_dirty(q, 2, 2000), q, 2, qnames);
  close(client);
  close(server);
}

static void ppoll_sigmask(void) {
  ct_out("-- ppoll signal mask");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  sigset_t blocked, open_mask, saved;
  ct_usr1_block_counted(&blocked, &saved);
  sigemptyset(&open_mask);
  struct pollfd p = {server, POLLIN, 0};
  struct timespec ts50 = {0, 50 * 1000000L}, ts0 = {0, 0}, ts2s = {2, 0};
  CT_RC("raise SIGUSR1 (blocked: pending)", raise(SIGUSR1), 0);
  CT_RC("ppoll, mask keeps it blocked, 50 ms", ppoll(&p, 1, &ts50, &blocked), 0);
  CT_RC("ppoll, NULL mask, 50 ms", ppoll(&p, 1, &ts50, NULL), 0);
  CT_RC("poll, 50 ms", poll(&p, 1, 50), 0);
  CT_CHECK(ct_usr1_count() == 0, "the handler did not run");
  CT_ERR("ppoll, mask unblocks it, 2 s", ppoll(&p, 1, &ts2s, &open_mask), EINTR);
  CT_CHECK(ct_usr1_count() == 1, "the handler ran once, inside the call");
  CT_RC("raise SIGUSR1 again", raise(SIGUSR1), 0);
  CT_ERR("ppoll, mask unblocks it, timeout 0", ppoll(&p, 1, &ts0, &open_mask), EINTR);
  CT_CHECK(ct_usr1_count() == 2, "a zero timeout still delivers the pending signal");
  CT_RC("raise SIGUSR1 again", raise(SIGUSR1), 0);
  CT_ERR("ppoll, mask unblocks it, no timeout", ppoll(&p, 1, NULL, &open_mask), EINTR);
  CT_CHECK(ct_usr1_count() == 3, "the handler ran once more");

  CT_RC("raise SIGUSR1 again", raise(SIGUSR1), 0);
  CT_RC("send", send(client, "s", 1, 0), 1);
  ct_wait_readable(server);
  CT_RC("ppoll, mask unblocks it, data ready", ppoll(&p, 1, &ts2s, &open_mask), 1);
  ct_out("revents: %s", ct_poll_str(p.revents));
  CT_CHECK(ct_usr1_count() == 3, "ready fds win: the signal stays pending");
  sigset_t pending;
  sigpending(&pending);
  CT_CHECK(sigismember(&pending, SIGUSR1), "SIGUSR1 still pending");
  CT_RC("unblock SIGUSR1", sigprocmask(SIG_UNBLOCK, &blocked, NULL), 0);
  CT_CHECK(ct_usr1_count() == 4, "the handler ran on unblocking");
  sigprocmask(SIG_SETMASK, &saved, NULL);
  char c;
  CT_RC("recv", recv(server, &c, 1, 0), 1);
  close(client);
  close(server);
}

static void timeouts(void) {
  ct_out("-- timeouts");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  struct pollfd p = {server, POLLIN, 0};
  long start = ct_now_ms();
  CT_RC("poll timeout 0", poll(&p, 1, 0), 0);
  ct_out("returned at once: %s", ct_now_ms() - start < 100 ? "yes" : "no");
  start = ct_now_ms();
  CT_RC("poll timeout 50 ms", poll(&p, 1, 50), 0);
  ct_out(">= 50 ms: %s", ct_now_ms() - start >= 50 ? "yes" : "no");
  struct timespec ts = {0, 0};
  start = ct_now_ms();
  CT_RC("ppoll timespec 0", ppoll(&p, 1, &ts, NULL), 0);
  ct_out("returned at once: %s", ct_now_ms() - start < 100 ? "yes" : "no");
  ts.tv_nsec = 50 * 1000000L;
  start = ct_now_ms();
  CT_RC("ppoll 50 ms", ppoll(&p, 1, &ts, NULL), 0);
  ct_out(">= 50 ms: %s", ct_now_ms() - start >= 50 ? "yes" : "no");
  ts.tv_nsec = 1;
  start = ct_now_ms();
  CT_RC("ppoll 1 ns", ppoll(&p, 1, &ts, NULL), 0);
  ct_out("returned at once: %s", ct_now_ms() - start < 100 ? "yes" : "no");

  /* A blocking call on a pair where data comes only after a while: not
   * deterministic unless the data is already there. */
  CT_RC("send", send(client, "t", 1, 0), 1);
  ct_wait_readable(server);
  CT_RC("poll timeout -1, data ready", poll(&p, 1, -1), 1);
  CT_RC("poll timeout -7 (forever), data ready", poll(&p, 1, -7), 1);
  CT_RC("ppoll NULL timespec, data ready", ppoll(&p, 1, NULL, NULL), 1);

  ts.tv_sec = 0;
  ts.tv_nsec = 1000000000L;
  CT_ERR("ppoll tv_nsec 1e9, data ready", ppoll(&p, 1, &ts, NULL), EINVAL);
  ts.tv_sec = -1;
  ts.tv_nsec = 0;
  CT_ERR("ppoll negative tv_sec, data ready", ppoll(&p, 1, &ts, NULL), EINVAL);

  /* nfds above RLIMIT_NOFILE: EINVAL before anything is looked at (the
   * array is big enough, all but the first entry negative). */
  struct rlimit saved, low;
  CT_RC("getrlimit RLIMIT_NOFILE", getrlimit(RLIMIT_NOFILE, &saved), 0);
  low = saved;
  low.rlim_cur = 256;
  CT_RC("lower RLIMIT_NOFILE to 256", setrlimit(RLIMIT_NOFILE, &low), 0);
  struct pollfd* many = calloc(257, sizeof *many);
  CT_ASSERT(many != NULL);
  many[0] = p;
  for (int i = 1; i < 257; ++i) many[i].fd = -1;
  CT_RC("poll 256 entries, data ready", poll(many, 256, 0), 1);
  CT_ERR("poll 257 entries (above the limit), data ready", poll(many, 257, 0), EINVAL);
  CT_RC("restore RLIMIT_NOFILE", setrlimit(RLIMIT_NOFILE, &saved), 0);
  free(many);
  close(client);
  close(server);
}

int main(void) {
  ct_start("poll_edges");
  zero_events();
  ppoll_sigmask();
  timeouts();
  return 0;
}
