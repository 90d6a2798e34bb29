/* fcntl and ioctl on sockets: F_GETFL/F_SETFL O_NONBLOCK and its effect,
 * F_GETFD/F_SETFD FD_CLOEXEC, F_SETOWN/F_GETOWN, FIONBIO, FIONREAD on TCP,
 * UDP and a listener, SIOCATMARK, and errors (closed fd, unknown request). */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <unistd.h>

static const char* fl_str(int fl) {
  static char buf[64];
  snprintf(buf, sizeof buf, "%s%s", (fl & O_ACCMODE) == O_RDWR ? "O_RDWR" : "other-mode",
           fl & O_NONBLOCK ? "|O_NONBLOCK" : "");
  return buf;
}

/* recv with a 60 ms SO_RCVTIMEO: EAGAIN after ~60 ms means it blocked. */
static void show_blocking(int fd, const char* what) {
  struct timeval tv = {0, 60000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  long start = ct_now_ms();
  ssize_t n = recv(fd, &c, 1, 0);
  int err = errno;
  long elapsed = ct_now_ms() - start;
  if (n != -1 || err != EAGAIN) CT_FAIL("%s: recv returned %zd %s", what, n, ct_errname(err));
  ct_out("%s: recv %s", what, elapsed >= 50 ? "blocked until the timeout" : "returned at once");
}

static void status_flags(int fd) {
  ct_out("F_GETFL: %s", fl_str(fcntl(fd, F_GETFL)));
  show_blocking(fd, "default");
  CT_RC("F_SETFL O_NONBLOCK", fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  ct_out("F_GETFL: %s", fl_str(fcntl(fd, F_GETFL)));
  show_blocking(fd, "after F_SETFL O_NONBLOCK");
  CT_RC("F_SETFL 0", fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK), 0);
  ct_out("F_GETFL: %s", fl_str(fcntl(fd, F_GETFL)));
  show_blocking(fd, "after clearing O_NONBLOCK");

  int on = 1, off = 0;
  CT_RC("ioctl FIONBIO 1", ioctl(fd, FIONBIO, &on), 0);
  ct_out("F_GETFL: %s", fl_str(fcntl(fd, F_GETFL)));
  show_blocking(fd, "after FIONBIO 1");
  CT_RC("ioctl FIONBIO 0", ioctl(fd, FIONBIO, &off), 0);
  ct_out("F_GETFL: %s", fl_str(fcntl(fd, F_GETFL)));

  CT_RC("F_GETFD", fcntl(fd, F_GETFD), 0);
  CT_RC("F_SETFD FD_CLOEXEC", fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
  CT_RC("F_GETFD", fcntl(fd, F_GETFD), FD_CLOEXEC);
  CT_RC("F_SETFD 0", fcntl(fd, F_SETFD, 0), 0);
  CT_RC("F_GETFD", fcntl(fd, F_GETFD), 0);

  CT_RC("F_SETOWN", fcntl(fd, F_SETOWN, getpid()), 0);
  CT_CHECK(fcntl(fd, F_GETOWN) == getpid(), "F_GETOWN returns our pid");
}

static void fionread_tcp(int client, int server) {
  int n = -1;
  CT_RC("FIONREAD on empty tcp", ioctl(server, FIONREAD, &n), 0);
  ct_out("FIONREAD: %d", n);
  char data[123] = {0};
  CT_RC("send 123", send(client, data, sizeof data, 0), 123);
  for (int i = 0; i < 200 && n < 123; ++i) {
    ct_wait(server, POLLIN, 10);
    ioctl(server, FIONREAD, &n);
  }
  ct_out("FIONREAD: %d", n);
  char buf[100];
  CT_RC("recv 100", recv(server, buf, sizeof buf, 0), 100);
  CT_RC("FIONREAD after partial read", ioctl(server, FIONREAD, &n), 0);
  ct_out("FIONREAD: %d", n);
  int atmark = -1;
  CT_RC("SIOCATMARK", ioctl(server, SIOCATMARK, &atmark), 0);
  ct_out("SIOCATMARK: %d", atmark);
}

static void fionread_udp(void) {
  struct sockaddr_in b_addr;
  int a = ct_udp_bound(NULL);
  int b = ct_udp_bound(&b_addr);
  char data[20] = {0};
  sendto(a, data, 10, 0, (struct sockaddr*)&b_addr, sizeof b_addr);
  sendto(a, data, 20, 0, (struct sockaddr*)&b_addr, sizeof b_addr);
  ct_wait_readable(b);
  int n = -1;
  CT_RC("FIONREAD on udp", ioctl(b, FIONREAD, &n), 0);
  ct_out("FIONREAD (size of the first datagram): %d", n);
  close(a);
  close(b);
}

int main(void) {
  ct_start("fd_fcntl_ioctl");
  int client, server;
  ct_tcp_pair(&client, &server);
  status_flags(server);
  fionread_tcp(client, server);
  fionread_udp();

  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  int n;
  CT_ERR("FIONREAD on a listener", ioctl(listener, FIONREAD, &n), EINVAL);
  CT_ERR("unknown ioctl on a socket", ioctl(server, 0x7fff, &n), ENOTTY);
  close(listener);
  close(client);
  close(server);
  CT_ERR("FIONREAD on a closed fd", ioctl(server, FIONREAD, &n), EBADF);
  CT_ERR("F_GETFL on a closed fd", fcntl(server, F_GETFL), EBADF);
  return 0;
}
