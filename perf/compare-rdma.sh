#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xport over RDMA beside perftest, in one run on one device:
#
#   perf/compare-rdma.sh [--build DIR] [--rounds N] [--only lat|bw]
#
# 8-byte latency: ib_send_lat against `xport-perf lat` (half the round
# trip, both); 1 MiB bandwidth: ib_read_bw (the protocol xport's bulk lane
# uses: the receiver reads) against `xport-perf bw`, and ib_write_bw beside
# it for reference; with XP_TRANSPORTS=rdma,tcp: messages and payloads over
# RDMA (tcp only watches). Rounds alternate the two; the table gives
# medians over rounds and xport/perftest ratios, then every command it ran.
#
# Where this host has no RDMA device it runs itself inside the lab VM
# (tests/rdma/vmlab.sh: Debian's kernel under QEMU with soft-RoCE), so the
# figures measure software (rxe under emulation), not a NIC: compare the
# ratios, not the numbers. Needs perftest (Debian package perftest).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$here/build
rounds=3
only=
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	-h | --help) sed -n '3,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "compare-rdma: unknown option $1" >&2; exit 2 ;;
	esac
done
for p in "$build/tools/xprun" "$build/perf/xport-perf"; do
	[ -x "$p" ] || { echo "compare-rdma: $p missing: build first" >&2; exit 2; }
done
for t in ib_send_lat ib_read_bw ib_write_bw; do
	command -v $t >/dev/null || { echo "compare-rdma: $t not found (apt-get install perftest)" >&2; exit 77; }
done
if [ -z "${XP_LAB:-}" ] && ! compgen -G '/sys/class/infiniband/*' >/dev/null; then
	exec bash "$here/tests/rdma/vmlab.sh" --timeout 1800 -- \
		bash "$here/perf/compare-rdma.sh" --build "$build" --rounds "$rounds" ${only:+--only "$only"}
fi

dev=$(ls /sys/class/infiniband | head -1)
gid=$(for g in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
	grep -q ':ffff:' "$g" 2>/dev/null && basename "$g" && break
done)
gid=${gid:-0}
tls=rdma,tcp
# Both latency runs take the same number of round trips, so that each
# spans about as much of the host's fast and slow spells as the other.
lat_iters=10000
# Every command, as run (the figures come from subshells, which cannot
# add to a list of ours).
cmds=(
	"ib_send_lat -d $dev -x $gid -s 8 -n $lat_iters -F -p PORT  (server), and the same + 127.0.0.1 (client)"
	"ib_read_bw -d $dev -x $gid -s 1048576 -n 1000 -F -p PORT  (server), and the same + 127.0.0.1 (client)"
	"ib_write_bw -d $dev -x $gid -s 1048576 -n 1000 -F -p PORT  (server), and the same + 127.0.0.1 (client)"
	"XP_TRANSPORTS=$tls $build/tools/xprun -n 2 $build/perf/xport-perf lat --sizes 8 --iters $lat_iters --json --no-pin"
	"XP_TRANSPORTS=$tls $build/tools/xprun -n 2 $build/perf/xport-perf bw --sizes 1048576 --json --no-pin"
	"XP_TRANSPORTS=$tls $build/tools/xprun -n 2 $build/perf/xport-perf bw --sizes 1048576 --json --no-pin --register"
)

# perftest: server in the background, client to 127.0.0.1 (its own TCP
# exchange of QP numbers); the client prints the figures.
perftest() { # tool size field-index [iterations]
	local tool=$1 size=$2 col=$3 n=${4:-1000} port=$((18515 + RANDOM % 1000))
	timeout 120 "$tool" -d "$dev" -x "$gid" -s "$size" -n "$n" -F -p $port >/dev/null 2>&1 &
	local spid=$!
	sleep 0.5
	local out=
	for _ in 1 2 3 4 5; do
		out=$(timeout 120 "$tool" -d "$dev" -x "$gid" -s "$size" -n "$n" -F -p $port 127.0.0.1 2>/dev/null) && break
		sleep 0.5
	done
	wait $spid 2>/dev/null
	echo "$out" | awk -v c="$col" -v s="$size" '$1 == s { print $c; exit }'
}
xport() { # test size key [extra option]
	local out
	out=$(XP_TRANSPORTS=$tls timeout 300 "$build/tools/xprun" -n 2 "$build/perf/xport-perf" \
		"$1" --sizes "$2" --json --no-pin ${4:-} 2>/dev/null)
	echo "$out" | python3 -c "import sys, json
for l in sys.stdin:
    try: d = json.loads(l)
    except ValueError: continue
    if d.get('size') == $2 and '$3' in d: print(d['$3'])"
}

