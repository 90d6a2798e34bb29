/* epoll flags and edge cases beyond epoll_level and epoll_edge, on TCP pairs
 * that carried data first (so over a verbs device they are upgraded):
 * EPOLLONESHOT (a disarmed entry reports nothing, not even a hang-up; MOD
 * re-arms with new events, also edge-triggered), EPOLLRDHUP with and without
 * data before the FIN, EPOLLERR/EPOLLHUP after a reset (SO_LINGER 0) and
 * after shutting both directions, EPOLLEXCLUSIVE (accepted at ADD, EINVAL
 * for MOD and for the flags it excludes), the user data returned untouched,
 * epoll_ctl errors for MOD/DEL, epoll_pwait/epoll_pwait2 swapping the signal
 * mask atomically, epoll_pwait2 timeouts, EPOLLOUT after the send buffer
 * filled and was drained. */
#include "common.h"
#include "warm_up.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static void add(int ep, int fd, uint32_t events, uint64_t data, const char* label) {
  struct epoll_event ev = {.events = events, .data.u64 = data};
  CT_RC(label, epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
}

static void mod(int ep, int fd, uint32_t events, uint64_t data, const char* label) {
  struct epoll_event ev = {.events = events, .data.u64 = data};
  CT_RC(label, epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev), 0);
}

/* Waits up to timeout ms on a set of one fd; prints the count, the events
 * and the user data. Returns the events (0 on timeout). */
static uint32_t wait_show(int ep, const char* what, int timeout) {
  struct epoll_event ev[4];
  int rc = epoll_wait(ep, ev, 4, timeout);
  if (rc < 0) CT_FAIL("%s: epoll_wait: %s", what, ct_errname(errno));
  if (rc > 1) CT_FAIL("%s: %d events, one fd per set here", what, rc);
  if (rc == 0) {
    ct_out("%s: 0", what);
    return 0;
  }
  ct_out("%s: 1 %s data=0x%llx", what, ct_epoll_str(ev[0].events), (unsigned long long)ev[0].data.u64);
  return ev[0].events;
}

/* Level-triggered sets: waits silently until all of `bits` show, prints once. */
static void wait_until(int ep, uint32_t bits, const char* what) {
  struct epoll_event ev[4];
  for (int i = 0; i < 150; ++i) {
    int rc = epoll_wait(ep, ev, 4, 20);
    if (rc < 0) CT_FAIL("%s: epoll_wait: %s", what, ct_errname(errno));
    if (rc == 1 && (ev[0].events & bits) == bits) {
      ct_out("%s: 1 %s data=0x%llx", what, ct_epoll_str(ev[0].events), (unsigned long long)ev[0].data.u64);
      return;
    }
  }
  CT_FAIL("%s: %s never reported", what, ct_epoll_str(bits));
}

static void oneshot(void) {
  ct_out("-- oneshot");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN | EPOLLONESHOT, 0x11, "ADD EPOLLIN|EPOLLONESHOT");
  CT_RC("send", send(client, "a", 1, 0), 1);
  wait_show(ep, "fires once", 2000);
  CT_RC("peer SHUT_WR", shutdown(client, SHUT_WR), 0);
  CT_CHECK(ct_wait(server, POLLRDHUP, 2000) & POLLRDHUP, "the FIN arrived");
  wait_show(ep, "disarmed: no event for more data or the FIN", 50);
  mod(ep, server, EPOLLOUT | EPOLLONESHOT, 0x12, "MOD re-arm with EPOLLOUT|EPOLLONESHOT");
  wait_show(ep, "re-armed for EPOLLOUT", 2000);
  wait_show(ep, "disarmed again", 0);
  mod(ep, server, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, 0x13, "MOD re-arm with EPOLLIN|EPOLLRDHUP|EPOLLONESHOT");
  wait_show(ep, "re-armed for EPOLLIN|EPOLLRDHUP", 2000);
  CT_RC("DEL of a disarmed entry", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), 0);
  CT_ERR("DEL again", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), ENOENT);
  close(ep);
  close(client);
  close(server);

  /* Edge-triggered one-shot: MOD re-arms and reports what is still ready,
   * with no new arrival. */
  ct_tcp_pair_warm(&client, &server);
  ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN | EPOLLET | EPOLLONESHOT, 0x21, "ADD EPOLLIN|EPOLLET|EPOLLONESHOT");
  CT_RC("send 2 bytes", send(client, "bc", 2, 0), 2);
  wait_show(ep, "edge, one-shot", 2000);
  wait_show(ep, "nothing more", 0);
  mod(ep, server, EPOLLIN | EPOLLET | EPOLLONESHOT, 0x22, "MOD re-arm, data still pending");
  wait_show(ep, "re-armed with data pending", 2000);
  wait_show(ep, "disarmed", 0);
  char buf[8];
  CT_RC("recv", recv(server, buf, sizeof buf, 0), 2);
  close(ep);
  close(client);
  close(server);
}

