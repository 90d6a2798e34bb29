/* Ancillary data on UDP: IP_PKTINFO, SO_TIMESTAMP, IP_RECVTOS and
 * IP_RECVTTL on receive (with IP_TOS/IP_TTL set on the sender), IP_TTL and
 * IP_PKTINFO given as control messages to sendmsg, and MSG_CTRUNC when the
 * control buffer is too small. Then the same receive options on a pair
 * whose datagrams go over UD under the library (warmed up first): the
 * same control messages, in the same order. */
#include "common.h"
#include "warm_up.h"

#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

static void enable(int fd, int level, int name, const char* label) {
  int one = 1;
  CT_RC(label, setsockopt(fd, level, name, &one, sizeof one), 0);
}

/* Receives one datagram and prints each control message, in order. */
static void receive_and_show(int fd, size_t control_len, const struct sockaddr_in* local) {
  char data[64];
  union {
    char buf[512];
    struct cmsghdr align;
  } control;
  struct iovec iov = {data, sizeof data};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = control_len};
  ct_wait_readable(fd);
  CT_RC("recvmsg", recvmsg(fd, &msg, 0), 4);
  ct_out("msg_flags: %s", (msg.msg_flags & MSG_CTRUNC) ? "MSG_CTRUNC" : msg.msg_flags ? "other" : "0");
  int count = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c && count < 16; c = CMSG_NXTHDR(&msg, c), ++count) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMP) {
      struct timeval tv, now;
      memcpy(&tv, CMSG_DATA(c), sizeof tv);
      gettimeofday(&now, NULL);
      long delta = (long)(now.tv_sec - tv.tv_sec);
      ct_out("cmsg SO_TIMESTAMP: %s", delta >= 0 && delta <= 5 ? "within 5 s of now" : "out of range");
      CT_ASSERT(delta >= 0 && delta <= 5);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      struct in_pktinfo info;
      memcpy(&info, CMSG_DATA(c), sizeof info);
      ct_out("cmsg IP_PKTINFO: ifindex %s, addr %s, spec_dst %s", info.ipi_ifindex > 0 ? ">0" : "0",
             info.ipi_addr.s_addr == local->sin_addr.s_addr ? "is ours" : "other",
             info.ipi_spec_dst.s_addr == local->sin_addr.s_addr ? "is ours" : "other");
      CT_ASSERT(info.ipi_addr.s_addr == local->sin_addr.s_addr);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      ct_out("cmsg IP_TOS: 0x%02x", *(unsigned char*)CMSG_DATA(c));
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
      int ttl;
      memcpy(&ttl, CMSG_DATA(c), sizeof ttl);
      ct_out("cmsg IP_TTL: %d", ttl);
    } else {
      ct_out("cmsg level %d type %d", c->cmsg_level, c->cmsg_type);
    }
  }
  ct_out("control messages: %d", count);
}

static void send_with_control(int fd, const struct sockaddr_in* to, int ttl, const struct sockaddr_in* source) {
  union {
    char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov = {"ctrl", 4};
  struct msghdr msg = {.msg_name = (void*)to, .msg_namelen = sizeof *to, .msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = control.buf, .msg_controllen = sizeof control.buf};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_TTL;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &ttl, sizeof ttl);
  c = CMSG_NXTHDR(&msg, c);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
  struct in_pktinfo info = {.ipi_ifindex = 0, .ipi_spec_dst = source->sin_addr};
  memcpy(CMSG_DATA(c), &info, sizeof info);
  CT_RC("sendmsg with IP_TTL and IP_PKTINFO control messages", sendmsg(fd, &msg, 0), 4);
}

int main(void) {
  ct_start("udp_cmsg");
  struct sockaddr_in a_addr, b_addr;
  int a = ct_udp_bound(&a_addr);
  int b = ct_udp_bound(&b_addr);
  enable(b, SOL_SOCKET, SO_TIMESTAMP, "SO_TIMESTAMP on");
  enable(b, IPPROTO_IP, IP_PKTINFO, "IP_PKTINFO on");
  enable(b, IPPROTO_IP, IP_RECVTOS, "IP_RECVTOS on");
  enable(b, IPPROTO_IP, IP_RECVTTL, "IP_RECVTTL on");
  int tos = 0x10, ttl = 33;
  CT_RC("sender IP_TOS 0x10", setsockopt(a, IPPROTO_IP, IP_TOS, &tos, sizeof tos), 0);
  CT_RC("sender IP_TTL 33", setsockopt(a, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl), 0);

  CT_RC("sendto", sendto(a, "cmsg", 4, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 4);
  receive_and_show(b, 512, &b_addr);

  CT_RC("sendto", sendto(a, "tiny", 4, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 4);
  receive_and_show(b, CMSG_SPACE(sizeof(struct timeval)), &b_addr);

  CT_RC("sendto", sendto(a, "none", 4, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 4);
  receive_and_show(b, 0, &b_addr);

  send_with_control(a, &b_addr, 7, &a_addr);
  receive_and_show(b, 512, &b_addr);
  close(a);
  close(b);

  /* A sender with no TOS or TTL of its own: under the library, over UD. */
  struct sockaddr_in c_addr, d_addr;
  int c = ct_udp_bound(&c_addr);
  int d = ct_udp_bound(&d_addr);
  enable(d, SOL_SOCKET, SO_TIMESTAMP, "SO_TIMESTAMP on");
  enable(d, IPPROTO_IP, IP_PKTINFO, "IP_PKTINFO on");
  enable(d, IPPROTO_IP, IP_RECVTOS, "IP_RECVTOS on");
  enable(d, IPPROTO_IP, IP_RECVTTL, "IP_RECVTTL on");
  /* d answers with control room, so the warm-up's datagrams to d are
   * read by plain recv() (no control asked). */
  ct_udp_warm_up(c, &c_addr, d, &d_addr);
  CT_RC("sendto", sendto(c, "cmsg", 4, 0, (struct sockaddr*)&d_addr, sizeof d_addr), 4);
  receive_and_show(d, 512, &d_addr);
  CT_RC("sendto", sendto(c, "tiny", 4, 0, (struct sockaddr*)&d_addr, sizeof d_addr), 4);
  receive_and_show(d, CMSG_SPACE(sizeof(struct timeval)) + 8, &d_addr);
  CT_RC("sendto", sendto(c, "none", 4, 0, (struct sockaddr*)&d_addr, sizeof d_addr), 4);
  receive_and_show(d, 0, &d_addr);
  close(c);
  close(d);
  return 0;
}
