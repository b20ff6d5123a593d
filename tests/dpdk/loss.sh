#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The DPDK transport under injected loss: test_dpdk_stream's stream over
# memif with XP_DPDK_DROP=DROP (LOSS[,REORDER[,DUP]], applied in each
# rank's receive path, since this kernel has no netem). The stream itself
# checks that every message arrived once, in order and intact; this script
# checks from the transport's own counters (XP_DEBUG=transport) that the
# injection really happened on both ranks, that lost datagrams were
# really sent again, and that every datagram was authenticated (no MAC
# refused: the knob acts after verification) or, with XP_DPDK_AUTH=off,
# that rendezvous windows went by reference (zero copy), so a knob or a
# path that did nothing cannot pass.
#
#   tests/dpdk/loss.sh JOB_SH TEST_DPDK_STREAM DROP
set -u
job=$1 bin=$2 drop=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
XP_DPDK_DROP=$drop XP_LOG_LEVEL=info XP_DEBUG=transport "$job" memif 2 "$bin" stream >"$out" 2>&1
rc=$?
grep -E 'goodput|: ok$|XP_DPDK_DROP dropped|resent|FAIL|SKIP|job.sh' "$out" | sed 's/^xport\[[0-9]*\] INFO: //'
[ $rc = 0 ] || { tail -n 30 "$out"; exit $rc; }

IFS=, read -r loss reorder dup <<<"$drop"
fail=0
for r in 0 1; do
	line=$(grep "rank $r: dpdk: frames in" "$out")
	num() { sed -n "s/.*$1 \([0-9]*\).*/\1/p" <<<"$line"; }
	d=$(num dropped) o=$(num reordered) u=$(num duplicated)
	res=$(grep "rank $r: dpdk to rank" "$out" | sed -n 's/.*resent \([0-9]*\).*/\1/p')
	[ -n "$d" ] && [ -n "$res" ] || { echo "rank $r: no counters in the output"; fail=1; continue; }
	[ "$d" -gt 0 ] || { echo "rank $r: XP_DPDK_DROP=$drop dropped nothing"; fail=1; }
	[ "$res" -gt 0 ] || { echo "rank $r: nothing was sent again"; fail=1; }
	[ -z "${reorder:-}" ] || [ "$o" -gt 0 ] || { echo "rank $r: nothing was reordered"; fail=1; }
	[ -z "${dup:-}" ] || [ "$u" -gt 0 ] || { echo "rank $r: nothing was duplicated"; fail=1; }
	if [ "${XP_DPDK_AUTH:-on}" = off ]; then
		# memif takes chained frames: rendezvous windows go by
		# reference, resends included (not sealed ones: dpdk_port.h).
		z=$(sed -n 's/.*by reference \([0-9]*\).*/\1/p' <<<"$line")
		[ "${z:-0}" -gt 0 ] || { echo "rank $r: no datagram was sent by reference"; fail=1; }
		grep -q "auth off" <<<"$line" || { echo "rank $r: XP_DPDK_AUTH=off, and auth is on"; fail=1; }
	else
		grep -Eq "auth (gcm|poly1305): bad MAC 0," <<<"$line" ||
			{ echo "rank $r: not authenticated, or a MAC refused"; fail=1; }
	fi
done
exit $fail
