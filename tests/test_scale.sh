#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# perf/scale.py at tiny sizes: jobs of 4 and 8 ranks over TCP and shm, ring
# and all-to-all, and an in-process job of 16; every table row is there, and
# the JSON lines hold plausible figures (xp_init took time, every rank holds
# at least its three standard descriptors, the transport asked for is the one
# that served, shm jobs map segments and TCP jobs none). Under a hard
# descriptor limit too small for the job, the size is a FAILED row naming
# EMFILE, the next size is skipped, and the exit status is 1, not a crash.
# Bad options are usage errors.
#
# usage: test_scale.sh SCALE_PY SCALE_PROBE XPRUN
#        exits 0 pass, 1 fail
set -uo pipefail
script=$1 probe=$2 xprun=$3
build=$(dirname "$(dirname "$probe")")
py=/usr/bin/python3
# shellcheck source=tests/scratch.sh
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"
[[ -x $xprun ]] || fail "no xprun at $xprun"

# --- a real run at tiny sizes
$py "$script" --build "$build" --no-build --sizes 4,8 --inproc-sizes 16 \
	--json-out "$tmp/out.json" >"$tmp/out" 2>"$tmp/err" || fail "scale.py exited $?"
cat "$tmp/out"
num='[0-9]+\.[0-9]+'
for n in 4 8; do
	for t in tcp shm; do
		for p in ring alltoall; do
			grep -Eq "^\| $n \| $t \| $p \| $num \| $num \| $num \| $num \| $num \| $num \| $num \| [0-9]+ \| [0-9]+ \|" \
				"$tmp/out" || fail "no table row for N=$n $t $p"
		done
	done
done
grep -Eq "^\| tcp \| alltoall \| 4 → 8 \| $num \| -?$num \|" "$tmp/out" || fail "no growth row"
grep -Eq "^\| shm \| ring \| -?$num \+ -?$num/peer \|" "$tmp/out" || fail "no per-step fit"
grep -Eq "^\| 16 \| $num \| $num \| [0-9]+ \|" "$tmp/out" || fail "no in-process row"
grep -q "^  XP_TRANSPORTS=shm .*xprun -n 8 .*scale-probe alltoall$" "$tmp/out" ||
	fail "the commands run are not listed"
$py - "$tmp/out.json" <<'PY' || fail "--json-out"
import json, sys
lines = [json.loads(ln) for ln in open(sys.argv[1])]
run = lines[0]
assert run["type"] == "run" and run["sizes"] == [4, 8], run
jobs = [r for r in lines if r["type"] == "scale"]
assert len(jobs) == 8, jobs
for r in jobs:
    assert "error" not in r, r
    assert r["served_by"] == [r["transport"]], r
    assert 0 < r["init_s_median"] <= r["init_s_max"] <= r["formation_s"] < 30, r
    assert 0 <= r["after_last_s"] <= r["formation_s"], r
    assert 0 <= r["init_sys_s_sum"] <= r["init_cpu_s_sum"] + 0.05 and r["init_cpu_s_sum"] > 0, r
    assert r["exchange_ms_max"] > 0 and r["rss_MiB_median"] > 0, r
    assert r["fds_rank0"] >= 3 and r["fds_others_max"] >= 3, r
    assert sum(r["fds_rank0_kinds"].values()) == r["fds_rank0"], r
    assert "scale-probe " + r["pattern"] in r["command"], r
    if r["transport"] == "shm":  # every segment's header page is written
        assert r["shm_map_MiB_max"] > 0 and r["shm_pss_MiB_sum"] > 0, r
    else:
        assert r["shm_map_MiB_max"] == 0 and r["fds_rank0_kinds"]["socket"] >= 1, r
(inproc,) = [r for r in lines if r["type"] == "scale-inproc"]
assert inproc["ranks"] == 16 and inproc["create_ns"] > 0 and inproc["allreduce_ns"] > 0, inproc
assert inproc["hwm_kB"] >= inproc["rss_before_kB"] > 0, inproc
(fits,) = [r for r in lines if r["type"] == "scale-fits"]
assert len(fits["fits"]) == 4 and all(f["sizes"] == [4, 8] for f in fits["fits"]), fits
print("json: ok")
PY

# --- a descriptor limit too small: a row that says why, the next size skipped
(
	ulimit -n 40
	exec $py "$script" --build "$build" --no-build --sizes 16,32 --transports tcp \
		--patterns ring --inproc-sizes none
) >"$tmp/lim" 2>"$tmp/err"
rc=$?
cat "$tmp/lim"
((rc == 1)) || fail "under ulimit -n 40: exit status $rc, expected 1"
grep -Eq '^\| 16 \| tcp \| ring \| FAILED: .*(EMFILE|Too many open files)' "$tmp/lim" ||
	fail "the failed size does not say EMFILE"
grep -q '^| 32 | tcp | ring | FAILED: skipped: N=16 failed |$' "$tmp/lim" ||
	fail "the next size was not skipped"
grep -q '^NOTE: the hard descriptor limit 40 is below' "$tmp/lim" || fail "no note of the limit"

# --- usage errors
for bad in "--sizes 1" "--sizes 4,x" "--transports udp" "--patterns star" "--timeout 5"; do
	# shellcheck disable=SC2086 # the option and its value are two words
	$py "$script" --build "$build" --dry-run $bad >/dev/null 2>&1
	(($? == 2)) || fail "$bad: not a usage error"
done
echo "all passed"
