/* libvsock public C API: what a program (or a tool) may ask the preloaded
 * library directly. Everything else libvsock exports is an interposed libc
 * call. Look these up with dlsym(RTLD_DEFAULT, "vsock_version") so a program
 * runs with or without the library. */
#ifndef VSOCK_VSOCK_H
#define VSOCK_VSOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VSOCK_VERSION_MAJOR 0
#define VSOCK_VERSION_MINOR 1
#define VSOCK_VERSION_PATCH 0

/* "0.1.0" */
const char* vsock_version(void);

/* Process-wide counters. Fields are only ever appended. */
struct vsock_stats {
  uint64_t tcp_sockets;        /* TCP sockets created or accepted */
  uint64_t udp_sockets;        /* UDP sockets created */
  uint64_t other_sockets;      /* any other family or type: always kernel */
  uint64_t kernel_by_rule;     /* inet sockets kept on the kernel by a rule or setting */
  uint64_t kernel_no_device;   /* inet sockets kept on the kernel: no verbs device */
  uint64_t device_opened;      /* 1 once a verbs device was opened */
  uint64_t forks;              /* fork()/daemon() calls that created a child */
  /* TCP stream sockets the library tracks: data and calls per path. A
   * "send"/"receive" is one application call that moved at least one byte. */
  uint64_t tcp_bytes_sent;     /* over the kernel TCP connection */
  uint64_t tcp_bytes_received;
  uint64_t tcp_sends;
  uint64_t tcp_receives;
  uint64_t rdma_bytes_sent;    /* over the RC queue pair, after the switch */
  uint64_t rdma_bytes_received;
  uint64_t rdma_sends;
  uint64_t rdma_receives;
  uint64_t upgrade_attempts;   /* connections that started an rdma_cm upgrade */
  uint64_t upgrades_done;      /* ... that switched to RDMA */
  uint64_t upgrade_resets;     /* connections reset after the switch had begun */
  /* Connections left on TCP, by reason (docs/protocol.md). */
  uint64_t fallback_declined;        /* no attempt: rule, no device, not a libvsock listener */
  uint64_t fallback_cached_peer;     /* the peer failed recently (peer_fail_cache_s) */
  uint64_t fallback_rejected;
  uint64_t fallback_no_listener;
  uint64_t fallback_unreachable;
  uint64_t fallback_timeout;
  uint64_t fallback_local_error;
  uint64_t fallback_peer_closed;
  uint64_t fallback_transport_error;
  uint64_t reverts_sent;       /* connections handed to another process: back to TCP (fork, SCM_RIGHTS) */
  uint64_t reverts_received;   /* peers that went back to TCP */
  /* RDMA WRITEs that carried stream data: below rdma_sends when small
   * writes coalesce (Nagle, autocork; docs/configuration.md). */
  uint64_t rdma_writes;
  /* Waits on an upgraded socket that went to sleep (a blocking call after
   * its spin budget, or a poll/select/epoll sleep, per socket watched);
   * the rest ended while spinning (VSOCK_SPIN_US, the profile). */
  uint64_t wait_sleeps;
  /* Connections the server refused one by one (a duplicate request, a
   * socket closed or handed off before its upgrade): unlike
   * fallback_rejected, not held against the peer. */
  uint64_t fallback_refused;
  /* Client: requests the server's listener redirected to the process that
   * serves the connection (a pre-forked worker, a forked handler). */
  uint64_t upgrade_redirects;
  /* Server: accepted sockets claimed for an upgrade by a process other than
   * the one that listens (the rendezvous, DESIGN decision 2). */
  uint64_t rendezvous_claims;
  /* Server: upgrade requests refused because they came from another
   * address than the client of the connection they name. */
  uint64_t upgrade_requests_forged;
  /* Upgraded connections reset because the peer broke the stream protocol
   * on the queue pair (docs/protocol.md section 3: a bad immediate, DATA
   * beyond its credit, CREDIT for more than was in flight, DATA after FIN,
   * a message too many or too long, a write the device refused as outside
   * the ring). */
  uint64_t stream_violations;
  /* Server: accepted connections that stay on TCP because no upgrade
   * request came for them in time (the client runs no libvsock). */
  uint64_t fallback_no_request;
  /* UDP over UD (DESIGN decision 5), counted on datagram sockets the
   * library serves: datagrams and their bytes sent and received over the
   * process's UD queue pair, and those that went through the kernel. */
  uint64_t udp_ud_sends;
  uint64_t udp_ud_receives;
  uint64_t udp_ud_bytes_sent;
  uint64_t udp_ud_bytes_received;
  uint64_t udp_kernel_sends;
  uint64_t udp_kernel_receives;
  /* Destinations resolved to a libvsock socket (SIDR), and those that
   * were not (no libvsock there, no route, timeout): their datagrams stay
   * on the kernel for peer_fail_cache_s. */
  uint64_t udp_resolutions;
  uint64_t udp_resolution_failures;
  /* Datagrams that came over UD and were dropped: the socket's receive
   * budget (SO_RCVBUF) was full; the header or GRH did not parse; no
   * socket of this process has that cookie (answered with an UNREACH, or
   * a REVOKE when that socket left UD and lives on in the kernel);
   * fragments (or partial datagrams) reassembly dropped: a bad or
   * duplicate fragment, memory or time limits. */
  uint64_t udp_drops_budget;
  uint64_t udp_drops_malformed;
  uint64_t udp_drops_unknown_socket;
  uint64_t udp_drops_reassembly;
  /* REVOKE messages sent (a socket that used UD closed or left it: each
   * peer it knew is told) and received (that peer's path is forgotten). */
  uint64_t udp_revokes_sent;
  uint64_t udp_revokes_received;
  /* Posts to the UD send queue (doorbells): a sendmmsg() of datagrams that
   * all go over UD posts them as one chain, so this grows by less than
   * udp_ud_sends. */
  uint64_t udp_ud_posts;
  /* UNREACH messages sent (a datagram named a socket that is gone here:
   * counted in udp_drops_unknown_socket too) and received (the sender's
   * path is forgotten; a connected socket then sees ECONNREFUSED). */
  uint64_t udp_unreach_sent;
  uint64_t udp_unreach_received;
  /* Multicast over UD (groups in udp_mcast_offload): rdma_cm joins of a
   * group by this process (one per group however many sockets joined it;
   * a send-only join for a sender that never joined counts too), joins
   * that failed (that group stays on the kernel), and leaves; datagrams
   * sent to a group over UD; datagrams delivered from a group to a socket
   * over UD (one per receiving socket); group datagrams dropped on arrival
   * because they came from this process's own queue pair (delivered in
   * software at send when IP_MULTICAST_LOOP is on) or from this host with
   * the sender's IP_MULTICAST_LOOP off. */
  uint64_t udp_mcast_joins;
  uint64_t udp_mcast_join_failures;
  uint64_t udp_mcast_leaves;
  uint64_t udp_mcast_sends;
  uint64_t udp_mcast_receives;
  uint64_t udp_mcast_drops_loop;
  uint64_t udp_send_errors; /* UD sends completed with an error: datagrams lost on the wire */
  /* Switched TCP connections whose queue pair failed (link down, device
   * removed, retry exceeded) and that went on over TCP with nothing lost
   * (docs/protocol.md section 5.1). */
  uint64_t stream_resumes;
  /* The process's UD queue pair failed (a send error: its port went down)
   * and was restarted; meanwhile datagrams went through the kernel. */
  uint64_t udp_ud_restarts;
  /* ANNOUNCE messages sent (a socket whose datagram went through the
   * kernel while its destination was being resolved: once resolved, the
   * destination is told the path back, at most once per socket and
   * resolution) and received (the path back to that socket is learnt;
   * nothing is delivered). */
  uint64_t udp_announces_sent;
  uint64_t udp_announces_received;
  /* fork()s after which this process kept connections on RDMA (the child's
   * first use of one asks for it: docs/protocol.md section 5.2) */
  uint64_t forks_keeping_rdma;
  uint64_t fork_handbacks; /* connections handed back to TCP because a fork child used them */
  /* connections that stayed on TCP because their rings could not be had:
   * memory_budget_mib reached, locked memory (ulimit -l), queue pair or
   * completion queue limits */
  uint64_t fallback_no_resources;
  uint64_t registered_bytes;      /* memory registered with the device now */
  uint64_t registered_bytes_peak; /* the most registered at once */
  /* Reverts sent at a connection's close here because a fork child that
   * shares it may live (docs/protocol.md section 5.2) */
  uint64_t close_handbacks;
  /* receive rings that grew with their connection's traffic (the peer
   * moved to the larger ring: docs/protocol.md section 3.1) */
  uint64_t ring_grows;
  /* Server: Switches refused because the client's token was not on TCP at
   * their switch point (docs/protocol.md section 2, "Who may switch"): a
   * request forged for somebody else's connection; the connection stayed
   * on TCP, untouched. */
  uint64_t upgrade_tokens_refused;
  /* Parked channels (docs/protocol.md section 1.2): queue pairs of closed
   * connections kept for the next connection between the same two
   * processes; connections upgraded on one (both sides count them);
   * Attaches the server refused (the client then asked with rdma_cm);
   * Attaches the client gave up on (refused, unanswered, or the channel
   * failed) before it asked with rdma_cm; parked channels closed because
   * a new connection needed their memory (memory_budget_mib, ulimit -l);
   * the channels parked now (a gauge, like registered_bytes). */
  uint64_t channels_parked;
  uint64_t upgrade_attached;
  uint64_t attach_refused;
  uint64_t attach_failed;
  uint64_t parked_yielded;
  uint64_t parked_now;
  /* Quiet epoll entries (docs/architecture.md, wait/epoll_quiet): idle
   * upgraded connections that epoll_wait stopped looking at until their
   * completion channel fired; the times one fired and was looked at again. */
  uint64_t epoll_quiet_wakes;
};

/* Copies at most `size` bytes of the counters into `out`; returns the number
 * of bytes the library's struct has (so a caller can tell what it got). */
size_t vsock_stats_snapshot(struct vsock_stats* out, size_t size);

#ifdef __cplusplus
}
#endif
#endif
