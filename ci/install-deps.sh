#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Installs, from Debian 12's archive, what xport needs on a fresh machine:
# the build dependencies (what `meson setup build && ninja -C build` needs)
# and, unless --build-only, the tools of the tests and CI steps
# (ci/test.sh, ci/install-test.sh, perf/plot, the man page test).
# Non-interactive and idempotent: when every package is already installed it
# does not touch apt at all, so a rerun takes well under a second.
#
# Usage: bash ci/install-deps.sh [--build-only]   (as root, or with sudo available)
set -euo pipefail

build_packages=(
	meson ninja-build pkg-config gcc g++ binutils
	# the io_uring TCP backend (probed by meson.build)
	liburing-dev
	# the job key's cryptography
	libsodium-dev
	# the RDMA verbs layer, src/rdma, and its rdma_cm connection setup
	# (probed by meson.build)
	libibverbs-dev librdmacm-dev
	# the DPDK port layer, src/dpdk (probed by meson.build)
	libdpdk-dev
)
test_packages=(
	# clang builds; the sanitizer runtimes of clang 14 (ASan, UBSan, TSan,
	# LSan) are in libclang-rt-14-dev, not in clang itself
	clang libclang-rt-14-dev
	# llvm-symbolizer on PATH, so sanitizer reports name functions and lines
	llvm
	# the microbenchmarks (perf/bench_core, optional, probed by meson.build)
	libbenchmark-dev
	# ci/lint.sh: formatting
	clang-format
	# ci/summarize-tests.py; setarch (util-linux) for the TSan/ASan ASLR
	# fallback in ci/test.sh; ip netns for network tests
	python3 util-linux iproute2
	# perf/plot and its test (Debian's /usr/bin/python3 with matplotlib)
	python3-matplotlib
	# ci/install-test.sh: the CMake consumer (find_package(xport))
	cmake
	# tests/test_man.sh: man -l renders each page, groff warns
	man-db groff-base
	# the RDMA lab (tests/rdma/vmlab.sh): QEMU boots Debian's kernel, whose
	# package it fetches itself, with a busybox initramfs and soft-RoCE;
	# the rxe user-space driver; the rdma tool is iproute2's
	qemu-system-x86 busybox-static cpio kmod xz-utils ibverbs-providers
	# perf/compare-rdma.sh: perftest's ib_send_lat and ib_read_bw
	perftest
	# tests/dpdk/netns.sh: the kernel side's veth without checksum offload
	ethtool
	# the PyTorch backend (python/xport, meson option torch) and its tests:
	# torch with c10d's headers, pybind11, Python's headers
	python3-torch libtorch-dev pybind11-dev python3-dev
	# the launchers suite (tests/launchers/run.sh): a one-node Slurm
	# cluster (tests/slurm/start.sh; its pmi2 and pmix plugins are in
	# slurm-wlm-basic-plugins), Open MPI's mpirun, PMIx for the pmix
	# option and Slurm's libpmi2 for the pmi2 option (meson.build)
	slurm-wlm slurm-wlm-basic-plugins munge openmpi-bin libpmix-dev libpmi2-0-dev
)

case ${1:-} in
--build-only) packages=("${build_packages[@]}") ;;
'') packages=("${build_packages[@]}" "${test_packages[@]}") ;;
-h | --help)
	echo "usage: $0 [--build-only]"
	echo "  build dependencies: ${build_packages[*]}"
	echo "  test tools (not with --build-only): ${test_packages[*]}"
	exit 0
	;;
*)
	echo "usage: $0 [--build-only]" >&2
	exit 2
	;;
esac

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
