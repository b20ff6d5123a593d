#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The RDMA lab: runs one command inside a small VM that has real verbs, a
# soft-RoCE device (rdma_rxe) on a dummy netdev, and carries the command's
# output and exit status out. This machine's kernel has no InfiniBand, so
# the VM boots Debian 12's own kernel under QEMU (software emulation: /dev/kvm
# here cannot run an unmodified kernel) and mounts the host's root read-only
# over virtio-9p, so host-built binaries run unchanged at the same paths.
# What we learnt about doing this here: ../shared/lab/RDMA.md.
#
#   tests/rdma/vmlab.sh [--cache DIR] [--timeout S] [--mem MiB] [--rw DIR]... [--quiet] -- CMD [ARG...]
#
# The kernel package is downloaded with apt-get (never installed), unpacked
# and cached in DIR (default: $XP_LAB_CACHE, or build/rdma-lab beside this
# tree), with the initramfs; later runs reuse both. Inside: the same working
# directory, tmpfs on /tmp, /run, /var/tmp, /dev/shm and /root (those of
# them that hold this tree, the cache or the working directory are instead
# the host's, shared writable), `ulimit -l unlimited`,
# the device rxe0 on netdev rdmanet0 (10.77.0.1/24, which exists only in the
# VM) with its IPv4-mapped GID in place, vgem (/dev/dri/card0: a dmabuf
# exporter for the dmabuf registration tests), XP_LAB=1, and the XP_*, UCX_*,
# ASAN_*, UBSAN_*, TSAN_* and MESON_* variables of the caller. --rw DIR
# shares one more host directory writable at its own path (a build
# directory, so that `meson test` can run inside and write its logs: CI
# runs the whole suite `rdma` in one VM that way, ci/test.sh).
#
# Exit status: CMD's; 77 (skip) with the reason when QEMU, busybox or the
# kernel package cannot be had; 1 when the VM fails or the timeout (default
# 600 s, around everything) passes, with the end of its console log.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${XP_LAB_CACHE:-$(cd "$here/../.." && pwd)/build/rdma-lab}
timeout_s=600
mem=1536
quiet=0
extra_rw=()
while [ $# -gt 0 ]; do
	case $1 in
	--cache) cache=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--quiet) quiet=1; shift ;;
	--rw) extra_rw+=("$(cd "$2" && pwd)") || exit 2; shift 2 ;;
	--) shift; break ;;
	-h | --help) sed -n '3,/^set -uo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "vmlab: unknown option $1 (--help)" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "vmlab: no command (vmlab.sh -- CMD [ARG...])" >&2; exit 2; }

skip() { echo "vmlab: SKIP: $*"; exit 77; }
fail() { echo "vmlab: $*" >&2; exit 1; }
note() { [ "$quiet" = 1 ] || echo "vmlab: $*" >&2; }

for tool in qemu-system-x86_64 cpio modprobe depmod xz timeout; do
	command -v "$tool" >/dev/null ||
		skip "$tool not found (Debian: apt-get install qemu-system-x86 cpio kmod xz-utils)"
done
command -v readelf >/dev/null || skip "readelf not found (Debian: apt-get install binutils)"
# The initramfs has no C library: its busybox must be static (no ELF
# interpreter). busybox-static puts one at /bin/busybox.
is_static() { [ -x "$1" ] && ! readelf -l "$1" 2>/dev/null | grep -q 'program interpreter'; }
busybox=
for b in /bin/busybox "$(command -v busybox || true)"; do
	if [ -n "$b" ] && is_static "$b"; then busybox=$b; break; fi
done
[ -n "$busybox" ] || skip "no statically linked busybox (Debian: apt-get install busybox-static)"
command -v rdma >/dev/null || skip "the rdma tool not found (Debian: apt-get install iproute2)"
ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 ||
	skip "the rxe user-space driver not found (Debian: apt-get install ibverbs-providers)"

mkdir -p "$cache" || fail "cannot create the cache $cache"
exec 9>"$cache/.lock"
flock 9 # one builder of the cache at a time; VMs themselves run side by side

# --- the kernel: Debian's generic flavour (cloud-amd64 lacks rxe and 9p) ---
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
	awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
if [ -z "$pkg" ]; then
	# No package lists: a kernel cached before still does.
	kver=$(ls "$cache/kernel" 2>/dev/null | sort -V | tail -1)
	[ -n "$kver" ] || skip "the kernel package cannot be had (apt-cache knows no linux-image-amd64; apt-get update?)"
