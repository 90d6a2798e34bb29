#!/bin/busybox sh
# /init of the libvsock Soft-RoCE guest. rxe-prepare.sh packs it into the
# initramfs next to busybox and the kernel modules listed in /modules.order;
# rxe-vm.sh boots it. It builds a view of the host (its / over 9p, read-only,
# under a tmpfs overlay; the shared directories read-write), creates the
# verbs device rxe0 on a dummy netdev (or on the NIC linked to another
# guest), runs /ctl/command.sh chrooted in that view with stdout/stderr
# going to files on the control share, writes the exit status to
# /ctl/status and powers off. Every wait here is bounded; the host's timeout
# bounds the whole run.
/bin/busybox --install -s /bin
export PATH=/bin

say() { echo "vsock-rxe-guest: $(cut -d' ' -f1 /proc/uptime)s: $*"; }
power_off() { sync; poweroff -f; sleep 30; }
finish() { echo "$1" > /ctl/status; power_off; }
setup_failed() {
  say "SETUP FAILED: $*"
  dmesg | tail -20
  echo "rxe-vm guest: setup failed: $*" >> /ctl/stderr
  finish 125
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
say "kernel booted, /init running"
while read -r module params; do
  # shellcheck disable=SC2086  # params are word lists on purpose
  insmod "/lib/modules/$module" $params || say "insmod $module failed"
done < /modules.order
say "modules loaded"

NINEP=trans=virtio,version=9p2000.L,msize=512000
mkdir -p /ctl /host /upper /view
# The control share carries the host's settings in, output and status out.
# cache=none: every write reaches the host file at once, so the host can
# stream it and nothing is lost at power-off.
mount -t 9p -o "$NINEP,cache=none" vsockctl /ctl || { say "no control share"; power_off; }
. /ctl/vm.conf

# The host's root: read-only underneath, writable through a throw-away
# overlay (packages' caches, /tmp) so that programs run unchanged.
mount -t 9p -o "$NINEP,cache=loose,ro" hostroot /host || setup_failed "mount of the host root"
mount -t tmpfs -o mode=755 tmpfs /upper
mkdir -p /upper/data /upper/work
V=/view
mount -t overlay -o lowerdir=/host,upperdir=/upper/data,workdir=/upper/work overlay $V \
  || setup_failed "overlay over the host root"
mount -t proc proc $V/proc
mount -t sysfs sysfs $V/sys
mount -t devtmpfs devtmpfs $V/dev
mkdir -p $V/dev/pts $V/dev/shm
# What udev would make: bash's process substitution needs /dev/fd.
ln -sf /proc/self/fd $V/dev/fd
ln -sf /proc/self/fd/0 $V/dev/stdin
ln -sf /proc/self/fd/1 $V/dev/stdout
ln -sf /proc/self/fd/2 $V/dev/stderr
mount -t devpts -o newinstance,ptmxmode=0666 devpts $V/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $V/dev/shm
mount -t tmpfs -o mode=755 tmpfs $V/run
mkdir -p $V/run/vsock-rxe
mount --bind /ctl $V/run/vsock-rxe
n=0
while [ "$n" -lt "$VM_RW_COUNT" ]; do
  eval "dir=\$VM_RW_$n"
  mkdir -p "$V$dir" && mount -t 9p -o "$NINEP,cache=mmap" "vsockrw$n" "$V$dir" || setup_failed "read-write share $dir"
  n=$((n + 1))
done
say "filesystems mounted"

# Registered memory is locked memory: no limit, as on a tuned RDMA host.
ulimit -l unlimited
ulimit -n 65536

# The verbs device: rxe0 over a dummy netdev, or, on a two-host bed
# (VM_LINK=1), over the virtio NIC joined to the other guest. busybox's ip
# does the netdev (a program started from the 9p share costs a second under
# emulation); busybox has no rdma applet, so the host's (iproute2) runs
# chrooted.
ip link set lo up
if [ "${VM_LINK:-0}" = 1 ]; then
  nic="" tries=0
  while [ -z "$nic" ]; do
    for dev in /sys/class/net/*; do
      [ "${dev##*/}" = lo ] || { nic=${dev##*/}; break; }
    done
    [ -n "$nic" ] && break
    tries=$((tries + 1))
    [ $tries -le 100 ] || setup_failed "no network interface for the link to the other guest"
    sleep 0.05
  done
  ip link set "$nic" name rxenet0 || setup_failed "ip link set $nic name rxenet0"
else
  ip link add rxenet0 type dummy || setup_failed "ip link add rxenet0 type dummy"
fi
ip addr add "$VM_IP_CIDR" dev rxenet0 || setup_failed "ip addr add $VM_IP_CIDR"
ip link set rxenet0 up || setup_failed "ip link set rxenet0 up"
chroot $V /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin rdma link add rxe0 type rxe netdev rxenet0 \
  || setup_failed "rdma link add rxe0"
port=/sys/class/infiniband/rxe0/ports/1
tries=0
until grep -q ACTIVE $port/state 2>/dev/null; do
  tries=$((tries + 1))
  [ $tries -le 100 ] || setup_failed "rxe0 port 1 is not ACTIVE: $(cat $port/state 2>/dev/null)"
  sleep 0.05
done
# The GID that holds the IPv4 address (::ffff:a.b.c.d) as RoCE v2; it
# appears shortly after the address does.
gid_index=""
tries=0
while [ -z "$gid_index" ]; do
  for gid in $port/gids/*; do
    i=${gid##*/}
    case "$(cat "$gid" 2>/dev/null)" in
      0000:0000:0000:0000:0000:ffff:*)
        grep -qi 'v2' $port/gid_attrs/types/"$i" 2>/dev/null && { gid_index=$i; break; } ;;
    esac
  done
  [ -n "$gid_index" ] && break
  tries=$((tries + 1))
  [ $tries -le 100 ] || setup_failed "no IPv4 RoCE v2 GID on rxe0"
  sleep 0.05
done
ip_address=${VM_IP_CIDR%/*}
echo "export RXE_VM=1 RXE_VM_DEV=rxe0 RXE_VM_NETDEV=rxenet0 RXE_VM_IPADDR=$ip_address RXE_VM_GID_INDEX=$gid_index" \
  > /ctl/guest.env
if [ "${VM_LINK:-0}" = 1 ]; then
  echo "export RXE_VM_HOST=$VM_HOST RXE_VM_PEER_IPADDR=$VM_PEER_IP" >> /ctl/guest.env
fi
say "rxe0 ACTIVE on rxenet0 ($ip_address), IPv4 RoCE v2 GID index $gid_index"
cut -d' ' -f1 /proc/uptime > /ctl/ready

chroot $V /bin/bash /run/vsock-rxe/command.sh < /dev/null > /ctl/stdout 2> /ctl/stderr
status=$?
say "command exited with status $status"
finish $status
