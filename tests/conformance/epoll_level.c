/* Level-triggered epoll over TCP, UDP, pipe and eventfd: timeouts, events
 * reported until drained, user data kept, EPOLL_CTL_MOD/DEL, maxevents,
 * epoll_pwait and epoll_pwait2, and the epoll_ctl/epoll_wait error codes. */
#include "common.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

enum { kTcp, kUdp, kPipe, kEvent, kCount };
static const char* const kNames[kCount] = {"tcp", "udp", "pipe", "eventfd"};

static int by_tag(const void* x, const void* y) {
  uint64_t a = ((const struct epoll_event*)x)->data.u64, b = ((const struct epoll_event*)y)->data.u64;
  return a < b ? -1 : a > b;
}

/* Prints the events sorted by tag (the ready-list order is not part of the contract). */
static void show(const char* what, int rc, struct epoll_event* ev) {
  char line[256];
  int len = snprintf(line, sizeof line, "%s: %d", what, rc);
  if (rc > 0) qsort(ev, (size_t)rc, sizeof ev[0], by_tag);
  for (int i = 0; i < rc && len < (int)sizeof line; ++i) {
    uint64_t tag = ev[i].data.u64;
    const char* name = tag >= 1000 && tag < 1000 + kCount ? kNames[tag - 1000] : "bad-tag";
    len += snprintf(line + len, sizeof line - len, " %s=%s", name, ct_epoll_str(ev[i].events));
  }
  ct_out("%s", line);
}

static void wait_show(int ep, const char* what, int timeout) {
  struct epoll_event ev[8];
  int rc = epoll_wait(ep, ev, 8, timeout);
  if (rc < 0) CT_FAIL("epoll_wait: %s", ct_errname(errno));
  show(what, rc, ev);
}

static void errors(int ep, int fd) {
  struct epoll_event ev = {.events = EPOLLIN};
  CT_ERR("EPOLL_CTL_ADD twice", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), EEXIST);
  int other = CT_OK("socket", socket(AF_INET, SOCK_DGRAM, 0));
  CT_ERR("EPOLL_CTL_MOD of an fd not in the set", epoll_ctl(ep, EPOLL_CTL_MOD, other, &ev), ENOENT);
  CT_ERR("EPOLL_CTL_DEL of an fd not in the set", epoll_ctl(ep, EPOLL_CTL_DEL, other, &ev), ENOENT);
  close(other);
  CT_ERR("EPOLL_CTL_ADD of a closed fd", epoll_ctl(ep, EPOLL_CTL_ADD, other, &ev), EBADF);
  CT_ERR("EPOLL_CTL_ADD of the epoll fd itself", epoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev), EINVAL);
  int file = CT_OK("open /dev/null", open("/dev/null", O_RDONLY));
  CT_ERR("EPOLL_CTL_ADD of /dev/null (not pollable)", epoll_ctl(ep, EPOLL_CTL_ADD, file, &ev), EPERM);
  close(file);
  CT_ERR("epoll_ctl with a bad op", epoll_ctl(ep, 42, fd, &ev), EINVAL);
  CT_ERR("epoll_ctl on a non-epoll fd", epoll_ctl(fd, EPOLL_CTL_ADD, fd, &ev), EINVAL);
  struct epoll_event out[1];
  CT_ERR("epoll_wait with maxevents 0", epoll_wait(ep, out, 0, 0), EINVAL);
  CT_ERR("epoll_wait on a non-epoll fd", epoll_wait(fd, out, 1, 0), EINVAL);
  CT_ERR("epoll_create1 with bad flags", epoll_create1(12345), EINVAL);
  CT_ERR("epoll_create(0)", epoll_create(0), EINVAL);
}