static void rdhup(void) {
  ct_out("-- rdhup");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep_et = CT_OK("epoll_create1 edge", epoll_create1(0));
  int ep_plain = CT_OK("epoll_create1 level without EPOLLRDHUP", epoll_create1(0));
  add(ep_et, server, EPOLLIN | EPOLLRDHUP | EPOLLET, 0x31, "ADD EPOLLIN|EPOLLRDHUP|EPOLLET");
  add(ep_plain, server, EPOLLIN, 0x32, "ADD EPOLLIN");
  CT_RC("send 3 bytes", send(client, "abc", 3, 0), 3);
  CT_RC("peer SHUT_WR", shutdown(client, SHUT_WR), 0);
  CT_CHECK(ct_wait(server, POLLRDHUP, 2000) & POLLRDHUP, "the FIN arrived");
  wait_show(ep_et, "data then FIN, edge-triggered", 2000);
  wait_show(ep_et, "no new edge", 0);
  wait_show(ep_plain, "data then FIN, EPOLLRDHUP not asked", 2000);
  char buf[8];
  CT_RC("recv the data", recv(server, buf, sizeof buf, 0), 3);
  CT_RC("recv end of file", recv(server, buf, sizeof buf, 0), 0);
  wait_show(ep_et, "after reading to end of file, no new edge", 0);
  wait_show(ep_plain, "end of file stays readable", 0);
  CT_RC("own SHUT_WR", shutdown(server, SHUT_WR), 0);
  wait_show(ep_et, "own SHUT_WR: a new edge with EPOLLHUP", 2000);
  close(ep_et);
  close(ep_plain);
  close(client);
  close(server);
}

static void hup_err(void) {
  ct_out("-- hup and err");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  int ep_none = CT_OK("epoll_create1 empty interest", epoll_create1(0));
  add(ep, server, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 0x41, "ADD EPOLLIN|EPOLLOUT|EPOLLRDHUP");
  add(ep_none, server, 0, 0x42, "ADD with no events");
  wait_show(ep_none, "no events asked, none reported", 0);
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  CT_RC("peer SO_LINGER 0", setsockopt(client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  CT_RC("peer close (reset)", close(client), 0);
  wait_until(ep, EPOLLERR | EPOLLHUP, "after the reset");
  wait_show(ep_none, "after the reset, no events asked", 0);
  int err = -1;
  socklen_t len = sizeof err;
  CT_RC("getsockopt SO_ERROR", getsockopt(server, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  ct_out("SO_ERROR: %s", ct_errname(err));
  wait_show(ep, "after SO_ERROR was read", 0);
  char buf[8];
  CT_RC("recv after the reset", recv(server, buf, sizeof buf, 0), 0);
  close(ep);
  close(ep_none);
  close(server);

  /* Both directions shut locally, the peer still open. */
  ct_tcp_pair_warm(&client, &server);
  ep = CT_OK("epoll_create1", epoll_create1(0));
  ep_none = CT_OK("epoll_create1 empty interest", epoll_create1(0));
  add(ep, server, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 0x43, "ADD EPOLLIN|EPOLLOUT|EPOLLRDHUP");
  add(ep_none, server, 0, 0x44, "ADD with no events");
  CT_RC("own SHUT_RD", shutdown(server, SHUT_RD), 0);
  wait_show(ep, "after own SHUT_RD", 2000);
  wait_show(ep_none, "after own SHUT_RD, no events asked", 0);
  CT_RC("own SHUT_WR", shutdown(server, SHUT_WR), 0);
  wait_show(ep, "both directions shut", 2000);
  wait_show(ep_none, "both directions shut, no events asked", 0);
  CT_RC("peer sees end of file", recv(client, buf, sizeof buf, 0), 0);
  close(ep);
  close(ep_none);
  close(client);
  close(server);
}

static void exclusive(void) {
  ct_out("-- exclusive");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  int other = CT_OK("epoll_create1 other", epoll_create1(0));
  struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = 0x51};
  CT_RC("ADD EPOLLIN|EPOLLEXCLUSIVE", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), 0);
  CT_RC("send", send(client, "x", 1, 0), 1);
  wait_show(ep, "exclusive entry reports", 2000);
  ev.events = EPOLLIN;
  CT_ERR("MOD of an exclusive entry", epoll_ctl(ep, EPOLL_CTL_MOD, server, &ev), EINVAL);
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  CT_ERR("MOD with EPOLLEXCLUSIVE", epoll_ctl(ep, EPOLL_CTL_MOD, server, &ev), EINVAL);
  wait_show(ep, "entry unchanged after the failed MODs", 0);
  CT_RC("DEL of an exclusive entry", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), 0);
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLEXCLUSIVE;
  CT_ERR("ADD EPOLLEXCLUSIVE with EPOLLRDHUP", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), EINVAL);
  ev.events = EPOLLIN | EPOLLONESHOT | EPOLLEXCLUSIVE;
  CT_ERR("ADD EPOLLEXCLUSIVE with EPOLLONESHOT", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), EINVAL);
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  CT_ERR("ADD EPOLLEXCLUSIVE of an epoll fd", epoll_ctl(ep, EPOLL_CTL_ADD, other, &ev), EINVAL);
  ev.events = EPOLLIN;
  CT_RC("ADD without EPOLLEXCLUSIVE", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), 0);
  wait_show(ep, "plain entry reports", 2000);
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  CT_ERR("MOD adding EPOLLEXCLUSIVE", epoll_ctl(ep, EPOLL_CTL_MOD, server, &ev), EINVAL);
  close(other);
  close(ep);
  close(client);
  close(server);
}

