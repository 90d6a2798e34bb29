/* sendfile from a regular file to sockets: a 1 MiB transfer to TCP with an
 * offset pointer (the file position stays put), without one (the position
 * moves), short counts at end of file, sendfile64, a connected UDP socket
 * (one datagram), and errors (a socket as an offset source, a closed target). */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

enum { kFileSize = 1 << 20 };

struct reader {
  int fd;
  size_t want;
  size_t offset; /* pattern offset of the first byte */
  int intact;
};

static void* read_pattern(void* arg) {
  struct reader* r = arg;
  unsigned char* buf = malloc(r->want);
  ct_recv_all(r->fd, buf, r->want);
  r->intact = ct_pattern_ok(buf, r->want, 5, r->offset);
  free(buf);
  return NULL;
}

static int make_file(void) {
  const char* dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/vsock_sendfile_XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) CT_FAIL("mkstemp: %s", ct_errname(errno));
  unlink(path);
  unsigned char* data = malloc(kFileSize);
  ct_pattern(data, kFileSize, 5, 0);
  if (write(fd, data, kFileSize) != kFileSize) CT_FAIL("write file: %s", ct_errname(errno));
  free(data);
  lseek(fd, 0, SEEK_SET);
  return fd;
}

int main(void) {
  ct_start("sendfile_tcp");
  int file = make_file();
  int client, server;
  ct_tcp_pair(&client, &server);

  struct reader r = {.fd = server, .want = kFileSize, .offset = 0};
  pthread_t t;
  pthread_create(&t, NULL, read_pattern, &r);
  off_t off = 0;
  size_t total = 0;
  for (int i = 0; i < 1000 && total < kFileSize; ++i) {
    ssize_t n = sendfile(client, file, &off, kFileSize - total);
    if (n <= 0) CT_FAIL("sendfile: %zd %s", n, ct_errname(errno));
    total += (size_t)n;
  }
  pthread_join(t, NULL);
  ct_out("sendfile 1 MiB with an offset: sent %zu, offset now %lld", total, (long long)off);
  CT_CHECK(r.intact, "the receiver got the file's bytes");
  CT_RC("file position unchanged", lseek(file, 0, SEEK_CUR), 0);

  CT_RC("lseek to 100", lseek(file, 100, SEEK_SET), 100);
  CT_RC("sendfile 50 without an offset", sendfile(client, file, NULL, 50), 50);
  CT_RC("file position moved", lseek(file, 0, SEEK_CUR), 150);
  unsigned char buf[256];
  ct_recv_all(server, buf, 50);
  CT_CHECK(ct_pattern_ok(buf, 50, 5, 100), "bytes 100..149 of the file");

  off = kFileSize - 10;
  CT_RC("sendfile past the end is short", sendfile(client, file, &off, 100), 10);
  CT_RC("sendfile at the end", sendfile(client, file, &off, 100), 0);
  ct_recv_all(server, buf, 10);
  CT_CHECK(ct_pattern_ok(buf, 10, 5, kFileSize - 10), "the last 10 bytes of the file");
  off64_t off64 = 1000;
  CT_RC("sendfile64 20", sendfile64(client, file, &off64, 20), 20);
  ct_recv_all(server, buf, 20);
  CT_CHECK(ct_pattern_ok(buf, 20, 5, 1000), "bytes 1000..1019 of the file");

  struct sockaddr_in b_addr;
  int a = ct_udp_bound(NULL);
  int b = ct_udp_bound(&b_addr);
  CT_RC("connect udp", connect(a, (struct sockaddr*)&b_addr, sizeof b_addr), 0);
  off = 0;
  CT_RC("sendfile 100 to connected udp", sendfile(a, file, &off, 100), 100);
  ct_wait_readable(b);
  CT_RC("one datagram of 100", recv(b, buf, sizeof buf, 0), 100);
  CT_CHECK(ct_pattern_ok(buf, 100, 5, 0), "datagram holds the first 100 bytes");

  off = 0;
  CT_ERR("sendfile from a socket at an offset", sendfile(client, server, &off, 10), ESPIPE);
  close(a);
  CT_ERR("sendfile to a closed fd", sendfile(a, file, &off, 10), EBADF);
  close(b);
  close(client);
  close(server);
  close(file);
  return 0;
}
