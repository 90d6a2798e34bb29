/* Error codes of the socket calls: a refused connect, connecting twice,
 * using an unconnected socket, closed and non-socket fds, and bad arguments
 * (family, type, protocol, address length, options). */
#include "common.h"

#include <string.h>
#include <unistd.h>

static void connect_errors(void) {
  int holder = CT_OK("socket port holder", socket(AF_INET, SOCK_STREAM, 0));
  struct sockaddr_in any = ct_addr(0);
  CT_RC("bind port holder", bind(holder, (struct sockaddr*)&any, sizeof any), 0);
  struct sockaddr_in closed = ct_addr(ct_port_of(holder));

  int fd = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  CT_ERR("connect to a port nobody listens on", connect(fd, (struct sockaddr*)&closed, sizeof closed), ECONNREFUSED);
  close(fd);

  struct sockaddr_in addr;
  int listener = ct_tcp_listener(&addr);
  fd = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  CT_RC("connect", connect(fd, (struct sockaddr*)&addr, sizeof addr), 0);
  CT_ERR("connect again (EISCONN)", connect(fd, (struct sockaddr*)&addr, sizeof addr), EISCONN);
  CT_ERR("listen on a connected socket", listen(fd, 1), EINVAL);
  CT_ERR("bind on a connected socket", bind(fd, (struct sockaddr*)&any, sizeof any), EINVAL);

  int other = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  CT_ERR("bind to a port in use", bind(other, (struct sockaddr*)&addr, sizeof addr), EADDRINUSE);
  close(other);
  close(fd);
  close(listener);
  close(holder);
}

static void unconnected_errors(void) {
  int tcp = CT_OK("socket tcp", socket(AF_INET, SOCK_STREAM, 0));
  char c = 'x';
  CT_ERR("send on unconnected tcp", send(tcp, &c, 1, 0), EPIPE);
  CT_ERR("recv on unconnected tcp", recv(tcp, &c, 1, 0), ENOTCONN);
  CT_ERR("write on unconnected tcp", write(tcp, &c, 1), EPIPE);
  CT_ERR("read on unconnected tcp", read(tcp, &c, 1), ENOTCONN);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  CT_ERR("getpeername on unconnected tcp", getpeername(tcp, (struct sockaddr*)&sa, &len), ENOTCONN);
  CT_ERR("shutdown on unconnected tcp", shutdown(tcp, SHUT_RDWR), ENOTCONN);
  CT_ERR("accept on a socket that does not listen", accept(tcp, NULL, NULL), EINVAL);
  close(tcp);

  int udp = CT_OK("socket udp", socket(AF_INET, SOCK_DGRAM, 0));
  CT_ERR("send on unconnected udp", send(udp, &c, 1, 0), EDESTADDRREQ);
  CT_ERR("getpeername on unconnected udp", getpeername(udp, (struct sockaddr*)&sa, &len), ENOTCONN);
  CT_ERR("listen on udp", listen(udp, 1), EOPNOTSUPP);
  CT_ERR("accept on udp", accept(udp, NULL, NULL), EOPNOTSUPP);
  close(udp);
}

static void bad_fds(void) {
  int fd = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  CT_RC("close", close(fd), 0);
  char c = 0;
  struct sockaddr_in sa = ct_addr(9);
  socklen_t len = sizeof sa;
  int one = 1;
  CT_ERR("close again", close(fd), EBADF);
  CT_ERR("send on closed fd", send(fd, &c, 1, 0), EBADF);
  CT_ERR("recv on closed fd", recv(fd, &c, 1, 0), EBADF);
  CT_ERR("connect on closed fd", connect(fd, (struct sockaddr*)&sa, sizeof sa), EBADF);
  CT_ERR("bind on closed fd", bind(fd, (struct sockaddr*)&sa, sizeof sa), EBADF);
  CT_ERR("listen on closed fd", listen(fd, 1), EBADF);
  CT_ERR("accept on closed fd", accept(fd, NULL, NULL), EBADF);
  CT_ERR("getsockname on closed fd", getsockname(fd, (struct sockaddr*)&sa, &len), EBADF);
  CT_ERR("setsockopt on closed fd", setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), EBADF);
  CT_ERR("shutdown on closed fd", shutdown(fd, SHUT_RDWR), EBADF);
  CT_ERR("send on fd -1", send(-1, &c, 1, 0), EBADF);

  int pipefd[2];
  CT_RC("pipe", pipe(pipefd), 0);
  CT_ERR("send on a pipe", send(pipefd[1], &c, 1, 0), ENOTSOCK);
  CT_ERR("recv on a pipe", recv(pipefd[0], &c, 1, MSG_DONTWAIT), ENOTSOCK);
  CT_ERR("connect on a pipe", connect(pipefd[0], (struct sockaddr*)&sa, sizeof sa), ENOTSOCK);
  len = sizeof one;
  CT_ERR("getsockopt on a pipe", getsockopt(pipefd[0], SOL_SOCKET, SO_TYPE, &one, &len), ENOTSOCK);
  CT_ERR("shutdown on a pipe", shutdown(pipefd[0], SHUT_RD), ENOTSOCK);
  close(pipefd[0]);
  close(pipefd[1]);
}

static void bad_arguments(void) {
  CT_ERR("socket unknown family", socket(12345, SOCK_STREAM, 0), EAFNOSUPPORT);
  CT_ERR("socket unknown type", socket(AF_INET, 12345, 0), EINVAL);
  CT_ERR("socket stream with udp protocol", socket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
  CT_ERR("socket unknown flags", socket(AF_INET, SOCK_STREAM | 0x40000000, 0), EINVAL);

  int fd = CT_OK("socket", socket(AF_INET, SOCK_STREAM, 0));
  struct sockaddr_in6 six;
  memset(&six, 0, sizeof six);
  six.sin6_family = AF_INET6;
  six.sin6_port = htons(9);
  six.sin6_addr = in6addr_loopback;
  CT_ERR("connect inet socket to an inet6 address", connect(fd, (struct sockaddr*)&six, sizeof six), EAFNOSUPPORT);
  struct sockaddr_in sa = ct_addr(0);
  CT_ERR("connect with a short address", connect(fd, (struct sockaddr*)&sa, 4), EINVAL);
  CT_ERR("bind with a short address", bind(fd, (struct sockaddr*)&sa, 4), EINVAL);
  CT_RC("bind", bind(fd, (struct sockaddr*)&sa, sizeof sa), 0);
  CT_ERR("bind twice", bind(fd, (struct sockaddr*)&sa, sizeof sa), EINVAL);
  CT_ERR("shutdown with a bad how", shutdown(fd, 42), EINVAL);

  int one = 1;
  CT_ERR("setsockopt unknown option", setsockopt(fd, SOL_SOCKET, 12345, &one, sizeof one), ENOPROTOOPT);
  CT_ERR("setsockopt short value", setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 1), EINVAL);
  CT_ERR("setsockopt unknown tcp option", setsockopt(fd, IPPROTO_TCP, 12345, &one, sizeof one), ENOPROTOOPT);
  int udp = CT_OK("socket udp", socket(AF_INET, SOCK_DGRAM, 0));
  socklen_t len = sizeof one;
  CT_ERR("getsockopt TCP_NODELAY on udp", getsockopt(udp, IPPROTO_TCP, 1, &one, &len), EOPNOTSUPP);
  close(udp);
  close(fd);
}

int main(void) {
  ct_start("socket_errors");
  connect_errors();
  unconnected_errors();
  bad_fds();
  bad_arguments();
  return 0;
}
