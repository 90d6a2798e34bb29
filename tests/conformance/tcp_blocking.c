/* Blocking TCP: socket/bind/listen/connect/accept, the addresses each side
 * reports, small exchanges with send/recv and read/write, a full-duplex bulk
 * transfer, and the order in which queued connections are accepted. */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kBulk = 4 << 20, kQueued = 3 };

static int same_addr(const struct sockaddr_in* a, const struct sockaddr_in* b) {
  return a->sin_family == b->sin_family && a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
}

struct bulk_job {
  int fd;
  unsigned seed;
  size_t received;
  int intact;
};

/* Receives kBulk bytes of pattern `seed` in whatever pieces recv returns. */
static void* bulk_receiver(void* arg) {
  struct bulk_job* job = arg;
  unsigned char* buf = malloc(65536);
  job->intact = 1;
  while (job->received < kBulk) {
    size_t want = kBulk - job->received < 65536 ? kBulk - job->received : 65536;
    ssize_t n = recv(job->fd, buf, want, 0);
    if (n <= 0) break;
    if (!ct_pattern_ok(buf, (size_t)n, job->seed, job->received)) job->intact = 0;
    job->received += (size_t)n;
  }
  free(buf);
  return NULL;
}

static void exchange_small(int client, int server) {
  char buf[64];
  CT_RC("send hello", send(client, "hello", 5, 0), 5);
  CT_RC("recv hello", recv(server, buf, sizeof buf, 0), 5);
  CT_CHECK(memcmp(buf, "hello", 5) == 0, "server got 'hello'");
  CT_RC("write world", write(server, "world!", 6), 6);
  CT_RC("read world", read(client, buf, sizeof buf), 6);
  CT_CHECK(memcmp(buf, "world!", 6) == 0, "client got 'world!'");
}

static void bulk_both_ways(int client, int server) {
  unsigned char* out = malloc(kBulk);
  unsigned char* back = malloc(kBulk);
  ct_pattern(out, kBulk, 1, 0);
  ct_pattern(back, kBulk, 2, 0);
  struct bulk_job at_server = {.fd = server, .seed = 1};
  struct bulk_job at_client = {.fd = client, .seed = 2};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, bulk_receiver, &at_server);
  pthread_create(&t2, NULL, bulk_receiver, &at_client);
  /* A blocking send queues everything before it returns. */
  CT_RC("bulk send client->server", send(client, out, kBulk, 0), kBulk);
  CT_RC("bulk write server->client", write(server, back, kBulk), kBulk);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  ct_out("bulk received at server: %zu intact=%d", at_server.received, at_server.intact);
  ct_out("bulk received at client: %zu intact=%d", at_client.received, at_client.intact);
  CT_CHECK(at_server.received == kBulk && at_server.intact, "server received the bulk intact");
  CT_CHECK(at_client.received == kBulk && at_client.intact, "client received the bulk intact");
  free(out);
  free(back);
}

static void accept_order(int listener, const struct sockaddr_in* addr) {
  int clients[kQueued];
  for (int i = 0; i < kQueued; ++i) clients[i] = ct_tcp_connect(addr);
  for (int i = 0; i < kQueued; ++i) {
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    int fd = CT_OK("accept queued", accept(listener, (struct sockaddr*)&peer, &len));
    struct sockaddr_in local;
    socklen_t local_len = sizeof local;
    getsockname(clients[i], (struct sockaddr*)&local, &local_len);
    CT_CHECK(same_addr(&peer, &local), "queued connections are accepted in connect order");
    char c = (char)('a' + i);
    CT_RC("send on queued", send(clients[i], &c, 1, 0), 1);
    char got = 0;
    CT_RC("recv on accepted", recv(fd, &got, 1, 0), 1);
    CT_CHECK(got == c, "byte arrives on the matching accepted socket");
    close(fd);
    close(clients[i]);
  }
  int c = ct_tcp_connect(addr);
  int fd = CT_OK("accept with NULL address", accept(listener, NULL, NULL));
  close(fd);
  close(c);
}

int main(void) {
  ct_start("tcp_blocking");
  int listener = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  struct sockaddr_in any = ct_addr(0);
  CT_RC("bind port 0", bind(listener, (struct sockaddr*)&any, sizeof any), 0);
  CT_RC("listen", listen(listener, 8), 0);
  struct sockaddr_in bound;
  socklen_t len = sizeof bound;
  CT_RC("getsockname listener", getsockname(listener, (struct sockaddr*)&bound, &len), 0);
  CT_CHECK(len == sizeof bound && bound.sin_port != 0, "listener got an ephemeral port");
  CT_CHECK(bound.sin_addr.s_addr == any.sin_addr.s_addr, "listener is bound to the test address");

  int client = CT_OK("socket client", socket(AF_INET, SOCK_STREAM, 0));
  CT_RC("connect", connect(client, (struct sockaddr*)&bound, sizeof bound), 0);
  struct sockaddr_in peer;
  len = sizeof peer;
  int server = CT_OK("accept", accept(listener, (struct sockaddr*)&peer, &len));
  CT_CHECK(len == sizeof peer, "accept filled a sockaddr_in");

  struct sockaddr_in client_local, client_peer, server_local, server_peer;
  len = sizeof client_local;
  CT_RC("getsockname client", getsockname(client, (struct sockaddr*)&client_local, &len), 0);
  len = sizeof client_peer;
  CT_RC("getpeername client", getpeername(client, (struct sockaddr*)&client_peer, &len), 0);
  len = sizeof server_local;
  CT_RC("getsockname server", getsockname(server, (struct sockaddr*)&server_local, &len), 0);
  len = sizeof server_peer;
  CT_RC("getpeername server", getpeername(server, (struct sockaddr*)&server_peer, &len), 0);
  CT_CHECK(same_addr(&peer, &client_local), "accept reports the client's local address");
  CT_CHECK(same_addr(&server_peer, &client_local), "server's peer is the client's local address");
  CT_CHECK(same_addr(&client_peer, &bound), "client's peer is the listener address");
  CT_CHECK(same_addr(&server_local, &bound), "server's local address is the listener address");

  exchange_small(client, server);
  bulk_both_ways(client, server);

  CT_RC("close client", close(client), 0);
  char c;
  CT_RC("recv after peer close", recv(server, &c, 1, 0), 0);
  CT_RC("close server", close(server), 0);

  accept_order(listener, &bound);
  CT_RC("close listener", close(listener), 0);
  return 0;
}
