/* Threads sharing sockets and epoll sets, on TCP pairs that carried data
 * first (so over a verbs device they are upgraded): one thread sends while
 * another receives on the same socket (a bounded echoed stream, byte-exact);
 * several threads, each with its own epoll set over one shared listening
 * socket, accept (every connection exactly once); several threads blocked in
 * epoll_wait on one shared set of one-shot entries (every wake-up handled,
 * no byte lost); a thread blocked in poll or epoll_wait while another closes
 * the watched socket (only what the kernel makes deterministic). Only totals
 * are printed: which thread did what is not stable. Every loop is bounded in
 * count and in time. */
#include "common.h"
#include "warm_up.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum { kDeadlineMs = 10000 };

static void start_thread(pthread_t* t, void* (*fn)(void*), void* arg) {
  if (pthread_create(t, NULL, fn, arg) != 0) CT_FAIL("pthread_create");
}

/* ---- one socket, a sending and a receiving thread ---- */

enum { kStreamBytes = 512 * 1024, kStreamChunk = 16 * 1024 };

struct duplex {
  int fd;
  size_t done;
  int exact;
};

static void* duplex_sender(void* arg) {
  struct duplex* d = arg;
  static unsigned char chunk[kStreamChunk];
  while (d->done < kStreamBytes) {
    size_t n = kStreamBytes - d->done < sizeof chunk ? kStreamBytes - d->done : sizeof chunk;
    ct_pattern(chunk, n, 3, d->done);
    ct_send_all(d->fd, chunk, n);
    d->done += n;
  }
  return NULL;
}

static void* duplex_receiver(void* arg) {
  struct duplex* d = arg;
  static unsigned char buf[kStreamChunk];
  d->exact = 1;
  while (d->done < kStreamBytes) {
    size_t want = kStreamBytes - d->done < sizeof buf ? kStreamBytes - d->done : sizeof buf;
    ssize_t n = recv(d->fd, buf, want, 0);
    if (n <= 0) CT_FAIL("receiver thread: recv %zd %s", n, ct_errname(errno));
    if (!ct_pattern_ok(buf, (size_t)n, 3, d->done)) d->exact = 0;
    d->done += (size_t)n;
  }
  return NULL;
}

static void* duplex_echo(void* arg) {
  struct duplex* d = arg;
  static unsigned char buf[kStreamChunk];
  while (d->done < kStreamBytes) {
    ssize_t n = recv(d->fd, buf, sizeof buf, 0);
    if (n <= 0) CT_FAIL("echo thread: recv %zd %s", n, ct_errname(errno));
    ct_send_all(d->fd, buf, (size_t)n);
    d->done += (size_t)n;
  }
  return NULL;
}

static void send_and_recv_threads(void) {
  ct_out("-- a sending and a receiving thread on one socket");
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  struct duplex tx = {.fd = client}, rx = {.fd = client}, echo = {.fd = server};
  pthread_t t_tx, t_rx, t_echo;
  start_thread(&t_echo, duplex_echo, &echo);
  start_thread(&t_rx, duplex_receiver, &rx);
  start_thread(&t_tx, duplex_sender, &tx);
  pthread_join(t_tx, NULL);
  pthread_join(t_rx, NULL);
  pthread_join(t_echo, NULL);
  ct_out("sender thread: %zu bytes", tx.done);
  ct_out("echo thread: %zu bytes", echo.done);
  ct_out("receiver thread: %zu bytes", rx.done);
  CT_CHECK(rx.exact, "the echoed stream is byte-exact");
  CT_RC("shutdown SHUT_WR", shutdown(client, SHUT_WR), 0);
  char c;
  CT_RC("echo side sees end of file", recv(server, &c, 1, 0), 0);
  close(client);
  close(server);
}

/* ---- accepting threads, one epoll set each, one listening socket ---- */

enum { kAcceptors = 3, kClients = 12 };

static int g_listener;
static atomic_int g_accepted;
static atomic_int g_seen[kClients];
static atomic_int g_stop_accepting;

static void* acceptor(void* arg) {
  (void)arg;
  int ep = epoll_create1(0);
  if (ep < 0) CT_FAIL("acceptor: epoll_create1: %s", ct_errname(errno));
  struct epoll_event ev = {.events = EPOLLIN};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, g_listener, &ev) != 0) CT_FAIL("acceptor: epoll_ctl: %s", ct_errname(errno));
  const long deadline = ct_now_ms() + kDeadlineMs;
  while (!atomic_load(&g_stop_accepting) && ct_now_ms() < deadline) {
    struct epoll_event out;
    int rc = epoll_wait(ep, &out, 1, 50);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) CT_FAIL("acceptor: epoll_wait: %s", ct_errname(errno));
    if (rc == 0) continue;
    int fd = accept4(g_listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue; /* another thread took it */
    if (fd < 0) CT_FAIL("acceptor: accept4: %s", ct_errname(errno));
    atomic_fetch_add(&g_accepted, 1);
    unsigned char id = 0;
    if ((ct_wait(fd, POLLIN, 5000) & POLLIN) == 0) CT_FAIL("acceptor: no id from the client");
    if (recv(fd, &id, 1, 0) != 1 || id >= kClients) CT_FAIL("acceptor: bad id");
    atomic_fetch_add(&g_seen[id], 1);
    unsigned char reply = (unsigned char)(id + 100);
    if (send(fd, &reply, 1, 0) != 1) CT_FAIL("acceptor: send: %s", ct_errname(errno));
    close(fd);
  }
  close(ep);
  return NULL;
}

