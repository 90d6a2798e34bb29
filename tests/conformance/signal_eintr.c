/* Signals during blocking calls: without SA_RESTART recv/read/recvfrom/
 * accept/poll/select/epoll_wait fail with EINTR; with SA_RESTART recv is
 * restarted but poll/select/epoll_wait are not, nor is a recv
 * that has SO_RCVTIMEO; ppoll/epoll_pwait with a mask that blocks the signal
 * run to their timeout and the handler runs afterwards. */
#include "common.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <unistd.h>

static atomic_int g_handled;
static atomic_int g_stop;
static pthread_t g_main;
static pthread_t g_pinger;
static int g_data_fd = -1; /* if >= 0, the pinger sends one byte here after 150 ms */

static void on_usr1(int sig) {
  (void)sig;
  atomic_fetch_add(&g_handled, 1);
}

static void set_handler(int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
}

/* Signals the main thread every 30 ms until told to stop (bounded). */
static void* pinger(void* arg) {
  (void)arg;
  for (int i = 0; i < 300 && !atomic_load(&g_stop); ++i) {
    ct_sleep_ms(30);
    if (atomic_load(&g_stop)) break;
    pthread_kill(g_main, SIGUSR1);
    if (g_data_fd >= 0 && i == 4) send(g_data_fd, "d", 1, 0);
  }
  return NULL;
}

static void start_pinger(int data_fd) {
  atomic_store(&g_stop, 0);
  atomic_store(&g_handled, 0);
  g_data_fd = data_fd;
  pthread_create(&g_pinger, NULL, pinger, NULL);
}

static void stop_pinger(void) {
  atomic_store(&g_stop, 1);
  pthread_join(g_pinger, NULL);
  g_data_fd = -1;
}

static void without_restart(int server, int udp, int listener, int ep) {
  set_handler(0);
  char c;
  start_pinger(-1);
  CT_ERR("recv", recv(server, &c, 1, 0), EINTR);
  CT_ERR("read", read(server, &c, 1), EINTR);
  CT_ERR("recvfrom udp", recvfrom(udp, &c, 1, 0, NULL, NULL), EINTR);
  CT_ERR("accept", accept(listener, NULL, NULL), EINTR);
  struct pollfd p = {.fd = server, .events = POLLIN};
  CT_ERR("poll", poll(&p, 1, 5000), EINTR);
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(server, &rd);
  struct timeval tv = {5, 0};
  CT_ERR("select", select(server + 1, &rd, NULL, NULL, &tv), EINTR);
  struct epoll_event ev;
  CT_ERR("epoll_wait", epoll_wait(ep, &ev, 1, 5000), EINTR);
  stop_pinger();
  CT_CHECK(atomic_load(&g_handled) >= 7, "the handler ran for each interrupted call");
}

static void with_restart(int client, int server, int ep) {
  set_handler(SA_RESTART);
  char c = 0;
  start_pinger(client);
  CT_RC("recv restarted until data arrives", recv(server, &c, 1, 0), 1);
  stop_pinger();
  CT_CHECK(c == 'd' && atomic_load(&g_handled) >= 1, "signals were handled while recv was restarted");

  start_pinger(-1);
  struct pollfd p = {.fd = server, .events = POLLIN};
  CT_ERR("poll is never restarted", poll(&p, 1, 5000), EINTR);
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(server, &rd);
  struct timeval tv = {5, 0};
  CT_ERR("select is never restarted", select(server + 1, &rd, NULL, NULL, &tv), EINTR);
  struct epoll_event ev;
  CT_ERR("epoll_wait is never restarted", epoll_wait(ep, &ev, 1, 5000), EINTR);
  struct timeval timeout = {5, 0};
  setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  CT_ERR("recv with SO_RCVTIMEO is not restarted", recv(server, &c, 1, 0), EINTR);
  stop_pinger();
}

static void masked(int server, int ep) {
  set_handler(0);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  struct pollfd p = {.fd = server, .events = POLLIN};
  struct timespec ts = {0, 200 * 1000000L};
  start_pinger(-1);
  CT_RC("ppoll with SIGUSR1 blocked runs to its timeout", ppoll(&p, 1, &ts, &block), 0);
  struct epoll_event ev;
  CT_RC("epoll_pwait with SIGUSR1 blocked runs to its timeout", epoll_pwait(ep, &ev, 1, 200, &block), 0);
  stop_pinger();
  CT_CHECK(atomic_load(&g_handled) >= 1, "the blocked signal was handled after the call");
}

int main(void) {
  ct_start("signal_eintr");
  g_main = pthread_self();
  int client, server;
  ct_tcp_pair(&client, &server);
  int udp = ct_udp_bound(NULL);
  int listener = ct_tcp_listener(NULL);
  int ep = CT_OK("epoll_create1", epoll_create1(0));
  struct epoll_event ev = {.events = EPOLLIN};
  CT_RC("EPOLL_CTL_ADD", epoll_ctl(ep, EPOLL_CTL_ADD, server, &ev), 0);
  without_restart(server, udp, listener, ep);
  with_restart(client, server, ep);
  masked(server, ep);
  close(ep);
  close(listener);
  close(udp);
  close(client);
  close(server);
  return 0;
}
