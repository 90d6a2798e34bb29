// vsock_bench's multicast one-to-two latency (issue 11's bench row): one
// sender, N receiver processes on one group and port.
//
//   vsock_bench mcast-echo --group G --addr A [--port P] [--receivers N] [--cpu C]
//       N processes (this one and N - 1 forked before any socket is made,
//       as N separate programs would be), each with its own UDP socket
//       bound to the wildcard address and port P (0: a free port, the same
//       for all; SO_REUSEADDR), joined to G on the interface of address A;
//       each answers every datagram with the same bytes to its sender
//       (unicast). Prints "READY <port>" once all have joined; serves until
//       SIGTERM/SIGINT, which it passes to the others.
//   vsock_bench client --test mcast-lat --group G --addr A --port P [--receivers N] ...
//       sends each datagram to G:P out of A's interface and waits for N
//       answers carrying its sequence number: one sample is the time from
//       the send to the last of them (all receivers have it and answered).
//       A datagram not fully answered within 1 s is lost.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct McastArgs {
  std::string group;           // an IPv4 multicast address
  std::string interface_addr;  // the local address whose interface sends and joins
  int port = 0;
  int receivers = 2;
  uint32_t size = 64;
  long iters = 1000;
  long warmup = 200;
  double seconds = 1;
};

// The echo processes; returns the exit status.
int run_mcast_echo(const McastArgs& args);

// The sender's measured round trips (µs, in the order measured) and how
// many datagrams were not answered by every receiver. False (and a
// message on stderr) when the run could not start.
bool run_mcast_latency(const McastArgs& args, std::vector<double>* samples, long* lost);