static void accepting_threads(void) {
  ct_out("-- accepting threads, one epoll set each, one listening socket");
  struct sockaddr_in addr;
  g_listener = ct_tcp_listener(&addr);
  CT_RC("listener O_NONBLOCK", fcntl(g_listener, F_SETFL, O_NONBLOCK), 0);
  pthread_t threads[kAcceptors];
  for (int i = 0; i < kAcceptors; ++i) start_thread(&threads[i], acceptor, NULL);
  int clients[kClients];
  for (int i = 0; i < kClients; ++i) clients[i] = ct_tcp_connect(&addr);
  for (int i = 0; i < kClients; ++i) {
    unsigned char id = (unsigned char)i;
    if (send(clients[i], &id, 1, 0) != 1) CT_FAIL("client send: %s", ct_errname(errno));
  }
  int replies = 0;
  for (int i = 0; i < kClients; ++i) {
    unsigned char reply = 0;
    if ((ct_wait(clients[i], POLLIN, 5000) & POLLIN) == 0) CT_FAIL("client %d: no reply", i);
    errno = 0;
    ssize_t n = recv(clients[i], &reply, 1, 0);
    if (n == 1 && reply == i + 100) ++replies;
    else fprintf(stderr, "client %d: recv %zd %s, reply %d\n", i, n, ct_errname(errno), reply);
    close(clients[i]);
  }
  const long deadline = ct_now_ms() + kDeadlineMs;
  while (atomic_load(&g_accepted) < kClients && ct_now_ms() < deadline) ct_sleep_ms(5);
  atomic_store(&g_stop_accepting, 1);
  for (int i = 0; i < kAcceptors; ++i) pthread_join(threads[i], NULL);
  int once = 1;
  for (int i = 0; i < kClients; ++i) once &= atomic_load(&g_seen[i]) == 1;
  ct_out("acceptor threads: %d, clients: %d", kAcceptors, kClients);
  ct_out("accepted in total: %d", atomic_load(&g_accepted));
  CT_CHECK(once, "each connection accepted exactly once");
  ct_out("clients that got their own reply (sent just before the acceptor's close): %d", replies);
  CT_CHECK(replies == kClients, "each client got its own reply");
  close(g_listener);
}

/* ---- several threads in epoll_wait on one shared set ---- */

enum { kPairs = 4, kWaiters = 3, kRounds = 50, kStopTag = 1000 };

static int g_shared_ep;
static int g_servers[kPairs];
static atomic_int g_received[kPairs];
static atomic_int g_wrong_bytes;
static atomic_int g_wakeups;
static atomic_int g_waiters_done;

static void* waiter(void* arg) {
  (void)arg;
  const long deadline = ct_now_ms() + kDeadlineMs;
  while (ct_now_ms() < deadline) {
    struct epoll_event ev;
    int rc = epoll_wait(g_shared_ep, &ev, 1, 100);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) CT_FAIL("waiter: epoll_wait: %s", ct_errname(errno));
    if (rc == 0) continue;
    if (ev.data.u64 == kStopTag) break;
    const int i = (int)ev.data.u64;
    if (i < 0 || i >= kPairs) CT_FAIL("waiter: bad tag");
    atomic_fetch_add(&g_wakeups, 1);
    char buf[64];
    for (int k = 0; k < 1000; ++k) {
      ssize_t n = recv(g_servers[i], buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) CT_FAIL("waiter: recv %zd %s", n, ct_errname(errno));
      for (ssize_t j = 0; j < n; ++j)
        if (buf[j] != 'A' + i) atomic_fetch_add(&g_wrong_bytes, 1);
      atomic_fetch_add(&g_received[i], (int)n);
    }
    struct epoll_event rearm = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = (uint64_t)i};
    if (epoll_ctl(g_shared_ep, EPOLL_CTL_MOD, g_servers[i], &rearm) != 0)
      CT_FAIL("waiter: MOD re-arm: %s", ct_errname(errno));
  }
  atomic_fetch_add(&g_waiters_done, 1);
  return NULL;
}

