// vsock_bench: socket ping-pong latency and streaming throughput, run the same
// way with and without libvsock preloaded (see bench/run.sh).
//
//   vsock_bench server [--addr A] [--port P] [--cpu N] [--simple]
//       Listens on TCP A:P (P=0: any free port) and binds UDP to the same
//       port, prints "READY <port>" on stdout, serves until SIGTERM/SIGINT.
//   vsock_bench sink [--addr A] [--port P] [--cpu N]
//       A UDP socket on A:P counting what arrives (recvmmsg, 64 at a time),
//       for udp-rate; prints "READY <port>", serves until SIGTERM/SIGINT.
//   vsock_bench mcast-echo --group G --addr A [--port P] [--receivers N] [--cpu N]
//       N processes answering what G:P brings (vsock_bench_mcast.hpp).
//   vsock_bench client --test tcp-lat|udp-lat|tcp-tput|tcp-call|tcp-conn|udp-rate|mcast-lat --port P [--addr A]
//       [--group G] [--receivers N] [--size BYTES] [--iters N] [--warmup N] [--seconds S] [--cpu N] [--simple] [--batch N]
//       [--wait block|poll|epoll] [--peer-pid PID] [--samples FILE] [--perf-ctl FIFO]...
//       Prints one line: "result test=... key=value ...".
//
// tcp-lat also reports the CPU time (user + system, every thread) the
// measured phase cost: cpu_s of the client (getrusage) and, with
// --peer-pid (the server's pid, same machine), peer_cpu_s from
// /proc/PID/stat; msgs counts both directions (2 per round trip); and
// the context switches (voluntary + involuntary, every thread) of the
// client (getrusage: ctxsw) and of the peer (/proc/PID/task/*/status:
// peer_ctxsw). --samples FILE writes every measured round trip (µs, one a
// line, in the order measured) for a CDF. --perf-ctl FIFO (repeatable)
// names the control fifo of a `perf stat -D -1 --control
// fifo:FIFO,FIFO.ack` counting one of the two processes: the client writes
// "enable" to each (and waits for the ack) when the measured phase starts
// and "disable" when it ends, so the counts cover the measured round trips
// only (bench/fair.sh).
// --wait poll|epoll makes both ends wait for each message in poll() or
// epoll_wait() before reading it (the server learns the mode from the
// Hello), so the library's poll/epoll wait is measured instead of its
// blocking read.
//
// --simple is for socket layers that implement only part of the socket API
// (rsocket's librspreload.so): the server has no UDP socket and no thread,
// blocks in accept() instead of poll(), and SIGTERM/SIGINT end it at once
// (_exit); neither side sets SO_RCVTIMEO/SO_SNDTIMEO (rsocket ignores them:
// ENOTSUP), so the bound on a run is the client's alarm() and, on the
// server, an alarm per connection. The measured loops are the same code in
// both modes: blocking read()/write() of the whole message.
//
// The warm-up (--warmup round trips) ends early after a quarter of --seconds,
// so slow large-message runs still measure; the measured phase then runs
// --iters round trips or until --seconds have passed (tcp-lat: counted from
// the end of the warm-up).
//
// udp-rate (against a sink) sends --size-byte datagrams with sendmmsg,
// --batch (default 32) per call, on a connected socket for --seconds,
// after a warm-up of a quarter of that (at most 1 s: the time a libvsock
// destination needs to resolve); a control datagram then asks the sink how
// many arrived in that window. Prints the send and receive rates (datagrams
// per second) and the loss: a sender faster than its receiver loses, as UDP
// does.
//
// udp-lat sends one datagram and waits 200 ms before its warm-up (the time a
// libvsock destination needs to resolve).
//
// tcp-conn opens --iters connections one after the other (no warm-up: the
// first one is the figure a new process pays), each: socket, connect, the
// Hello, one --size request, its echo, close; the time of each from
// socket() to close()'s return. Prints the first connection's (first_us)
// and, over the others, p50/p99/mean (the later connections' set-up cost)
// and the p50 of each part: connect_p50_us (socket to the Hello written),
// exchange_p50_us (the request and its echo), close_p50_us.
// Whether they went over RDMA is the harness's to count (the library's
// VSOCK_STATS=1 line at exit: bench/setup_time.sh).
//
// tcp-call times --iters recv(MSG_DONTWAIT) calls on a connected, empty TCP
// socket (each fails with EAGAIN at once): the per-call cost of the socket
// path, where an interposer's overhead shows without network noise.
//
// A TCP connection starts with a Hello naming the test; the server then echoes
// (latency) or counts bytes until EOF and answers with the count (throughput).
// Every blocking call has a timeout and the whole run an alarm, so a broken
// peer ends the run with an error instead of a hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "round_trips.hpp"
#include "vsock_bench_mcast.hpp"

