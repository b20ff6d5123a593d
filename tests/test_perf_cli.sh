#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xport-perf and the other shipped programs at their command line:
#  - --version of xport-perf, sock-baseline and xprun names the project's
#    version;
#  - xport-perf --json, in-process and under xprun over shared memory: every
#    stdout line parses as JSON (python's json), the first is the run record,
#    every lat row has lat_us_avg, lat_us_min, lat_us_p50, lat_us_p99;
#  - the table's column headers are the JSON rows' keys;
#  - --sizes rejects 8,,16, 8k5, -1, 0x10, a trailing comma, trailing junk,
#    an empty list and sizes above 1g, naming the bad element (exit 2);
#  - --transport that XP_TRANSPORTS does not list exits 2 naming both.
#
# usage: test_perf_cli.sh XPORT_PERF XPRUN SOCK_BASELINE VERSION
#        exits 0 pass, 1 fail, 77 skip
set -uo pipefail
perf=$1
xprun=$2
sock=$3
version=$4
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/perf_checks.sh
source "$(dirname "$0")/perf_checks.sh"
[[ -x $py ]] || { echo "SKIP: no $py"; exit 77; }

echo "-- --version"
for p in "$perf:xport-perf" "$sock:sock-baseline" "$xprun:xprun"; do
	got=$("${p%%:*}" --version) || fail "${p##*:} --version failed"
	[[ $got == "${p##*:} (xport) $version" ]] || fail "${p##*:} --version: '$got'"
done

# check_json FILE: every line parses; the first is the run record; lat rows
# carry the four latency figures as numbers.
check_json() {
	$py - "$1" <<'PY' || fail "JSON rows of $1"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows and rows[0].get("type") == "run", "first line is not the run record"
for k in ("version", "command", "transport"):
    assert rows[0].get(k), "run record without " + k
lat = [r for r in rows[1:] if r.get("test") == "lat"]
assert lat, "no lat rows"
for r in lat:
    for k in ("lat_us_avg", "lat_us_min", "lat_us_p50", "lat_us_p99"):
        assert isinstance(r.get(k), (int, float)), f"{k} missing in {r}"
    assert r["lat_us_min"] <= r["lat_us_p50"] <= r["lat_us_p99"], r
    for k in ("test", "transport", "protocol", "size", "bw_MBps"):
        assert k in r, f"{k} missing in {r}"
print(f"{len(rows)} lines parse; lat rows carry avg/min/p50/p99")
PY
}

echo "-- --json in-process"
"$perf" lat --sizes 8,1024 --iters 500 --json >"$tmp/out" 2>"$tmp/err" || fail "status $?"
check_json "$tmp/out"

echo "-- --json under xprun over shm, stdout into a file"
"$xprun" -n 2 "$perf" lat --transport shm --sizes 8,1024 --iters 500 --json \
	>"$tmp/out" 2>"$tmp/err" </dev/null || fail "status $?"
check_json "$tmp/out"
grep -q '"transport":"shm"' "$tmp/out" || fail "no shm row"
grep -q "\"command\":\"$xprun -n 2 " "$tmp/out" || fail "the run record does not name xprun's command"

echo "-- the table's columns are the JSON keys"
columns_are_keys bw

echo "-- strict --sizes"
for bad in '8,,16' '8k5' '-1' '0x10' '8,' ',8' '' '16abc' '2g' '8 ' '1,2,x'; do
	"$perf" lat --sizes "$bad" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	((rc == 2)) || fail "--sizes '$bad': status $rc, expected 2"
	grep -q -- "--sizes" "$tmp/err" || fail "--sizes '$bad': no message"
done
msg=$("$perf" lat --sizes '8,,16' 2>&1)
[[ $msg == *"element 2 is empty"* ]] || fail "8,,16: the element is not named: $msg"
msg=$("$perf" lat --sizes '8,8k5' 2>&1)
[[ $msg == *"'8k5' (element 2)"* ]] || fail "8k5: the element is not named: $msg"

echo "-- --transport against XP_TRANSPORTS"
XP_TRANSPORTS=tcp "$xprun" -n 2 "$perf" lat --transport shm --sizes 8 >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
((rc == 2)) || fail "shm against XP_TRANSPORTS=tcp: status $rc, expected 2"
grep -q -- '--transport shm disagrees with XP_TRANSPORTS=tcp' "$tmp/err" || fail "no message naming both"
XP_TRANSPORTS=shm "$perf" lat --transport inproc --sizes 8 >"$tmp/out" 2>"$tmp/err"
rc=$?
((rc == 2)) || fail "inproc with XP_TRANSPORTS=shm: status $rc, expected 2"
XP_TRANSPORTS='tcp, shm' "$xprun" -n 2 "$perf" lat --transport shm --sizes 8 --iters 100 --json \
	>"$tmp/out" 2>"$tmp/err" </dev/null || fail "shm within XP_TRANSPORTS='tcp, shm': status $?"

echo "all passed"
exit 0
