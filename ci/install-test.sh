#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Install-and-consume test: installs a configured build into a staging
# directory and builds programs against that copy the way another project
# would: with nothing but `pkg-config --cflags --libs xport`, and with CMake's
# find_package(xport) and its imported target xport::xport.
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
#  6. CMake: xportConfig.cmake and xportConfigVersion.cmake are installed in
#     <libdir>/cmake/xport; ci/cmake-consumer (find_package(xport 0.1
#     REQUIRED), target_link_libraries(app PRIVATE xport::xport)) configures
#     with CMAKE_PREFIX_PATH at the staged prefix, builds, loads the staged
#     library and prints consumer.c's "ok" line; find_package(xport 0.2)
#     and (xport 1.0) are refused. Skipped with a note if cmake is missing.
#  7. Where the build made the PyTorch package: it is in a directory
#     Debian's python3 reads, and a job of one rank runs over it.
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
	# (ldd's output taken whole first: grep -q stops at the match, and
	# under pipefail an ldd still writing would fail the pipe.)
	local deps
	deps=$(ldd "$work/$name")
	grep -q "=> $libdir/libxport.so" <<<"$deps" ||
		{ printf '%s\n' "$deps" >&2; fail "$name does not load $so"; }
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

# 6. CMake, against the staged prefix only.
if ! command -v cmake >/dev/null; then
	step "cmake not installed: CMake consumer SKIPPED (apt-get install cmake)"
else
	mapfile -t cfgs < <(find "$stage" -name xportConfig.cmake -path '*/cmake/xport/*')
	((${#cfgs[@]} == 1)) || fail "expected one installed xportConfig.cmake, found ${#cfgs[@]}"
	cmdir=$(dirname "${cfgs[0]}")
	[[ $cmdir == "$libdir/cmake/xport" ]] || fail "xportConfig.cmake is in $cmdir, not $libdir/cmake/xport"
	[[ -f $cmdir/xportConfigVersion.cmake ]] || fail "no xportConfigVersion.cmake beside it"
	# The staged prefix: the configured one (as xport.pc records it) under
	# $stage (pkgconf already prefixes it with PKG_CONFIG_SYSROOT_DIR).
	prefix=$(pkg-config --variable=prefix xport)
	[[ $prefix == "$stage"/* ]] || prefix=$stage$prefix
	[[ -d $prefix/include/xport ]] || fail "no staged prefix at $prefix"
	cbuild=$work/cmake-build
	step "cmake -S ci/cmake-consumer -DCMAKE_PREFIX_PATH=$prefix"
	# Nothing installed on the host may answer instead.
	CC=$CC cmake -S "$root/ci/cmake-consumer" -B "$cbuild" -DCMAKE_PREFIX_PATH="$prefix" \
		-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
		>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; fail "cmake configure"; }
	grep -q "xport_DIR:PATH=$cmdir" "$cbuild/CMakeCache.txt" ||
		fail "find_package(xport) did not find the staged package ($(grep xport_DIR "$cbuild/CMakeCache.txt"))"
	cmake --build "$cbuild" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; fail "cmake build"; }
	deps=$(ldd "$cbuild/app")
	grep -q "=> $libdir/libxport.so" <<<"$deps" ||
		{ printf '%s\n' "$deps" >&2; fail "the CMake consumer does not load $so"; }
	out=$(timeout 60 "$cbuild/app") || fail "the CMake consumer failed: $out"
	[[ $out == "consumer: ok" ]] || fail "the CMake consumer printed '$out'"
	step "cmake consumer: $out"
	# The version file refuses what this version does not provide.
	mkdir -p "$work/cmake-v"
	for want in 0.2 1.0; do
		# project() with C: CMake searches the multiarch libdir
		# (lib/<triplet>/cmake) only when it knows the architecture.
		printf '%s\n' 'cmake_minimum_required(VERSION 3.13)' 'project(v C)' \
			"find_package(xport $want QUIET)" \
			'if(xport_FOUND)' "  message(FATAL_ERROR \"xport $want accepted\")" 'endif()' \
			'find_package(xport 0.1 QUIET)' \
			'if(NOT xport_FOUND)' '  message(FATAL_ERROR "xport 0.1 not found")' 'endif()' \
			>"$work/cmake-v/CMakeLists.txt"
		rm -rf "$work/cmake-v/b"
		cmake -S "$work/cmake-v" -B "$work/cmake-v/b" -DCMAKE_PREFIX_PATH="$prefix" \
			>"$work/cmake-v.log" 2>&1 || { cat "$work/cmake-v.log" >&2; fail "find_package(xport $want) accepted, or 0.1 not found"; }
	done
	step "find_package(xport 0.2) and (xport 1.0) refused"
fi

# 7. The PyTorch package, where the build made it: /usr/bin/python3
# imports the staged xport.torch (its module finds the staged libxport
# through its rpath, here relocated by LD_LIBRARY_PATH) and runs a job of
# one rank over it.
mapfile -t pkgs < <(find "$stage" -path '*/dist-packages/xport/torch.py')
if ((${#pkgs[@]} == 0)); then
	step "no PyTorch package in this build (torch not found at setup): SKIPPED"
else
	site=$(dirname "$(dirname "${pkgs[0]}")")
	[[ $site == "$stage"*/lib/python3.*/dist-packages ]] ||
		fail "the PyTorch package is in $site, not a dist-packages directory Debian's python3 reads"
	rm -f "$work/torch-store"
	out=$(cd / && PYTHONPATH=$site LD_LIBRARY_PATH=$libdir XPT_STORE=$work/torch-store \
		timeout 120 /usr/bin/python3 -c '
import os, torch, torch.distributed as dist, xport.torch
dist.init_process_group("xport", init_method="file://" + os.environ["XPT_STORE"], rank=0, world_size=1)
t = torch.arange(4.0); dist.all_reduce(t); assert t.tolist() == [0, 1, 2, 3]
print("torch: ok", xport.torch.__file__)' 2>&1) || fail "the staged PyTorch package failed: $out"
	[[ $out == *"torch: ok $site/xport/torch.py"* ]] || fail "python3 printed '$out'"
	step "PyTorch package: ${out##*$'\n'}"
fi

step "ok"
