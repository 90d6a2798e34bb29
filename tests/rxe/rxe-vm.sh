#!/usr/bin/env bash
# rxe-vm.sh - run a command where a real verbs device exists: inside a
# throw-away QEMU guest with Soft-RoCE (rdma_rxe), libvsock's RDMA test bed.
#
#   tests/rxe/rxe-vm.sh [options] -- CMD ARGS...
#   tests/rxe/rxe-vm.sh --prepare     install packages, build the cache, exit
#
# The guest boots Debian's kernel (the host's may have no RDMA) from a
# busybox initramfs, sees the host's / read-only under a throw-away overlay
# and the current directory read-write, creates rxe0 on a dummy netdev with
# an IPv4 address, and runs CMD chrooted in that view of the host, in the
# same directory, with the same exported environment (PATH with the system
# directories first), stdin from /dev/null.
# CMD's stdout and stderr are streamed here as it runs; the exit status is
# CMD's, 124 on timeout, 125 if the VM or rxe0 could not be set up.
#
# CMD sees, in addition to this environment:
#   RXE_VM=1 RXE_VM_DEV=rxe0 RXE_VM_NETDEV=rxenet0
#   RXE_VM_IPADDR=<the address of rxe0's netdev: connect RDMA there, not to 127.0.0.1>
#   RXE_VM_GID_INDEX=<index of rxe0's IPv4 RoCE v2 GID>
#
# Options (and the environment variables that set the same):
#   -t SECS   VSOCK_RXE_TIMEOUT   wall-clock limit of the whole run (default 600)
#             VSOCK_RXE_BOOT_TIMEOUT  a guest not ready (rxe0 up) after this many
#                                 seconds hung while booting: booted once more (default 60)
#   -m MiB    VSOCK_RXE_MEMORY    guest memory (default 1024)
#   -c N      VSOCK_RXE_CPUS      guest CPUs (default: host cores, 2..4)
#   --ip CIDR VSOCK_RXE_IP        rxe0's netdev address (default 192.168.77.1/24)
#   --rw DIR                      share DIR read-write as well (repeatable)
#   --link LPORT:RPORT:PEER_IP:NAME
#                                 two-host bed (two-hosts.sh starts both guests): rxe0
#                                 sits on a virtio NIC whose frames travel as UDP between
#                                 127.0.0.1:LPORT here and 127.0.0.1:RPORT (the other
#                                 guest's QEMU); CMD also sees RXE_VM_HOST=NAME and
#                                 RXE_VM_PEER_IPADDR=PEER_IP
#             VSOCK_RXE_CACHE     kernel/initramfs cache (/var/cache/libvsock-rxe)
#             VSOCK_RXE_ACCEL     auto | tcg | kvm (auto: kvm only with kvm_intel or
#                                 kvm_amd; a stock kernel cannot run on kvm_pvm)
#             VSOCK_RXE_VERBOSE=1 report boot time and guest setup steps on stderr
#             VSOCK_RXE_KEEP=1    keep the run directory (console log) afterwards
# Limits: needs root. AF_UNIX sockets bound on the read-write share cannot be
# connected to (use /run or /dev/shm); rdma_cm cannot resolve 127.0.0.1 on
# rxe (use $RXE_VM_IPADDR); the guest CPU has no AVX-512 (no -march=native).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
me=rxe-vm.sh
fail() { echo "$me: error: $*" >&2; exit 125; }
verbose() { [ "${VSOCK_RXE_VERBOSE:-0}" = 1 ]; }
say() { if verbose; then echo "$me: $*" >&2; fi; }

timeout_s=${VSOCK_RXE_TIMEOUT:-600}
memory=${VSOCK_RXE_MEMORY:-1024}
cpus=${VSOCK_RXE_CPUS:-$(nproc 2>/dev/null || echo 2)}
[ "$cpus" -gt 4 ] && cpus=4
[ "$cpus" -lt 2 ] && cpus=2   # tests run a client and a server process
ip_cidr=${VSOCK_RXE_IP:-192.168.77.1/24}
accel=${VSOCK_RXE_ACCEL:-auto}
prepare_only=0
rw_dirs=()
link=""

while [ $# -gt 0 ]; do
  case "$1" in
    -t) timeout_s=$2; shift 2 ;;
    -m) memory=$2; shift 2 ;;
    -c) cpus=$2; shift 2 ;;
    --ip) ip_cidr=$2; shift 2 ;;
    --rw) rw_dirs+=("$(cd "$2" && pwd -P)") || fail "--rw $2: no such directory"; shift 2 ;;
    --link) link=$2; shift 2 ;;
    --prepare) prepare_only=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) fail "unknown option $1 (put -- before the command)" ;;
    *) break ;;
  esac
done
for n in "$timeout_s" "$memory" "$cpus"; do
  case "$n" in ''|*[!0-9]*) fail "not a positive number: $n" ;; esac
