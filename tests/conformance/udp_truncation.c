/* Datagram truncation: a short buffer drops the rest of the datagram,
 * MSG_TRUNC returns the real length, recvmsg sets MSG_TRUNC in msg_flags,
 * MSG_PEEK keeps the datagram, and a zero-length read consumes one. */
#include "common.h"

#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static const char* msg_flags_str(int flags) {
  static char buf[64];
  buf[0] = '\0';
  if (flags & MSG_TRUNC) strcat(buf, "|MSG_TRUNC");
  if (flags & MSG_CTRUNC) strcat(buf, "|MSG_CTRUNC");
  if (flags & ~(MSG_TRUNC | MSG_CTRUNC)) strcat(buf, "|other");
  return buf[0] ? buf + 1 : "0";
}

static void send100(int a, const struct sockaddr_in* to, char tag) {
  unsigned char data[100];
  ct_pattern(data, sizeof data, (unsigned)tag, 0);
  data[0] = (unsigned char)tag;
  if (sendto(a, data, sizeof data, 0, (const struct sockaddr*)to, sizeof *to) != 100)
    CT_FAIL("sendto: %s", ct_errname(errno));
}

static ssize_t recvmsg_into(int fd, char* buf, size_t len, int flags, int* msg_flags) {
  struct iovec iov = {.iov_base = buf, .iov_len = len};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  ssize_t n = recvmsg(fd, &msg, flags);
  *msg_flags = msg.msg_flags;
  return n;
}

int main(void) {
  ct_start("udp_truncation");
  struct sockaddr_in b_addr;
  int a = ct_udp_bound(NULL);
  int b = ct_udp_bound(&b_addr);
  char buf[256];
  int flags;

  send100(a, &b_addr, 'A');
  send100(a, &b_addr, 'B');
  ct_wait_readable(b);
  CT_RC("recv 10 of a 100-byte datagram", recv(b, buf, 10, 0), 10);
  CT_CHECK(buf[0] == 'A', "first datagram");
  ct_wait_readable(b);
  CT_RC("next recv gets the next datagram", recv(b, buf, sizeof buf, 0), 100);
  CT_CHECK(buf[0] == 'B', "the rest of the first datagram was dropped");

  send100(a, &b_addr, 'C');
  ct_wait_readable(b);
  memset(buf, 0, sizeof buf);
  CT_RC("recv 10 with MSG_TRUNC returns the real length", recv(b, buf, 10, MSG_TRUNC), 100);
  CT_CHECK(buf[0] == 'C' && buf[10] == 0, "only 10 bytes were copied");

  send100(a, &b_addr, 'D');
  ct_wait_readable(b);
  CT_RC("recvmsg into 10 bytes", recvmsg_into(b, buf, 10, 0, &flags), 10);
  ct_out("msg_flags: %s", msg_flags_str(flags));
  CT_CHECK(flags & MSG_TRUNC, "recvmsg sets MSG_TRUNC");

  send100(a, &b_addr, 'E');
  ct_wait_readable(b);
  CT_RC("recvmsg into 10 bytes with MSG_TRUNC", recvmsg_into(b, buf, 10, MSG_TRUNC, &flags), 100);
  ct_out("msg_flags: %s", msg_flags_str(flags));

  send100(a, &b_addr, 'F');
  ct_wait_readable(b);
  CT_RC("recvmsg into a large buffer", recvmsg_into(b, buf, sizeof buf, 0, &flags), 100);
  ct_out("msg_flags: %s", msg_flags_str(flags));

  send100(a, &b_addr, 'G');
  send100(a, &b_addr, 'H');
  ct_wait_readable(b);
  CT_RC("peek 5", recv(b, buf, 5, MSG_PEEK), 5);
  CT_RC("peek with MSG_TRUNC", recv(b, buf, 5, MSG_PEEK | MSG_TRUNC), 100);
  CT_RC("recvmsg peek into 5", recvmsg_into(b, buf, 5, MSG_PEEK, &flags), 5);
  ct_out("msg_flags: %s", msg_flags_str(flags));
  CT_RC("recv after peeks", recv(b, buf, sizeof buf, 0), 100);
  CT_CHECK(buf[0] == 'G', "peeking left the datagram queued");
  ct_wait_readable(b);
  CT_RC("recv of length 0 consumes a datagram", recv(b, buf, 0, 0), 0);
  CT_ERR("queue empty afterwards", recv(b, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);

  send100(a, &b_addr, 'I');
  ct_wait_readable(b);
  CT_RC("recv of length 0 with MSG_TRUNC", recv(b, NULL, 0, MSG_TRUNC), 100);
  CT_ERR("queue empty afterwards", recv(b, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
  close(a);
  close(b);
  return 0;
}
