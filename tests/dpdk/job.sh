#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Runs a job whose ranks talk over the DPDK transport on real virtual
# devices, which this script creates and removes:
#
#   memif   two ranks, net_memif between them (rank 0 the server)
#   bridge  N ranks in one network namespace, each with net_af_packet on
#           its own veth, the veths' other ends on a Linux bridge (a switch:
#           ARP, broadcast, N ranks)
#   netns   two ranks in two network namespaces joined by a veth pair with
#           net_af_packet on each end; the bootstrap and the TCP watch go
#           over a second veth pair with kernel addresses
#
#   tests/dpdk/job.sh [--per-rank] [--kills] [--huge] [--stranger PROG] MODE N COMMAND [ARGS...]
#
# --stranger (bridge only): a third network namespace whose veth is a port
# of the bridge too, and the bridge made a hub (ageing time 0: it floods
# every frame to every port); PROG runs there, as PROG IFACE SECONDS,
# from before the job starts until it ends (then SIGTERM). Its output
# follows the job's; its failure fails the run.
#
# Without --per-rank, COMMAND forms the job itself (a test that forks its
# ranks, or xprun): it runs once with the environment set. With it, the
# script starts COMMAND once per rank with XP_RANK, XP_SIZE, XP_ADDR and
# XP_JOB_KEY (netns needs that: its ranks live in different namespaces).
# XP_TRANSPORTS defaults to dpdk,tcp; the caller's XP_* variables pass
# through (XP_DPDK_DROP, XP_DEBUG, ...). Output goes to stdout/stderr.
#
# Afterwards no EAL runtime directory of the job may remain in
# /var/run/dpdk: the transport's end must have removed it (checked, fails
# the run), nor with --huge (the EALs on 2 MiB hugepages of a hugetlbfs
# mount the script makes) any hugepage file, unless --kills says COMMAND kills a rank (SIGKILL leaves its
# directory; the script removes it). Exit: COMMAND's status (the first rank's failure), 1 if a
# runtime directory was left, 77 with the reason if the host cannot do it.
set -u
per_rank=0 kills=0 huge=0 stranger=""
while [ $# -gt 0 ]; do
	case $1 in
	--stranger) stranger=$2; shift ;;
	--per-rank) per_rank=1 ;;
	--kills) kills=1 ;;
	--huge) huge=1 ;;
	*) break ;;
	esac
	shift
done
if [ $# -lt 3 ]; then
	echo "usage: $0 [--per-rank] memif|bridge|netns N COMMAND [ARGS...]" >&2
	exit 1
fi
mode=$1 n=$2
shift 2
skip() {
	echo "SKIP: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "DPDK's virtual devices and namespaces need root"
command -v ip >/dev/null || skip "ip not found (Debian: apt-get install iproute2)"
case $mode in
memif) [ "$n" = 2 ] || { echo "memif joins two ranks" >&2; exit 1; } ;;
netns) [ "$n" = 2 ] && [ $per_rank = 1 ] || { echo "netns: --per-rank, two ranks" >&2; exit 1; } ;;
bridge) ;;
*) echo "unknown mode $mode" >&2; exit 1 ;;
esac
case $mode in
bridge) ;;
*) [ -z "$stranger" ] || { echo "--stranger: bridge only" >&2; exit 1; } ;;
esac