namespace {

constexpr uint32_t kHelloMagic = 0x56534248;  // "VSBH"
constexpr uint32_t kMaxSize = 1u << 20;
constexpr uint32_t kMaxDatagram = 65507;
constexpr int kIoTimeoutS = 10;
constexpr int kUdpReplyTimeoutMs = 1000;
// udp-rate: the first word of every datagram to a sink
constexpr uint32_t kRateData = 0x56425244;   // "VBRD": counted
constexpr uint32_t kRateReset = 0x5642525a;  // "VBRZ": counts to zero, answered with the tag
constexpr uint32_t kRateQuery = 0x56425251;  // "VBRQ": answered with a RateCount
constexpr int kSinkBatch = 64;
constexpr unsigned kSimpleConnectionAlarmS = 300;  // --simple server: bound of one connection

enum class Test : uint32_t { kTcpLatency = 1, kTcpThroughput = 2, kUdpLatency = 3 };
// How a latency run waits for the next message (Hello::wait).
enum class WaitMode : uint32_t { kBlock = 0, kPoll = 1, kEpoll = 2 };

struct Hello {
  uint32_t magic;
  uint32_t test;
  uint32_t size;
  uint32_t wait;  // WaitMode; 0 (blocking read) from older clients
};

struct Options {
  std::string mode;
  std::string addr = "127.0.0.1";
  int port = 0;
  std::string test;
  uint32_t size = 64;
  long iters = 20000;
  long warmup = 1000;
  double seconds = 5.0;
  int cpu = -1;
  bool simple = false;
  WaitMode wait = WaitMode::kBlock;
  int peer_pid = -1;
  std::string samples_file;
  std::vector<std::string> perf_ctl;
  int batch = 32;
  std::string group;  // mcast-echo, mcast-lat
  int receivers = 2;
};

std::atomic<bool> g_stop{false};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "vsock_bench: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "vsock_bench: %s\n"
               "usage: vsock_bench server [--addr A] [--port P] [--cpu N] [--simple]\n"
               "       vsock_bench sink [--addr A] [--port P] [--cpu N]\n"
               "       vsock_bench mcast-echo --group G --addr A [--port P] [--receivers N] [--cpu N]\n"
               "       vsock_bench client --test tcp-lat|udp-lat|tcp-tput|tcp-call|tcp-conn|udp-rate|mcast-lat --port P [--addr A]\n"
               "                          [--size BYTES] [--iters N] [--warmup N] [--seconds S] [--cpu N] [--simple]\n"
               "                          [--batch N] [--group G] [--receivers N]\n"
               "                          [--wait block|poll|epoll] [--peer-pid PID] [--samples FILE]\n"
               "                          [--perf-ctl FIFO]...\n",
               message.c_str());
  std::exit(2);
}

using bench::now_seconds;

sockaddr_in make_address(const std::string& addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) usage_error("bad IPv4 address " + addr);
  return sa;
}

void set_io_timeouts(int fd, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void pin_to_cpu(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
}

// Waits until fd is readable in poll() or epoll_wait() (WaitMode), so that
// the read after it does not block. Level-triggered; kIoTimeoutS bound.
class Waiter {
 public:
  Waiter(int fd, WaitMode mode) : fd_(fd), mode_(mode) {
    if (mode_ != WaitMode::kEpoll) return;
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) die("epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
  }
  ~Waiter() {
    if (epfd_ >= 0) close(epfd_);
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  // false on timeout or error (errno set).
  bool wait() const {
    for (;;) {
      int n = 1;
      if (mode_ == WaitMode::kPoll) {
        pollfd pfd{fd_, POLLIN, 0};
        n = poll(&pfd, 1, kIoTimeoutS * 1000);
      } else if (mode_ == WaitMode::kEpoll) {
        epoll_event ev{};
        n = epoll_wait(epfd_, &ev, 1, kIoTimeoutS * 1000);
      }
      if (n > 0) return true;
      if (n == 0) errno = ETIMEDOUT;
      if (n == 0 || errno != EINTR || g_stop.load()) return false;
    }
  }

 private:
  int fd_;
  WaitMode mode_;
  int epfd_ = -1;
};

// Reads exactly len bytes; false on EOF or error (errno set; 0 for EOF).
// With a waiter, waits in it before each read.
bool read_exact(int fd, void* buf, size_t len, const Waiter* waiter = nullptr) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    if (waiter != nullptr && !waiter->wait()) return false;
    ssize_t n = read(fd, p, len);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      errno = 0;
      return false;
    } else if (errno != EINTR || g_stop.load()) {
      return false;
    }
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t len) {
  auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && (errno != EINTR || g_stop.load())) {
      return false;
    }
  }
  return true;
}

// ---- server ----

