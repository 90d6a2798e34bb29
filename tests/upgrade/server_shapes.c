/* server_shapes: one echo server in each shape real servers have, and a
 * client that checks every byte (issue 10, DESIGN decision 2 revised).
 *
 *   server_shapes server SHAPE ADDR PORTFILE [N]
 *     prefork N      listen, fork N workers that accept and serve
 *     prefork-lock N the same, accept() under a lock shared by the workers
 *     daemon         listen, daemon(), then accept and serve
 *     fork-per-conn  accept, fork a child that serves; the parent closes
 *     fork-late      the same, 150 ms between each accept and its fork
 *     fork-slow      the same, 400 ms: longer than the library waits before
 *                    the parent's engine claims an unused socket itself
 *     fork-slow-range  fork-slow, but the parent closes its copy with
 *                    close_range() (as a parent that closes everything it
 *                    handed on does)
 *     fork-slow-dup2 fork-slow, but the parent closes its copy by dup2()ing
 *                    /dev/null over it (then closes that)
 *     listen-once    listen, accept one connection, close the listener,
 *                    serve; again for the next connection
 *     threads N      N threads accept on one listener
 *     reuseport N    N workers, each with its own listener on one port
 *                    (SO_REUSEPORT), each accepting and serving
 *     reuseport-master N  the master opens N listeners on one port
 *                    (SO_REUSEPORT, as nginx's `reuseport` does), then forks
 *                    N workers; each accepts on its own one and closes the
 *                    others; the master keeps them all (nginx's does)
 *     reuseport-respawn N  the same; then worker 0 is stopped, the master
 *                    closes its listener (the first it opened), opens a
 *                    replacement on the port and forks a new worker for it
 *     reuseport-closed N  as reuseport-master, but the master closes its
 *                    copies once it forked; then worker 0 is stopped, and
 *                    the master opens a replacement listener, forks a new
 *                    worker for it and closes its copy again
 *     inetd          accept, fork, and exec `server_shapes handler` with the
 *                    connection as its stdin and stdout (inetd's "nowait"
 *                    services); the parent closes its copy
 *   The server writes its port (and for `daemon` its pid) to PORTFILE and
 *   runs until SIGTERM (every process it made exits too).
 *
 *   server_shapes handler
 *     Echoes fd 0 to fd 1 until the end of fd 0 (the exec'd image of
 *     `inetd`: it knows the connection only as inherited fds).
 *
 *   server_shapes client ADDR PORTFILE CONNECTIONS BYTES
 *     Sequential connections, each echoing BYTES (written and read back in
 *     chunks, checked); prints "MEASURED ..." with the mean time per
 *     connection. Exit 0 only if every byte came back right.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536
#define MAX_WORKERS 16

static volatile sig_atomic_t stopping;
static pid_t workers[MAX_WORKERS];
static int worker_count;

static void die(const char* what) {
  fprintf(stderr, "server_shapes: %s: %s\n", what, strerror(errno));
  exit(2);
}

static void on_term(int sig) {
  (void)sig;
  stopping = 1;
}

/* Workers end on SIGTERM through exit(), so the library prints its stats. */
static void install_term_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
}

static int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Echoes until the client closes. */
static void serve(int fd) {
  static __thread char buf[CHUNK];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR && !stopping) continue;
    if (n <= 0) break;
    if (write_all(fd, buf, (size_t)n) != 0) break;
  }
  close(fd);
}

/* The handler of `inetd`: stdin and stdout are the connection. */
static int run_handler(void) {
  static char buf[CHUNK];
  for (;;) {
    ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : 1;
    if (write_all(1, buf, (size_t)n) != 0) return 1;
  }
}

/* A socket bound to ADDR:PORT; listening unless `listen_too` is 0. */
static int make_socket(const char* addr, int port, int reuseport, int listen_too) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) die("SO_REUSEPORT");
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) die("address");
  if (bind(fd, (struct sockaddr*)&sa, sizeof sa) != 0) die("bind");
  if (listen_too && listen(fd, 64) != 0) die("listen");
  return fd;
}

static int make_listener(const char* addr, int port) { return make_socket(addr, port, 0, 1); }

