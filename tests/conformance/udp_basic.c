/* UDP: sendto/recvfrom and the source address, datagram boundaries, empty
 * and maximum-size datagrams, EAGAIN (SOCK_NONBLOCK and MSG_DONTWAIT),
 * connected UDP (peer filtering, sendto another address, disconnect with
 * AF_UNSPEC, ECONNREFUSED from a closed port), and sendmmsg/recvmmsg. */
#include "common.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kMaxPayload = 65507 };

static int same_addr(const struct sockaddr_in* a, const struct sockaddr_in* b) {
  return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static void send_recv(int a, const struct sockaddr_in* a_addr, int b, const struct sockaddr_in* b_addr) {
  char buf[64];
  CT_RC("sendto", sendto(a, "one", 3, 0, (const struct sockaddr*)b_addr, sizeof *b_addr), 3);
  struct sockaddr_in from;
  socklen_t len = sizeof from;
  ct_wait_readable(b);
  CT_RC("recvfrom", recvfrom(b, buf, sizeof buf, 0, (struct sockaddr*)&from, &len), 3);
  CT_CHECK(len == sizeof from && same_addr(&from, a_addr), "recvfrom reports the sender's address");
  CT_CHECK(memcmp(buf, "one", 3) == 0, "payload 'one'");

  static const int sizes[] = {1, 200, 3000, 0, 60000};
  unsigned char* out = malloc(kMaxPayload + 1);
  unsigned char* in = malloc(kMaxPayload + 1);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    ct_pattern(out, (size_t)sizes[i], (unsigned)i, 0);
    char label[64];
    snprintf(label, sizeof label, "sendto %d bytes", sizes[i]);
    CT_RC(label, sendto(a, out, (size_t)sizes[i], 0, (const struct sockaddr*)b_addr, sizeof *b_addr), sizes[i]);
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    ct_wait_readable(b);
    char label[64];
    snprintf(label, sizeof label, "recv datagram %zu", i);
    CT_RC(label, recv(b, in, kMaxPayload + 1, 0), sizes[i]);
    CT_ASSERT(ct_pattern_ok(in, (size_t)sizes[i], (unsigned)i, 0));
  }
  ct_out("check: datagram boundaries and order kept");
  CT_RC("sendto the maximum payload", sendto(a, out, kMaxPayload, 0, (const struct sockaddr*)b_addr, sizeof *b_addr),
        kMaxPayload);
  ct_wait_readable(b);
  CT_RC("recv the maximum payload", recv(b, in, kMaxPayload + 1, 0), kMaxPayload);
  CT_ERR("sendto one byte over the maximum",
         sendto(a, out, kMaxPayload + 1, 0, (const struct sockaddr*)b_addr, sizeof *b_addr), EMSGSIZE);
  free(out);
  free(in);
}

