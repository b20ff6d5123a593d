#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A stranger forging datagrams (issue 24, item 3): two ranks stream over
# the DPDK transport on a bridge (test_dpdk_stream stream: every message
# once, in order and intact) while tests/dpdk/test_dpdk_forge, in a third
# network namespace on the same bridge and without the job key, watches
# their datagrams and sends forged DATA and ACKs (right addresses, ports,
# ranks, epochs and sequence numbers; no MAC or a wrong one), replays of
# real ones, and ARP requests. The job must succeed (nothing forged was
# delivered, no pair failed), and each rank's counters (XP_DEBUG=transport)
# must show the forgeries refused: bad MACs and replays dropped, the
# stranger's ARP unanswered.
#
#   tests/dpdk/forge.sh JOB_SH TEST_DPDK_STREAM TEST_DPDK_FORGE
set -u
job=$1 bin=$2 forger=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
XP_LOG_LEVEL=info XP_DEBUG=transport "$job" --stranger "$forger" bridge 2 "$bin" stream >"$out" 2>&1
rc=$?
grep -E 'goodput|: ok$|frames in|stranger|FAIL|SKIP|job.sh|failed|error' "$out" | sed 's/^xport\[[0-9]*\] INFO: //'
[ $rc = 0 ] || { tail -n 30 "$out"; exit $rc; }

fail=0
for r in 0 1; do
	line=$(grep "rank $r: dpdk: frames in" "$out")
	num() { sed -n "s/.*$1 \([0-9]*\).*/\1/p" <<<"$line"; }
	bad=$(num "bad MAC") replayed=$(num replayed) arp=$(sed -n 's/.*learned [0-9]*, refused \([0-9]*\).*/\1/p' <<<"$line")
	[ -n "$bad" ] && [ -n "$replayed" ] && [ -n "$arp" ] || { echo "rank $r: no counters in the output"; fail=1; continue; }
	[ "$bad" -gt 0 ] || { echo "rank $r: no forged datagram was refused"; fail=1; }
	[ "$replayed" -gt 0 ] || { echo "rank $r: no replay was refused"; fail=1; }
	[ "$arp" -gt 0 ] || { echo "rank $r: the stranger's ARP was not refused"; fail=1; }
done
exit $fail
