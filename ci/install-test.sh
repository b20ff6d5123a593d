#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Install-and-consume test: installs a configured build into a staging
# directory and builds programs against that copy the way another project
# would, with nothing but `pkg-config --cflags --libs xport`.
#
# Usage: bash ci/install-test.sh BUILDDIR
#
# Checks, in order:
#  1. `meson install --destdir` of BUILDDIR succeeds.
#  2. pkg-config finds xport.pc in the staged tree, and its -I/-L point there.
#  3. The installed header compiles on its own as C11 with
#     -Wall -Wextra -Werror -pedantic and as C++17 with -Wall -Wextra -Werror.
#  4. The installed libxport.so exports only xp_* functions, all at XPORT_0.1.
#  5. ci/consumer.c (C11) and ci/consumer.cpp (C++17) build, link, run against
#     the staged library and print their "ok" line.
# Exits 0 if all pass, 1 otherwise. Leaves its files in BUILDDIR/install-test.
set -euo pipefail

if (($# != 1)); then
	echo "usage: $0 BUILDDIR" >&2
	exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd)
work=$build/install-test
stage=$work/stage
CC=${CC:-cc}
CXX=${CXX:-c++}

step() { printf 'install-test: %s\n' "$*"; }
fail() {
	printf 'install-test: FAIL: %s\n' "$*" >&2
	exit 1
}

rm -rf "$work"
mkdir -p "$work"

# 1. Install into a staging root. The .pc file keeps the configured prefix
# (/usr/local by default), as a package built with DESTDIR would.
step "meson install --destdir $stage"
meson install -C "$build" --destdir "$stage" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log" >&2; fail "meson install"; }

# 2. Find the staged xport.pc. The prefix recorded in it is where the files
# would live on a real install; PKG_CONFIG_SYSROOT_DIR is pkg-config's own
# way of saying "that tree is staged under this directory": it prefixes
# every -I and -L path with it. (pkg-config --define-prefix cannot relocate
# this .pc: its libdir and includedir are absolute, not ${prefix}-relative,
# and the multiarch libdir lib/<triplet>/pkgconfig is deeper than it expects.)
mapfile -t pcs < <(find "$stage" -name xport.pc -path '*/pkgconfig/*')
((${#pcs[@]} == 1)) || fail "expected one installed xport.pc, found ${#pcs[@]}"
PKG_CONFIG_PATH=$(dirname "${pcs[0]}")
export PKG_CONFIG_PATH
export PKG_CONFIG_SYSROOT_DIR=$stage
# Nothing from the host's own pkg-config directories may answer instead.
export PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
cflags=$(pkg-config --cflags xport) || fail "pkg-config --cflags xport"
libs=$(pkg-config --libs xport) || fail "pkg-config --libs xport"
step "pkg-config --cflags --libs xport: $cflags $libs"

incdir='' libdir=''
for f in $cflags; do
	[[ $f == -I* ]] && incdir=${f#-I}
done
for f in $libs; do
	[[ $f == -L* ]] && libdir=${f#-L}
done
# pkg-config drops -I/-L for the system directories; a staged tree never is one.
[[ -n $incdir && $incdir == "$stage"/* ]] || fail "Cflags do not point into the staged tree"
[[ -n $libdir && $libdir == "$stage"/* ]] || fail "Libs do not point into the staged tree"
[[ -f $incdir/xport/xport.h ]] || fail "no xport/xport.h under $incdir"
so=$libdir/libxport.so
[[ -e $so ]] || fail "no libxport.so under $libdir"

# 3. The header alone, strictly.
step "header compiles as C11 and C++17 with -Werror"
printf '#include <xport/xport.h>\nint main(void) { return XP_VERSION_MAJOR; }\n' >"$work/hdr.c"
cp "$work/hdr.c" "$work/hdr.cpp"
# shellcheck disable=SC2086 # pkg-config output is a list of words
$CC -std=c11 -Wall -Wextra -Werror -pedantic $cflags -fsyntax-only "$work/hdr.c" ||
	fail "header as C11"
# shellcheck disable=SC2086
$CXX -std=c++17 -Wall -Wextra -Werror $cflags -fsyntax-only "$work/hdr.cpp" ||
	fail "header as C++17"

# 4. Exported symbols. nm -D prints "ADDR TYPE NAME@@VERSION" for defined
# versioned symbols, and the version node itself as an absolute symbol
# ("0 A XPORT_0.1").
step "nm -D: only xp_* symbols, versioned XPORT_0.1"
nm -D --defined-only "$so" >"$work/nm.txt"
bad=$(awk '!($2 == "A" && $3 == "XPORT_0.1") && $3 !~ /^xp_[A-Za-z0-9_]*@@XPORT_0\.1$/' \
	"$work/nm.txt")
if [[ -n $bad ]]; then
	printf '%s\n' "$bad" >&2
	fail "libxport.so exports symbols outside xp_*@@XPORT_0.1"
fi
nsyms=$(grep -c ' xp_' "$work/nm.txt" || true)
((nsyms > 0)) || fail "libxport.so exports no xp_ symbol"
step "$nsyms xp_ symbols exported"

# 5. Build and run the consumers against the staged copy only.
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run_consumer() {
	local name=$1 expect=$2
	shift 2
	step "build $name: $*"
	"$@" || fail "building $name"
	# The loader must pick the staged library, not some other copy.
	ldd "$work/$name" | grep -q "=> $libdir/libxport.so" ||
		{ ldd "$work/$name" >&2; fail "$name does not load $so"; }
	local out rc=0
	out=$(timeout 60 "$work/$name" 2>"$work/$name.err") || rc=$?
	cat "$work/$name.err" >&2
	[[ $rc == 0 ]] || fail "$name exited with $rc; output: $out"
	[[ $out == "$expect" ]] || fail "$name printed '$out', expected '$expect'"
	step "$name: $out"
}
# shellcheck disable=SC2086
run_consumer consumer "consumer: ok" \
	$CC -std=c11 -Wall -Wextra -Werror -pedantic "$root/ci/consumer.c" -o "$work/consumer" \
	$cflags $libs
# shellcheck disable=SC2086
run_consumer consumer-cpp "consumer-cpp: ok" \
	$CXX -std=c++17 -Wall -Wextra -Werror "$root/ci/consumer.cpp" -o "$work/consumer-cpp" \
	$cflags $libs

step "ok"