else
	kver=${pkg#linux-image-}
fi
kdir=$cache/kernel/$kver
if [ ! -f "$kdir/vmlinux" ]; then
	note "fetching $pkg into $cache (once)"
	tmp=$(mktemp -d "$cache/dl.XXXXXX")
	if ! (cd "$tmp" && apt-get download -q "$pkg" >/dev/null 2>&1); then
		rm -rf "$tmp"
		skip "the kernel package $pkg cannot be had (apt-get download failed)"
	fi
	rm -rf "$kdir.part" && mkdir -p "$kdir.part"
	dpkg -x "$tmp"/*.deb "$kdir.part" || fail "dpkg -x of $pkg failed"
	rm -rf "$tmp"
	depmod -b "$kdir.part" "$kver" || fail "depmod failed for $kver"
	# The bzImage's payload is xz: booting the ELF inside directly (PVH
	# entry) skips the BIOS and the decompressor, ~4 s instead of ~9.
	vmlinuz=$kdir.part/boot/vmlinuz-$kver
	off=$(grep -abo $'\xfd7zXZ\x00' "$vmlinuz" | head -1 | cut -d: -f1)
	[ -n "$off" ] || fail "no xz payload in $vmlinuz"
	tail -c +$((off + 1)) "$vmlinuz" | xz -dc 2>/dev/null >"$kdir.part/vmlinux"
	head -c 4 "$kdir.part/vmlinux" | grep -q $'\x7fELF' || fail "could not extract vmlinux from $vmlinuz"
	rm -rf "$kdir" && mv "$kdir.part" "$kdir"
fi

# --- the initramfs: busybox, the modules in load order, /init ---
mods=(virtio_pci virtio_net 9pnet_virtio 9p dummy crc32_generic crc32c_generic ib_uverbs rdma_ucm rdma_rxe vgem)
stamp=$(cat "${BASH_SOURCE[0]}" "$busybox" | sha256sum | cut -c1-16)
initrd=$cache/initrd-$kver-$stamp.cpio.gz
if [ ! -f "$initrd" ]; then
	note "building the initramfs for $kver (once)"
	root=$(mktemp -d "$cache/initrd.XXXXXX")
	mkdir -p "$root/bin" "$root/modules" "$root/proc" "$root/sys" "$root/dev" "$root/newroot"
	cp "$busybox" "$root/bin/busybox"
	: >"$root/modules/order"
	for m in "${mods[@]}"; do
		# -C /nonexistent: the host's /etc/modprobe.d must not leak in.
		modprobe -C /nonexistent -d "$kdir" -S "$kver" --show-depends "$m" 2>/dev/null |
			awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++' | while read -r ko; do
		name=$(basename "$ko")
		cp "$ko" "$root/modules/$name"
		echo "$name" >>"$root/modules/order"
	done
	grep -q rdma_rxe "$root/modules/order" || fail "rdma_rxe is not in $pkg"
	cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do
	insmod /modules/$m 2>/dev/null || echo "xplab: insmod $m failed"
done
out=/dev/ttyS1
stty -F $out raw -echo
bye() { echo "XPLAB-STATUS $1" >$out; sync; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /newroot ||
	{ echo "xplab: cannot mount the host root" >$out; bye 125; }
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/shm /newroot/dev/pts 2>/dev/null
# Scratch directories are the VM's own tmpfs, except those the host shares
# writable because this tree, the cache or the working directory lies in
# them (a clone under /tmp must stay visible): xplab.rw lists them, and
# the directories --rw asked for. The tmpfs first, so that a directory
# shared from inside one is mounted on top of it, not hidden under it.
rw=$(sed -n 's/.*xplab.rw=\([^ ]*\).*/\1/p' /proc/cmdline)
for d in /tmp /run /var/tmp /root /dev/shm; do
	case ",$rw," in *",$d,"*) continue ;; esac
	mount -t tmpfs -o mode=1777 tmpfs /newroot$d
done
n=0
for d in $(echo "$rw" | tr , ' '); do
	mkdir -p /newroot$d 2>/dev/null
	mount -t 9p -o trans=virtio,version=9p2000.L,cache=mmap,msize=512000 rw$n /newroot$d ||
		{ echo "xplab: cannot mount the host's $d" >$out; bye 125; }
	n=$((n + 1))
