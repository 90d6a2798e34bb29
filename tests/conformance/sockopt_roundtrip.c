/* Socket options: defaults and set/get round trips on TCP and UDP sockets
 * (SO_REUSEADDR, SO_REUSEPORT, SO_KEEPALIVE, TCP_NODELAY, keepalive timers,
 * SO_RCVBUF/SO_SNDBUF as the kernel reports them, SO_TYPE, SO_DOMAIN,
 * SO_PROTOCOL, SO_LINGER, IP_TOS, IP_TTL, SO_PRIORITY, SO_BROADCAST,
 * SO_ACCEPTCONN, SO_RCVTIMEO/SO_SNDTIMEO and its effect), optlen handling,
 * TCP_INFO state, and the options an accepted socket inherits. */
#include "common.h"

#include <netinet/tcp.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int get_int(int fd, int level, int name) {
  int value = -12345;
  socklen_t len = sizeof value;
  if (getsockopt(fd, level, name, &value, &len) != 0) CT_FAIL("getsockopt %d/%d: %s", level, name, ct_errname(errno));
  if (len != sizeof value) CT_FAIL("getsockopt %d/%d: optlen %u", level, name, (unsigned)len);
  return value;
}

/* Prints "label: default D, set V -> got G". */
static int roundtrip(int fd, int level, int name, const char* label, int value) {
  int before = get_int(fd, level, name);
  if (setsockopt(fd, level, name, &value, sizeof value) != 0) CT_FAIL("setsockopt %s: %s", label, ct_errname(errno));
  int after = get_int(fd, level, name);
  ct_out("%s: default %d, set %d -> got %d", label, before, value, after);
  return after;
}