void serve_tcp_connection(int fd, bool simple) {
  if (!simple) set_io_timeouts(fd, 60);
  Hello hello{};
  if (!read_exact(fd, &hello, sizeof hello) || hello.magic != kHelloMagic || hello.size == 0 ||
      hello.size > kMaxSize) {
    std::fprintf(stderr, "vsock_bench server: bad hello, closing\n");
    return;
  }
  std::vector<char> buf(hello.size);
  if (hello.test == static_cast<uint32_t>(Test::kTcpLatency)) {
    set_nodelay(fd);
    WaitMode mode = hello.wait <= static_cast<uint32_t>(WaitMode::kEpoll) ? static_cast<WaitMode>(hello.wait)
                                                                         : WaitMode::kBlock;
    Waiter waiter(fd, mode);
    while (read_exact(fd, buf.data(), buf.size(), &waiter) && write_all(fd, buf.data(), buf.size())) {
    }
  } else if (hello.test == static_cast<uint32_t>(Test::kTcpThroughput)) {
    uint64_t total = 0;
    for (;;) {
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n > 0) total += static_cast<uint64_t>(n);
      else if (n == 0) break;
      else if (errno != EINTR) return;
    }
    write_all(fd, &total, sizeof total);
  }
}

void serve_udp(int fd) {
  std::vector<char> buf(kMaxDatagram);
  pollfd pfd{fd, POLLIN, 0};
  while (!g_stop.load()) {
    if (poll(&pfd, 1, 200) <= 0) continue;
    sockaddr_in peer{};
    socklen_t peer_len = sizeof peer;
    ssize_t n = recvfrom(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&peer), &peer_len);
    if (n >= 0) sendto(fd, buf.data(), static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&peer), peer_len);
  }
}

// The TCP listener both server modes use: SO_REUSEADDR, bound to
// o.addr:o.port (0 = any free port), listening; *port is the bound port.
int open_tcp_listener(const Options& o, int* port) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa_tcp = make_address(o.addr, o.port);
  if (bind(listener, reinterpret_cast<sockaddr*>(&sa_tcp), sizeof sa_tcp) != 0) die("bind tcp");
  if (listen(listener, 16) != 0) die("listen");
  socklen_t len = sizeof sa_tcp;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&sa_tcp), &len) != 0) die("getsockname");
  *port = ntohs(sa_tcp.sin_port);
  return listener;
}

// --simple: one thread, blocking accept(), no UDP; a signal ends the process.
int run_simple_server(const Options& o) {
  struct sigaction sa{};
  sa.sa_handler = [](int) { _exit(0); };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = [](int) {
    static const char msg[] = "vsock_bench server: a connection outlived its alarm, exiting\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(3);
  };
  sigaction(SIGALRM, &sa, nullptr);

  int port = 0;
  int listener = open_tcp_listener(o, &port);
  std::printf("READY %d\n", port);
  std::fflush(stdout);
  for (;;) {
    int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR) continue;
      die("accept");
    }
    alarm(kSimpleConnectionAlarmS);
    serve_tcp_connection(fd, true);
    close(fd);
    alarm(0);
  }
}

int run_server(const Options& o) {
  pin_to_cpu(o.cpu);
  if (o.simple) return run_simple_server(o);
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_stop.store(true); };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  int port = 0;
  int listener = open_tcp_listener(o, &port);

  int udp = socket(AF_INET, SOCK_DGRAM, 0);
  if (udp < 0) die("socket udp");
  sockaddr_in sa_udp = make_address(o.addr, port);
  if (bind(udp, reinterpret_cast<sockaddr*>(&sa_udp), sizeof sa_udp) != 0) die("bind udp (port taken?)");
  std::thread udp_thread(serve_udp, udp);

  std::printf("READY %d\n", port);
  std::fflush(stdout);

  pollfd pfd{listener, POLLIN, 0};
  while (!g_stop.load()) {
    if (poll(&pfd, 1, 200) <= 0) continue;
    int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) continue;
    serve_tcp_connection(fd, false);  // one client at a time: measurements run in turn
    close(fd);
  }
  udp_thread.join();
  close(udp);
  close(listener);
  return 0;
}

// ---- sink (udp-rate's receiver) ----

struct RateCount {
  uint32_t tag;
  uint32_t pad;
  uint64_t datagrams;
  uint64_t bytes;
};