done
run=$(sed -n 's/.*xplab.run=\([^ ]*\).*/\1/p' /proc/cmdline)
chroot /newroot /bin/sh -c '
	ip link set lo up &&
	ip link add rdmanet0 type dummy &&
	ip addr add 10.77.0.1/24 dev rdmanet0 &&
	ip link set rdmanet0 up &&
	rdma link add rxe0 type rxe netdev rdmanet0' >$out 2>&1 ||
	{ echo "xplab: could not create rxe0" >$out; bye 125; }
# The GIDs fill in asynchronously: wait for the IPv4-mapped one.
i=0
until grep -qs 'ffff:0a4d:0001' /sys/class/infiniband/rxe0/ports/1/gids/*; do
	i=$((i + 1))
	[ $i -lt 200 ] || { echo "xplab: rxe0 got no IPv4 GID" >$out; bye 125; }
	sleep 0.05
done
chroot /newroot /bin/bash -c "ulimit -l unlimited; . $run" >$out 2>&1 </dev/null
bye $?
INIT
	chmod +x "$root/init"
	(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.part" ||
		fail "cpio failed"
	mv "$initrd.part" "$initrd"
	rm -rf "$root"
fi
flock -u 9

# --- the run: a script the VM sources, written where it can read it ---
rundir=$(mktemp -d "$cache/run.XXXXXX")
trap 'rm -rf "$rundir"' EXIT
{
	echo "export XP_LAB=1 PATH=$(printf %q "$PATH") HOME=/root"
	env | grep -E '^(XP|UCX|ASAN|UBSAN|TSAN|LSAN|MESON)_[A-Za-z0-9_]*=' | while IFS='=' read -r k v; do
		printf 'export %s=%q\n' "$k" "$v"
	done
	printf 'cd %q || exit 126\n' "$PWD"
	printf '%q ' "$@"
	echo
} >"$rundir/run.sh"

# Host directories the VM must see writable rather than cover with a tmpfs:
# any of its scratch directories that holds this tree, the cache or the
# working directory.
rw=
share=()
n=0
for d in /tmp /var/tmp /root /run; do
	inside=0
	for p in "$PWD" "$cache" "$here"; do
		case "$p/" in "$d"/*) inside=1 ;; esac
	done
	[ $inside = 1 ] || continue
	rw=${rw:+$rw,}$d
	share+=(-fsdev "local,id=rw$n,path=$d,security_model=none,multidevs=remap"
		-device "virtio-9p-pci,fsdev=rw$n,mount_tag=rw$n")
	n=$((n + 1))
done
# --rw: after those, so one inside a shared scratch directory is mounted
# over it (the same files either way); a path with a comma or a space
# cannot go through the kernel's command line.
for d in "${extra_rw[@]}"; do
	case $d in *,* | *' '*) fail "--rw $d: a path with a comma or a space cannot be shared" ;; esac
	rw=${rw:+$rw,}$d
	share+=(-fsdev "local,id=rw$n,path=$d,security_model=none,multidevs=remap"
		-device "virtio-9p-pci,fsdev=rw$n,mount_tag=rw$n")
	n=$((n + 1))
done

# clocksource=tsc: left to itself the guest picks the emulated HPET, which
# makes every clock_gettime a system call (no vDSO) and charged xport's
# waits, which read the clock, several microseconds a message that a real
# host's TSC does not cost (perftest reads the TSC itself).
note "booting $kver (QEMU TCG) for: $*"
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
	-nodefaults -no-user-config -no-reboot -display none \
	-machine q35 -accel tcg -cpu max -smp 2 -m "$mem" \
	-kernel "$kdir/vmlinux" -initrd "$initrd" \
	-append "console=ttyS0 quiet panic=-1 clocksource=tsc tsc=reliable xplab.run=$rundir/run.sh${rw:+ xplab.rw=$rw}" \
	"${share[@]}" \
	-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
	-serial "file:$rundir/console" -serial "file:$rundir/out" </dev/null
qrc=$?
status=$(sed -n 's/^XPLAB-STATUS \([0-9]*\).*/\1/p' "$rundir/out" 2>/dev/null | tail -1)
grep -v '^XPLAB-STATUS ' "$rundir/out" 2>/dev/null
if [ -z "$status" ]; then
	echo "vmlab: the VM ended without the command's status (qemu status $qrc$([ $qrc = 124 ] && echo ": timed out after ${timeout_s} s")); console:" >&2
	tail -20 "$rundir/console" >&2
	exit 1
fi
[ "$status" = 125 ] && { echo "vmlab: the lab failed to set up; console:" >&2; tail -20 "$rundir/console" >&2; exit 1; }
exit "$status"
