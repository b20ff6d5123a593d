#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Clean endings are not errors (issue 24, 4.5). A job of ranks that only
# call xp_init, xp_oob_barrier and xp_finalize over TCP logs no ERROR or
# WARN line (ranks used to log "rank N has finalized; operations with it
# fail" at error level as peers left after the last barrier, now and then;
# a rank that sees its peer finalize with nothing under way with it shows
# the same every time); and a job
# stopped with SIGTERM to xprun, its ranks waiting in the library, logs no
# ERROR line as the ranks see each other go.
#
# usage: test_quiet.sh XPRUN QUIET_RANK [RANKS]   exits 0 pass, 1 fail
set -uo pipefail
xprun=$1
rank=$2
n=${3:-64}
tmp=$(mktemp -d)
bg=
cleanup() {
	[[ -n $bg ]] && kill -9 "$bg" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	[[ -f $tmp/err ]] && { echo "--- stderr" >&2; cat "$tmp/err" >&2; }
	exit 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

export XP_TRANSPORTS=tcp

for i in 1 2 3; do
	echo "-- $n ranks: init, barrier, finalize (run $i)"
	t0=$(now_ms)
	"$xprun" -n "$n" "$rank" >"$tmp/out" 2>"$tmp/err" </dev/null || fail "status $?"
	echo "   $(($(now_ms) - t0)) ms, $(grep -cE 'ERROR|WARN' "$tmp/err") ERROR/WARN lines"
	grep -qE 'ERROR|WARN' "$tmp/err" && fail "a clean job logged errors or warnings"
done

echo "-- a rank that finalizes while its peer is still in the library"
"$xprun" -n 2 "$rank" --early >"$tmp/out" 2>"$tmp/err" </dev/null || fail "status $?"
grep -q 'ERROR.*has finalized' "$tmp/err" && fail "a peer that finalized was logged as an error"

for i in 1 2 3; do
	echo "-- SIGTERM to xprun while 8 ranks wait in the library (run $i)"
	"$xprun" -n 8 "$rank" --wait >"$tmp/out" 2>"$tmp/err" </dev/null &
	bg=$!
	limit=$(($(now_ms) + 30000))
	until (($(grep -c '^ready' "$tmp/out" 2>/dev/null || true) >= 8)); do
		(($(now_ms) < limit)) || fail "the ranks did not all get ready"
		sleep 0.02
	done
	kill -TERM "$bg"
	wait "$bg"
	bg=
	grep -q "xprun: got SIGTERM" "$tmp/err" || fail "xprun did not say it got SIGTERM"
	echo "   $(grep -c 'ERROR' "$tmp/err") ERROR lines"
	grep -q 'ERROR' "$tmp/err" && fail "stopping the job logged errors"
done
exit 0