done
[ "$prepare_only" = 1 ] || [ $# -gt 0 ] || fail "no command (usage: $me [options] -- CMD ARGS...)"
[ "$(id -u)" = 0 ] || fail "must run as root (packages, cache, 9p export of /)"

# ------------------------------------------------------ packages and cache --
kernel="" initramfs=""
prepared=$("$here/rxe-prepare.sh") || exit 125
while IFS='=' read -r key value; do
  case "$key" in kernel) kernel=$value ;; initramfs) initramfs=$value ;; esac
done <<< "$prepared"
[ -s "$kernel" ] && [ -s "$initramfs" ] || fail "rxe-prepare.sh gave no kernel/initramfs"
if [ "$prepare_only" = 1 ]; then echo "$me: ready: $kernel $initramfs"; exit 0; fi

# -------------------------------------------------------------- accelerator --
if [ "$accel" = auto ]; then
  accel=tcg
  if [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then accel=kvm; fi
fi
case "$accel" in
  kvm) accel_args=(-accel kvm -cpu host) ;;
  tcg) accel_args=(-accel tcg,thread=multi,tb-size=256 -cpu max) ;;
  *) fail "VSOCK_RXE_ACCEL must be auto, tcg or kvm" ;;
esac

link_args=() link_conf=()
if [ -n "$link" ]; then
  IFS=: read -r link_local link_remote link_peer link_name <<< "$link"
  for n in "$link_local" "$link_remote"; do
    case "$n" in ''|*[!0-9]*) fail "--link $link: LPORT and RPORT must be numbers" ;; esac
  done
  [ -n "$link_peer" ] && [ -n "$link_name" ] || fail "--link $link: want LPORT:RPORT:PEER_IP:NAME"
  # A MAC of its own per guest: the last two bytes of its address.
  ip_host=${ip_cidr%/*}
  mac=$(printf '52:54:00:77:%02x:%02x' "$(echo "$ip_host" | cut -d. -f3)" "$(echo "$ip_host" | cut -d. -f4)")
  link_args=(-netdev "dgram,id=link0,local.type=inet,local.host=127.0.0.1,local.port=$link_local,remote.type=inet,remote.host=127.0.0.1,remote.port=$link_remote"
             -device "virtio-net-pci,netdev=link0,mac=$mac")
  link_conf=("VM_LINK=1" "VM_HOST=$link_name" "VM_PEER_IP=$link_peer")
fi

# ------------------------------------------------------------- run directory --
run=$(mktemp -d "${TMPDIR:-/tmp}/libvsock-rxe.XXXXXX")
timeout_pid=""
tail_pids=()
stop_vm() {
  local status=$? pid p
  # Ours only: timeout(1) started by this script (it passes TERM on to qemu),
  # then the qemu of this run, recognised by the run directory on its command line.
  if [ -n "$timeout_pid" ] && kill -0 "$timeout_pid" 2>/dev/null; then
    kill "$timeout_pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$timeout_pid" 2>/dev/null || break; sleep 0.3; done
  fi
  pid=$(cat "$run/qemu.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$run/"; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  for p in "${tail_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ "${VSOCK_RXE_KEEP:-0}" = 1 ]; then echo "$me: run directory kept: $run" >&2; else rm -rf "$run"; fi
  exit "$status"
}
trap stop_vm EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The current directory is shared read-write (build trees, logs), unless it is /.
[ "$PWD" != / ] && rw_dirs=("$(pwd -P)" "${rw_dirs[@]}")
{
  echo "VM_IP_CIDR=$ip_cidr"
  for line in "${link_conf[@]}"; do echo "$line"; done
  echo "VM_RW_COUNT=${#rw_dirs[@]}"
  for i in "${!rw_dirs[@]}"; do printf 'VM_RW_%d=%q\n' "$i" "${rw_dirs[$i]}"; done
} > "$run/vm.conf"

# The command, as bash runs it in the guest: this environment (minus what
# belongs to this shell, and an empty TMPDIR, which makes programs write to
# /), the guest's RXE_VM_* on top, the same directory.
{
  echo "# written by $me"
  for name in $(compgen -e); do
    case "$name" in BASH*|SHLVL|_|PWD|OLDPWD|SHELLOPTS) continue ;; esac
    [ "$name" = TMPDIR ] && [ -z "${TMPDIR}" ] && continue
    printf 'export %s=%q\n' "$name" "${!name}"
  done
  # The distribution's programs first: a version manager's shim on the
  # host's PATH (pyenv's python3 is a bash script that starts about 40
  # processes before the interpreter) costs 10-20 s per call under TCG.
  printf 'export PATH=/usr/sbin:/usr/bin:/sbin:/bin:%q\n' "$PATH"
  echo '. /run/vsock-rxe/guest.env'
  printf 'cd -- %q || exit 126\n' "$PWD"
  printf 'exec'; printf ' %q' "$@"; printf '\n'
} > "$run/command.sh"
: > "$run/stdout"
: > "$run/stderr"

# ------------------------------------------------------------------- guest --
share() {  # share ID TAG DIR [readonly]
  qemu_args+=(-fsdev "local,id=$1,path=$3,security_model=none,multidevs=remap${4:+,readonly=on}"
              -device "virtio-9p-pci,fsdev=$1,mount_tag=$2")
}
qemu_args=(-name libvsock-rxe -M q35 "${accel_args[@]}" -smp "$cpus" -m "$memory"
           -nodefaults -no-user-config -display none -no-reboot
           -serial "file:$run/console.log" -pidfile "$run/qemu.pid"
           -kernel "$kernel" -initrd "$initramfs"
           -append "console=ttyS0 loglevel=3 panic=-1 mitigations=off tsc=reliable no_timer_check random.trust_cpu=on cryptomgr.notests 8250.nr_uarts=1"
           -device virtio-rng-pci "${link_args[@]}")
share fshost hostroot / readonly
share fsctl vsockctl "$run"
for i in "${!rw_dirs[@]}"; do
  case "${rw_dirs[$i]}" in *,*) fail "cannot share a path with a comma: ${rw_dirs[$i]}" ;; esac
  share "fsrw$i" "vsockrw$i" "${rw_dirs[$i]}"
done

say "accel=$accel cpus=$cpus memory=${memory}M rw=${rw_dirs[*]:-none} run=$run"
# The guest writes $run/ready once rxe0 is up, right before it runs the
# command (3 s after the start on this machine, TCG). One that is not ready
# after boot_s hung while booting (CI saw two such boots in one run: not a
# line on the console, the command never started): it is killed and booted
# once more.
boot_s=${VSOCK_RXE_BOOT_TIMEOUT:-60}
for attempt in 1 2; do
  started=$(date +%s.%N)
  timeout -k 5 "$timeout_s" qemu-system-x86_64 "${qemu_args[@]}" < /dev/null > "$run/qemu.log" 2>&1 &
  timeout_pid=$!
  # Stream the command's output as the guest writes it; tail exits with qemu.
  tail -q -n +1 -s 0.1 -F --pid="$timeout_pid" "$run/stdout" 2> /dev/null &
  tail_pids+=($!)
  tail -q -n +1 -s 0.1 -F --pid="$timeout_pid" "$run/stderr" >&2 2> /dev/null &
  tail_pids+=($!)
  set +e
  boot_deadline=$(($(date +%s) + boot_s))
  while kill -0 "$timeout_pid" 2>/dev/null && [ ! -s "$run/ready" ] && [ "$(date +%s)" -lt "$boot_deadline" ]; do
    sleep 0.2
  done
  if [ "$attempt" = 1 ] && [ ! -s "$run/ready" ] && kill -0 "$timeout_pid" 2>/dev/null; then
    echo "$me: the guest was not ready ${boot_s} s after its start (a hung boot): booting it once more; console tail:" >&2
    tail -n 15 "$run/console.log" >&2
    kill "$timeout_pid" 2>/dev/null
    wait "$timeout_pid"
    for p in "${tail_pids[@]}"; do wait "$p"; done
    tail_pids=()
    : > "$run/stdout"
    : > "$run/stderr"
    : > "$run/console.log"
    rm -f "$run/status" "$run/qemu.pid"
    set -e
    continue
  fi
  wait "$timeout_pid"
  qemu_status=$?
  timeout_pid=""
  for p in "${tail_pids[@]}"; do wait "$p"; done
  tail_pids=()
  set -e
  break
done
ended=$(date +%s.%N)

if verbose; then
  grep -a 'vsock-rxe-guest:' "$run/console.log" >&2 || true
  if [ -s "$run/ready" ]; then
    ready_at=$(stat -c '%.3Y' "$run/ready")
    echo "$me: VM boot: rxe0 ready $(awk -v a="$started" -v b="$ready_at" 'BEGIN{printf "%.2f", b-a}') s after start" \
         "(guest uptime $(cat "$run/ready") s); whole run $(awk -v a="$started" -v b="$ended" 'BEGIN{printf "%.2f", b-a}') s" >&2
  fi
fi
if [ -s "$run/status" ]; then
  status=$(cat "$run/status")
  if [ "$status" = 125 ]; then echo "$me: guest setup failed; console:" >&2; tail -n 30 "$run/console.log" >&2; fi
  exit "$status"
fi
if [ "$qemu_status" = 124 ] || [ "$qemu_status" = 137 ]; then
  echo "$me: TIMEOUT after ${timeout_s} s; console tail:" >&2
  tail -n 15 "$run/console.log" >&2
  exit 124
fi
echo "$me: the VM stopped (qemu status $qemu_status) without a command status" >&2
cat "$run/qemu.log" >&2
tail -n 30 "$run/console.log" >&2
exit 125
