#!/bin/bash
# conformance_over_rdma.sh RUNNER CONFORMANCE_BIN_DIR PRELOAD [--expect-rdma]
#
# Like tests/rdma/passthrough_on_device.sh: every conformance program, kernel
# vs library (RUNNER = run_conformance.sh, which compares stdout only), on
# the device's address, but with the preloaded run's stats captured
# (VSOCK_STATS=1; run_conformance.sh appends that run's stderr to
# $VSOCK_CONFORMANCE_STDERR) and printed per program, summed over its
# processes. With --expect-rdma (or VSOCK_EXPECT_RDMA=1), each program of
# RDMA_PROGRAMS below must show rdma_bytes_sent > 0.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 3 ] || { echo "usage: $0 RUNNER CONFORMANCE_BIN_DIR PRELOAD [--expect-rdma]"; exit 2; }
runner=$(ut_abs "$1") bindir=$(ut_abs "$2") preload=$(ut_abs "$3")
shift 3
expect=0
ut_expect_rdma "$@" && expect=1

# TCP stream programs that move data between two library sockets (threads
# or processes of the same program). Left out: select_mixed (MSG_OOB on its
# only TCP pair, which may keep it on TCP), fork_exec, vfork_exec and
# unix_scm_rights (they hand sockets over before any data), signal_eintr,
# sockopt_roundtrip, socket_errors, epoll_close (little or no data), udp_*.
# The wait-engine programs (epoll_flags, poll_edges, select_edges,
# threads_wait, epoll_nested) warm their pairs up until both directions go
# over RDMA (warm_up.c) before they look at readiness.
RDMA_PROGRAMS=" tcp_blocking tcp_inherited_options tcp_nonblocking tcp_recv_flags tcp_small_writes tcp_shutdown msg_iov sendfile_tcp epoll_level
  epoll_edge fd_dup fd_close_range fortify high_fd select_mixed signal_eintr fork_inflight fork_shared
  epoll_flags poll_edges select_edges threads_wait epoll_nested "

RDMA_PROGRAMS=" $(echo $RDMA_PROGRAMS) "  # one line, single spaces

# UDP programs that warm their pair up until datagrams go over UD
# (ct_udp_warm_up) and then look at what a UD datagram brings: each must
# show udp_ud_receives > 0.
UD_PROGRAMS=" udp_cmsg udp_peer_gone udp_segment "

# Programs whose every byte must go on the ring, none on TCP: their clients
# connect (blocking, or non-blocking and then wait for POLLOUT) and write
# at once; the connect waits for the upgrade (protocol.md §1, early bytes).
# Both accept() in the connecting thread after connect() returned, so their
# upgrades are early ones (§1): the client switches once the server's
# Bound, posted by that accept(), reached its library thread, and a write
# that comes first goes on TCP by design (§2, "Until Bound"). CI's load
# made that happen about once in three runs (131,076 bytes, the first three
# writes, then 2 MiB on the ring). Such a run is repeated once: a second
# one must be clean.
ALL_RDMA_PROGRAMS=" tcp_blocking tcp_nonblocking "

# Programs that fork with switched connections open: each fork keeps them
# on RDMA in the parent (forks_keeping_rdma), and a child's first use of
# one makes the parent hand it back to TCP (fork_handbacks; protocol.md
# §5.2). fork_shared's first case, a child that never uses the socket, is
# what no handback must follow: its bytes after the fork go over RDMA.
FORK_KEEP_PROGRAMS=" fork_inflight fork_shared "

# Known limits of the RDMA path, listed in docs/compatibility.md: these run
# and their result is printed, but a difference from the kernel does not
# fail this test (a program that starts to pass is reported too, so the
# list can shrink). Everything else must match the kernel.
#  (none at present)
declare -A KNOWN_LIMIT=()

VSOCK_TEST_ADDR=$(ut_address)
export VSOCK_TEST_ADDR VSOCK_STATS=1
work=$(mktemp -d /tmp/vsock-conf-rdma.XXXXXX) || exit 2
trap 'rm -rf "$work"' EXIT
cd /tmp  # programs that create temp files must not run on a 9p share
echo "conformance over $VSOCK_TEST_ADDR with stats, expect-rdma=$expect"

# A slow first upgrade under emulation must not put a program on TCP: this
# test is about the semantics over RDMA, not about the upgrade's speed.
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-3000}

failed=0 passed=0 missing=0 limited=0
# One line per failure, printed again at the end: a long output is cut in
# the middle (CI's record of session 32's failure kept neither the program
# nor its difference).
problems=()
# The program once more (an early upgrade's writes before a late Bound):
# its stats replace the first run's in $err; a failure counts.
run_again() {
  : >"$err"
  if VSOCK_CONFORMANCE_STDERR="$err" "$runner" "$prog" "$preload" >/dev/null 2>&1; then
    printf '%-18s again rdma=%-3s %s\n' "$name" "$wanted" "$(ut_stats_summary "$err")"
    return 0
  fi
  echo "  $name failed when run again"
  problems+=("$name: failed when run again")
  failed=$((failed + 1))
  return 1
}

