/* poll and ppoll over a mix of fds (TCP, UDP, pipe, eventfd): timeouts,
 * readiness as each becomes readable, writability, a wake-up from another
 * process, negative fds, the same fd twice, POLLNVAL, POLLHUP. */
#include "common.h"

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kTcp, kUdp, kPipe, kEvent, kCount };
static const char* const kNames[kCount] = {"tcp", "udp", "pipe", "eventfd"};

static void show_named(const char* what, int rc, const struct pollfd* p, int n, const char* const* names) {
  char line[256];
  int len = snprintf(line, sizeof line, "%s: poll=%d", what, rc);
  for (int i = 0; i < n && len < (int)sizeof line; ++i)
    len += snprintf(line + len, sizeof line - len, " %s=%s", names[i], ct_poll_str(p[i].revents));
  ct_out("%s", line);
}

static void show(const char* what, int rc, const struct pollfd* p, int n) { show_named(what, rc, p, n, kNames); }

static int poll_all(struct pollfd* p, int n, int timeout) {
  for (int i = 0; i < n; ++i) p[i].revents = 0;
  return poll(p, (nfds_t)n, timeout);
}

int main(void) {
  ct_start("poll_mixed");
  int client, server, a, b, pipefd[2], efd;
  struct sockaddr_in b_addr;
  ct_mixed_fds(&client, &server, &a, &b, &b_addr, pipefd, &efd);

  struct pollfd in[kCount] = {{server, POLLIN, 0}, {b, POLLIN, 0}, {pipefd[0], POLLIN, 0}, {efd, POLLIN, 0}};
  show("nothing ready", poll_all(in, kCount, 0), in, kCount);
  long start = ct_now_ms();
  int rc = poll_all(in, kCount, 100);
  long elapsed = ct_now_ms() - start;
  show("timeout 100 ms", rc, in, kCount);
  CT_CHECK(elapsed >= 95 && elapsed < 2000, "poll waited its timeout");

  CT_RC("write pipe", write(pipefd[1], "p", 1), 1);
  show("pipe written", poll_all(in, kCount, 1000), in, kCount);
  CT_RC("send tcp", send(client, "t", 1, 0), 1);
  ct_wait_readable(server);
  show("tcp sent", poll_all(in, kCount, 1000), in, kCount);
  CT_RC("sendto udp", sendto(a, "u", 1, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 1);
  ct_wait_readable(b);
  show("udp sent", poll_all(in, kCount, 1000), in, kCount);
  uint64_t one = 1;
  CT_RC("write eventfd", write(efd, &one, sizeof one), 8);
  show("eventfd written", poll_all(in, kCount, 1000), in, kCount);

  char buf[8];
  recv(server, buf, sizeof buf, 0);
  recv(b, buf, sizeof buf, 0);
  read(pipefd[0], buf, sizeof buf);
  uint64_t count;
  read(efd, &count, sizeof count);
  show("all drained", poll_all(in, kCount, 0), in, kCount);

  struct pollfd out[kCount] = {{client, POLLOUT, 0}, {a, POLLOUT, 0}, {pipefd[1], POLLOUT, 0}, {efd, POLLOUT, 0}};
  show("writable", poll_all(out, kCount, 0), out, kCount);

  /* Another process sends after 50 ms; a blocking poll wakes up for it. */
  pid_t pid = fork();
  if (pid < 0) CT_FAIL("fork: %s", ct_errname(errno));
  if (pid == 0) {
    ct_sleep_ms(50);
    send(client, "w", 1, 0);
    _exit(0);
  }
  show("wake-up from a child", poll_all(in, kCount, 5000), in, kCount);
  waitpid(pid, NULL, 0);
  recv(server, buf, sizeof buf, 0);

  struct timespec ts = {0, 50 * 1000000L};
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR1);
  show("ppoll 50 ms with a mask", ppoll(in, kCount, &ts, &mask), in, kCount);
  CT_RC("write pipe", write(pipefd[1], "p", 1), 1);
  show("ppoll, pipe ready", ppoll(in, kCount, &ts, NULL), in, kCount);
  read(pipefd[0], buf, sizeof buf);

  int closed = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  close(closed);
  struct pollfd odd[4] = {{-1, POLLIN, 0}, {closed, POLLIN, 0}, {client, POLLOUT, 0}, {client, POLLOUT | POLLIN, 0}};
  static const char* const odd_names[4] = {"negative", "closed", "tcp", "tcp-again"};
  show_named("odd entries", poll_all(odd, 4, 0), odd, 4, odd_names);

  CT_RC("close pipe writer", close(pipefd[1]), 0);
  CT_RC("client shutdown SHUT_WR", shutdown(client, SHUT_WR), 0);
  ct_wait_readable(server);
  in[kTcp].events = POLLIN | POLLRDHUP;
  show("pipe writer closed, tcp peer shut", poll_all(in, kCount, 0), in, kCount);
  close(client);
  close(server);
  close(a);
  close(b);
  close(pipefd[0]);
  close(efd);
  return 0;
}
