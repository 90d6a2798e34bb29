#!/usr/bin/env bash
# rxe-prepare.sh - make a machine ready to boot the Soft-RoCE test guest.
#
#   rxe-prepare.sh            installs what is missing, builds the cache if
#                             needed, prints "kernel=PATH" and "initramfs=PATH"
#
# 1. Packages (apt-get, only those missing): qemu, busybox-static, iproute2,
#    kmod, xz-utils and the rdma-core user space the guest runs from the
#    host's root (ibverbs-providers, rdma-core, librdmacm1, ibverbs-utils).
# 2. A Debian kernel, downloaded (never installed) with `apt-get download`:
#    the host's own kernel may have no RDMA at all, Debian's has rdma_rxe.
# 3. The cache, $VSOCK_RXE_CACHE (default /var/cache/libvsock-rxe):
#      kernel-package                 which linux-image-X package is used
#      <package>/package.deb          the downloaded package
#      <package>/vmlinux (or bzImage) the kernel QEMU boots
#      <package>/initramfs-<hash>.gz  busybox, guest-init.sh, modules
#    Files are written under a temporary name and renamed, so a run that is
#    using them is never disturbed; builders are serialised by a lock. The
#    hash covers guest-init.sh and this script, so editing either rebuilds
#    the initramfs.
# Needs root. Exit status 125 on failure (what rxe-vm.sh reports as "setup").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
me=rxe-prepare.sh
cache=${VSOCK_RXE_CACHE:-/var/cache/libvsock-rxe}
apt_log=${TMPDIR:-/tmp}/libvsock-rxe-apt.log
# Modules the guest loads, dependencies first (modprobe resolves them).
# virtio_net: the link between the two guests of a two-host bed.
# crc32 / crc32-pclmul: rxe computes the RoCE ICRC through the crypto API,
# which finds them by name, so no module lists them as a dependency.
guest_modules=(virtio_pci virtio_rng 9pnet_virtio 9p overlay dummy virtio_net
               crc32_generic crc32-pclmul rdma_rxe ib_uverbs rdma_ucm
               inet_diag tcp_diag)  # sock_diag: the listener checks that a request names a real connection

fail() { echo "$me: error: $*" >&2; exit 125; }
note() { echo "$me: $*" >&2; }

[ "$(id -u)" = 0 ] || fail "must run as root (apt-get, the cache in $cache)"

# ---------------------------------------------------------------- packages --
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

install_packages() {
  local wanted=(qemu-system-x86 busybox-static iproute2 kmod xz-utils util-linux
                ibverbs-providers rdma-core librdmacm1 ibverbs-utils)
  local missing=() p
  for p in "${wanted[@]}"; do installed "$p" || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  note "installing ${missing[*]} (log: $apt_log)"
  export DEBIAN_FRONTEND=noninteractive
  # Try with the current package lists first; refresh them only if needed.
  if ! timeout 900 apt-get install -y --no-install-recommends "${missing[@]}" > "$apt_log" 2>&1; then
    timeout 600 apt-get update >> "$apt_log" 2>&1 || true
    timeout 900 apt-get install -y --no-install-recommends "${missing[@]}" >> "$apt_log" 2>&1 \
      || { tail -n 15 "$apt_log" >&2; fail "apt-get install ${missing[*]} failed"; }
  fi
}

# ------------------------------------------------------------ kernel image --
# The package linux-image-amd64 currently depends on, e.g. linux-image-6.1.0-56-amd64.
kernel_package_name() {
  local name
  name=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\).*/\1/p' | head -n 1)
  if [ -z "$name" ]; then
    timeout 600 apt-get update > /dev/null 2>&1 || true
    name=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\).*/\1/p' | head -n 1)
  fi
  [ -n "$name" ] || fail "cannot tell which Debian kernel package to use (apt-cache depends linux-image-amd64)"
  echo "$name"
}