for prog in "$bindir"/*; do
  [ -f "$prog" ] && [ -x "$prog" ] || continue
  name=$(basename "$prog")
  err="$work/$name.err"
  : >"$err"
  start=$SECONDS
  limit=${KNOWN_LIMIT[$name]:-}
  if out=$(VSOCK_CONFORMANCE_STDERR="$err" "$runner" "$prog" "$preload" 2>&1); then
    passed=$((passed + 1))
    [ -n "$limit" ] && echo "known limit now passes: $name ($limit): take it off the list"
  else
    rc=$?
    if [ $rc = 77 ]; then echo "skipped: $name"; continue; fi
    if [ -n "$limit" ]; then
      limited=$((limited + 1))
      echo "KNOWN LIMIT, differs from the kernel: $name ($limit)"
      echo "$out" | grep -E '^[-+]' | head -4
    else
      # What differed, then the end of the output. A difference that comes
      # once under load (CI at e356186: epoll_edge, 1 run in 13 here; it
      # printed only its tail then) is shown and the program run once
      # more: it passes only if that run matches the kernel's.
      echo "FAILED: $name"
      echo "$out" | grep -E '^[-+]|FAIL' | head -20
      echo "$out" | tail -15
      : >"$err"
      if VSOCK_CONFORMANCE_STDERR="$err" "$runner" "$prog" "$preload" >/dev/null 2>&1; then
        passed=$((passed + 1))
        echo "  FLAKY: $name failed once (above) and matched the kernel when run again"
      else
        failed=$((failed + 1))
        problems+=("$name: differs from the kernel, twice; first: $(echo "$out" | grep -E '^[-+][^-+]|FAIL' | head -3 | tr '\n' ' ')")
        echo "  $name failed again"
      fi
    fi
  fi
  wanted=no
  case "$RDMA_PROGRAMS" in *" $name "*) wanted=yes ;; esac
  sent=$(ut_stat "$err" rdma_bytes_sent)
  printf '%-18s %3ss rdma=%-3s %s\n' "$name" $((SECONDS - start)) "$wanted" "$(ut_stats_summary "$err")"
  # A program that moves only a few bytes (epoll_edge: 12) may have sent
  # them all before its pairs' Bound came (the early upgrade, §2): CI's
  # load did so once at e43a6b8. Repeated once, like the programs below.
  if [ $expect = 1 ] && [ $wanted = yes ] && ! [ "${sent:-0}" -gt 0 ]; then
    echo "  $name: nothing over RDMA (all written before the server's Bound came?): once more"
    run_again && sent=$(ut_stat "$err" rdma_bytes_sent)
  fi
  if [ $expect = 1 ] && [ $wanted = yes ] && ! [ "${sent:-0}" -gt 0 ]; then
    echo "  --expect-rdma: $name sent no byte over RDMA"
    problems+=("$name: sent no byte over RDMA")
    missing=$((missing + 1))
  fi
  if [ $expect = 1 ] && [[ $FORK_KEEP_PROGRAMS == *" $name "* ]]; then
    kept=$(ut_stat "$err" forks_keeping_rdma) handed=$(ut_stat "$err" fork_handbacks)
    echo "  $name: forks that kept RDMA ${kept:-0}, connections handed back for a child ${handed:-0}"
    if ! [ "${kept:-0}" -gt 0 ] || ! [ "${handed:-0}" -gt 0 ]; then
      echo "  --expect-rdma: $name: no fork kept its connections on RDMA, or no child's use handed one back"
      problems+=("$name: forks that kept RDMA ${kept:-0}, handbacks ${handed:-0}")
      missing=$((missing + 1))
    fi
  fi
  ud_received=$(ut_stat "$err" udp_ud_receives)
  if [ $expect = 1 ] && [[ $UD_PROGRAMS == *" $name "* ]] && ! [ "${ud_received:-0}" -gt 0 ]; then
    echo "  --expect-rdma: $name received no datagram over UD"
    problems+=("$name: received no datagram over UD")
    missing=$((missing + 1))
  fi
  tcp_sent=$(ut_stat "$err" tcp_bytes_sent)
  if [ $expect = 1 ] && [[ $ALL_RDMA_PROGRAMS == *" $name "* ]] && [ "${tcp_sent:-0}" != 0 ]; then
    echo "  $name: $tcp_sent bytes on TCP (written before the server's Bound came?): once more"
    run_again && tcp_sent=$(ut_stat "$err" tcp_bytes_sent)
  fi
  # After the repeat, a first write of a few bytes before a late Bound is
  # still the early upgrade's design, not a fault: CI at 63e4a47 had
  # tcp_blocking's first 11-12 bytes on TCP in both runs, its 8 MiB on the
  # ring. More than 4096 bytes is not.
  if [ $expect = 1 ] && [[ $ALL_RDMA_PROGRAMS == *" $name "* ]] && [ "${tcp_sent:-0}" -gt 4096 ]; then
    echo "  --expect-rdma: $name sent $tcp_sent bytes on TCP before its upgrade"
    problems+=("$name: sent $tcp_sent bytes on TCP before its upgrade")
    missing=$((missing + 1))
  elif [ $expect = 1 ] && [[ $ALL_RDMA_PROGRAMS == *" $name "* ]] && [ "${tcp_sent:-0}" != 0 ]; then
    echo "  $name: its first $tcp_sent bytes went on TCP before a late Bound, again (at most 4096 allowed)"
  fi
done
for problem in "${problems[@]}"; do echo "PROBLEM: $problem"; done
echo "conformance over $VSOCK_TEST_ADDR: $passed passed, $failed failed, $limited known limits; RDMA expected and missing (or TCP where none was expected): $missing"
[ $failed = 0 ] && [ $passed -gt 0 ] && [ $missing = 0 ]
