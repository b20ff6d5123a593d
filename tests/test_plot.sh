#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# perf/plot on a real short sweep: xport-perf lat in-process and under xprun
# over shm, plus a line that is not JSON (skipped with a warning). Each PNG
# must exist, start with the PNG signature and have the asked pixel size
# (IHDR width and height); no usable rows must fail with a message.
#
# usage: test_plot.sh PLOT XPORT_PERF XPRUN      exits 0 pass, 1 fail, 77 skip
set -uo pipefail
plot=$1
perf=$2
xprun=$3
py=/usr/bin/python3
# shellcheck source=tests/scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"
if ! $py -c 'import matplotlib' 2>/dev/null; then
	echo "SKIP: $py has no matplotlib (apt-get install python3-matplotlib)"
	exit 77
fi

# Few round trips: the plot is under test, not the figures (the default
# 20,000 took 110 s under TSan).
"$perf" lat --sizes 8,1024 --iters 200 --json >"$tmp/inproc.json" 2>"$tmp/err" ||
	fail "in-process sweep: $?: $(tail -5 "$tmp/err")"
"$xprun" -n 2 "$perf" --transport shm --sizes 8,1024 --iters 50 --json \
	>"$tmp/shm.json" 2>"$tmp/err" </dev/null || fail "shm sweep: $?: $(tail -5 "$tmp/err")"
echo "not json" >>"$tmp/shm.json"

$py "$plot" -o "$tmp/out" --prefix t --dpi 80 --size 640x480 "$tmp/inproc.json" "$tmp/shm.json" \
	>"$tmp/log" 2>"$tmp/err" || fail "plot exited $?"
grep -q "not a JSON object, skipped" "$tmp/err" || fail "no warning for the non-JSON line"
for chart in latency bandwidth; do
	png=$tmp/out/t-$chart.png
	[[ -s $png ]] || fail "no $png"
	$py - "$png" <<'PY' || fail "$png"
import struct, sys
data = open(sys.argv[1], "rb").read(24)
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
assert data[12:16] == b"IHDR", "no IHDR first"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (640, 480), f"{w}x{h}, expected 640x480"
print(f"{sys.argv[1]}: PNG {w}x{h}")
PY
done

echo '{"type":"run","command":"nothing"}' >"$tmp/empty.json"
$py "$plot" -o "$tmp/none" "$tmp/empty.json" >/dev/null 2>"$tmp/err"
rc=$?
((rc == 1)) || fail "no usable rows: status $rc, expected 1"
grep -q "no usable rows" "$tmp/err" || fail "no message for no usable rows"
$py "$plot" --size 10x10 "$tmp/inproc.json" >/dev/null 2>&1
(($? == 2)) || fail "--size 10x10 accepted"
echo "all passed"
exit 0