# Reads a little-endian unsigned field of `size` bytes at `offset` of a file.
read_field() { od -An -tu"$3" -j "$2" -N "$3" "$1" | tr -d ' '; }

# QEMU can boot the uncompressed ELF vmlinux through its PVH entry point,
# which spares the guest decompressing the kernel (seconds under TCG). The
# bzImage's boot header says where its compressed payload is:
# setup_sects at 0x1f1, payload_offset at 0x248 and payload_length at 0x24c
# (boot protocol >= 2.08), the offset counted from the protected-mode code
# that starts after the (setup_sects + 1) 512-byte setup sectors.
extract_vmlinux() {
  local bzimage=$1 out=$2 sects offset length start
  sects=$(read_field "$bzimage" $((0x1f1)) 1)
  [ "$sects" = 0 ] && sects=4
  offset=$(read_field "$bzimage" $((0x248)) 4)
  length=$(read_field "$bzimage" $((0x24c)) 4)
  [ -n "$offset" ] && [ -n "$length" ] && [ "$length" -gt 0 ] || return 1
  start=$(( (sects + 1) * 512 + offset ))
  dd if="$bzimage" of="$out.payload" bs=1M iflag=skip_bytes,count_bytes skip="$start" count="$length" status=none
  case "$(od -An -tx1 -N4 "$out.payload" | tr -d ' ')" in
    fd377a58) xz -dc --single-stream < "$out.payload" > "$out" 2>/dev/null || true ;;
    1f8b*)    gzip -dc < "$out.payload" > "$out" 2>/dev/null || true ;;
    28b52ffd) zstd -qdc < "$out.payload" > "$out" 2>/dev/null || true ;;
    *)        rm -f "$out.payload"; return 1 ;;
  esac
  rm -f "$out.payload"
  [ "$(od -An -tx1 -N4 "$out" 2>/dev/null | tr -d ' ')" = 7f454c46 ]  # ELF
}

# ------------------------------------------------------------- initramfs --
# Debian signs its modules and the kernel checks each signature at insmod:
# RSA under emulation costs about a second for the ~25 modules. A module
# without a signature loads all the same (the kernel is only tainted), so
# cut it off: the file ends in "~Module signature appended~\n", preceded
# by a 12-byte trailer whose last 4 bytes are the signature's length (big
# endian), preceded by the signature.
strip_signature() {
  local file=$1 magic='~Module signature appended~' size length
  size=$(stat -c %s "$file")
  [ "$size" -gt 40 ] && [ "$(tail -c 28 "$file" | head -c 27)" = "$magic" ] || return 0
  length=$(od -An -tx1 -j $((size - 32)) -N 4 "$file" | tr -d ' ')
  length=$((16#$length))
  [ "$length" -gt 0 ] && [ "$length" -lt $((size - 40)) ] || return 0
  truncate -s $((size - 40 - length)) "$file"
}

# Copies each module the guest needs, and what it depends on, into the
# initramfs tree, in load order, decompressed (busybox insmod wants .ko).
collect_modules() {
  local root=$1 version=$2 tree=$3 module word path params rel
  : > "$tree/modules.order"
  for module in "${guest_modules[@]}"; do
    while read -r word path params; do
      [ "$word" = insmod ] || continue   # "builtin X": nothing to load
      rel=${path#"$root/lib/modules/$version/"}
      rel=${rel%.xz}; rel=${rel%.zst}; rel=${rel%.gz}
      grep -q "^$rel\\b" "$tree/modules.order" && continue
      mkdir -p "$tree/lib/modules/$(dirname "$rel")"
      case "$path" in
        *.xz)  xz -dc "$path" ;;
        *.zst) zstd -qdc "$path" ;;
        *.gz)  gzip -dc "$path" ;;
        *)     cat "$path" ;;
      esac > "$tree/lib/modules/$rel"
      strip_signature "$tree/lib/modules/$rel"
      echo "$rel $params" >> "$tree/modules.order"
    done < <(modprobe -d "$root" -S "$version" --show-depends "$module" 2>/dev/null || true)
  done
  grep -q 'rdma_rxe\.ko' "$tree/modules.order" || fail "the kernel package has no rdma_rxe module"
}

