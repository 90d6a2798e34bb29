/* A UDP peer that goes away after the pair exchanged datagrams (over UD
 * under the library, once warmed up): a socket connected to it sees the
 * refusal of its next datagram (poll POLLERR, recv ECONNREFUSED once, then
 * SO_ERROR 0), an unconnected one sees nothing; a new socket bound to the
 * same port gets what is sent there afterwards. The library must answer as
 * the kernel's ICMP does: the closing socket tells its peers (REVOKE), a
 * datagram that still names it is answered (UNREACH). */
#include "common.h"
#include "warm_up.h"

#include <poll.h>
#include <string.h>
#include <unistd.h>

static void expect_refusal(int fd, const char* label) {
  short rev = 0;
  for (int i = 0; i < 200 && !(rev & POLLERR); ++i) rev = ct_wait(fd, POLLIN, 10);
  ct_out("%s: poll after the peer went away: %s", label, ct_poll_str(rev));
  char buf[8];
  CT_ERR("recv reports the refusal", recv(fd, buf, sizeof buf, MSG_DONTWAIT), ECONNREFUSED);
  CT_ERR("recv once the error was reported", recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
  int error = -1;
  socklen_t length = sizeof error;
  CT_RC("getsockopt SO_ERROR", getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length), 0);
  ct_out("SO_ERROR: %s", error == 0 ? "0" : ct_errname(error));
}

int main(void) {
  ct_start("udp_peer_gone");
  struct sockaddr_in a_addr, b_addr, c_addr;
  int a = ct_udp_bound(&a_addr);
  int b = ct_udp_bound(&b_addr);
  int c = ct_udp_bound(&c_addr);
  ct_udp_warm_up(a, &a_addr, b, &b_addr);
  ct_udp_warm_up(c, &c_addr, b, &b_addr);
  CT_RC("connect a to b", connect(a, (struct sockaddr*)&b_addr, sizeof b_addr), 0);
  CT_RC("a sends to b", send(a, "ab", 2, 0), 2);
  char buf[8];
  ct_wait_readable(b);
  CT_RC("b receives", recv(b, buf, sizeof buf, 0), 2);

  CT_RC("close b", close(b), 0);
  ct_sleep_ms(50);
  CT_RC("connected a sends to the closed port", send(a, "x", 1, 0), 1);
  expect_refusal(a, "connected a");
  CT_RC("unconnected c sends to the closed port", sendto(c, "y", 1, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 1);
  short rev = ct_wait(c, POLLIN, 200);
  ct_out("unconnected c: poll: %s", rev ? ct_poll_str(rev) : "nothing");
  CT_ERR("unconnected c: recv", recv(c, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);

  /* The port comes back: a new socket bound there receives again. */
  int d = socket(AF_INET, SOCK_DGRAM, 0);
  int one = 1;
  CT_RC("SO_REUSEADDR on the new socket", setsockopt(d, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  CT_RC("bind the new socket to the same port", bind(d, (struct sockaddr*)&b_addr, sizeof b_addr), 0);
  int got = 0;
  for (int i = 0; i < 100 && !got; ++i) {
    CT_ASSERT(sendto(c, "again", 5, 0, (struct sockaddr*)&b_addr, sizeof b_addr) == 5);
    if (ct_wait(d, POLLIN, 50) & POLLIN) got = recv(d, buf, sizeof buf, 0) == 5 && memcmp(buf, "again", 5) == 0;
  }
  CT_CHECK(got, "the new socket on the port receives");
  close(a);
  close(c);
  close(d);
  return 0;
}
