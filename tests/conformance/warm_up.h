/* Moving a TCP pair onto RDMA before a program looks at it. Over a verbs
 * device (VSOCK_TEST_ADDR on the device, both ends under libvsock) the
 * connection switches from TCP to the RC queue pair some time after the
 * first bytes; a program about waiting on upgraded sockets must first make
 * sure the switch has happened. On loopback or on the kernel alone this is
 * just traffic. */
#ifndef VSOCK_CONFORMANCE_WARM_UP_H
#define VSOCK_CONFORMANCE_WARM_UP_H

#include "common.h"

/* Round trips of 4 KiB between the two ends of a connected pair (a sends,
 * b echoes), byte-exact, until both directions went over RDMA (judged from
 * the library's counters) or a bound is reached. Prints one stable line;
 * whether the pair ended on RDMA goes to stderr only. */
void ct_warm_up(int a, int b);
/* A connected TCP pair through a fresh listener, then ct_warm_up(). */
void ct_tcp_pair_warm(int* client, int* server);
/* Bytes the library sent over RDMA so far (0 without the library). */
uint64_t ct_rdma_bytes_sent(void);
/* Datagrams the library sent over UD so far (0 without the library). */
uint64_t ct_udp_ud_sends(void);
/* Datagrams between two bound UDP sockets (a sends, b answers) until both
 * directions went over UD (judged from the library's counters) or a bound
 * is reached; over a device, the first ones go through the kernel while
 * the library resolves the destination. Prints one stable line. */
void ct_udp_warm_up(int a, const struct sockaddr_in* a_addr, int b, const struct sockaddr_in* b_addr);

#endif