static int port_of(int fd) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  if (getsockname(fd, (struct sockaddr*)&sa, &len) != 0) die("getsockname");
  return ntohs(sa.sin_port);
}

static void write_portfile(const char* path, int port) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) die("portfile");
  fprintf(f, "%d %d\n", port, (int)getpid());
  fclose(f);
  if (rename(tmp, path) != 0) die("rename portfile");
}

static int accept_one(int listener) {
  for (;;) {
    int fd = accept(listener, NULL, NULL);
    if (fd >= 0 || stopping) return fd;
    if (errno != EINTR && errno != ECONNABORTED) return -1;
  }
}

static void accept_loop(int listener, sem_t* lock) {
  while (!stopping) {
    if (lock != NULL && sem_wait(lock) != 0) continue;
    int fd = accept_one(listener);
    if (lock != NULL) sem_post(lock);
    if (fd < 0) break;
    serve(fd);
  }
}

/* SIGTERM, then SIGKILL for a worker that took it just before blocking in
 * accept() (and so sleeps on). */
static void stop_workers(void) {
  for (int i = 0; i < worker_count; ++i) kill(workers[i], SIGTERM);
  for (int i = 0; i < worker_count; ++i) {
    for (int tick = 0; tick < 40 && waitpid(workers[i], NULL, WNOHANG) == 0; ++tick) usleep(50000);
    if (kill(workers[i], 0) == 0) {
      kill(workers[i], SIGKILL);
      waitpid(workers[i], NULL, 0);
    }
  }
}

static void wait_for_term(void) {
  sigset_t none;
  sigemptyset(&none);
  while (!stopping) sigsuspend(&none);
}

static void* thread_main(void* arg) {
  accept_loop(*(int*)arg, NULL);
  return NULL;
}

