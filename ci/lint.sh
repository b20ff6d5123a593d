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
#    reach into a backend to test it), and the
#    public header includes none of them.
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
	done < <(git grep -nE "#include <${pattern}" -- include src perf | grep -v "^$dir/")
done
# Backends never include each other; the core includes no backend.
for dir in src/*/; do
	dir=${dir%/}
	name=${dir#src/}
	[[ $name == core ]] && continue # every backend builds on the core
	while IFS= read -r hit; do
		[[ -z $hit ]] && continue
		file=${hit%%:*}
		case $file in
		"$dir"/*) ;;                   # a backend's own files
		src/core/init.c) ;;            # the bootstrap starts the backends
		*)
			echo "lint: $hit: $file must not include $name's headers"
			fail=1
			;;
		esac
	done < <(git grep -nE "#include \"(\.\./)?$name/" -- src)
done

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
