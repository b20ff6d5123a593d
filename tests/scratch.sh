# SPDX-License-Identifier: MIT
#
# Sourced by the test scripts that run a tool into a scratch directory:
# makes $tmp (removed on exit) and defines fail, which ends the test with
# its message and the last lines of $tmp/err, the tool's stderr by the
# scripts' convention.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*" >&2
	[[ -s $tmp/err ]] && tail -n 20 "$tmp/err" >&2
	exit 1
}