static void user_data(void) {
  ct_out("-- user data");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN, 0xfedcba9876543210ull, "ADD with data 0xfedcba9876543210");
  CT_RC("send", send(client, "d", 1, 0), 1);
  wait_show(ep, "data returned", 2000);
  mod(ep, server, EPOLLIN, 0x8000000000000001ull, "MOD with data 0x8000000000000001");
  wait_show(ep, "new data returned", 2000);
  mod(ep, server, EPOLLIN | EPOLLET, 0xffffffffffffffffull, "MOD with all bits set, edge-triggered");
  wait_show(ep, "all bits returned", 2000);
  static int anchor;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &anchor};
  CT_RC("MOD with data.ptr", epoll_ctl(ep, EPOLL_CTL_MOD, server, &ev), 0);
  struct epoll_event out;
  memset(&out, 0, sizeof out);
  CT_RC("epoll_wait", epoll_wait(ep, &out, 1, 2000), 1);
  CT_CHECK(out.data.ptr == &anchor, "data.ptr returned untouched");
  close(ep);
  close(client);
  close(server);
}

static void ctl_errors(void) {
  ct_out("-- epoll_ctl errors");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0x61};
  CT_ERR("MOD of a stream socket not in the set", epoll_ctl(ep, EPOLL_CTL_MOD, server, &ev), ENOENT);
  CT_ERR("DEL of a stream socket not in the set", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), ENOENT);
  CT_RC("ADD", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), 0);
  CT_RC("send", send(client, "e", 1, 0), 1);
  wait_show(ep, "ready", 2000);
  CT_ERR("ADD again after a wait", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), EEXIST);
  CT_ERR("MOD with a NULL event", epoll_ctl(ep, EPOLL_CTL_MOD, server, NULL), EFAULT);
  CT_ERR("MOD with epfd as fd", epoll_ctl(ep, EPOLL_CTL_MOD, ep, &ev), EINVAL);
  CT_ERR("DEL with epfd as fd", epoll_ctl(ep, EPOLL_CTL_DEL, ep, NULL), EINVAL);
  CT_ERR("MOD with a bad op on a member", epoll_ctl(ep, 42, server, &ev), EINVAL);

  int closed = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  close(closed);
  CT_ERR("MOD of a closed fd", epoll_ctl(ep, EPOLL_CTL_MOD, closed, &ev), EBADF);
  CT_ERR("DEL of a closed fd", epoll_ctl(ep, EPOLL_CTL_DEL, closed, NULL), EBADF);

  char path[] = "/tmp/vsock-epoll-flags.XXXXXX";
  int file = CT_OK("mkstemp (a regular file)", mkstemp(path));
  unlink(path);
  CT_ERR("ADD of a regular file", epoll_ctl(ep, EPOLL_CTL_ADD, file, &ev), EPERM);
  CT_ERR("MOD of a regular file", epoll_ctl(ep, EPOLL_CTL_MOD, file, &ev), EPERM);
  CT_ERR("DEL of a regular file", epoll_ctl(ep, EPOLL_CTL_DEL, file, NULL), EPERM);
  close(file);

  CT_RC("DEL", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), 0);
  CT_ERR("MOD after DEL", epoll_ctl(ep, EPOLL_CTL_MOD, server, &ev), ENOENT);
  wait_show(ep, "empty set", 0);
  int dead = CT_OK("epoll_create1", epoll_create1(0));
  CT_RC("ADD to a second set", epoll_ctl(dead, EPOLL_CTL_ADD, server, &ev), 0);
  CT_RC("close that set", close(dead), 0);
  CT_ERR("epoll_ctl on a closed epoll fd", epoll_ctl(dead, EPOLL_CTL_MOD, server, &ev), EBADF);
  struct epoll_event out[1];
  CT_ERR("epoll_wait on a closed epoll fd", epoll_wait(dead, out, 1, 0), EBADF);
  close(ep);
  close(client);
  close(server);
}