id=xpj$$
tmp=$(mktemp -d)
prefix="xpdj$$"
made=()
hugemnt="" hugeraised=""
cleanup() {
	if [ -n "$hugemnt" ]; then
		rm -f "$hugemnt"/* 2>/dev/null
		umount "$hugemnt" 2>/dev/null
	fi
	[ -n "$hugeraised" ] && echo "$hugeraised" >/proc/sys/vm/nr_hugepages
	for ns in "${made[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$tmp" /var/run/dpdk/"$prefix"-*
}
trap cleanup EXIT

# Every rank polls; --lcores keeps each EAL from pinning its rank to one
# core, so ranks share the host's cores as the scheduler sees fit (two
# ranks on two cores pin themselves apart in memif mode).
memory="--no-huge -m 128"
if [ $huge = 1 ]; then
	free=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
	if [ "${free:-0}" -lt 96 ]; then # 64 MiB per rank, two ranks and some
		total=$(cat /proc/sys/vm/nr_hugepages)
		echo $((total + 96)) >/proc/sys/vm/nr_hugepages 2>/dev/null && hugeraised=$total
		free=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
		[ "${free:-0}" -ge 96 ] || skip "fewer than 96 free 2 MiB hugepages, and none could be reserved"
	fi
	hugemnt="$tmp/huge"
	mkdir -p "$hugemnt" && mount -t hugetlbfs -o pagesize=2M nodev "$hugemnt" 2>/dev/null ||
		{ hugemnt=""; skip "cannot mount hugetlbfs"; }
	memory="-m 64 --huge-dir $hugemnt"
fi
common="--no-pci $memory --no-telemetry --log-level=lib.eal:error --log-level=pmd:error --file-prefix=$prefix-{rank}"
quiet_ns() {
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	ip -n "$1" link set lo up
}

run_in=()
case $mode in
memif)
	sock="$tmp/memif.sock"
	eal="-l 0 $common --vdev=net_memif0,role=server,socket=$sock,socket-abstract=no,id=0;-l 1 $common --vdev=net_memif0,role=client,socket=$sock,socket-abstract=no,id=0"
	;;
bridge)
	ns=$id
	ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
	made+=("$ns")
	quiet_ns "$ns"
	ip -n "$ns" link add br0 type bridge 2>/dev/null || skip "cannot create a bridge"
	ip -n "$ns" link set br0 up
	eal=""
	for ((i = 0; i < n; i++)); do
		# DPDK's af_packet driver joins a PACKET_FANOUT group numbered
		# (pid ^ ifindex) & 0xffff, and groups are per namespace: two
		# ranks whose numbers meet fail to probe. Forked ranks' pids
		# differ in the low bits; indices 4096 apart keep them apart.
		ip -n "$ns" link add "r$i" index $((4096 * (i + 1))) type veth peer name "s$i" \
			index $((4096 * (i + 1) + 1)) 2>/dev/null || skip "cannot create a veth pair"
		ip -n "$ns" link set "s$i" master br0
		ip -n "$ns" link set "s$i" up
		ip -n "$ns" link set "r$i" up
		eal+="${eal:+;}--lcores=0@(0-1) $common --vdev=net_af_packet0,iface=r$i"
	done
	run_in=(ip netns exec "$ns")
	if [ -n "$stranger" ]; then
		ip netns add "${id}x" 2>/dev/null || skip "cannot create a network namespace"
		made+=("${id}x")
		quiet_ns "${id}x"
		ip -n "$ns" link add sx type veth peer name x0 netns "${id}x" || exit 1
		ip -n "$ns" link set sx master br0
		ip -n "$ns" link set sx up
		ip -n "${id}x" link set x0 up
		ip -n "$ns" link set br0 type bridge ageing_time 0
		ip netns exec "${id}x" "$stranger" x0 300 >"$tmp/stranger.out" 2>&1 &
		stranger_pid=$!
	fi
	;;
netns)
	a=${id}a b=${id}b
	ip netns add "$a" 2>/dev/null && made+=("$a") && ip netns add "$b" 2>/dev/null &&
		made+=("$b") || skip "cannot create network namespaces"
	ip link add "${id}d0" type veth peer name "${id}d1" 2>/dev/null || skip "cannot create a veth pair"
	ip link add "${id}c0" type veth peer name "${id}c1" || exit 1
	ip link set "${id}d0" netns "$a" && ip link set "${id}c0" netns "$a" &&
		ip link set "${id}d1" netns "$b" && ip link set "${id}c1" netns "$b" || exit 1
	net=10.201.$(($$ % 250 + 1))
	for side in 0 1; do
		nsx=$([ $side = 0 ] && echo "$a" || echo "$b")
		quiet_ns "$nsx"
		ip -n "$nsx" link set "${id}d$side" up
		ip -n "$nsx" addr add "$net.$((side + 1))/24" dev "${id}c$side"
		ip -n "$nsx" link set "${id}c$side" up
	done
	eal="--lcores=0@(0-1) $common --vdev=net_af_packet0,iface=${id}d0;--lcores=0@(0-1) $common --vdev=net_af_packet0,iface=${id}d1"
	;;
esac

export XP_DPDK_EAL="$eal"
export XP_TRANSPORTS="${XP_TRANSPORTS:-dpdk,tcp}"
echo "job.sh: $mode, $n ranks, XP_TRANSPORTS=$XP_TRANSPORTS${XP_DPDK_DROP:+, XP_DPDK_DROP=$XP_DPDK_DROP}"

rc=0
if [ $per_rank = 0 ]; then
	"${run_in[@]}" "$@"
	rc=$?
else
	key=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	port=$((20000 + $$ % 20000))
	pids=()
	for ((r = 0; r < n; r++)); do
		where=("${run_in[@]}")
		addr=127.0.0.1
		ifname=()
		if [ "$mode" = netns ]; then
			where=(ip netns exec "$([ $r = 0 ] && echo "$a" || echo "$b")")
			addr=$net.1
			ifname=(XP_SOCKET_IFNAME="${id}c$r")
		fi
		"${where[@]}" env XP_RANK=$r XP_SIZE="$n" XP_ADDR="$addr:$port" XP_JOB_KEY="$key" \
			"${ifname[@]}" "$@" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p"
		r=$?
		[ $rc = 0 ] && rc=$r
	done
fi

if [ -n "$stranger" ]; then
	kill -TERM "$stranger_pid" 2>/dev/null
	wait "$stranger_pid"
	r=$?
	cat "$tmp/stranger.out"
	[ $rc = 0 ] && rc=$r
fi

if [ -n "$hugemnt" ] && [ -n "$(ls -A "$hugemnt")" ] && [ $kills = 0 ]; then
	echo "job.sh: hugepage files were left behind: $(ls "$hugemnt" | head -3)"
	[ $rc = 0 ] && rc=1
fi
left=$(ls -d /var/run/dpdk/"$prefix"-* 2>/dev/null)
if [ -n "$left" ] && [ $kills = 0 ]; then
	echo "job.sh: the EAL runtime directories were left behind: $left"
	[ $rc = 0 ] && rc=1
fi
exit $rc
