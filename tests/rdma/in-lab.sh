#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# How the meson suite `rdma` runs a test: directly where this host has an
# RDMA device (real hardware, or inside the lab VM), otherwise inside the
# lab VM (tests/rdma/vmlab.sh), which skips (77) with its reason only when
# QEMU or the kernel package cannot be had.
#
#   tests/rdma/in-lab.sh TEST [ARG...]
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${XP_LAB:-}" ] || compgen -G '/sys/class/infiniband/*' >/dev/null; then
	exec "$@"
fi
exec bash "$here/vmlab.sh" --quiet ${XP_LAB_TIMEOUT:+--timeout "$XP_LAB_TIMEOUT"} -- "$@"