declare -a lat_ib lat_xp bw_ib bw_iw bw_xp bw_xr
for ((r = 0; r < rounds; r++)); do
	echo "compare-rdma: round $((r + 1))/$rounds" >&2
	if [ "$only" != bw ]; then
		lat_ib+=("$(perftest ib_send_lat 8 6 $lat_iters)") # t_typical [usec]
		lat_xp+=("$(xport lat 8 lat_us_p50 "--iters $lat_iters")")
	fi
	if [ "$only" != lat ]; then
		bw_ib+=("$(perftest ib_read_bw 1048576 4)")  # BW average [MB/sec], MiB/s
		bw_iw+=("$(perftest ib_write_bw 1048576 4)")
		bw_xp+=("$(xport bw 1048576 bw_MBps)")       # 10^6 B/s
		bw_xr+=("$(xport bw 1048576 bw_MBps --register)")
	fi
done
med() { [ $# -gt 0 ] || { echo -; return; }; printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
li=$(med "${lat_ib[@]}"); lx=$(med "${lat_xp[@]}")
bi=$(med "${bw_ib[@]}"); bw=$(med "${bw_iw[@]}"); bx=$(med "${bw_xp[@]}"); br=$(med "${bw_xr[@]}")
# perftest's MB/sec are MiB/s: both in 10^6 B/s here.
mb() { awk -v b="$1" 'BEGIN { if (b == "-") print "-"; else printf "%.1f", b * 1.048576 }'; }
bi_mb=$(mb "$bi"); bw_mb=$(mb "$bw")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
# Paired: each round's own xport/perftest ratio, then their median. The
# host has fast and slow spells lasting seconds; the two runs of one round
# share a spell more often than two medians do.
paired() { # name-of-xport-array name-of-perftest-array
	local -n xs=$1 ps=$2
	local i rs=()
	for ((i = 0; i < ${#xs[@]} && i < ${#ps[@]}; i++)); do
		rs+=("$(ratio "${xs[i]:--}" "${ps[i]:--}")")
	done
	med "${rs[@]}"
}
echo
echo "# compare-rdma on $dev (gid index $gid), $rounds rounds, medians; xport: XP_TRANSPORTS=$tls"
# perftest's bandwidth in 10^6 B/s, round by round, for the paired ratios.
bw_ib_mb=() bw_iw_mb=()
for v in "${bw_ib[@]}"; do bw_ib_mb+=("$(mb "${v:--}")"); done
for v in "${bw_iw[@]}"; do bw_iw_mb+=("$(mb "${v:--}")"); done
printf '%-28s %12s %12s %8s %8s\n' "row" "perftest" "xport" "ratio" "paired"
printf '%-28s %12s %12s %8s %8s\n' "8 B latency, us (p50)" "$li" "$lx" "$(ratio "$lx" "$li")" \
	"$(paired lat_xp lat_ib)"
printf '%-28s %12s %12s %8s %8s\n' "1 MiB bandwidth, MB/s" "$bi_mb" "$bx" "$(ratio "$bx" "$bi_mb")" \
	"$(paired bw_xp bw_ib_mb)"
printf '%-28s %12s %12s %8s %8s\n' "  the same, --register" "$bi_mb" "$br" "$(ratio "$br" "$bi_mb")" \
	"$(paired bw_xr bw_ib_mb)"
printf '%-28s %12s %12s %8s %8s\n' "  ib_write_bw beside it" "$bw_mb" "$br" "$(ratio "$br" "$bw_mb")" \
	"$(paired bw_xr bw_iw_mb)"
echo "# ratio: of the medians; paired: the median of each round's own ratio."
echo "# latency: ib_send_lat's t_typical against xport-perf lat_us_p50; xport's 8 B messages go"
echo "#   over rdma's small lane (inline SENDs into the shared receive queue). Bandwidth: ib_read_bw's BW average (MiB/s,"
echo "#   shown in 10^6 B/s) against xport-perf bw_MBps (a window of sends, payloads read by RDMA;"
echo "#   --register: buffers registered with xp_mem_register, pinned once through the cache,"
echo "#   as perftest's are; without it each transfer registers its buffers)."
echo "# rounds: perftest lat ${lat_ib[*]} | xport lat ${lat_xp[*]} | perftest read bw ${bw_ib[*]} | write bw ${bw_iw[*]} | xport bw ${bw_xp[*]} | registered ${bw_xr[*]}"
echo "# commands run:"
printf '#   %s\n' "${cmds[@]}"