build_initramfs() {
  local root=$1 version=$2 out=$3 tree
  tree=$(dirname "$out")/tree
  mkdir -p "$tree"/{bin,dev,proc,sys}
  cp /bin/busybox "$tree/bin/busybox"
  cp "$here/guest-init.sh" "$tree/init"
  chmod 755 "$tree/init"
  collect_modules "$root" "$version" "$tree"
  (cd "$tree" && find . | busybox cpio -o -H newc 2>/dev/null) | gzip -1 > "$out"
}

# ------------------------------------------------------------------- main --
install_packages
mkdir -p "$cache"
exec 8> "$cache/.lock"
flock -w 900 8 || fail "$cache/.lock is held by another build for 15 minutes"

package=${VSOCK_RXE_KERNEL_PACKAGE:-}
[ -z "$package" ] && [ -s "$cache/kernel-package" ] && package=$(cat "$cache/kernel-package")
[ -z "$package" ] && package=$(kernel_package_name)
hash=$(cat "$here/guest-init.sh" "$here/rxe-prepare.sh" | md5sum | cut -c1-16)
dir=$cache/$package
initramfs=$dir/initramfs-$hash.gz
kernel=""
for k in "$dir/vmlinux" "$dir/bzImage"; do [ -s "$k" ] && { kernel=$k; break; }; done

if [ -z "$kernel" ] || [ ! -s "$initramfs" ]; then
  started=$SECONDS
  note "building the guest kernel and initramfs in $cache ($package) ..."
  work=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$dir"
  # The package is kept: a new guest-init.sh then only repacks the initramfs.
  if [ ! -s "$dir/package.deb" ]; then
    if ! (cd "$work" && timeout 900 apt-get download "$package" > download.log 2>&1); then
      timeout 600 apt-get update > /dev/null 2>&1 || true
      (cd "$work" && timeout 900 apt-get download "$package" > download.log 2>&1) \
        || { tail -n 5 "$work/download.log" >&2; fail "apt-get download $package failed"; }
    fi
    mv -f "$work"/"$package"_*.deb "$dir/package.deb"
  fi
  dpkg-deb -x "$dir/package.deb" "$work/root"
  version=$(ls "$work/root/lib/modules" | head -n 1)
  [ -f "$work/root/boot/vmlinuz-$version" ] || fail "$package contains no /boot/vmlinuz-$version"
  grep -q '^CONFIG_RDMA_RXE=[ym]' "$work/root/boot/config-$version" || fail "$package is built without CONFIG_RDMA_RXE"
  depmod -b "$work/root" "$version"
  if [ -z "$kernel" ]; then
    if extract_vmlinux "$work/root/boot/vmlinuz-$version" "$work/vmlinux"; then
      mv -f "$work/vmlinux" "$dir/vmlinux"; kernel=$dir/vmlinux
    else
      note "could not extract an ELF vmlinux; booting the bzImage (slower)"
      cp "$work/root/boot/vmlinuz-$version" "$dir/bzImage.tmp"; mv -f "$dir/bzImage.tmp" "$dir/bzImage"; kernel=$dir/bzImage
    fi
  fi
  build_initramfs "$work/root" "$version" "$work/initramfs.gz"
  mv -f "$work/initramfs.gz" "$initramfs"
  echo "$package" > "$work/kernel-package" && mv -f "$work/kernel-package" "$cache/kernel-package"
  # Initramfs images of older guest-init.sh versions, unused for a week.
  find "$dir" -name 'initramfs-*.gz' ! -name "initramfs-$hash.gz" -mtime +7 -delete 2>/dev/null || true
  note "cache ready in $((SECONDS - started)) s"
fi
touch "$initramfs"   # marks it as in use for the clean-up above
echo "kernel=$kernel"
echo "initramfs=$initramfs"
