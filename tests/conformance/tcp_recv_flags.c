/* recv flags on TCP: MSG_PEEK, partial reads, MSG_WAITALL (data arriving in
 * pieces, and cut short by EOF), MSG_DONTWAIT on a blocking socket, MSG_TRUNC
 * (discard), zero-length recv, and SO_RCVLOWAT. */
#include "common.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct dribble {
  int fd;
  int pieces;
  int piece_len;
  int delay_ms;
  int shut_after;
};

/* Sends `pieces` pieces of pattern 3 with a pause before each. */
static void* dribbler(void* arg) {
  struct dribble* d = arg;
  unsigned char buf[1024];
  for (int i = 0; i < d->pieces; ++i) {
    ct_sleep_ms(d->delay_ms);
    ct_pattern(buf, (size_t)d->piece_len, 3, (size_t)i * d->piece_len);
    ct_send_all(d->fd, buf, (size_t)d->piece_len);
  }
  if (d->shut_after) shutdown(d->fd, SHUT_WR);
  return NULL;
}

/* Waits until `want` bytes are queued for reading on fd. */
static void wait_queued(int fd, int want) {
  for (int i = 0; i < 200; ++i) {
    int n = 0;
    if (ioctl(fd, FIONREAD, &n) == 0 && n >= want) return;
    ct_wait(fd, POLLIN, 10);
  }
  CT_FAIL("%d bytes never became readable", want);
}

static void peek_and_partial(int client, int server) {
  char buf[128];
  CT_RC("send abcdef", send(client, "abcdef", 6, 0), 6);
  wait_queued(server, 6);
  CT_RC("recv MSG_PEEK 3", recv(server, buf, 3, MSG_PEEK), 3);
  CT_CHECK(memcmp(buf, "abc", 3) == 0, "peek shows 'abc'");
  CT_RC("recv MSG_PEEK 64", recv(server, buf, 64, MSG_PEEK), 6);
  CT_RC("recv 2", recv(server, buf, 2, 0), 2);
  CT_CHECK(memcmp(buf, "ab", 2) == 0, "recv consumed 'ab'");
  CT_RC("recv MSG_PEEK after partial read", recv(server, buf, 64, MSG_PEEK), 4);
  CT_CHECK(memcmp(buf, "cdef", 4) == 0, "peek now shows 'cdef'");
  CT_RC("recv rest", recv(server, buf, 64, 0), 4);
  CT_ERR("recv MSG_PEEK|MSG_DONTWAIT on empty", recv(server, buf, 64, MSG_PEEK | MSG_DONTWAIT), EAGAIN);

  unsigned char data[100];
  ct_pattern(data, sizeof data, 9, 0);
  CT_RC("send 100", send(client, data, sizeof data, 0), 100);
  wait_queued(server, 100);
  unsigned char in[100];
  CT_RC("recv 30 of 100", recv(server, in, 30, 0), 30);
  CT_RC("read 30 more", read(server, in + 30, 30), 30);
  CT_RC("recv the remaining 40", recv(server, in + 60, 100, 0), 40);
  CT_CHECK(ct_pattern_ok(in, sizeof in, 9, 0), "partial reads reassemble the stream in order");

  CT_RC("send 10", send(client, "0123456789", 10, 0), 10);
  wait_queued(server, 10);
  CT_RC("recv MSG_TRUNC 4 (discard)", recv(server, buf, 4, MSG_TRUNC), 4);
  CT_RC("recv after discard", recv(server, buf, 64, 0), 6);
  CT_CHECK(memcmp(buf, "456789", 6) == 0, "MSG_TRUNC discarded the first 4 bytes");
}

static void dontwait(int client, int server) {
  char buf[16];
  CT_ERR("recv MSG_DONTWAIT on empty blocking socket", recv(server, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
  CT_RC("send MSG_DONTWAIT", send(client, "nb", 2, MSG_DONTWAIT), 2);
  wait_queued(server, 2);
  CT_RC("recv MSG_DONTWAIT with data", recv(server, buf, sizeof buf, MSG_DONTWAIT), 2);
  CT_ERR("recv of length 0 on empty socket", recv(server, buf, 0, MSG_DONTWAIT), EAGAIN);
  CT_RC("send 1", send(client, "z", 1, 0), 1);
  wait_queued(server, 1);
  CT_RC("recv of length 0 with data queued", recv(server, buf, 0, 0), 0);
  CT_RC("recv the queued byte", recv(server, buf, sizeof buf, 0), 1);
}

static void waitall(int client, int server) {
  struct dribble d = {.fd = client, .pieces = 5, .piece_len = 1000, .delay_ms = 20};
  pthread_t t;
  pthread_create(&t, NULL, dribbler, &d);
  unsigned char buf[5000];
  CT_RC("recv MSG_WAITALL 5000 from 5 delayed pieces", recv(server, buf, sizeof buf, MSG_WAITALL), 5000);
  CT_CHECK(ct_pattern_ok(buf, sizeof buf, 3, 0), "MSG_WAITALL data intact");
  pthread_join(t, NULL);

  struct dribble shortd = {.fd = client, .pieces = 3, .piece_len = 100, .delay_ms = 20, .shut_after = 1};
  pthread_create(&t, NULL, dribbler, &shortd);
  CT_RC("recv MSG_WAITALL 1000 cut short by EOF", recv(server, buf, 1000, MSG_WAITALL), 300);
  CT_RC("recv at EOF", recv(server, buf, 1000, MSG_WAITALL), 0);
  pthread_join(t, NULL);
}

static void rcvlowat(int client, int server) {
  int lowat = 10;
  CT_RC("setsockopt SO_RCVLOWAT 10", setsockopt(server, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat), 0);
  CT_RC("send 5", send(client, "12345", 5, 0), 5);
  wait_queued(server, 5);
  ct_out("poll with 5 of 10 bytes: %s", ct_poll_str(ct_wait(server, POLLIN, 50)));
  /* Only the option changes between these two looks: the library's look
   * may not answer from what the first one saw. */
  lowat = 4;
  CT_RC("setsockopt SO_RCVLOWAT 4", setsockopt(server, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat), 0);
  ct_out("poll with 5 bytes, SO_RCVLOWAT 4: %s", ct_poll_str(ct_wait(server, POLLIN, 50)));
  lowat = 10;
  CT_RC("setsockopt SO_RCVLOWAT 10 again", setsockopt(server, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat), 0);
  ct_out("poll with 5 of 10 bytes again: %s", ct_poll_str(ct_wait(server, POLLIN, 50)));
  CT_RC("send 5 more", send(client, "67890", 5, 0), 5);
  ct_out("poll with 10 of 10 bytes: %s", ct_poll_str(ct_wait(server, POLLIN, 2000)));
  char buf[16];
  CT_RC("recv 10", recv(server, buf, sizeof buf, 0), 10);
}

int main(void) {
  ct_start("tcp_recv_flags");
  int client, server;
  ct_tcp_pair(&client, &server);
  peek_and_partial(client, server);
  dontwait(client, server);
  rcvlowat(client, server);
  close(client);
  close(server);
  ct_tcp_pair(&client, &server);
  waitall(client, server);
  close(client);
  close(server);
  return 0;
}
