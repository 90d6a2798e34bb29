/* Small writes and Nagle's algorithm. Runs of one-byte writes, with and
 * without TCP_NODELAY, must all reach the peer while the writer makes no
 * further socket call (the kernel sends what Nagle held once the ACK comes;
 * a library that holds small writes must not wait for the writer's next
 * call either). Setting TCP_NODELAY sends what is held. Replies written in
 * two pieces (a header, then a body) make request/response rounds that must
 * not stall. */
#include "common.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

enum { kRun = 200, kArriveMs = 2000, kRounds = 20 };

/* The writer sends `count` one-byte writes of pattern `seed` and then makes
 * no call on its socket; the reader must get them all within kArriveMs. */
static void run_of_small_writes(const char* label, int writer, int reader, int count, unsigned seed) {
  unsigned char out[kRun], in[kRun];
  ct_pattern(out, (size_t)count, seed, 0);
  for (int i = 0; i < count; i++) CT_ASSERT(send(writer, out + i, 1, 0) == 1);
  size_t got = 0;
  long deadline = ct_now_ms() + kArriveMs;
  while (got < (size_t)count && ct_now_ms() < deadline) {
    if (!(ct_wait(reader, POLLIN, (int)(deadline - ct_now_ms())) & POLLIN)) break;
    ssize_t n = recv(reader, in + got, (size_t)count - got, MSG_DONTWAIT);
    if (n <= 0) break;
    got += (size_t)n;
  }
  ct_out("%s: %d one-byte writes arrived while the writer made no call: %s", label, count,
         got == (size_t)count ? "all" : "NOT all");
  if (got != (size_t)count) CT_FAIL("%s: %zu of %d bytes arrived", label, got, count);
  if (memcmp(in, out, (size_t)count) != 0) CT_FAIL("%s: bytes changed or out of order", label);
}

static void set_no_delay(int fd, int on) {
  CT_RC("setsockopt TCP_NODELAY", setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on), 0);
  int value = -1;
  socklen_t len = sizeof value;
  CT_RC("getsockopt TCP_NODELAY", getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len), 0);
  ct_out("TCP_NODELAY now %d", value != 0);
}

/* Request of 4 bytes; reply of a 4-byte header and a 12-byte body, two writes. */
static void split_replies(int client, int server) {
  char request[4], reply[16];
  for (int round = 0; round < kRounds; round++) {
    CT_ASSERT(send(client, "req?", 4, 0) == 4);
    CT_ASSERT(recv(server, request, sizeof request, MSG_WAITALL) == 4);
    CT_ASSERT(send(server, "HEAD", 4, 0) == 4);
    CT_ASSERT(send(server, "body-payload", 12, 0) == 12);
    CT_ASSERT(recv(client, reply, sizeof reply, MSG_WAITALL) == 16);
    if (memcmp(reply, "HEADbody-payload", 16) != 0) CT_FAIL("reply changed in round %d", round);
  }
  ct_out("%d request/reply rounds with replies in two writes: done", kRounds);
}

int main(void) {
  ct_start("tcp_small_writes");
  int client, server;
  ct_tcp_pair(&client, &server);
  /* A first exchange, so both ends are past connection set-up. */
  char byte;
  CT_RC("send ping", send(client, "p", 1, 0), 1);
  CT_RC("recv ping", recv(server, &byte, 1, MSG_WAITALL), 1);
  CT_RC("send pong", send(server, "P", 1, 0), 1);
  CT_RC("recv pong", recv(client, &byte, 1, MSG_WAITALL), 1);

  run_of_small_writes("client, Nagle on", client, server, kRun, 1);
  run_of_small_writes("server, Nagle on", server, client, kRun, 2);
  split_replies(client, server);

  set_no_delay(client, 1);
  run_of_small_writes("client, TCP_NODELAY", client, server, kRun, 3);

  /* Writes held by Nagle, then TCP_NODELAY set before anything else. */
  set_no_delay(client, 0);
  unsigned char out[50], in[50];
  ct_pattern(out, sizeof out, 4, 0);
  for (size_t i = 0; i < sizeof out; i++) CT_ASSERT(send(client, out + i, 1, 0) == 1);
  set_no_delay(client, 1);
  ct_recv_all(server, in, sizeof in);
  CT_CHECK(memcmp(in, out, sizeof out) == 0, "bytes written before TCP_NODELAY intact");
  ct_out("50 one-byte writes, then TCP_NODELAY: all arrived");

  CT_RC("close client", close(client), 0);
  CT_RC("recv EOF", recv(server, &byte, 1, 0), 0);
  CT_RC("close server", close(server), 0);
  ct_out("tcp_small_writes: done");
  return 0;
}