int run_sink(const Options& o) {
  pin_to_cpu(o.cpu);
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_stop.store(true); };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket udp");
  sockaddr_in me = make_address(o.addr, o.port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) die("bind udp");
  socklen_t me_len = sizeof me;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&me), &me_len) != 0) die("getsockname");
  timeval tv{0, 200000};  // to see g_stop
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::printf("READY %d\n", ntohs(me.sin_port));
  std::fflush(stdout);
  constexpr size_t kSlot = 2048;
  std::vector<char> buffers(kSinkBatch * kSlot);
  mmsghdr msgs[kSinkBatch];
  iovec iov[kSinkBatch];
  sockaddr_in peers[kSinkBatch];
  RateCount count{kRateQuery, 0, 0, 0};
  while (!g_stop.load()) {
    for (int i = 0; i < kSinkBatch; ++i) {
      iov[i] = iovec{buffers.data() + i * kSlot, kSlot};
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &peers[i];
      msgs[i].msg_hdr.msg_namelen = sizeof peers[i];
    }
    int n = recvmmsg(fd, msgs, kSinkBatch, MSG_WAITFORONE, nullptr);
    for (int i = 0; i < n; ++i) {
      uint32_t tag = 0;
      if (msgs[i].msg_len >= sizeof tag) std::memcpy(&tag, iov[i].iov_base, sizeof tag);
      if (tag == kRateData) {
        ++count.datagrams;
        count.bytes += msgs[i].msg_len;
      } else if (tag == kRateReset || tag == kRateQuery) {
        if (tag == kRateReset) count.datagrams = count.bytes = 0;
        RateCount answer = count;
        answer.tag = tag;
        sendto(fd, &answer, sizeof answer, 0, reinterpret_cast<sockaddr*>(&peers[i]), msgs[i].msg_hdr.msg_namelen);
      }
    }
  }
  close(fd);
  return 0;
}

// ---- client ----

struct LatencySummary {
  double p50, p99, p999, mean, min, max;
};

LatencySummary summarize(std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))]; };
  double sum = 0;
  for (double v : us) sum += v;
  return {at(0.50), at(0.99), at(0.999), sum / static_cast<double>(us.size()), us.front(), us.back()};
}

int connect_tcp(const Options& o, Test test) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  if (!o.simple) set_io_timeouts(fd, kIoTimeoutS);
  if (test == Test::kTcpLatency) set_nodelay(fd);  // streams keep Nagle, as iperf3 does
  sockaddr_in sa = make_address(o.addr, o.port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect");
  Hello hello{kHelloMagic, static_cast<uint32_t>(test), o.size, static_cast<uint32_t>(o.wait)};
  if (!write_all(fd, &hello, sizeof hello)) die("send hello");
  return fd;
}

