#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xport's DPDK transport beside what the same devices give without it, each
# measured in the same run, round by round:
#
#   memif      xport-perf lat (8 B), rate (64 B) and bw (1 MiB) between two
#              processes over net_memif, beside a bare DPDK ping-pong of
#              the same frames (perf/dpdk_baseline.c: 114 bytes of headers
#              and the payload, no xport code) over net_memif.
#   af_packet  xport-perf over net_af_packet on a veth pair joining two
#              network namespaces, beside kernel UDP sockets over a veth
#              pair made the same way (perf/udp_baseline.c: busy-polled
#              ping-pong; a 64-byte and an MTU-datagram stream counted at
#              the receiver, without reliability: a ceiling, not a peer).
#   loss       xport-perf bw (1 MiB) over memif with XP_DPDK_DROP losing
#              1%, 5% and 20% of the datagrams each rank receives.
#   auth       every row above runs with datagram authentication (the
#              default, docs/DPDK-WIRE.md); memif lat (8 B) and bw (1 MiB)
#              run again in the same round with XP_DPDK_AUTH=off, so its
#              cost is read off one round's pair.
#
# Pinning: over memif both sides are pinned alike, each process to its own
# core (EAL -l 0 and -l 1 for the baseline and for xport, whose xport-perf
# pins rank r to CPU r as well). Over af_packet xport's ranks are pinned by
# xport-perf (rank r on CPU r) and the UDP client and server with taskset
# to CPUs 0 and 1. Medians of the rounds; ratios per round, then their
# median (the host has fast and slow spells; one round's pair shares one).
#
# --memif: only the memif rows without loss (latency against the bare
# ping-pong, rate, bandwidth, authentication on and off): many rounds in
# the time of a few, for a host whose load comes and goes.
#
#   perf/compare-dpdk.sh [--rounds N] [--build DIR] [--memif]   (root; default 3 rounds)
set -u
rounds=3 build=build memif_only=0
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift ;;
	--build) build=$2; shift ;;
	--memif) memif_only=1 ;;
	*) echo "usage: $0 [--rounds N] [--build DIR] [--memif]" >&2; exit 1 ;;
	esac
	shift
