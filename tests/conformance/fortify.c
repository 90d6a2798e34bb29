/* Built with -O2 -D_FORTIFY_SOURCE=2, so glibc's inline wrappers route
 * read/recv/recvfrom/poll/ppoll on buffers of known size through __read_chk,
 * __recv_chk, __recvfrom_chk, __poll_chk and __ppoll_chk (lengths are kept
 * out of the compiler's sight so the checked variants are really called;
 * check_fortify_symbols.cmake verifies the binary imports them). */
#include "common.h"

#include <poll.h>
#include <string.h>
#include <unistd.h>

#if !defined(__OPTIMIZE__) || !defined(_FORTIFY_SOURCE) || _FORTIFY_SOURCE < 2
#error "fortify.c must be built with -O2 -D_FORTIFY_SOURCE=2"
#endif

/* A value the optimizer cannot see through. */
static size_t runtime(size_t value) {
  volatile size_t v = value;
  return v;
}

int main(void) {
  ct_start("fortify");
  int client, server;
  ct_tcp_pair(&client, &server);
  struct sockaddr_in b_addr;
  int a = ct_udp_bound(NULL);
  int b = ct_udp_bound(&b_addr);

  struct pollfd fds[2] = {{server, POLLIN, 0}, {b, POLLIN, 0}};
  CT_RC("poll (__poll_chk), nothing ready", poll(fds, runtime(2), 0), 0);
  struct timespec ts = {0, 20 * 1000000L};
  CT_RC("ppoll (__ppoll_chk), nothing ready", ppoll(fds, runtime(2), &ts, NULL), 0);

  CT_RC("send", send(client, "fortified", 9, 0), 9);
  CT_RC("sendto", sendto(a, "datagram", 8, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 8);
  ct_wait_readable(server);
  ct_wait_readable(b);
  CT_RC("poll (__poll_chk), both ready", poll(fds, runtime(2), 1000), 2);
  ct_out("revents: %s", ct_poll_str(fds[0].revents));
  ct_out("revents: %s", ct_poll_str(fds[1].revents));
  CT_RC("ppoll (__ppoll_chk), both ready", ppoll(fds, runtime(2), &ts, NULL), 2);

  char buf[32];
  memset(buf, 0, sizeof buf);
  CT_RC("read 4 (__read_chk)", read(server, buf, runtime(4)), 4);
  CT_RC("recv 5 (__recv_chk)", recv(server, buf + 4, runtime(5), 0), 5);
  CT_CHECK(strcmp(buf, "fortified") == 0, "stream bytes 'fortified'");

  char dgram[16];
  memset(dgram, 0, sizeof dgram);
  struct sockaddr_in from;
  socklen_t len = sizeof from;
  CT_RC("recvfrom (__recvfrom_chk)", recvfrom(b, dgram, runtime(sizeof dgram), 0, (struct sockaddr*)&from, &len), 8);
  CT_CHECK(strcmp(dgram, "datagram") == 0, "datagram bytes 'datagram'");

  CT_RC("send", send(client, "x", 1, 0), 1);
  ct_wait_readable(server);
  CT_RC("recv MSG_DONTWAIT (__recv_chk)", recv(server, buf, runtime(sizeof buf), MSG_DONTWAIT), 1);
  CT_ERR("recv MSG_DONTWAIT on empty (__recv_chk)", recv(server, buf, runtime(sizeof buf), MSG_DONTWAIT), EAGAIN);
  CT_ERR("recvfrom MSG_DONTWAIT on empty (__recvfrom_chk)",
         recvfrom(b, dgram, runtime(sizeof dgram), MSG_DONTWAIT, NULL, NULL), EAGAIN);
  close(client);
  CT_RC("read at EOF (__read_chk)", read(server, buf, runtime(sizeof buf)), 0);
  close(server);
  close(a);
  close(b);
  return 0;
}
