#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xport-perf's collective tests at their command line:
#  - a short --check sweep (odd sizes included) of every collective, in
#    process with 3 ranks (several types and operators, in place too) and
#    under `xprun -n 3` over shared memory;
#  - --json rows parse, follow the run record and carry every key of the
#    table's header (time_us_*, algbw_GBps, busbw_GBps, algorithm,
#    transports, ranks); busbw is null for barrier only;
#  - a bad --dtype, --op, -b, -e, -f, -b above -e, --sizes with -b, a
#    collective option on a point-to-point test, and --ranks 3 on one, exit 2;
#  - the point-to-point tests still refuse a job of 3.
#
# usage: test_perf_coll.sh XPORT_PERF XPRUN
#        exits 0 pass, 1 fail, 77 skip
set -uo pipefail
perf=$1
xprun=$2
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/perf_checks.sh
source "$(dirname "$0")/perf_checks.sh"
[[ -x $py ]] || { echo "SKIP: no $py"; exit 77; }

# check_rows FILE RANKS TRANSPORTS: every line parses, the first is the run
# record, every collective has rows with the keys of the table.
check_rows() {
	$py - "$@" <<'PY' || fail "JSON rows of $1"
import json, sys
path, ranks, transports = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [json.loads(l) for l in open(path)]
assert rows and rows[0].get("type") == "run", "first line is not the run record"
keys = ("test size count dtype op iters time_us_avg time_us_min time_us_p50 time_us_p99 "
        "algbw_GBps busbw_GBps algorithm transports ranks").split()
tests = set()
for r in rows[1:]:
    missing = [k for k in keys if k not in r]
    assert not missing, f"keys {missing} missing in {r}"
    assert r["ranks"] == ranks and r["transports"] == transports, r
    assert r["check"] is True, r
    assert r["time_us_min"] <= r["time_us_p50"] <= r["time_us_p99"], r
    assert (r["busbw_GBps"] is None) == (r["test"] == "barrier"), r
    assert r["algorithm"], r
    tests.add(r["test"])
want = {"allreduce", "reduce_scatter", "allgather", "bcast", "alltoall", "barrier"}
assert tests == want, f"tests {sorted(tests)}"
print(f"{len(rows)} lines parse; every collective's rows carry the keys")
PY
}

sweep=(--check --iters 3 --warmup 1 --sizes 0,4,7,100,1001,65536)

echo "-- in-process, 3 ranks, every collective, --check, --json"
"$perf" coll --ranks 3 "${sweep[@]}" --json >"$tmp/out" 2>"$tmp/err" || fail "status $?"
check_rows "$tmp/out" 3 inproc
grep -q "rounded down" "$tmp/err" || fail "no note on sizes rounded down"

echo "-- in-process, 3 ranks, other types and operators, in place"
for args in "--dtype int8 --op max" "--dtype bfloat16 --op avg --in-place" \
	"--dtype float16 --op prod" "--dtype uint64 --op min --in-place" \
	"--dtype float64 --in-place"; do
	# shellcheck disable=SC2086 # the options' words
	"$perf" coll --ranks 3 "${sweep[@]}" $args >"$tmp/out" 2>"$tmp/err" ||
		fail "$args: status $?"
done

echo "-- xprun -n 3 over shm, every collective, --check, --json"
"$xprun" -n 3 "$perf" coll "${sweep[@]}" --json >"$tmp/out" 2>"$tmp/err" </dev/null ||
	fail "status $?"
check_rows "$tmp/out" 3 shm
grep -q "OVERSUBSCRIBED\|pinned (rank:CPU)" "$tmp/err" || fail "the header does not say the placement"

echo "-- the table's columns are the JSON keys"
columns_are_keys allreduce

echo "-- bad options exit 2"
while IFS= read -r args; do
	# shellcheck disable=SC2086 # the options' words
	"$perf" $args >"$tmp/out" 2>"$tmp/err"
	rc=$?
	((rc == 2)) || fail "'$args': status $rc, expected 2"
	[[ -s $tmp/err ]] || fail "'$args': no message"
done <<'ARGS'
allreduce --dtype float8
allreduce --dtype
allreduce --op xor
allreduce -b 0
allreduce -b 8x
allreduce -e 2g
allreduce -e -1
allreduce -f 1
allreduce -b 1m -e 1k
allreduce --sizes 8 -b 8
allreduce --ranks 0
lat --dtype int8
lat --check
lat --ranks 3
ARGS

echo "-- point-to-point tests refuse a job of 3"
"$xprun" -n 3 "$perf" lat --sizes 8 >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
((rc != 0)) || fail "lat under xprun -n 3 ran"
grep -q "exactly 2" "$tmp/err" || fail "no message"

echo "all passed"
exit 0
