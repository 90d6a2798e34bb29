#!/bin/bash
# Installs the Debian 12 packages libvsock needs to build, test and benchmark.
# Quick when everything is present; needs root (or sudo) otherwise.
set -euo pipefail
packages=(
  # build
  cmake g++ make pkg-config libibverbs-dev librdmacm-dev ibverbs-providers rdma-core libgtest-dev
  # Soft-RoCE test bed (tests/rxe/)
  qemu-system-x86 busybox-static iproute2 kmod xz-utils util-linux ibverbs-utils librdmacm1
  # real programs and peers for tests and benchmarks
  redis-server redis-tools iperf3 sockperf memcached libmemcached-tools python3 nodejs perftest rdmacm-utils
  dnsmasq-base bind9-dnsutils
  apache2 apache2-utils openbsd-inetd gunicorn
  # the main job: perf counts system calls and context switches, gnuplot draws the plots
  linux-perf gnuplot-nox
  # tools the tests use
  binutils perl strace clang libclang-rt-14-dev
  # the Debian package and its man pages (tests/package/)
  dpkg-dev debhelper fakeroot lintian man-db
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
log=/tmp/libvsock-apt.log
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  $sudo apt-get update >>"$log" 2>&1
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >>"$log" 2>&1 ||
    { tail -20 "$log" >&2; echo "install-deps: apt-get failed (log: $log)" >&2; exit 1; }
fi
# Debian starts these services on install; the tests start their own.
for svc in redis-server memcached apache2 openbsd-inetd; do
  command -v service >/dev/null && $sudo service "$svc" stop >/dev/null 2>&1 || true
done
