/* select and pselect over TCP, UDP, pipe and eventfd: timeouts (and the
 * remaining time select writes back), read/write/except sets, TCP urgent
 * data in exceptfds, counting an fd in two sets, EBADF and EINVAL. */
#include "common.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

enum { kTcp, kUdp, kPipe, kEvent, kCount };
static const char* const kNames[kCount] = {"tcp", "udp", "pipe", "eventfd"};
static int g_fds[kCount];

static int max_fd(void) {
  int m = -1;
  for (int i = 0; i < kCount; ++i)
    if (g_fds[i] > m) m = g_fds[i];
  return m;
}

static void fill(fd_set* set) {
  FD_ZERO(set);
  for (int i = 0; i < kCount; ++i) FD_SET(g_fds[i], set);
}

static void show(const char* what, int rc, const fd_set* rd, const fd_set* wr, const fd_set* ex) {
  char line[256];
  int len = snprintf(line, sizeof line, "%s: select=%d", what, rc);
  for (int i = 0; i < kCount && len < (int)sizeof line; ++i) {
    int fd = g_fds[i];
    char sets[4] = "";
    if (rd && FD_ISSET(fd, rd)) strcat(sets, "r");
    if (wr && FD_ISSET(fd, wr)) strcat(sets, "w");
    if (ex && FD_ISSET(fd, ex)) strcat(sets, "x");
    len += snprintf(line + len, sizeof line - len, " %s=%s", kNames[i], sets[0] ? sets : "-");
  }
  ct_out("%s", line);
}

static void show_read(const char* what, int timeout_ms) {
  fd_set rd;
  fill(&rd);
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  int rc = select(max_fd() + 1, &rd, NULL, NULL, &tv);
  if (rc < 0) CT_FAIL("select: %s", ct_errname(errno));
  show(what, rc, &rd, NULL, NULL);
}

int main(void) {
  ct_start("select_mixed");
  int client, server, a, b, pipefd[2], efd;
  struct sockaddr_in b_addr;
  ct_mixed_fds(&client, &server, &a, &b, &b_addr, pipefd, &efd);
  int in_fds[kCount] = {server, b, pipefd[0], efd};
  for (int i = 0; i < kCount; ++i) g_fds[i] = in_fds[i];

  show_read("nothing ready", 0);
  fd_set rd;
  fill(&rd);
  struct timeval tv = {0, 100000};
  long start = ct_now_ms();
  int rc = select(max_fd() + 1, &rd, NULL, NULL, &tv);
  long elapsed = ct_now_ms() - start;
  show("timeout 100 ms", rc, &rd, NULL, NULL);
  ct_out("remaining timeval: %ld s %ld us", (long)tv.tv_sec, (long)tv.tv_usec);
  CT_CHECK(elapsed >= 95 && elapsed < 2000, "select waited its timeout");

  CT_RC("send tcp", send(client, "t", 1, 0), 1);
  CT_RC("sendto udp", sendto(a, "u", 1, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 1);
  CT_RC("write pipe", write(pipefd[1], "p", 1), 1);
  ct_wait_readable(server);
  ct_wait_readable(b);
  show_read("tcp, udp and pipe ready", 1000);
  uint64_t one = 1;
  CT_RC("write eventfd", write(efd, &one, sizeof one), 8);
  show_read("all ready", 1000);

  /* Read and write sets at once; each fd counts once per set it is in. */
  fd_set wr;
  fill(&rd);
  fill(&wr);
  rc = select(max_fd() + 1, &rd, &wr, NULL, NULL);
  show("read and write sets", rc, &rd, &wr, NULL);

  char buf[8];
  recv(server, buf, sizeof buf, 0);
  recv(b, buf, sizeof buf, 0);
  read(pipefd[0], buf, sizeof buf);
  read(efd, buf, 8);
  show_read("drained", 0);

  /* Urgent data shows in exceptfds. */
  CT_RC("send MSG_OOB", send(client, "!", 1, MSG_OOB), 1);
  fd_set ex;
  fill(&ex);
  tv.tv_sec = 2;
  tv.tv_usec = 0;
  rc = select(max_fd() + 1, NULL, NULL, &ex, &tv);
  show("urgent data", rc, NULL, NULL, &ex);
  CT_RC("recv MSG_OOB", recv(server, buf, 1, MSG_OOB), 1);
  CT_CHECK(buf[0] == '!', "urgent byte is '!'");

  struct timespec ts = {0, 50 * 1000000L};
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR1);
  fill(&rd);
  rc = pselect(max_fd() + 1, &rd, NULL, NULL, &ts, &mask);
  show("pselect 50 ms", rc, &rd, NULL, NULL);
  CT_RC("write pipe", write(pipefd[1], "p", 1), 1);
  fill(&rd);
  rc = pselect(max_fd() + 1, &rd, NULL, NULL, &ts, NULL);
  show("pselect, pipe ready", rc, &rd, NULL, NULL);
  read(pipefd[0], buf, sizeof buf);

  tv.tv_sec = 0;
  tv.tv_usec = 20000;
  CT_RC("select with no fds sleeps", select(0, NULL, NULL, NULL, &tv), 0);
  tv.tv_usec = 0;
  CT_ERR("select with negative nfds", select(-1, NULL, NULL, NULL, &tv), EINVAL);
  int closed = CT_OK("socket", socket(AF_INET, SOCK_DGRAM, 0));
  close(closed);
  FD_ZERO(&rd);
  FD_SET(closed, &rd);
  CT_ERR("select with a closed fd", select(closed + 1, &rd, NULL, NULL, &tv), EBADF);

  close(client);
  close(server);
  close(a);
  close(b);
  close(pipefd[0]);
  close(pipefd[1]);
  close(efd);
  return 0;
}