static void pwait_sigmask(void) {
  ct_out("-- epoll_pwait and epoll_pwait2 signal masks");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN, 0x71, "ADD EPOLLIN");
  sigset_t blocked, open_mask, saved;
  ct_usr1_block_counted(&blocked, &saved);
  sigemptyset(&open_mask);
  struct epoll_event ev[2];
  struct timespec ts50 = {0, 50 * 1000000L}, ts0 = {0, 0}, ts2s = {2, 0};

  for (int round = 0; round < 2; ++round) {
    const int p2 = round == 1;
    const char* fn = p2 ? "epoll_pwait2" : "epoll_pwait";
#define PW(timeout_ms, ts, mask) (p2 ? epoll_pwait2(ep, ev, 2, (ts), (mask)) : epoll_pwait(ep, ev, 2, (timeout_ms), (mask)))
    char label[128];
    ct_usr1_reset();
    CT_RC("raise SIGUSR1 (blocked: pending)", raise(SIGUSR1), 0);
    snprintf(label, sizeof label, "%s, mask keeps it blocked, 50 ms", fn);
    CT_RC(label, PW(50, &ts50, &blocked), 0);
    snprintf(label, sizeof label, "%s, NULL mask, 50 ms", fn);
    CT_RC(label, PW(50, &ts50, NULL), 0);
    CT_CHECK(ct_usr1_count() == 0, "the handler did not run");
    snprintf(label, sizeof label, "%s, mask unblocks it, timeout 0", fn);
    CT_RC(label, PW(0, &ts0, &open_mask), 0);
    CT_CHECK(ct_usr1_count() == 0, "timeout 0 returns before looking at signals");
    snprintf(label, sizeof label, "%s, mask unblocks it, 2 s", fn);
    CT_ERR(label, PW(2000, &ts2s, &open_mask), EINTR);
    CT_CHECK(ct_usr1_count() == 1, "the handler ran once, inside the call");

    CT_RC("raise SIGUSR1 again", raise(SIGUSR1), 0);
    CT_RC("send", send(client, "s", 1, 0), 1);
    ct_wait_readable(server);
    snprintf(label, sizeof label, "%s, mask unblocks it, data ready", fn);
    CT_RC(label, PW(2000, &ts2s, &open_mask), 1);
    CT_CHECK(ct_usr1_count() == 1, "ready events win: the signal stays pending");
    char c;
    CT_RC("recv", recv(server, &c, 1, 0), 1);
    sigset_t pending;
    sigpending(&pending);
    CT_CHECK(sigismember(&pending, SIGUSR1), "SIGUSR1 still pending");
    CT_RC("unblock SIGUSR1", sigprocmask(SIG_UNBLOCK, &blocked, NULL), 0);
    CT_CHECK(ct_usr1_count() == 2, "the handler ran on unblocking");
    CT_RC("block SIGUSR1", sigprocmask(SIG_BLOCK, &blocked, NULL), 0);
#undef PW
  }
  sigprocmask(SIG_SETMASK, &saved, NULL);
  close(ep);
  close(client);
  close(server);
}

