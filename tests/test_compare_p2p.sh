#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# perf/compare-p2p.py without UCX or Open MPI: --dry-run prints the build
# directory's xprun and xport-perf and pins every tool alike (and --no-pin
# pins none); a real --rows inproc round measures both in-process rows and
# their ratio, judges the target, and writes JSON lines that parse and that
# perf/plot draws; a bad --rows is a usage error.
#
# usage: test_compare_p2p.sh COMPARE_P2P PLOT XPORT_PERF XPRUN
#        exits 0 pass, 1 fail
set -uo pipefail
script=$1 plot=$2 perf=$3 xprun=$4
build=$(dirname "$(dirname "$perf")")
root=$(dirname "$(dirname "$(realpath "$script")")")
py=/usr/bin/python3
# shellcheck source=tests/scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

# --- --dry-run: nothing runs; every command of a round is printed.
$py "$script" --build "$build" --dry-run >"$tmp/dry" 2>"$tmp/err" || fail "--dry-run exited $?"
grep -c . "$tmp/dry" | grep -qx 32 || fail "--dry-run: $(grep -c . "$tmp/dry") lines, expected 32"
# Commands run from the repository root: relative paths are relative to it.
resolve() { (cd "$root" && realpath -m -- "$1"); }
while read -r launcher _ _ prog _; do
	[[ $(resolve "$launcher") == $(realpath "$xprun") ]] || fail "not the build's xprun: $launcher"
	[[ $(resolve "$prog") == $(realpath "$perf") ]] || fail "not the build's xport-perf: $prog"
done < <(grep 'xprun -n 2 ' "$tmp/dry")
(($(grep -c 'xprun -n 2 .*xport-perf .*--transport' "$tmp/dry") == 8)) ||
	fail "--dry-run: not 8 xport-perf commands under xprun"
grep -q "^$(grep 'xport-perf lat --sizes 8' "$tmp/dry" | cut -d' ' -f1) lat --sizes 8 --json$" \
	"$tmp/dry" || fail "--dry-run: the in-process command runs under a launcher"
if grep -q "^# .*pinning: initiator/sender on CPU 0" "$tmp/dry"; then
	for want in 'ucx_perftest -p PORT -c 1 &$' 'ucx_perftest 127.0.0.1 -p PORT -c 0 ' \
		'sock-baseline lat --pin' 'mpirun .*--bind-to core'; do
		(($(grep -c "$want" "$tmp/dry") >= 1)) || fail "--dry-run: no '$want'"
	done
	! grep -q -- '--no-pin\|--bind-to none' "$tmp/dry" || fail "--dry-run: something unpinned"
	(($(grep -c 'ucx_perftest -p PORT -c 1 &$' "$tmp/dry") == 6)) || fail "--dry-run: UCX servers"
	(($(grep -c 'ucx_perftest 127.0.0.1 -p PORT -c 0 ' "$tmp/dry") == 6)) ||
		fail "--dry-run: UCX clients"
else
	echo "CPUs 0 and 1 are not both ours: pinning not checked"
fi
$py "$script" --build "$build" --dry-run --no-pin >"$tmp/dry" 2>"$tmp/err" || fail "--no-pin"
! grep -q -- ' -c [01]\| --pin\|--bind-to core' "$tmp/dry" || fail "--no-pin: something pinned"
(($(grep -c 'xport-perf.* --no-pin' "$tmp/dry") == 9)) || fail "--no-pin: xport-perf pinned"

# --- one real round of the in-process row, no UCX or MPI needed.
$py "$script" --build "$build" --rows inproc --rounds 1 --no-install --no-build \
	--json-out "$tmp/out.json" >"$tmp/out" 2>"$tmp/err" || fail "--rows inproc exited $?"
cat "$tmp/out"
num='[0-9]+\.[0-9]{3}'
grep -Eq "^  xport inproc \(two threads\) +$num +$num$" "$tmp/out" || fail "no xport inproc row"
grep -Eq "^  cache line ping-pong \(two threads\) +$num +$num +[0-9.]+ +[0-9.]+$" "$tmp/out" ||
	fail "no cache-line row with its ratios"
grep -Eq '^- in-process 8 B <= 2x the cache line ping-pong: (met|NOT MET)$' "$tmp/out" ||
	fail "the in-process target was not judged"
! grep -Eq 'not measured|NOT MEASURED|^  (UCX|Open MPI|socket|xport (tcp|shm)|mpirun|[a-z/]*sock-baseline)' \
	"$tmp/out" || fail "rows beyond inproc"
$py - "$tmp/out.json" <<'PY' || fail "--json-out"
import json, sys
lines = [json.loads(ln) for ln in open(sys.argv[1])]
run, rows = lines[0], lines[1:]
assert run["type"] == "run" and "--rows inproc" in run["command"], run
assert sorted(r["transport"] for r in rows) == ["cacheline-baseline", "inproc"], rows
for r in rows:
    assert r["system"] == "xport" and r["round"] == 1 and r["test"] == "lat", r
    assert r["size"] == 8 and r["lat_us_p50"] > 0 and "xport-perf lat" in r["command"], r
print("json: ok")
PY
if $py -c 'import matplotlib' 2>/dev/null; then
	$py "$plot" -o "$tmp/plots" "$tmp/out.json" >/dev/null 2>"$tmp/err" || fail "perf/plot: $?"
	[[ -s $tmp/plots/xport-perf-latency.png ]] || fail "perf/plot drew no latency chart"
else
	echo "no matplotlib: perf/plot not checked"
fi

# --- usage errors
$py "$script" --rows nothing --dry-run >/dev/null 2>&1
(($? == 2)) || fail "--rows nothing: not a usage error"
$py "$script" --rounds 0 --dry-run >/dev/null 2>&1
(($? == 2)) || fail "--rounds 0: not a usage error"
echo "all passed"