static int run_server(const char* shape, const char* addr, const char* portfile, int n) {
  install_term_handler();
  if (n < 1) n = 1;
  if (n > MAX_WORKERS) n = MAX_WORKERS;
  if (strcmp(shape, "reuseport") == 0) {
    /* The port: a bound socket (never listening, so it takes no connection)
     * holds it until every worker listens on it. */
    int holder = make_socket(addr, 0, 1, 0);
    int port = port_of(holder);
    int ready[2];
    if (pipe(ready) != 0) die("pipe");
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid < 0) die("fork");
      if (pid == 0) {
        close(holder);
        close(ready[0]);
        int listener = make_socket(addr, port, 1, 1);
        if (write(ready[1], "r", 1) != 1) die("ready");
        close(ready[1]);
        accept_loop(listener, NULL);
        exit(0);
      }
      workers[worker_count++] = pid;
    }
    close(ready[1]);
    char c;
    for (int i = 0; i < n; ++i)
      if (read(ready[0], &c, 1) != 1) die("a worker did not listen");
    close(ready[0]);
    close(holder);
    write_portfile(portfile, port);
    wait_for_term();
    stop_workers();
    return 0;
  }
  if (strcmp(shape, "reuseport-master") == 0 || strcmp(shape, "reuseport-respawn") == 0 ||
      strcmp(shape, "reuseport-closed") == 0) {
    const int closed = strcmp(shape, "reuseport-closed") == 0;
    int listeners[MAX_WORKERS];
    listeners[0] = make_socket(addr, 0, 1, 1);
    int port = port_of(listeners[0]);
    for (int i = 1; i < n; ++i) listeners[i] = make_socket(addr, port, 1, 1);
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid < 0) die("fork");
      if (pid == 0) {
        for (int j = 0; j < n; ++j)
          if (j != i) close(listeners[j]);
        accept_loop(listeners[i], NULL);
        exit(0);
      }
      workers[worker_count++] = pid;
    }
    if (closed) {
      for (int i = 0; i < n; ++i) close(listeners[i]);
      kill(workers[0], SIGKILL);
      waitpid(workers[0], NULL, 0);
      listeners[0] = make_socket(addr, port, 1, 1);
      pid_t pid = fork();
      if (pid < 0) die("fork");
      if (pid == 0) {
        accept_loop(listeners[0], NULL);
        exit(0);
      }
      workers[0] = pid;
      close(listeners[0]);
    }
    if (strcmp(shape, "reuseport-respawn") == 0) {
      /* Worker 0 goes (SIGKILL: no exit handlers); its listener, the
       * master's first, is closed so the kernel sends it nothing more; a
       * new one takes its place, served by a new worker. */
      kill(workers[0], SIGKILL);
      waitpid(workers[0], NULL, 0);
      close(listeners[0]);
      listeners[0] = make_socket(addr, port, 1, 1);
      pid_t pid = fork();
      if (pid < 0) die("fork");
      if (pid == 0) {
        for (int j = 1; j < n; ++j) close(listeners[j]);
        accept_loop(listeners[0], NULL);
        exit(0);
      }
      workers[0] = pid;
    }
    write_portfile(portfile, port);
    wait_for_term();
    stop_workers();
    return 0;
  }
  if (strcmp(shape, "listen-once") == 0) {
    int port = 0;
    while (!stopping) {
      int listener = make_listener(addr, port);
      if (port == 0) {
        port = port_of(listener);
        write_portfile(portfile, port);
      }
      int fd = accept_one(listener);
      close(listener);
      if (fd < 0) break;
      serve(fd);
    }
    return 0;
  }
  int listener = make_listener(addr, 0);
  if (strcmp(shape, "daemon") == 0) {
    if (daemon(1, 1) != 0) die("daemon");
    write_portfile(portfile, port_of(listener));
    accept_loop(listener, NULL);
    return 0;
  }
  write_portfile(portfile, port_of(listener));
  if (strcmp(shape, "prefork") == 0 || strcmp(shape, "prefork-lock") == 0) {
    sem_t* lock = NULL;
    if (strcmp(shape, "prefork-lock") == 0) {
      lock = mmap(NULL, sizeof *lock, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (lock == MAP_FAILED || sem_init(lock, 1, 1) != 0) die("accept lock");
    }
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid < 0) die("fork");
      if (pid == 0) {
        accept_loop(listener, lock);
        exit(0);
      }
      workers[worker_count++] = pid;
    }
    wait_for_term();
    stop_workers();
    return 0;
  }
  if (strcmp(shape, "fork-per-conn") == 0 || strcmp(shape, "fork-late") == 0 || strncmp(shape, "fork-slow", 9) == 0) {
    /* fork-late: 150 ms between accept and fork, as a loaded host makes of
     * any parent (longer than the 50 ms after which the library used to
     * claim an unused socket for the parent). fork-slow: 400 ms, after the
     * parent's claim (250 ms at most): the client's bytes must still come
     * through whole (the client once switched behind bytes the parent had
     * not read, and the child's first use reset the connection). */
    long late_ms = strcmp(shape, "fork-late") == 0 ? 150 : strncmp(shape, "fork-slow", 9) == 0 ? 400 : 0;
    /* How the parent lets go of its copy: a plain close() is not the only
     * call that closes an fd, and each must leave the child a working
     * connection. */
    const int by_range = strcmp(shape, "fork-slow-range") == 0, by_dup2 = strcmp(shape, "fork-slow-dup2") == 0;
    int devnull = by_dup2 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
    if (by_dup2 && devnull < 0) die("/dev/null");
    const struct timespec late = {0, late_ms * 1000 * 1000};
    signal(SIGCHLD, SIG_IGN);  /* no zombies */
    while (!stopping) {
      int fd = accept_one(listener);
      if (fd < 0) break;
      if (late.tv_nsec > 0) nanosleep(&late, NULL);
      pid_t pid = fork();
      if (pid == 0) {
        close(listener);
        serve(fd);
        exit(0);
      }
      if (by_range) {
        if (close_range((unsigned)fd, (unsigned)fd, 0) != 0) die("close_range");
      } else if (by_dup2) {
        if (dup2(devnull, fd) != fd) die("dup2");
        close(fd);
      } else {
        close(fd);
      }
    }
    return 0;
  }
  if (strcmp(shape, "inetd") == 0) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) die("readlink /proc/self/exe");
    self[len] = 0;
    signal(SIGCHLD, SIG_IGN);  /* no zombies */
    while (!stopping) {
      int fd = accept_one(listener);
      if (fd < 0) break;
      pid_t pid = fork();
      if (pid < 0) die("fork");
      if (pid == 0) {
        signal(SIGCHLD, SIG_DFL);
        if (dup2(fd, 0) != 0 || dup2(fd, 1) != 1) _exit(2);
        if (fd > 1) close(fd);
        close(listener);
        execl(self, "server_shapes", "handler", (char*)NULL);
        _exit(127);
      }
      close(fd);
    }
    return 0;
  }
  if (strcmp(shape, "threads") == 0) {
    pthread_t threads[MAX_WORKERS];
    for (int i = 0; i < n; ++i) pthread_create(&threads[i], NULL, thread_main, &listener);
    wait_for_term();
    shutdown(listener, SHUT_RDWR);  /* wakes the accepting threads */
    for (int i = 0; i < n; ++i) pthread_join(threads[i], NULL);
    return 0;
  }
  fprintf(stderr, "server_shapes: unknown shape %s\n", shape);
  return 2;
}