static void flags_and_identity(int tcp, int udp) {
  ct_out("SO_TYPE tcp: %d udp: %d", get_int(tcp, SOL_SOCKET, SO_TYPE), get_int(udp, SOL_SOCKET, SO_TYPE));
  ct_out("SO_DOMAIN tcp: %d udp: %d", get_int(tcp, SOL_SOCKET, SO_DOMAIN), get_int(udp, SOL_SOCKET, SO_DOMAIN));
  ct_out("SO_PROTOCOL tcp: %d udp: %d", get_int(tcp, SOL_SOCKET, SO_PROTOCOL), get_int(udp, SOL_SOCKET, SO_PROTOCOL));
  ct_out("SO_ERROR tcp: %d udp: %d", get_int(tcp, SOL_SOCKET, SO_ERROR), get_int(udp, SOL_SOCKET, SO_ERROR));
  ct_out("SO_RCVLOWAT tcp: %d", get_int(tcp, SOL_SOCKET, SO_RCVLOWAT));
  CT_CHECK(roundtrip(tcp, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", 1) == 1, "SO_REUSEADDR is 1");
  CT_CHECK(roundtrip(tcp, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR off", 0) == 0, "SO_REUSEADDR is 0 again");
  CT_CHECK(roundtrip(tcp, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", 1) == 1, "SO_REUSEPORT is 1");
  CT_CHECK(roundtrip(tcp, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 1) == 1, "SO_KEEPALIVE is 1");
  CT_CHECK(roundtrip(tcp, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 1) == 1, "TCP_NODELAY is 1");
  CT_CHECK(roundtrip(tcp, IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE", 30) == 30, "TCP_KEEPIDLE is 30");
  CT_CHECK(roundtrip(tcp, IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL", 5) == 5, "TCP_KEEPINTVL is 5");
  CT_CHECK(roundtrip(tcp, IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT", 4) == 4, "TCP_KEEPCNT is 4");
  roundtrip(tcp, SOL_SOCKET, SO_PRIORITY, "SO_PRIORITY", 3);
  roundtrip(tcp, IPPROTO_IP, IP_TOS, "IP_TOS tcp", 0x10);
  roundtrip(tcp, IPPROTO_IP, IP_TOS, "IP_TOS tcp with ECN bits", 0x13);
  roundtrip(udp, IPPROTO_IP, IP_TOS, "IP_TOS udp", 0x13);
  roundtrip(tcp, IPPROTO_IP, IP_TTL, "IP_TTL", 10);
  roundtrip(udp, SOL_SOCKET, SO_BROADCAST, "SO_BROADCAST", 1);
  roundtrip(udp, IPPROTO_IP, IP_MULTICAST_TTL, "IP_MULTICAST_TTL", 4);
  roundtrip(udp, IPPROTO_IP, IP_MULTICAST_LOOP, "IP_MULTICAST_LOOP", 0);
}

static void buffers(int tcp, int udp) {
  /* Linux doubles the value set (bookkeeping overhead) and clamps small ones. */
  roundtrip(tcp, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF tcp", 65536);
  roundtrip(tcp, SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF tcp", 65536);
  roundtrip(udp, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF udp", 32768);
  roundtrip(udp, SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF udp", 1);
}

static void linger(int tcp) {
  struct linger l = {-1, -1};
  socklen_t len = sizeof l;
  CT_RC("getsockopt SO_LINGER", getsockopt(tcp, SOL_SOCKET, SO_LINGER, &l, &len), 0);
  ct_out("SO_LINGER default: onoff %d linger %d", l.l_onoff, l.l_linger);
  struct linger set = {1, 5};
  CT_RC("setsockopt SO_LINGER {1,5}", setsockopt(tcp, SOL_SOCKET, SO_LINGER, &set, sizeof set), 0);
  len = sizeof l;
  CT_RC("getsockopt SO_LINGER", getsockopt(tcp, SOL_SOCKET, SO_LINGER, &l, &len), 0);
  ct_out("SO_LINGER: onoff %d linger %d len %u", l.l_onoff, l.l_linger, (unsigned)len);
}

static void optlen(int tcp) {
  long long big = -1;
  socklen_t len = sizeof big;
  CT_RC("getsockopt SO_TYPE into 8 bytes", getsockopt(tcp, SOL_SOCKET, SO_TYPE, &big, &len), 0);
  ct_out("optlen now: %u", (unsigned)len);
  int value = 1;
  CT_RC("setsockopt TCP_NODELAY with 8 bytes", setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &big, sizeof big), 0);
  len = 0;
  CT_RC("getsockopt SO_TYPE into 0 bytes", getsockopt(tcp, SOL_SOCKET, SO_TYPE, &value, &len), 0);
  ct_out("optlen now: %u", (unsigned)len);
}

static void timeouts(void) {
  int client, server;
  ct_tcp_pair(&client, &server);
  struct timeval tv = {0, 150000}, got = {0, 0};
  socklen_t len = sizeof got;
  CT_RC("SO_RCVTIMEO 150 ms", setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  CT_RC("getsockopt SO_RCVTIMEO", getsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &got, &len), 0);
  ct_out("SO_RCVTIMEO: %ld s %ld us", (long)got.tv_sec, (long)got.tv_usec);
  tv.tv_usec = 250000;
  CT_RC("SO_SNDTIMEO 250 ms", setsockopt(server, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
  len = sizeof got;
  CT_RC("getsockopt SO_SNDTIMEO", getsockopt(server, SOL_SOCKET, SO_SNDTIMEO, &got, &len), 0);
  ct_out("SO_SNDTIMEO: %ld s %ld us", (long)got.tv_sec, (long)got.tv_usec);
  char c;
  long start = ct_now_ms();
  CT_ERR("recv times out", recv(server, &c, 1, 0), EAGAIN);
  long elapsed = ct_now_ms() - start;
  CT_CHECK(elapsed >= 140 && elapsed < 2000, "recv waited about the timeout");

  struct tcp_info info;
  len = sizeof info;
  CT_RC("getsockopt TCP_INFO", getsockopt(client, IPPROTO_TCP, TCP_INFO, &info, &len), 0);
  ct_out("TCP_INFO state: %d (ESTABLISHED is %d)", info.tcpi_state, 1);
  close(client);
  close(server);
}

static void inherited(void) {
  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  ct_out("SO_ACCEPTCONN listener: %d", get_int(listener, SOL_SOCKET, SO_ACCEPTCONN));
  int one = 1, buf = 65536;
  setsockopt(listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(listener, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  int client = ct_tcp_connect(&addr);
  int server = CT_OK("accept", accept(listener, NULL, NULL));
  ct_out("accepted: SO_ACCEPTCONN %d TCP_NODELAY %d SO_KEEPALIVE %d SO_RCVBUF %d",
         get_int(server, SOL_SOCKET, SO_ACCEPTCONN), get_int(server, IPPROTO_TCP, TCP_NODELAY),
         get_int(server, SOL_SOCKET, SO_KEEPALIVE), get_int(server, SOL_SOCKET, SO_RCVBUF));
  ct_out("client: TCP_NODELAY %d SO_KEEPALIVE %d", get_int(client, IPPROTO_TCP, TCP_NODELAY),
         get_int(client, SOL_SOCKET, SO_KEEPALIVE));
  close(client);
  close(server);
  close(listener);
}

int main(void) {
  ct_start("sockopt_roundtrip");
  int tcp = CT_OK("socket tcp NONBLOCK|CLOEXEC", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int udp = CT_OK("socket udp", socket(AF_INET, SOCK_DGRAM, 0));
  flags_and_identity(tcp, udp);
  buffers(tcp, udp);
  linger(tcp);
  optlen(tcp);
  close(tcp);
  close(udp);
  timeouts();
  inherited();
  return 0;
}
