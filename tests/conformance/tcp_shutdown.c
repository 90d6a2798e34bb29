/* EOF and half-close: shutdown(SHUT_WR/SHUT_RD/SHUT_RDWR), data before the
 * FIN, sticky EOF, EPIPE after our own SHUT_WR, revents of half-closed
 * sockets, a close right after SHUT_RD, and the reset that follows writing
 * to / closing on a dead peer. */
#include "common.h"
#include "warm_up.h"

#include <poll.h>
#include <string.h>
#include <unistd.h>

static const short kAll = POLLIN | POLLOUT | POLLRDHUP;

static void show_poll(const char* what, int fd) { ct_out("poll %s: %s", what, ct_poll_str(ct_wait(fd, kAll, 0))); }

/* Waits up to 10 s until the revents of fd contain `bit`: at once on the
 * kernel; over the library a pair made just before may still be upgrading
 * (under TCG that can take seconds), and its FIN or reset shows once it
 * settles. (poll returns at once while POLLOUT is set, so the wait between
 * two looks is a sleep, not poll's timeout.) */
static void wait_for(int fd, short bit) {
  const long deadline = ct_now_ms() + 10000;
  while (!(ct_wait(fd, kAll, 0) & bit)) {
    if (ct_now_ms() > deadline) CT_FAIL("revents never showed %s within 10 s", ct_poll_str(bit));
    poll(NULL, 0, 10);
  }
}

static void half_close_write(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  char buf[16];
  CT_RC("client send before SHUT_WR", send(client, "tail", 4, 0), 4);
  CT_RC("client shutdown SHUT_WR", shutdown(client, SHUT_WR), 0);
  CT_RC("client shutdown SHUT_WR twice", shutdown(client, SHUT_WR), 0);
  CT_ERR("client send after SHUT_WR", send(client, "x", 1, 0), EPIPE);
  ct_wait_readable(server);
  wait_for(server, POLLRDHUP);
  show_poll("server after peer SHUT_WR", server);
  CT_RC("server recv data before FIN", recv(server, buf, sizeof buf, 0), 4);
  CT_CHECK(memcmp(buf, "tail", 4) == 0, "data before the FIN arrives intact");
  CT_RC("server recv at EOF", recv(server, buf, sizeof buf, 0), 0);
  CT_RC("server recv at EOF again", recv(server, buf, sizeof buf, 0), 0);
  CT_RC("server read at EOF", read(server, buf, sizeof buf), 0);
  CT_RC("server still sends", send(server, "back", 4, 0), 4);
  ct_wait_readable(client);
  CT_RC("client still receives", recv(client, buf, sizeof buf, 0), 4);
  CT_CHECK(memcmp(buf, "back", 4) == 0, "client got 'back' after its SHUT_WR");
  show_poll("client after own SHUT_WR", client);
  CT_RC("server shutdown SHUT_WR", shutdown(server, SHUT_WR), 0);
  wait_for(client, POLLHUP);
  show_poll("client after both SHUT_WR", client);
  CT_RC("client recv at EOF", recv(client, buf, sizeof buf, 0), 0);
  close(client);
  close(server);
}

static void half_close_read(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  char buf[16];
  CT_RC("server shutdown SHUT_RD", shutdown(server, SHUT_RD), 0);
  show_poll("server after own SHUT_RD", server);
  CT_RC("server recv after SHUT_RD returns EOF at once", recv(server, buf, sizeof buf, 0), 0);
  CT_RC("server sends after SHUT_RD", send(server, "out", 3, 0), 3);
  ct_wait_readable(client);
  CT_RC("client receives", recv(client, buf, sizeof buf, 0), 3);
  show_poll("client after peer SHUT_RD", client);
  close(client);
  close(server);
}

static void close_both(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  char buf[16];
  CT_RC("client shutdown SHUT_RDWR", shutdown(client, SHUT_RDWR), 0);
  CT_ERR("client send after SHUT_RDWR", send(client, "x", 1, 0), EPIPE);
  CT_RC("client recv after SHUT_RDWR", recv(client, buf, sizeof buf, 0), 0);
  wait_for(server, POLLRDHUP);
  show_poll("server after peer SHUT_RDWR", server);
  CT_RC("server recv at EOF", recv(server, buf, sizeof buf, 0), 0);
  close(client);
  close(server);
}

/* Writing to a peer that closed: accepted, then the peer's RST makes the
 * next write EPIPE. `gone_ms` > 0: the peer has been gone that long (over
 * RDMA its queue pair too: the pair is warmed up onto RDMA first), not
 * just closed a moment ago. */
static void write_to_closed_peer(int gone_ms) {
  int client, server;
  if (gone_ms > 0)
    ct_tcp_pair_warm(&client, &server);
  else
    ct_tcp_pair(&client, &server);
  char buf[16];
  CT_RC("client close", close(client), 0);
  ct_wait_readable(server);
  CT_RC("server recv at EOF", recv(server, buf, sizeof buf, 0), 0);
  if (gone_ms > 0) {
    ct_sleep_ms(gone_ms);
    show_poll("server a while after the peer's close", server);
  }
  CT_RC("server send to a closed peer is accepted", send(server, "x", 1, 0), 1);
  wait_for(server, POLLERR);
  show_poll("server after the peer's reset", server);
  CT_ERR("server send after reset", send(server, "y", 1, 0), EPIPE);
  CT_RC("server recv after reset", recv(server, buf, sizeof buf, 0), 0);
  close(server);
}

/* The server reads nothing: SHUT_RD and close right after the accept. Over
 * the library that is within 250 ms of its Bound, while the client's Switch
 * and token may be on their way: the close waits for them rather than reset
 * the connection on an unread token, and the client sees the kernel's FIN,
 * then, once it writes to the closed socket, the kernel's reset. */
static void shut_read_then_close(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  char buf[16];
  CT_RC("server shutdown SHUT_RD at once", shutdown(server, SHUT_RD), 0);
  CT_RC("server close after SHUT_RD", close(server), 0);
  wait_for(client, POLLRDHUP);
  show_poll("client after the peer's SHUT_RD and close", client);
  CT_RC("client recv at EOF", recv(client, buf, sizeof buf, 0), 0);
  CT_RC("client send to the closed peer is accepted", send(client, "x", 1, 0), 1);
  wait_for(client, POLLERR);
  show_poll("client after the peer's reset", client);
  CT_ERR("client send after reset", send(client, "y", 1, 0), EPIPE);
  close(client);
}

static void close_with_unread_data(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  char buf[16];
  CT_RC("client send", send(client, "unread", 6, 0), 6);
  ct_wait_readable(server);
  CT_RC("server close with unread data", close(server), 0);
  wait_for(client, POLLERR);
  show_poll("client after reset", client);
  CT_ERR("client recv after reset", recv(client, buf, sizeof buf, 0), ECONNRESET);
  CT_RC("client recv after the reset was reported", recv(client, buf, sizeof buf, 0), 0);
  CT_ERR("client send after reset", send(client, "x", 1, 0), EPIPE);
  close(client);
}

int main(void) {
  ct_start("tcp_shutdown");
  half_close_write();
  half_close_read();
  close_both();
  write_to_closed_peer(0);
  write_to_closed_peer(300);
  shut_read_then_close();
  close_with_unread_data();
  return 0;
}
