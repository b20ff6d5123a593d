# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# What the xport-perf command-line tests share (sourced by
# test_perf_cli.sh and test_perf_coll.sh, which set $perf, $py and $tmp).
# shellcheck disable=SC2154 # those three are the sourcing script's

# Fails the test, showing the start of the last command's output.
fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/out "$tmp"/err; do
		[[ -s $f ]] && { echo "--- $f" >&2; head -n 20 "$f" >&2; }
	done
	exit 1
}

# The table's column headers of `xport-perf TEST` are its JSON rows' keys.
columns_are_keys() {
	"$perf" "$1" --sizes 8 --iters 5 >"$tmp/table" 2>"$tmp/err" || fail "status $?"
	"$perf" "$1" --sizes 8 --iters 5 --json >"$tmp/out" 2>"$tmp/err" || fail "status $?"
	local head
	head=$(grep -m1 '^test ' "$tmp/table") || fail "no table header"
	# shellcheck disable=SC2086 # the header's words are the columns
	$py - "$tmp/out" $head <<'PY' || fail "table columns and JSON keys differ"
import json, sys
row = [json.loads(l) for l in open(sys.argv[1])][-1]
missing = [c for c in sys.argv[2:] if c not in row]
assert not missing, f"columns {missing} are not keys of {row}"
PY
}
