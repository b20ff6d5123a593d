#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The README's C examples are real: both are cut out of README.md, built
# against this build's header and library with this build's compiler (and
# sanitizer), and run: the xp_init one under xprun with 4 ranks, the
# threads one alone. Each must print what its code says it prints.
#
# usage: test_readme.sh README INCLUDE_DIR LIB_DIR XPRUN CC [CFLAGS...]
set -uo pipefail
readme=$1 inc=$2 libdir=$3 xprun=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# The C blocks, in order, one file each.
awk -v dir="$tmp" '
	/^```c$/ { n++; out = dir "/example" n ".c"; inblock = 1; next }
	/^```/ { inblock = 0; next }
	inblock { print > out }
' "$readme"
[[ -f $tmp/example1.c && -f $tmp/example2.c ]] || fail "README.md has not two C examples"
grep -q 'xp_init(' "$tmp/example1.c" || fail "the first example does not call xp_init"
grep -q 'xp_local_run(' "$tmp/example2.c" || fail "the second example does not call xp_local_run"

for n in 1 2; do
	"$@" -std=c11 -Wall -Wextra -Werror -I"$inc" "$tmp/example$n.c" -L"$libdir" -lxport \
		-Wl,-rpath,"$libdir" -o "$tmp/example$n" || fail "example $n does not build"
done

"$xprun" -n 4 "$tmp/example1" >"$tmp/out1" 2>"$tmp/err1" || {
	cat "$tmp/err1" >&2
	fail "example 1 under xprun -n 4 failed"
}
grep -qx 'token came back as 6 from 4 ranks' "$tmp/out1" ||
	fail "example 1 printed: $(cat "$tmp/out1")"

"$tmp/example2" >"$tmp/out2" 2>"$tmp/err2" || {
	cat "$tmp/err2" >&2
	fail "example 2 failed"
}
grep -qx 'rank 1 got "hello" from rank 0' "$tmp/out2" || fail "example 2 printed: $(cat "$tmp/out2")"
echo "readme examples: ok"