static void nonblocking(int a) {
  char buf[8];
  CT_ERR("recv MSG_DONTWAIT on empty", recv(a, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
  int nb = CT_OK("socket SOCK_NONBLOCK", socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0));
  struct sockaddr_in addr = ct_addr(0);
  CT_RC("bind", bind(nb, (struct sockaddr*)&addr, sizeof addr), 0);
  CT_ERR("recvfrom on empty nonblocking", recvfrom(nb, buf, sizeof buf, 0, NULL, NULL), EAGAIN);
  ct_out("poll empty nonblocking: %s", ct_poll_str(ct_wait(nb, POLLIN | POLLOUT, 0)));
  close(nb);
}

static void connected(int a, const struct sockaddr_in* a_addr, int b, const struct sockaddr_in* b_addr) {
  char buf[64];
  struct sockaddr_in c_addr;
  int c = ct_udp_bound(&c_addr);
  CT_RC("connect a to b", connect(a, (const struct sockaddr*)b_addr, sizeof *b_addr), 0);
  struct sockaddr_in peer;
  socklen_t len = sizeof peer;
  CT_RC("getpeername", getpeername(a, (struct sockaddr*)&peer, &len), 0);
  CT_CHECK(same_addr(&peer, b_addr), "getpeername is b");
  CT_RC("send on connected", send(a, "conn", 4, 0), 4);
  ct_wait_readable(b);
  CT_RC("b recv", recv(b, buf, sizeof buf, 0), 4);

  CT_RC("c sends to connected a (dropped)", sendto(c, "stray", 5, 0, (const struct sockaddr*)a_addr, sizeof *a_addr), 5);
  CT_RC("b sends to a", sendto(b, "good", 4, 0, (const struct sockaddr*)a_addr, sizeof *a_addr), 4);
  ct_wait_readable(a);
  CT_RC("a recv", recv(a, buf, sizeof buf, 0), 4);
  CT_CHECK(memcmp(buf, "good", 4) == 0, "connected UDP only receives from its peer");
  CT_ERR("a recv again", recv(a, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);

  CT_RC("sendto another address on connected", sendto(a, "over", 4, 0, (struct sockaddr*)&c_addr, sizeof c_addr), 4);
  ct_wait_readable(c);
  CT_RC("c recv", recv(c, buf, sizeof buf, 0), 4);

  struct sockaddr unspec = {.sa_family = AF_UNSPEC};
  CT_RC("disconnect with AF_UNSPEC", connect(a, &unspec, sizeof unspec), 0);
  len = sizeof peer;
  CT_ERR("getpeername after disconnect", getpeername(a, (struct sockaddr*)&peer, &len), ENOTCONN);
  CT_ERR("send after disconnect", send(a, "x", 1, 0), EDESTADDRREQ);
  close(c);
}

static void refused(void) {
  struct sockaddr_in gone;
  int tmp = ct_udp_bound(&gone);
  close(tmp);
  int fd = CT_OK("socket", socket(AF_INET, SOCK_DGRAM, 0));
  CT_RC("connect to a closed port", connect(fd, (struct sockaddr*)&gone, sizeof gone), 0);
  CT_RC("send to a closed port", send(fd, "x", 1, 0), 1);
  short rev = 0;
  for (int i = 0; i < 200 && !(rev & POLLERR); ++i) rev = ct_wait(fd, POLLIN, 10);
  ct_out("poll after the port unreachable: %s", ct_poll_str(rev));
  char buf[4];
  CT_ERR("recv reports the refusal", recv(fd, buf, sizeof buf, 0), ECONNREFUSED);
  CT_ERR("recv once the error was reported", recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
  close(fd);
}

static void mmsg(int a, int b, const struct sockaddr_in* b_addr) {
  char payload[3][8] = {"m0", "m11", "m222"};
  struct iovec out_iov[3];
  struct mmsghdr out[3];
  memset(out, 0, sizeof out);
  for (int i = 0; i < 3; ++i) {
    out_iov[i].iov_base = payload[i];
    out_iov[i].iov_len = strlen(payload[i]);
    out[i].msg_hdr.msg_iov = &out_iov[i];
    out[i].msg_hdr.msg_iovlen = 1;
    out[i].msg_hdr.msg_name = (void*)b_addr;
    out[i].msg_hdr.msg_namelen = sizeof *b_addr;
  }
  CT_RC("sendmmsg 3", sendmmsg(a, out, 3, 0), 3);
  for (int i = 0; i < 3; ++i) ct_out("sendmmsg msg_len[%d]: %u", i, out[i].msg_len);

  char in_buf[4][16];
  struct iovec in_iov[4];
  struct mmsghdr in[4];
  memset(in, 0, sizeof in);
  for (int i = 0; i < 4; ++i) {
    in_iov[i].iov_base = in_buf[i];
    in_iov[i].iov_len = sizeof in_buf[i];
    in[i].msg_hdr.msg_iov = &in_iov[i];
    in[i].msg_hdr.msg_iovlen = 1;
  }
  /* Collect all three, whatever way they arrive (bounded). */
  int got = 0;
  for (int round = 0; round < 3 && got < 3; ++round) {
    ct_wait_readable(b);
    int n = recvmmsg(b, in + got, 4 - got, MSG_DONTWAIT, NULL);
    if (n < 0) CT_FAIL("recvmmsg: %s", ct_errname(errno));
    got += n;
  }
  ct_out("recvmmsg got: %d", got);
  for (int i = 0; i < got; ++i) ct_out("recvmmsg msg_len[%d]: %u '%.*s'", i, in[i].msg_len, (int)in[i].msg_len, in_buf[i]);
  CT_CHECK(got == 3, "recvmmsg received the three datagrams");
  CT_ERR("recvmmsg on empty", recvmmsg(b, in, 4, MSG_DONTWAIT, NULL), EAGAIN);
}

int main(void) {
  ct_start("udp_basic");
  struct sockaddr_in a_addr, b_addr;
  int a = ct_udp_bound(&a_addr);
  int b = ct_udp_bound(&b_addr);
  send_recv(a, &a_addr, b, &b_addr);
  nonblocking(a);
  mmsg(a, b, &b_addr);
  connected(a, &a_addr, b, &b_addr);
  refused();
  close(a);
  close(b);
  return 0;
}