// CPU seconds (user + system, all threads) of this process.
double self_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The same for another process, from /proc/PID/stat (utime and stime, the
// 14th and 15th fields, in clock ticks); -1 if it cannot be read.
double process_cpu_seconds(int pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  size_t end = line.rfind(')');  // the command name may hold spaces
  if (end == std::string::npos) return -1;
  std::istringstream fields(line.substr(end + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // After the name: state is field 3, so utime (14) is the 12th from here.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Context switches (voluntary + involuntary) of this process, all threads.
long self_context_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

// The same for another process: the sum over its threads' status files
// (a thread that ends meanwhile is lost; a ping-pong peer has none that
// do); -1 if it cannot be read.
long process_context_switches(int pid) {
  if (pid <= 0) return -1;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  long total = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name + "/status");
    std::string key;
    long value = 0;
    while (in >> key) {
      if ((key == "voluntary_ctxt_switches:" || key == "nonvoluntary_ctxt_switches:") && in >> value) total += value;
    }
  }
  closedir(d);
  return total;
}

struct CpuMark {
  double self = 0, peer = -1;
  long self_cs = 0, peer_cs = -1;
};

CpuMark cpu_mark(const Options& o) {
  return CpuMark{self_cpu_seconds(), process_cpu_seconds(o.peer_pid), self_context_switches(),
                 process_context_switches(o.peer_pid)};
}

// Sends a perf control command ("enable" / "disable") to every --perf-ctl
// fifo (in reverse with `reverse`), each time waiting for perf's ack on
// FIFO.ack. A few system calls of ours fall inside the counted window;
// over hundreds of messages they are noise.
void perf_control(const Options& o, const char* command, bool reverse) {
  size_t n = o.perf_ctl.size();
  for (size_t k = 0; k < n; ++k) {
    const std::string& fifo = o.perf_ctl[reverse ? n - 1 - k : k];
    int ctl = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    if (ctl < 0) die(("open " + fifo).c_str());
    std::string line = std::string(command) + "\n";
    if (!write_all(ctl, line.data(), line.size())) die("write perf control");
    close(ctl);
    int ack = open((fifo + ".ack").c_str(), O_RDONLY | O_CLOEXEC);
    if (ack < 0) die(("open " + fifo + ".ack").c_str());
    char buf[8];
    if (read(ack, buf, sizeof buf) <= 0) die("read perf ack");
    close(ack);
  }
}

void print_latency(const Options& o, std::vector<double>& samples, long lost, const std::string& extra = "") {
  if (samples.empty()) {
    std::fprintf(stderr, "vsock_bench: no round trip completed\n");
    std::exit(1);
  }
  if (!o.samples_file.empty()) {  // before summarize() sorts them: in the order measured
    FILE* f = std::fopen(o.samples_file.c_str(), "w");
    if (f == nullptr) die("open --samples file");
    for (double v : samples) std::fprintf(f, "%.2f\n", v);
    std::fclose(f);
  }
  LatencySummary s = summarize(samples);
  std::printf("result test=%s size=%u iters=%zu p50_us=%.2f p99_us=%.2f p999_us=%.2f mean_us=%.2f min_us=%.2f max_us=%.2f lost=%ld%s\n",
              o.test.c_str(), o.size, samples.size(), s.p50, s.p99, s.p999, s.mean, s.min, s.max, lost, extra.c_str());
}

int run_tcp_latency(const Options& o) {
  int fd = connect_tcp(o, Test::kTcpLatency);
  Waiter waiter(fd, o.wait);
  std::vector<char> out(o.size), in(o.size);
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(o.iters));
  double start = now_seconds();
  double warmup_end = start + o.seconds / 4;
  double deadline = start + o.seconds;
  bool warming = o.warmup > 0;
  if (!warming) perf_control(o, "enable", false);
  CpuMark cpu0 = cpu_mark(o);
  double measure_start = start;
  for (long i = 0, measured = 0; measured < o.iters; ++i) {
    out[0] = out[o.size - 1] = static_cast<char>(i);
    double t0 = now_seconds();
    if (!write_all(fd, out.data(), out.size())) die("write");
    if (!read_exact(fd, in.data(), in.size(), &waiter)) die("read echo");
    double t1 = now_seconds();
    if (in[0] != out[0] || in[o.size - 1] != out[o.size - 1]) {
      std::fprintf(stderr, "vsock_bench: echo %ld differs from what was sent\n", i);
      return 1;
    }
    if (warming) {
      if (i + 1 >= o.warmup || t1 > warmup_end) {
        warming = false;
        // The measured phase gets its own --seconds: a slow start (a
        // connection that upgraded late, a descheduled vCPU) must not leave
        // it a handful of samples.
        deadline = now_seconds() + o.seconds;
        perf_control(o, "enable", false);  // list the server's fifo first: it counts before we send
        cpu0 = cpu_mark(o);
        measure_start = now_seconds();
      }
      continue;
    }
    samples.push_back((t1 - t0) * 1e6);
    ++measured;
    if (t1 > deadline) break;
  }
  CpuMark cpu1 = cpu_mark(o);
  perf_control(o, "disable", true);
  double wall = now_seconds() - measure_start;
  close(fd);
  char extra[160];
  std::snprintf(extra, sizeof extra, " msgs=%zu wall_s=%.3f cpu_s=%.3f ctxsw=%ld", 2 * samples.size(), wall,
                cpu1.self - cpu0.self, cpu1.self_cs - cpu0.self_cs);
  std::string cpu = extra;
  if (cpu0.peer >= 0 && cpu1.peer >= 0) {
    std::snprintf(extra, sizeof extra, " peer_cpu_s=%.3f", cpu1.peer - cpu0.peer);
    cpu += extra;
  }
  if (cpu0.peer_cs >= 0 && cpu1.peer_cs >= 0) {
    std::snprintf(extra, sizeof extra, " peer_ctxsw=%ld", cpu1.peer_cs - cpu0.peer_cs);
    cpu += extra;
  }
  print_latency(o, samples, 0, cpu);
  return 0;
}

int run_tcp_connections(const Options& o) {
  if (o.iters < 2) usage_error("tcp-conn needs --iters 2 or more (the first, then the later ones)");
  std::vector<char> out(o.size, 'c'), in(o.size);
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(o.iters));
  const double deadline = now_seconds() + o.seconds;
  // Where each later connection's time went (µs): socket() to the
  // Hello written (connect_tcp), the request and its answer, close().
  std::vector<double> in_connect, in_exchange, in_close;
  double first_us = -1;
  for (long i = 0; i < o.iters && now_seconds() < deadline; ++i) {
    const double t0 = now_seconds();
    int fd = connect_tcp(o, Test::kTcpLatency);
    const double t1 = now_seconds();
    if (!write_all(fd, out.data(), out.size()) || !read_exact(fd, in.data(), in.size())) die("request on a new connection");
    const double t2 = now_seconds();
    close(fd);
    const double t3 = now_seconds();
    const double us = (t3 - t0) * 1e6;
    if (first_us < 0) {
      first_us = us;
      continue;
    }
    samples.push_back(us);
    in_connect.push_back((t1 - t0) * 1e6);
    in_exchange.push_back((t2 - t1) * 1e6);
    in_close.push_back((t3 - t2) * 1e6);
  }
  if (samples.empty()) {
    std::fprintf(stderr, "vsock_bench: only the first connection completed within --seconds\n");
    return 1;
  }
  LatencySummary s = summarize(samples);
  std::printf(
      "result test=tcp-conn size=%u conns=%zu first_us=%.1f p50_us=%.1f p99_us=%.1f mean_us=%.1f max_us=%.1f"
      " connect_p50_us=%.1f exchange_p50_us=%.1f close_p50_us=%.1f\n",
      o.size, samples.size() + 1, first_us, s.p50, s.p99, s.mean, s.max, summarize(in_connect).p50,
      summarize(in_exchange).p50, summarize(in_close).p50);
  return 0;
}

