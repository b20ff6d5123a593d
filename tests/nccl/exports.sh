#!/bin/sh
# SPDX-License-Identifier: MIT
# The plugin exports the tables NCCL looks up and nothing else: exactly
# ncclNetPlugin_v6 to ncclNetPlugin_v12 among its defined dynamic symbols.
plugin=$1
command -v nm >/dev/null 2>&1 || { echo "nm not found (binutils)"; exit 77; }
expected='ncclNetPlugin_v10
ncclNetPlugin_v11
ncclNetPlugin_v12
ncclNetPlugin_v6
ncclNetPlugin_v7
ncclNetPlugin_v8
ncclNetPlugin_v9'
got=$(nm -D --defined-only "$plugin" | awk '{print $3}' | LC_ALL=C sort)
if [ "$got" != "$expected" ]; then
	echo "FAIL: $plugin exports:"
	echo "$got"
	echo "expected:"
	echo "$expected"
	exit 1
fi
echo "exports exactly the seven tables"