static void pwait2_timeouts(void) {
  ct_out("-- epoll_pwait2 timeouts");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  add(ep, server, EPOLLIN, 0x81, "ADD EPOLLIN");
  struct epoll_event ev[2];
  struct timespec ts = {0, 0};
  long start = ct_now_ms();
  CT_RC("epoll_pwait2 timespec 0", epoll_pwait2(ep, ev, 2, &ts, NULL), 0);
  ct_out("returned at once: %s", ct_now_ms() - start < 100 ? "yes" : "no");
  ts.tv_nsec = 1;
  start = ct_now_ms();
  CT_RC("epoll_pwait2 1 ns", epoll_pwait2(ep, ev, 2, &ts, NULL), 0);
  ct_out("returned at once: %s", ct_now_ms() - start < 100 ? "yes" : "no");
  ts.tv_nsec = 30 * 1000000L;
  start = ct_now_ms();
  CT_RC("epoll_pwait2 30 ms", epoll_pwait2(ep, ev, 2, &ts, NULL), 0);
  ct_out(">= 30 ms: %s", ct_now_ms() - start >= 30 ? "yes" : "no");
  ts.tv_nsec = 1000000000L;
  CT_ERR("epoll_pwait2 tv_nsec 1e9", epoll_pwait2(ep, ev, 2, &ts, NULL), EINVAL);
  ts.tv_sec = -1;
  ts.tv_nsec = 0;
  CT_ERR("epoll_pwait2 negative tv_sec", epoll_pwait2(ep, ev, 2, &ts, NULL), EINVAL);
  CT_RC("send", send(client, "t", 1, 0), 1);
  ct_wait_readable(server);
  ts.tv_sec = 0;
  CT_RC("epoll_pwait2 timespec 0, data ready", epoll_pwait2(ep, ev, 2, &ts, NULL), 1);
  CT_RC("epoll_wait timeout -5 (forever), data ready", epoll_wait(ep, ev, 2, -5), 1);
  close(ep);
  close(client);
  close(server);
}

static void epollout_refill(void) {
  ct_out("-- EPOLLOUT after a full send buffer");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  CT_RC("client O_NONBLOCK", fcntl(client, F_SETFL, O_NONBLOCK), 0);
  int ep = CT_OK("epoll_create1 level", epoll_create1(0));
  int ep_et = CT_OK("epoll_create1 edge", epoll_create1(0));
  add(ep, client, EPOLLOUT, 0x91, "ADD EPOLLOUT");
  add(ep_et, client, EPOLLOUT | EPOLLET, 0x92, "ADD EPOLLOUT|EPOLLET");
  wait_show(ep, "writable", 0);
  wait_show(ep_et, "writable edge", 0);
  wait_show(ep_et, "no second edge", 0);
  static unsigned char chunk[65536];
  size_t total = 0;
  int full = 0;
  for (int i = 0; i < 4096 && !full; ++i) {
    ct_pattern(chunk, sizeof chunk, 9, total);
    ssize_t n = send(client, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EAGAIN) full = 1;
    else if (n <= 0) CT_FAIL("send: %zd %s", n, ct_errname(errno));
    else total += (size_t)n;
  }
  CT_CHECK(full, "send returned EAGAIN");
  wait_show(ep, "full: not writable", 0);
  wait_show(ep_et, "full: no edge", 0);
  static unsigned char in[65536];
  size_t got = 0;
  while (got < total) {
    size_t want = total - got < sizeof in ? total - got : sizeof in;
    ssize_t n = recv(server, in, want, 0);
    if (n <= 0) CT_FAIL("recv: %zd %s with %zu bytes missing", n, ct_errname(errno), total - got);
    CT_ASSERT(ct_pattern_ok(in, (size_t)n, 9, got));
    got += (size_t)n;
  }
  ct_out("peer drained every byte sent: yes");
  wait_show(ep, "drained: writable", 2000);
  wait_show(ep_et, "drained: a new edge", 2000);
  wait_show(ep_et, "no second edge", 0);
  close(ep);
  close(ep_et);
  close(client);
  close(server);
}

int main(void) {
  ct_start("epoll_flags");
  oneshot();
  rdhup();
  hup_err();
  exclusive();
  user_data();
  ctl_errors();
  pwait_sigmask();
  pwait2_timeouts();
  epollout_refill();
  return 0;
}