int run_udp_latency(const Options& o) {
  if (o.size < sizeof(uint64_t) || o.size > kMaxDatagram) usage_error("udp-lat needs --size 8..65507");
  if (o.simple) usage_error("udp-lat is not available with --simple (the simple server has no UDP socket)");
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket");
  sockaddr_in sa = make_address(o.addr, o.port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect udp");
  std::vector<char> out(o.size), in(o.size);
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(o.iters));
  long lost = 0;
  pollfd pfd{fd, POLLIN, 0};
  // One datagram, then 200 ms: the time a libvsock destination needs to
  // resolve (the first datagrams go through the kernel meanwhile), so the
  // warm-up and the measured round trips take the path they measure.
  {
    uint64_t probe = ~uint64_t{0};
    std::memcpy(out.data(), &probe, sizeof probe);
    if (send(fd, out.data(), out.size(), 0) == static_cast<ssize_t>(out.size()) && poll(&pfd, 1, kUdpReplyTimeoutMs) > 0)
      (void)recv(fd, in.data(), in.size(), 0);
    usleep(200000);
  }
  // Where each answered round trip went (µs): in send(), waiting in
  // poll(), in the recv() that took the answer. The medians are printed
  // beside the round trip's (send_p50_us= wait_p50_us= recv_p50_us=).
  std::vector<double> in_send, in_wait, in_recv;
  // Sends `seq` and waits for its echo, skipping late replies to earlier,
  // timed-out datagrams; false when none came within kUdpReplyTimeoutMs.
  auto round_trip = [&](uint64_t seq) {
    std::memcpy(out.data(), &seq, sizeof seq);
    const double t0 = now_seconds();
    if (send(fd, out.data(), out.size(), 0) != static_cast<ssize_t>(out.size())) die("send udp");
    const double t1 = now_seconds();
    for (;;) {
      int ready = poll(&pfd, 1, kUdpReplyTimeoutMs);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return false;
      const double t2 = now_seconds();
      ssize_t n = recv(fd, in.data(), in.size(), 0);
      if (n < 0) die("recv udp");
      uint64_t got;
      std::memcpy(&got, in.data(), sizeof got);
      if (static_cast<size_t>(n) == o.size && got == seq) {
        in_send.push_back((t1 - t0) * 1e6);
        in_wait.push_back((t2 - t1) * 1e6);
        in_recv.push_back((now_seconds() - t2) * 1e6);
        return true;
      }
    }
  };
  if (!bench::measure_round_trips(o.warmup, o.iters, o.seconds, round_trip, &samples, &lost)) {
    std::fprintf(stderr, "vsock_bench: more than 100 datagrams lost; is the server up?\n");
    return 1;
  }
  close(fd);
  // The measured round trips are the last answered ones (the warm-up's came first).
  auto median_of_measured = [&](std::vector<double>& phase) {
    std::vector<double> tail(phase.end() - static_cast<long>(std::min(phase.size(), samples.size())), phase.end());
    if (tail.empty()) return 0.0;
    std::nth_element(tail.begin(), tail.begin() + static_cast<long>(tail.size() / 2), tail.end());
    return tail[tail.size() / 2];
  };
  char phases[128];
  std::snprintf(phases, sizeof phases, " send_p50_us=%.2f wait_p50_us=%.2f recv_p50_us=%.2f", median_of_measured(in_send),
                median_of_measured(in_wait), median_of_measured(in_recv));
  print_latency(o, samples, lost, phases);
  return 0;
}

// One control exchange with a sink: TAG sent until an answer with the same
// tag comes (every 200 ms, at most 25 times).
bool rate_control(int fd, uint32_t tag, RateCount* answer) {
  pollfd pfd{fd, POLLIN, 0};
  for (int attempt = 0; attempt < 25; ++attempt) {
    RateCount ask{tag, 0, 0, 0};
    if (send(fd, &ask, sizeof ask, 0) < 0 && errno != ENOBUFS && errno != EAGAIN) die("send control");
    double until = now_seconds() + 0.2;
    while (now_seconds() < until) {
      if (poll(&pfd, 1, 50) <= 0) continue;
      RateCount got{};
      ssize_t n = recv(fd, &got, sizeof got, MSG_DONTWAIT);
      if (n == static_cast<ssize_t>(sizeof got) && got.tag == tag) {
        *answer = got;
        return true;
      }
    }
  }
  return false;
}

