/* Scatter/gather: readv/writev and sendmsg/recvmsg with several iovecs
 * (including empty ones) on TCP and UDP, msg_name on UDP, iovec count
 * errors, and writev/readv on a connected UDP socket (one datagram). */
#include "common.h"

#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

static void wait_queued(int fd, int want) {
  for (int i = 0; i < 200; ++i) {
    int n = 0;
    if (ioctl(fd, FIONREAD, &n) == 0 && n >= want) return;
    ct_wait(fd, POLLIN, 10);
  }
  CT_FAIL("%d bytes never became readable", want);
}

static void tcp_vectors(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  struct iovec out[3] = {{"ab", 2}, {"", 0}, {"cdefg", 5}};
  CT_RC("writev 3 iovecs", writev(client, out, 3), 7);
  wait_queued(server, 7);
  char a[3], b[2], c[10];
  memset(c, 0, sizeof c);
  struct iovec in[4] = {{a, sizeof a}, {NULL, 0}, {b, sizeof b}, {c, sizeof c}};
  CT_RC("readv 4 iovecs", readv(server, in, 4), 7);
  CT_CHECK(memcmp(a, "abc", 3) == 0 && memcmp(b, "de", 2) == 0 && memcmp(c, "fg", 3) == 0,
           "readv split 'abcdefg' as abc|de|fg");

  struct iovec parts[4] = {{"sen", 3}, {"dm", 2}, {"", 0}, {"sg!", 3}};
  struct msghdr msg = {.msg_iov = parts, .msg_iovlen = 4};
  CT_RC("sendmsg 4 iovecs", sendmsg(client, &msg, 0), 8);
  wait_queued(server, 8);
  char x[5], y[16];
  struct iovec rin[2] = {{x, sizeof x}, {y, sizeof y}};
  struct msghdr rmsg = {.msg_iov = rin, .msg_iovlen = 2};
  CT_RC("recvmsg 2 iovecs", recvmsg(server, &rmsg, 0), 8);
  CT_CHECK(memcmp(x, "sendm", 5) == 0 && memcmp(y, "sg!", 3) == 0, "recvmsg split 'sendmsg!' as sendm|sg!");
  ct_out("recvmsg msg_flags: %d msg_namelen: %u", rmsg.msg_flags, (unsigned)rmsg.msg_namelen);

  CT_RC("readv with no iovecs", readv(server, in, 0), 0);
  CT_RC("writev with no iovecs", writev(client, out, 0), 0);
  volatile int negative = -1; /* hidden from the compiler's argument checks */
  CT_ERR("writev with a negative count", writev(client, out, negative), EINVAL);
  static struct iovec too_many[IOV_MAX + 1];
  CT_ERR("readv with more than IOV_MAX iovecs", readv(server, too_many, IOV_MAX + 1), EINVAL);
  close(client);
  close(server);
}

static void udp_vectors(void) {
  struct sockaddr_in a_addr, b_addr;
  int a = ct_udp_bound(&a_addr);
  int b = ct_udp_bound(&b_addr);
  struct iovec parts[3] = {{"dat", 3}, {"agr", 3}, {"am", 2}};
  struct msghdr msg = {.msg_name = &b_addr, .msg_namelen = sizeof b_addr, .msg_iov = parts, .msg_iovlen = 3};
  CT_RC("sendmsg with msg_name and 3 iovecs", sendmsg(a, &msg, 0), 8);
  ct_wait_readable(b);
  char x[4], y[100];
  struct iovec in[2] = {{x, sizeof x}, {y, sizeof y}};
  struct sockaddr_in from;
  memset(&from, 0, sizeof from);
  struct msghdr rmsg = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = in, .msg_iovlen = 2};
  CT_RC("recvmsg one datagram into 2 iovecs", recvmsg(b, &rmsg, 0), 8);
  CT_CHECK(memcmp(x, "data", 4) == 0 && memcmp(y, "gram", 4) == 0, "datagram split as data|gram");
  ct_out("recvmsg msg_namelen: %u", (unsigned)rmsg.msg_namelen);
  CT_CHECK(from.sin_port == a_addr.sin_port && from.sin_addr.s_addr == a_addr.sin_addr.s_addr,
           "msg_name is the sender");

  /* A short msg_namelen: the kernel copies what fits and reports the full length. */
  CT_RC("sendmsg again", sendmsg(a, &msg, 0), 8);
  ct_wait_readable(b);
  memset(&from, 0, sizeof from);
  rmsg.msg_namelen = 4;
  CT_RC("recvmsg with msg_namelen 4", recvmsg(b, &rmsg, 0), 8);
  ct_out("recvmsg msg_namelen: %u", (unsigned)rmsg.msg_namelen);
  CT_CHECK(from.sin_family == AF_INET && from.sin_port == a_addr.sin_port && from.sin_addr.s_addr == 0,
           "only the first 4 bytes of the address were copied");

  CT_RC("connect a to b", connect(a, (struct sockaddr*)&b_addr, sizeof b_addr), 0);
  CT_RC("writev on connected udp", writev(a, parts, 3), 8);
  ct_wait_readable(b);
  CT_RC("readv gets one datagram", readv(b, in, 2), 8);
  CT_ERR("nothing more queued", recv(b, x, sizeof x, MSG_DONTWAIT), EAGAIN);
  close(a);
  close(b);
}

int main(void) {
  ct_start("msg_iov");
  tcp_vectors();
  udp_vectors();
  return 0;
}