done
here=$(cd "$(dirname "$0")/.." && pwd)
job="$here/tests/dpdk/job.sh"
perf="$build/perf/xport-perf"
for f in "$perf" "$build/perf/dpdk-baseline" "$build/perf/udp-baseline" "$build/tools/xprun"; do
	[ -x "$f" ] || { echo "compare-dpdk: $f not built (meson with libdpdk)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "compare-dpdk: needs root (devices, namespaces)" >&2; exit 1; }
tmp=$(mktemp -d)
ns_made=()
cleanup() {
	for ns in "${ns_made[@]}"; do ip netns del "$ns" 2>/dev/null; done
	rm -rf "$tmp" /var/run/dpdk/xpcmp$$-*
}
trap cleanup EXIT

field() { # key: the value of key in the JSON lines on stdin that have it
	python3 -c "import sys, json
for l in sys.stdin:
    try: d = json.loads(l)
    except ValueError: continue
    if d.get('$1') is not None: print(d['$1']); break"
}
xport_memif() { # test size key [env...]
	local t=$1 s=$2 k=$3
	shift 3
	env "$@" timeout 300 "$job" memif 2 "$build/tools/xprun" -n 2 "$perf" "$t" --sizes "$s" \
		--json 2>/dev/null | field "$k"
}
xport_afp() { # test size key: per rank, in two namespaces (rank 0 prints)
	timeout 300 "$job" --per-rank netns 2 "$perf" "$1" --sizes "$2" --json 2>/dev/null |
		field "$3"
}
bare_memif() { # one-way p50 (us) of an 8-byte ping-pong
	local sock="$tmp/bare.sock" common="--no-pci --no-huge -m 128 --no-telemetry --log-level=*:error"
	rm -f "$sock"
	timeout 120 "$build/perf/dpdk-baseline" server --size 8 --iters 10000 -- -l 1 $common \
		--file-prefix=xpcmp$$-s --vdev=net_memif0,role=server,socket=$sock,socket-abstract=no,id=0 \
		>/dev/null 2>&1 &
	local spid=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
	timeout 120 "$build/perf/dpdk-baseline" client --size 8 --iters 10000 -- -l 0 $common \
		--file-prefix=xpcmp$$-c --vdev=net_memif0,role=client,socket=$sock,socket-abstract=no,id=0 \
		2>/dev/null | field lat_us_p50
	wait $spid 2>/dev/null
}

# Kernel UDP: a veth pair between two namespaces, addresses on both ends.
udp_setup() {
	local a=xpcu$$a b=xpcu$$b
	ip netns add $a && ns_made+=($a) && ip netns add $b && ns_made+=($b) || return 1
	ip link add xpcu$$0 type veth peer name xpcu$$1 || return 1
	ip link set xpcu$$0 netns $a && ip link set xpcu$$1 netns $b || return 1
	for n in 0 1; do
		local ns=$([ $n = 0 ] && echo $a || echo $b)
		ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		ip -n $ns link set lo up
		ip -n $ns addr add 10.204.0.$((n + 1))/24 dev xpcu$$$n
		ip -n $ns link set xpcu$$$n up
	done
}
udp() { # mode size key
	local port=$((30000 + RANDOM % 20000))
	ip netns exec xpcu$$b taskset -c 1 "$build/perf/udp-baseline" server \
		--bind 10.204.0.2:$port --seconds 60 >/dev/null 2>&1 &
	local spid=$!
	sleep 0.2
	ip netns exec xpcu$$a taskset -c 0 "$build/perf/udp-baseline" client \
		--to 10.204.0.2:$port "$1" --size "$2" --json 2>/dev/null | field "$3"
	wait $spid 2>/dev/null
}
udp_setup || { echo "compare-dpdk: cannot make the namespaces for kernel UDP" >&2; exit 1; }

declare -a m_lat b_lat m_rate m_bw m_lat_off m_bw_off a_lat a_rate a_bw u_lat u_rate u_bw l1 l5 l20
for ((r = 0; r < rounds; r++)); do
	echo "compare-dpdk: round $((r + 1))/$rounds" >&2
	m_lat+=("$(xport_memif lat 8 lat_us_p50)")
	b_lat+=("$(bare_memif)")
	m_rate+=("$(xport_memif rate 64 Mmsg_per_s)")
	m_bw+=("$(xport_memif bw 1048576 bw_MBps)")
	m_lat_off+=("$(xport_memif lat 8 lat_us_p50 XP_DPDK_AUTH=off)")
	m_bw_off+=("$(xport_memif bw 1048576 bw_MBps XP_DPDK_AUTH=off)")
	[ $memif_only = 1 ] && continue
	a_lat+=("$(xport_afp lat 8 lat_us_p50)")
	u_lat+=("$(udp lat 8 lat_us_p50)")
	a_rate+=("$(xport_afp rate 64 Mmsg_per_s)")
	u_rate+=("$(udp rate 64 Mmsg_per_s)")
	a_bw+=("$(xport_afp bw 1048576 bw_MBps)")
	u_bw+=("$(udp bw 1048576 bw_MBps)")
	l1+=("$(xport_memif bw 1048576 bw_MBps XP_DPDK_DROP=0.01)")
	l5+=("$(xport_memif bw 1048576 bw_MBps XP_DPDK_DROP=0.05)")
	l20+=("$(xport_memif bw 1048576 bw_MBps XP_DPDK_DROP=0.2)")
done

med() { printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
	awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
paired() { # name-of-xport-array name-of-baseline-array
	local -n xs=$1 ps=$2
	local i rs=()
	for ((i = 0; i < ${#xs[@]} && i < ${#ps[@]}; i++)); do
		rs+=("$(ratio "${xs[i]:--}" "${ps[i]:--}")")
	done
	med "${rs[@]}"
}
echo
echo "# compare-dpdk: $rounds rounds, medians (paired ratio: each round's ratio, then the median)"
echo
echo "| row | xport dpdk | baseline | baseline is | xport/baseline (paired) |"
echo "|---|---|---|---|---|"
echo "| memif 8 B one-way p50 (us) | $(med "${m_lat[@]}") | $(med "${b_lat[@]}") | bare DPDK ping-pong, same frames | $(paired m_lat b_lat) |"
echo "| memif 64 B rate (M msg/s) | $(med "${m_rate[@]}") | - | | |"
echo "| memif 1 MiB bw (MB/s) | $(med "${m_bw[@]}") | - | | |"
echo "| memif 8 B one-way p50, XP_DPDK_AUTH=off (us) | $(med "${m_lat_off[@]}") | $(med "${b_lat[@]}") | bare DPDK ping-pong, same frames | $(paired m_lat_off b_lat) |"
echo "| memif 8 B one-way p50, auth on vs off (us) | $(med "${m_lat[@]}") | $(med "${m_lat_off[@]}") | xport, XP_DPDK_AUTH=off | $(paired m_lat m_lat_off) |"
echo "| memif 1 MiB bw, auth on vs off (MB/s) | $(med "${m_bw[@]}") | $(med "${m_bw_off[@]}") | xport, XP_DPDK_AUTH=off | $(paired m_bw m_bw_off) |"
[ $memif_only = 1 ] && exit 0
echo "| af_packet 8 B one-way p50 (us) | $(med "${a_lat[@]}") | $(med "${u_lat[@]}") | kernel UDP over veth, busy-polled | $(paired a_lat u_lat) |"
echo "| af_packet 64 B rate (M msg/s) | $(med "${a_rate[@]}") | $(med "${u_rate[@]}") | kernel UDP stream, received | $(paired a_rate u_rate) |"
echo "| af_packet 1 MiB bw (MB/s) | $(med "${a_bw[@]}") | $(med "${u_bw[@]}") | kernel UDP stream, unreliable | $(paired a_bw u_bw) |"
echo "| memif 1 MiB goodput, 1% loss (MB/s) | $(med "${l1[@]}") | $(med "${m_bw[@]}") | xport without loss | $(paired l1 m_bw) |"
echo "| memif 1 MiB goodput, 5% loss (MB/s) | $(med "${l5[@]}") | $(med "${m_bw[@]}") | xport without loss | $(paired l5 m_bw) |"
echo "| memif 1 MiB goodput, 20% loss (MB/s) | $(med "${l20[@]}") | $(med "${m_bw[@]}") | xport without loss | $(paired l20 m_bw) |"