static uint8_t pattern(int conn, size_t offset) { return (uint8_t)((offset * 131u + (size_t)conn * 7u) >> 3); }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int read_portfile(const char* path) {
  for (int i = 0; i < 300; ++i) {
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      int port = 0;
      int ok = fscanf(f, "%d", &port);
      fclose(f);
      if (ok == 1 && port > 0) return port;
    }
    usleep(100000);
  }
  fprintf(stderr, "server_shapes: no port in %s after 30 s\n", path);
  exit(2);
}

/* One connection: echo `bytes`, checked. 0 if every byte came back. */
static int one_connection(const struct sockaddr_in* sa, int conn, size_t bytes) {
  int fd = -1;
  for (int attempt = 0; attempt < 100; ++attempt) {  /* listen-once re-listens between connections */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (const struct sockaddr*)sa, sizeof *sa) == 0) break;
    int err = errno;
    close(fd);
    fd = -1;
    if (err != ECONNREFUSED) {
      fprintf(stderr, "connection %d: connect: %s\n", conn, strerror(err));
      return -1;
    }
    usleep(50000);
  }
  if (fd < 0) return -1;
  static char out[CHUNK], in[CHUNK];
  size_t done = 0;
  while (done < bytes) {
    size_t n = bytes - done < CHUNK ? bytes - done : CHUNK;
    for (size_t i = 0; i < n; ++i) out[i] = (char)pattern(conn, done + i);
    if (write_all(fd, out, n) != 0) {
      fprintf(stderr, "connection %d: write at %zu: %s\n", conn, done, strerror(errno));
      close(fd);
      return -1;
    }
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd, in + got, n - got);
      if (r <= 0) {
        fprintf(stderr, "connection %d: read at %zu: %s\n", conn, done + got, r == 0 ? "end of stream" : strerror(errno));
        close(fd);
        return -1;
      }
      got += (size_t)r;
    }
    if (memcmp(in, out, n) != 0) {
      fprintf(stderr, "connection %d: wrong bytes in [%zu, %zu)\n", conn, done, done + n);
      close(fd);
      return -1;
    }
    done += n;
  }
  close(fd);
  return 0;
}

static int run_client(const char* addr, const char* portfile, int connections, size_t bytes) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)read_portfile(portfile));
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) die("address");
  int failed = 0;
  double t0 = now_s();
  for (int i = 0; i < connections; ++i) failed += one_connection(&sa, i, bytes) != 0;
  double elapsed = now_s() - t0;
  printf("MEASURED connections=%d failed=%d bytes_each=%zu mean_ms_per_connection=%.1f\n", connections, failed,
         bytes, elapsed * 1000.0 / connections);
  return failed == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc >= 5 && strcmp(argv[1], "server") == 0)
    return run_server(argv[2], argv[3], argv[4], argc > 5 ? atoi(argv[5]) : 1);
  if (argc == 2 && strcmp(argv[1], "handler") == 0) return run_handler();
  if (argc == 6 && strcmp(argv[1], "client") == 0)
    return run_client(argv[2], argv[3], atoi(argv[4]), (size_t)strtoull(argv[5], NULL, 0));
  fprintf(stderr,
          "usage: server_shapes server SHAPE ADDR PORTFILE [N]\n"
          "       server_shapes handler\n"
          "       server_shapes client ADDR PORTFILE CONNECTIONS BYTES\n");
  return 2;
}
