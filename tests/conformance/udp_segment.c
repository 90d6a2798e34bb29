/* UDP_SEGMENT (UDP GSO): one send cut into datagrams of the segment size,
 * by the socket option and by a control message, received one by one
 * with their bytes; a send no larger than the segment is one datagram;
 * what the kernel refuses (a malformed control message, too many
 * segments: 130, above what any kernel takes) is refused the same. Under
 * the library, after a warm-up, the segments go over UD as one chain. */
#include "common.h"
#include "warm_up.h"

#include <netinet/udp.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

enum { kMax = 65507 };
static unsigned char out[kMax], in[kMax + 1];

/* Takes `count` datagrams from b and checks each against the cut of out. */
static void receive_segments(int b, size_t total, size_t segment, const char* label) {
  size_t at = 0;
  int count = 0;
  while (at < total) {
    ct_wait_readable(b);
    ssize_t n = recv(b, in, sizeof in, MSG_DONTWAIT);
    size_t want = total - at < segment ? total - at : segment;
    CT_ASSERT(n == (ssize_t)want && memcmp(in, out + at, want) == 0);
    at += want;
    ++count;
  }
  ct_out("%s: %d datagrams, each the right bytes", label, count);
  CT_ERR("nothing more", recv(b, in, sizeof in, MSG_DONTWAIT), EAGAIN);
}

static ssize_t send_with_segment(int a, const struct sockaddr_in* to, size_t length, size_t cmsg_bytes,
                                 uint16_t segment) {
  union {
    char buf[CMSG_SPACE(sizeof(uint32_t))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov = {out, length};
  struct msghdr msg = {.msg_name = (void*)to, .msg_namelen = sizeof *to, .msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = control.buf, .msg_controllen = CMSG_SPACE(cmsg_bytes)};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(cmsg_bytes);
  memcpy(CMSG_DATA(c), &segment, sizeof segment);
  return sendmsg(a, &msg, 0);
}

int main(void) {
  ct_start("udp_segment");
  for (size_t i = 0; i < sizeof out; ++i) out[i] = (unsigned char)(i * 7 + (i >> 9));
  struct sockaddr_in a_addr, b_addr;
  int a = ct_udp_bound(&a_addr);
  int b = ct_udp_bound(&b_addr);
  ct_udp_warm_up(a, &a_addr, b, &b_addr);

  int segment = 500;
  CT_RC("setsockopt UDP_SEGMENT 500", setsockopt(a, SOL_UDP, UDP_SEGMENT, &segment, sizeof segment), 0);
  CT_RC("sendto 1,700 bytes", sendto(a, out, 1700, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 1700);
  receive_segments(b, 1700, 500, "option 500, 1,700 bytes");
  CT_RC("sendto 1,500 bytes", sendto(a, out, 1500, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 1500);
  receive_segments(b, 1500, 500, "option 500, 1,500 bytes");
  CT_RC("sendto 400 bytes (below the segment)", sendto(a, out, 400, 0, (struct sockaddr*)&b_addr, sizeof b_addr),
        400);
  receive_segments(b, 400, 500, "option 500, 400 bytes");
  CT_RC("sendto 32,000 bytes", sendto(a, out, 32000, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 32000);
  receive_segments(b, 32000, 500, "option 500, 32,000 bytes");
  CT_ERR("sendto 64,600 bytes (130 segments)", sendto(a, out, 64600, 0, (struct sockaddr*)&b_addr, sizeof b_addr),
         EINVAL);
  segment = 0;
  CT_RC("setsockopt UDP_SEGMENT 0", setsockopt(a, SOL_UDP, UDP_SEGMENT, &segment, sizeof segment), 0);
  CT_RC("sendto 1,700 bytes", sendto(a, out, 1700, 0, (struct sockaddr*)&b_addr, sizeof b_addr), 1700);
  receive_segments(b, 1700, 1700, "no segment, 1,700 bytes");

  CT_RC("sendmsg UDP_SEGMENT 300 as a control message, 1,000 bytes", send_with_segment(a, &b_addr, 1000, 2, 300),
        1000);
  receive_segments(b, 1000, 300, "control message 300, 1,000 bytes");
  CT_ERR("sendmsg with a 4-byte UDP_SEGMENT control message", send_with_segment(a, &b_addr, 1000, 4, 300), EINVAL);
  close(a);
  close(b);
  return 0;
}
