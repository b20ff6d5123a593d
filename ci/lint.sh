#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Checks that need no build: the layering rule between src/core and the
# backends (docs/ARCHITECTURE.md) and the formatting (.clang-format).
# Exits 0 when both hold, 1 otherwise, naming each offending line or file.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
fail=0

# 1. Only a backend's own directory includes its library's headers (tests may
#    reach into a backend to test it; perf/dpdk_baseline.c is bare DPDK, the
#    yardstick, with no xport code), and the public header includes none of them.
declare -A owner=(
	['liburing\.h']=src/tcp
	['infiniband/']=src/rdma
	['rdma/']=src/rdma
	['rte_']=src/dpdk
)
for pattern in "${!owner[@]}"; do
	dir=${owner[$pattern]}
	while IFS= read -r hit; do
		[[ -z $hit ]] && continue
		echo "lint: $hit: only $dir/ may include <$pattern...>"
		fail=1
	done < <(git grep -nE "#include <${pattern}" -- include src perf ':!perf/dpdk_baseline.c' |
		grep -v "^$dir/")
done
# The layers (docs/ARCHITECTURE.md), by directory: each may include only the
# layers below it.
#   core      the engine                          includes: core
#   select    capability cards, selection        includes: core, select
#   job       forming a job, xp_init, registry   includes: core, select, job,
#             and inproc/ (a job of one rank is a local job)
#   backends  src/<name>/                         includes: core, select, job, itself
#   coll      collectives: reduction kernels,    includes: core, coll
#             algorithms (on the p2p engine)
# Backends never include each other.
layer_may_include() { # $1: including directory, $2: included directory
	local from=$1 to=$2
	[[ $from == "$to" || $to == core ]] && return 0
	case $from in
	core) return 1 ;;
	select) return 1 ;;
	coll) return 1 ;;
	job) [[ $to == select || $to == inproc ]] ;;
	*) [[ $to == select || $to == job ]] ;;
	esac
}
while IFS= read -r hit; do
	[[ -z $hit ]] && continue
	file=${hit%%:*}
	from=${file#src/}
	from=${from%%/*}
	inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${hit#*:*:}")
	# Where the include points: "../dir/x.h" or, within a directory, "x.h".
	if [[ $inc == ../*/* ]]; then
		to=${inc#../}
		to=${to%%/*}
	else
		to=$from
	fi
	if ! layer_may_include "$from" "$to"; then
		echo "lint: $hit: src/$from must not include src/$to's headers"
		fail=1
	fi
done < <(git grep -nE '#include "' -- 'src/*.c' 'src/*.h')

# 2. Formatting.
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/xport-format.$$; then
	grep -E "^[^ ].*: (error|warning)" /tmp/xport-format.$$ | cut -d: -f1 | sort -u |
		sed 's/^/lint: not formatted (clang-format -i): /'
	fail=1
fi
rm -f /tmp/xport-format.$$
((fail == 0)) && echo "lint: ok"
exit $fail