int run_udp_rate(const Options& o) {
  if (o.size < sizeof(uint32_t) || o.size > 1024) usage_error("udp-rate needs --size 4..1024");
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket");
  sockaddr_in sa = make_address(o.addr, o.port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect udp");
  std::vector<char> out(o.size, 'r');
  std::memcpy(out.data(), &kRateData, sizeof kRateData);
  std::vector<mmsghdr> msgs(static_cast<size_t>(o.batch));
  iovec iov{out.data(), out.size()};
  auto send_batch = [&]() -> int {
    for (mmsghdr& m : msgs) {
      m = mmsghdr{};
      m.msg_hdr.msg_iov = &iov;
      m.msg_hdr.msg_iovlen = 1;
    }
    int n = sendmmsg(fd, msgs.data(), static_cast<unsigned>(msgs.size()), 0);
    if (n < 0 && errno != ENOBUFS && errno != EAGAIN && errno != EINTR) die("sendmmsg");
    return n < 0 ? 0 : n;
  };
  double warm_until = now_seconds() + std::min(1.0, o.seconds / 4);
  while (now_seconds() < warm_until) send_batch();
  usleep(100000);
  RateCount answer{};
  if (!rate_control(fd, kRateReset, &answer)) {
    std::fprintf(stderr, "vsock_bench: the sink did not answer; is it up?\n");
    return 1;
  }
  uint64_t sent = 0, calls = 0;
  double start = now_seconds();
  double deadline = start + o.seconds;
  while (now_seconds() < deadline) {
    sent += static_cast<uint64_t>(send_batch());
    ++calls;
  }
  double elapsed = now_seconds() - start;
  usleep(200000);  // what is on its way arrives
  if (!rate_control(fd, kRateQuery, &answer)) {
    std::fprintf(stderr, "vsock_bench: the sink did not answer the count\n");
    return 1;
  }
  close(fd);
  double loss = sent > 0 ? 100.0 * (static_cast<double>(sent) - static_cast<double>(answer.datagrams)) / static_cast<double>(sent) : 0;
  std::printf("result test=udp-rate size=%u batch=%d sent=%llu received=%llu calls=%llu seconds=%.3f send_mps=%.4f "
              "recv_mps=%.4f loss_pct=%.2f\n",
              o.size, o.batch, static_cast<unsigned long long>(sent), static_cast<unsigned long long>(answer.datagrams),
              static_cast<unsigned long long>(calls), elapsed, static_cast<double>(sent) / elapsed / 1e6,
              static_cast<double>(answer.datagrams) / elapsed / 1e6, loss);
  return 0;
}

int run_tcp_call_cost(const Options& o) {
  int fd = connect_tcp(o, Test::kTcpLatency);  // the server waits for data that never comes
  char byte;
  double deadline = now_seconds() + o.seconds;
  long calls = 0;
  double start = now_seconds();
  while (calls < o.iters) {
    for (int i = 0; i < 1000; ++i, ++calls) {
      if (recv(fd, &byte, 1, MSG_DONTWAIT) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        std::fprintf(stderr, "vsock_bench: recv on an empty socket did not fail with EAGAIN\n");
        return 1;
      }
    }
    if (now_seconds() > deadline) break;
  }
  double elapsed = now_seconds() - start;
  close(fd);
  std::printf("result test=%s calls=%ld seconds=%.3f ns_per_call=%.1f\n", o.test.c_str(), calls, elapsed,
              elapsed * 1e9 / static_cast<double>(calls));
  return 0;
}

int run_tcp_throughput(const Options& o) {
  int fd = connect_tcp(o, Test::kTcpThroughput);
  std::vector<char> out(o.size, 'x');
  uint64_t sent = 0;
  double start = now_seconds();
  double deadline = start + o.seconds;
  // --iters bounds the number of writes; --seconds the time.
  for (long i = 0; i < o.iters && now_seconds() < deadline; ++i) {
    if (!write_all(fd, out.data(), out.size())) die("write");
    sent += o.size;
  }
  shutdown(fd, SHUT_WR);
  uint64_t received = 0;
  if (!read_exact(fd, &received, sizeof received)) die("read byte count");
  double elapsed = now_seconds() - start;
  close(fd);
  if (received != sent) {
    std::fprintf(stderr, "vsock_bench: server counted %llu bytes, client sent %llu\n",
                 static_cast<unsigned long long>(received), static_cast<unsigned long long>(sent));
    return 1;
  }
  double mbps = static_cast<double>(sent) / elapsed / 1e6;
  std::printf("result test=%s size=%u bytes=%llu seconds=%.3f MBps=%.1f Gbps=%.3f\n", o.test.c_str(), o.size,
              static_cast<unsigned long long>(sent), elapsed, mbps, mbps * 8 / 1000);
  return 0;
}

McastArgs mcast_args(const Options& o) {
  McastArgs a;
  a.group = o.group;
  a.interface_addr = o.addr;
  a.port = o.port;
  a.receivers = o.receivers;
  a.size = o.size;
  a.iters = o.iters;
  a.warmup = o.warmup;
  a.seconds = o.seconds;
  return a;
}

int run_client(const Options& o) {
  pin_to_cpu(o.cpu);
  if (o.port <= 0) usage_error("client needs --port");
  if (o.size == 0 || o.size > kMaxSize) usage_error("--size must be 1.." + std::to_string(kMaxSize));
  // The whole run, however it goes, ends within --seconds plus a margin.
  alarm(static_cast<unsigned>(o.seconds) + 2 * kIoTimeoutS + 5);
  if (o.test == "tcp-lat") return run_tcp_latency(o);
  if (o.test == "udp-lat") return run_udp_latency(o);
  if (o.test == "tcp-tput") return run_tcp_throughput(o);
  if (o.test == "tcp-call") return run_tcp_call_cost(o);
  if (o.test == "tcp-conn") return run_tcp_connections(o);
  if (o.test == "udp-rate") return run_udp_rate(o);
  if (o.test == "mcast-lat") {
    if (o.group.empty()) usage_error("mcast-lat needs --group");
    std::vector<double> samples;
    long lost = 0;
    if (!run_mcast_latency(mcast_args(o), &samples, &lost)) return 1;
    print_latency(o, samples, lost, " receivers=" + std::to_string(o.receivers));
    return 0;
  }
  usage_error("--test must be tcp-lat, udp-lat, tcp-tput, tcp-call, tcp-conn, udp-rate or mcast-lat");
}

long parse_number(const char* flag, const char* text, long min, long max) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
    usage_error(std::string(flag) + " expects a number in " + std::to_string(min) + ".." + std::to_string(max));
  return v;
}

