#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Installs, from Debian 12's archive, everything the build and every CI step
# (ci/test.sh) needs on a fresh machine. Non-interactive and idempotent: when
# every package is already installed it does not touch apt at all, so a rerun
# takes well under a second.
#
# Usage: bash ci/install-deps.sh    (as root, or with sudo available)
set -euo pipefail

packages=(
	# build
	meson ninja-build pkg-config gcc g++ binutils
	libsodium-dev
	# clang builds; the sanitizer runtimes of clang 14 (ASan, UBSan, TSan,
	# LSan) are in libclang-rt-14-dev, not in clang itself
	clang libclang-rt-14-dev
	# llvm-symbolizer on PATH, so sanitizer reports name functions and lines
	llvm
	# optional backends and microbenchmarks, probed by meson.build
	liburing-dev libbenchmark-dev
	# ci/lint.sh: formatting
	clang-format
	# ci/summarize-tests.py; setarch (util-linux) for the TSan/ASan ASLR
	# fallback in ci/test.sh; ip netns for network tests
	python3 util-linux iproute2
)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	# "ii " = wanted install, currently installed, no error flag
	[[ $status == "ii " ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	echo "install-deps: all ${#packages[@]} packages already installed"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if ((EUID != 0)); then
	sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