static void shared_epoll_set(void) {
  ct_out("-- threads blocked in epoll_wait on one shared set");
  int clients[kPairs];
  for (int i = 0; i < kPairs; ++i) ct_tcp_pair_warm(&clients[i], &g_servers[i]);
  g_shared_ep = CT_OK("epoll_create1", epoll_create1(0));
  for (int i = 0; i < kPairs; ++i) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = (uint64_t)i};
    if (epoll_ctl(g_shared_ep, EPOLL_CTL_ADD, g_servers[i], &ev) != 0) CT_FAIL("ADD: %s", ct_errname(errno));
  }
  int stop = CT_OK("eventfd (stop)", eventfd(0, EFD_NONBLOCK));
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = kStopTag};
  CT_RC("ADD the stop eventfd (level-triggered)", epoll_ctl(g_shared_ep, EPOLL_CTL_ADD, stop, &ev), 0);
  pthread_t threads[kWaiters];
  for (int i = 0; i < kWaiters; ++i) start_thread(&threads[i], waiter, NULL);
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kPairs; ++i) {
      char c = (char)('A' + i);
      if (send(clients[i], &c, 1, 0) != 1) CT_FAIL("send: %s", ct_errname(errno));
    }
    if (r % 10 == 9) ct_sleep_ms(10); /* let the waiters go to sleep again */
  }
  const long deadline = ct_now_ms() + kDeadlineMs;
  int total = 0;
  while (ct_now_ms() < deadline) {
    total = 0;
    for (int i = 0; i < kPairs; ++i) total += atomic_load(&g_received[i]);
    if (total >= kPairs * kRounds) break;
    ct_sleep_ms(5);
  }
  uint64_t one = 1;
  CT_RC("write the stop eventfd", write(stop, &one, sizeof one), 8);
  for (int i = 0; i < kWaiters; ++i) pthread_join(threads[i], NULL);
  ct_out("waiter threads: %d, sockets: %d, bytes sent: %d", kWaiters, kPairs, kPairs * kRounds);
  ct_out("bytes received: %d", total);
  int exact = 1;
  for (int i = 0; i < kPairs; ++i) exact &= atomic_load(&g_received[i]) == kRounds;
  CT_CHECK(exact, "every socket's bytes arrived, none twice");
  CT_CHECK(atomic_load(&g_wrong_bytes) == 0, "every byte came from its own socket");
  CT_CHECK(atomic_load(&g_wakeups) >= 1, "the waiters were woken");
  CT_CHECK(atomic_load(&g_waiters_done) == kWaiters, "every waiter saw the stop event");
  close(stop);
  close(g_shared_ep);
  for (int i = 0; i < kPairs; ++i) {
    close(clients[i]);
    close(g_servers[i]);
  }
}

/* ---- a waiting thread while another closes the watched socket ---- */

struct closing_wait {
  int fd;
  int rc;
  short revents;
};

static void* poll_waiter(void* arg) {
  struct closing_wait* w = arg;
  struct pollfd p = {.fd = w->fd, .events = POLLIN};
  w->rc = poll(&p, 1, 3000);
  w->revents = p.revents;
  return NULL;
}

static void* epoll_waiter(void* arg) {
  struct closing_wait* w = arg;
  struct epoll_event ev;
  w->rc = epoll_wait(w->fd, &ev, 1, 500);
  return NULL;
}

static void close_while_waiting(void) {
  ct_out("-- another thread closes the socket a thread waits on");
  /* poll: the kernel keeps the socket alive while poll watches it; data
   * arriving after the close wakes poll, which finds the number closed. */
  int client, server;
  ct_tcp_pair_warm(&client, &server);
  struct closing_wait w = {.fd = server};
  pthread_t t;
  start_thread(&t, poll_waiter, &w);
  ct_sleep_ms(100);
  CT_RC("close the polled socket", close(server), 0);
  CT_RC("peer sends after the close", send(client, "x", 1, 0), 1);
  pthread_join(t, NULL);
  ct_out("poll in the other thread: %d %s", w.rc, ct_poll_str(w.revents));
  close(client);

  /* epoll: closing the last reference takes the socket out of the set; a
   * wait on the set sees nothing more and times out. */
  ct_tcp_pair_warm(&client, &server);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  struct epoll_event ev = {.events = EPOLLIN};
  CT_RC("ADD", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), 0);
  struct closing_wait we = {.fd = ep};
  start_thread(&t, epoll_waiter, &we);
  ct_sleep_ms(100);
  CT_RC("close the watched socket", close(server), 0);
  send(client, "y", 1, 0); /* may fail: the socket is gone */
  pthread_join(t, NULL);
  ct_out("epoll_wait in the other thread: %d", we.rc);
  close(ep);
  close(client);
}

int main(void) {
  ct_start("threads_wait");
  send_and_recv_threads();
  accepting_threads();
  shared_epoll_set();
  close_while_waiting();
  return 0;
}