Options parse_options(int argc, char** argv) {
  if (argc < 2) usage_error("missing mode");
  Options o;
  o.mode = argv[1];
  if (o.mode != "server" && o.mode != "client" && o.mode != "sink" && o.mode != "mcast-echo")
    usage_error("mode must be server, client, sink or mcast-echo");
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--simple") {
      o.simple = true;
      continue;
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "--addr") o.addr = value;
    else if (flag == "--port") o.port = static_cast<int>(parse_number("--port", value, 0, 65535));
    else if (flag == "--test") o.test = value;
    else if (flag == "--size") o.size = static_cast<uint32_t>(parse_number("--size", value, 1, kMaxSize));
    else if (flag == "--iters") o.iters = parse_number("--iters", value, 1, 1L << 40);
    else if (flag == "--warmup") o.warmup = parse_number("--warmup", value, 0, 1L << 30);
    else if (flag == "--seconds") o.seconds = static_cast<double>(parse_number("--seconds", value, 1, 3600));
    else if (flag == "--cpu") o.cpu = static_cast<int>(parse_number("--cpu", value, 0, CPU_SETSIZE - 1));
    else if (flag == "--samples") o.samples_file = value;
    else if (flag == "--group") o.group = value;
    else if (flag == "--receivers") o.receivers = static_cast<int>(parse_number("--receivers", value, 1, 16));
    else if (flag == "--batch") o.batch = static_cast<int>(parse_number("--batch", value, 1, 1024));
    else if (flag == "--perf-ctl") o.perf_ctl.push_back(value);
    else if (flag == "--peer-pid") o.peer_pid = static_cast<int>(parse_number("--peer-pid", value, 1, 1L << 22));
    else if (flag == "--wait") {
      std::string mode = value;
      if (mode == "block") o.wait = WaitMode::kBlock;
      else if (mode == "poll") o.wait = WaitMode::kPoll;
      else if (mode == "epoll") o.wait = WaitMode::kEpoll;
      else usage_error("--wait must be block, poll or epoll");
    }
    else usage_error("unknown option " + flag);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Options o = parse_options(argc, argv);
  if (o.mode == "sink") return run_sink(o);
  if (o.mode == "mcast-echo") {
    if (o.group.empty()) usage_error("mcast-echo needs --group");
    pin_to_cpu(o.cpu);
    return run_mcast_echo(mcast_args(o));
  }
  return o.mode == "server" ? run_server(o) : run_client(o);
}
