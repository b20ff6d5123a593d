#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# perf/compare-torch.py in one quick round (--quick --rounds 1): the rows
# of both transports' tables, of the binding's overhead and of the measures
# come out with figures, its JSON lines parse and perf/plot draws them.
# Not the speed: on a shared machine a measure may or may not hold.
#
# usage: test_compare_torch.sh COMPARE_TORCH PLOT XPORT_PERF XPRUN
#        exits 0 pass, 1 fail
set -uo pipefail
script=$1 plot=$2 perf=$3
build=$(dirname "$(dirname "$perf")")
py=/usr/bin/python3
# shellcheck source=tests/scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

$py "$script" --build "$build" --quick --rounds 1 --json-out "$tmp/out.json" \
	>"$tmp/out" 2>"$tmp/err" || fail "--quick --rounds 1 exited $?"
cat "$tmp/out"
num='[0-9]+\.?[0-9]*'
for tr in shm tcp; do
	grep -q "^### $tr: xport over $tr" "$tmp/out" || fail "no $tr table"
	for size in 4 64; do
		grep -Eq "^\| $size B \| $tr \| $num \| $num \| [-+]$num \| $num \|$" "$tmp/out" ||
			fail "no $tr overhead row of $size B"
	done
	for what in "all_reduce p50 at 4 B-4 KiB" "all_reduce busbw from 1 MiB" "DDP step"; do
		grep -Eq "^- $tr: $what .*: \*\*(met|NOT MET)\*\* \(paired" "$tmp/out" ||
			fail "$tr: '$what' not judged"
	done
done
for row in "all_reduce 4 B p50 us" "all_reduce 1 MiB busbw GB/s" "broadcast 4 KiB p50 us" \
	"broadcast 1 MiB busbw GB/s" "all_gather 4 KiB p50 us" "all_gather 1 MiB busbw GB/s" \
	"DDP step p50 us"; do
	(($(grep -Ec "^\| $row \| $num \| $num \| $num \|$" "$tmp/out") == 2)) ||
		fail "'$row' not in both tables with figures"
done
grep -q 'FAILED\|NOT MEASURED' "$tmp/out" && fail "a measurement failed"
$py - "$tmp/out.json" <<'PY' || fail "--json-out"
import json, sys
lines = [json.loads(ln) for ln in open(sys.argv[1])]
run, rows = lines[0], lines[1:]
assert run["type"] == "run" and "--quick" in run["command"], run
got = {(r["system"], r["transports"], r["test"]) for r in rows}
for tr in ("shm", "tcp"):
    for test in ("allreduce", "bcast", "allgather", "ddp"):
        assert ("xport-torch", tr, test) in got, (tr, test)
        assert ("gloo", "tcp", test) in got, test
    assert ("xport", tr, "allreduce") in got, tr  # xport-perf's rows
for r in rows:
    assert r["round"] == 1 and r["time_us_p50"] > 0 and r["command"], r
print("json: ok")
PY
if $py -c 'import matplotlib' 2>/dev/null; then
	$py "$plot" -o "$tmp/plots" "$tmp/out.json" >/dev/null 2>"$tmp/err" || fail "perf/plot: $?"
	[[ -s $tmp/plots/xport-perf-coll-time.png ]] || fail "perf/plot drew no collective chart"
else
	echo "no matplotlib: perf/plot not checked"
fi
echo "all passed"