static void pwait_variants(int ep, int pipe_w, int pipe_r) {
  struct epoll_event ev[8];
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR1);
  int rc = epoll_pwait(ep, ev, 8, 50, &mask);
  show("epoll_pwait 50 ms with a mask", rc, ev);
  struct timespec ts = {0, 50 * 1000000L};
  rc = epoll_pwait2(ep, ev, 8, &ts, NULL);
  if (rc < 0 && errno == ENOSYS) {
    ct_out("epoll_pwait2: not available");
    return;
  }
  show("epoll_pwait2 50 ms", rc, ev);
  CT_RC("write pipe", write(pipe_w, "p", 1), 1);
  rc = epoll_pwait2(ep, ev, 8, &ts, &mask);
  show("epoll_pwait2 with the pipe ready", rc, ev);
  rc = epoll_pwait2(ep, ev, 8, NULL, NULL);
  show("epoll_pwait2 with no timeout, pipe still ready", rc, ev);
  char c;
  read(pipe_r, &c, 1);
}

int main(void) {
  ct_start("epoll_level");
  int client, server, a, b, pipefd[2], efd;
  struct sockaddr_in b_addr;
  ct_mixed_fds(&client, &server, &a, &b, &b_addr, pipefd, &efd);
  int ep = CT_OK("epoll_create1 EPOLL_CLOEXEC", epoll_create1(EPOLL_CLOEXEC));
  CT_CHECK(fcntl(ep, F_GETFD) & FD_CLOEXEC, "epoll fd has FD_CLOEXEC");

  int fds[kCount] = {server, b, pipefd[0], efd};
  for (int i = 0; i < kCount; ++i) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1000 + (uint64_t)i};
    char label[48];
    snprintf(label, sizeof label, "EPOLL_CTL_ADD %s", kNames[i]);
    CT_RC(label, epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev), 0);
  }
  wait_show(ep, "nothing ready", 0);
  long start = ct_now_ms();
  wait_show(ep, "timeout 100 ms", 100);
  long elapsed = ct_now_ms() - start;
  CT_CHECK(elapsed >= 95 && elapsed < 2000, "epoll_wait waited its timeout");

  CT_RC("send tcp", send(client, "t", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(ep, "tcp ready", 1000);
  wait_show(ep, "tcp still ready (level-triggered)", 1000);
  CT_RC("sendto udp", sendto(a, "u", 1, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 1);
  CT_RC("write pipe", write(pipefd[1], "p", 1), 1);
  uint64_t one = 1;
  CT_RC("write eventfd", write(efd, &one, sizeof one), 8);
  ct_wait_readable(b);
  wait_show(ep, "all ready", 1000);

  struct epoll_event two[2];
  CT_RC("epoll_wait maxevents 2 with 4 ready", epoll_wait(ep, two, 2, 1000), 2);

  char buf[8];
  recv(server, buf, sizeof buf, 0);
  wait_show(ep, "tcp drained", 0);
  recv(b, buf, sizeof buf, 0);
  read(pipefd[0], buf, sizeof buf);
  read(efd, buf, 8);
  wait_show(ep, "all drained", 0);

  struct epoll_event mod = {.events = EPOLLIN | EPOLLOUT, .data.u64 = 1000 + kTcp};
  CT_RC("EPOLL_CTL_MOD tcp to IN|OUT", epoll_ctl(ep, EPOLL_CTL_MOD, server, &mod), 0);
  wait_show(ep, "tcp writable", 0);
  CT_RC("EPOLL_CTL_DEL tcp", epoll_ctl(ep, EPOLL_CTL_DEL, server, NULL), 0);
  wait_show(ep, "tcp removed", 0);
  CT_RC("send tcp", send(client, "t", 1, 0), 1);
  ct_wait_readable(server);
  wait_show(ep, "data on the removed tcp socket", 0);

  pwait_variants(ep, pipefd[1], pipefd[0]);
  errors(ep, b);

  close(ep);
  close(client);
  close(server);
  close(a);
  close(b);
  close(pipefd[0]);
  close(pipefd[1]);
  close(efd);
  return 0;
}
