#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds xport and runs its whole test suite in up to three configurations,
# each in its own build directory under build-ci/:
#   gcc   gcc, -Dwerror=true, default options; then the install-and-consume
#         test (ci/install-test.sh) on the same build
#   asan  clang, ASan + UBSan
#   tsan  clang, TSan
#   fuzz  ci/fuzz.sh: each libFuzzer target for 20 s ($FUZZ_SECONDS) on top
#         of its corpus, each target counted as one test
# and, first, ci/lint.sh (layering rule and formatting), counted as one test.
#
# Usage: bash ci/test.sh [gcc] [asan] [tsan] [fuzz]      (default: all four)
#
# The last line of output is "N passed, N failed, N skipped" over every
# configuration (ci/summarize-tests.py over each meson-logs/testlog.json).
# A configuration that fails to set up or build counts as one failed test.
# Exits non-zero if anything failed.
set -uo pipefail # no -e: one configuration failing must not hide the others

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
out=build-ci

configs=("$@")
((${#configs[@]})) || configs=(gcc asan tsan fuzz)
for c in "${configs[@]}"; do
	case $c in
	gcc | asan | tsan | fuzz) ;;
	*)
		echo "usage: $0 [gcc] [asan] [tsan] [fuzz]" >&2
		exit 2
		;;
	esac
done

# Meson 1.0 sets no sanitizer options. Without halt_on_error UBSan only
# prints its findings and the test still passes; abort_on_error makes an ASan
# report end the test with a signal meson cannot mistake for a skip (77).
asan_env=(ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
tsan_env=(TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1)

log() { printf 'ci: %s\n' "$*"; }

# Clang 14's sanitizer runtimes assume the kernel's default mmap ASLR entropy
# (vm.mmap_rnd_bits = 28 on x86_64). Kernels configured with more (32, as some
# distributions ship) place mappings where the runtime does not expect them:
# TSan dies with "FATAL: ThreadSanitizer: unexpected memory mapping" and ASan
# intermittently crashes at start-up (both reproduced on this 6.18 kernel by
# setting the sysctl to 32). See google/sanitizers issues #1716 (TSan) and
# #1614 (ASan); TSan re-executes itself without ASLR only from LLVM 18
# (llvm-project commit 0784b1eefa36), and Debian 12 has clang 14.
#
# Chosen fix, applied only when a probe shows the problem: run the tests under
# `setarch $(uname -m) -R` via `meson test --wrapper`. It turns ASLR off for
# that process tree only (the personality is inherited across fork and exec),
# needs no privileges and changes nothing on the machine, and the sanitizers
# instrument and check exactly as before. Lowering vm.mmap_rnd_bits would
# also work as root, but it changes the whole machine's ASLR for every other
# process and outlives the run.
sanitizer_wrapper=
probe_done=0
probe_aslr() {
	((probe_done)) && return
	probe_done=1
	local d=$out/aslr-probe bits
	mkdir -p "$d"
	printf '%s\n' '#include <pthread.h>' \
		'static int n;' \
		'static void *f(void *a) { __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED); return a; }' \
		'int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); f(0);' \
		'	pthread_join(t, 0); return n == 2 ? 0 : 1; }' >"$d/probe.c"
	if ! clang -fsanitize=thread -g "$d/probe.c" -o "$d/probe" 2>"$d/build.log"; then
		log "TSan probe does not build (is libclang-rt-14-dev installed?):"
		cat "$d/build.log"
		return # the tsan configuration itself will then fail to build
	fi
	local fails=0
	for _ in 1 2 3; do
		"$d/probe" >/dev/null 2>"$d/run.log" || fails=$((fails + 1))
		[[ -s $d/run.log ]] || echo "(crashed or exited without a message)" >"$d/run.log"
	done
	bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo "?")
	if ((fails == 0)) && [[ $bits == "?" || $bits -le 28 ]]; then
		log "sanitizer runtimes work with this kernel's ASLR (vm.mmap_rnd_bits=$bits)"
		return
	fi
	local wrap
	wrap="setarch $(uname -m) -R"
	if $wrap "$d/probe" >/dev/null 2>"$d/run-norandom.log"; then
		sanitizer_wrapper=$wrap
		log "ASLR entropy too high for clang 14 sanitizers (vm.mmap_rnd_bits=$bits," \
			"probe failed $fails/3: $(head -c 200 "$d/run.log"));" \
			"running sanitizer tests under '$wrap'"
	else
		log "TSan probe fails even under '$wrap':"
		cat "$d/run-norandom.log"
	fi
}

# The suite rdma. Where this host has no RDMA device, the whole suite runs
# in one lab VM (vmlab.sh --rw shares the build directory writable, so
# meson runs inside and writes its log there): one boot instead of one a
# test, ~5 s each under emulation, the same tests on the same soft-RoCE.
# Where the lab cannot start (vmlab.sh says skip, 77), meson runs the suite
# here, and each test records the lab's reason as its skip.
run_rdma_suite() { # build-dir env-assignment...
	local dir=$1 rc=0
	shift
	local cmd=(meson test -C "$dir" --no-rebuild --setup rdma --suite rdma --print-errorlogs)
	if compgen -G '/sys/class/infiniband/*' >/dev/null; then
		env "$@" "${cmd[@]}"
		return
	fi
	# | cat: inside, meson's output is the VM's serial port, a terminal,
	# and would draw progress bars into the CI log.
	env "$@" bash tests/rdma/vmlab.sh --quiet --rw "$dir" --timeout 3000 -- \
		bash -c 'set -o pipefail; "$@" | cat' rdma-suite "${cmd[@]}" || rc=$?
	if ((rc == 77)); then
		env "$@" "${cmd[@]}"
		return
	fi
	return $rc
}

summary_args=()
timings=()
failed_steps=0

run_config() {
	local cfg=$1 dir=$out/$1 cc cxx opts=() envs=() test_args=()
	test_args=(--num-processes 2 --print-errorlogs)
	case $cfg in
	gcc)
		cc=gcc cxx=g++
		opts=(-Dwerror=true)
		;;
	asan)
		cc=clang cxx=clang++
		# shellcheck disable=SC2054 # the comma belongs to the option value
		# -Dtorch=disabled: the PyTorch module runs in Debian's python3,
		# which cannot load a sanitized module (tests/meson.build).
		opts=(-Db_sanitize=address,undefined -Db_lundef=false -Dtorch=disabled)
		envs=("${asan_env[@]}")
		# ASan slows code about 2x; the tests' own timeouts are set for
		# uninstrumented builds.
		test_args+=(--timeout-multiplier 2)
		# The launchers suite runs here too: srun, sbatch and mpirun
		# start ASan-built ranks. libpmix leaks two strings of its own
		# at exit; tests/launchers/lsan-libpmix.supp suppresses exactly
		# those (run.sh sets it, with the slow unwinder that sees them).
		# Under the ASLR wrapper below, run.sh gives the ranks slurmd
		# starts the same personality.
		;;
	tsan)
		cc=clang cxx=clang++
		opts=(-Db_sanitize=thread -Db_lundef=false -Dtorch=disabled)
		envs=("${tsan_env[@]}")
		# TSan slows code 5-15x, and more on two cores under contention.
		test_args+=(--timeout-multiplier 4)
		# Not dpdk_port_memif: DPDK's memif driver and EAL share state
		# between the caller's thread and DPDK's eal-intr-thread under
		# DPDK's own spinlocks, which uninstrumented DPDK hides from TSan
		# (reported: memif's close against recvmsg on its socket,
		# rte_intr_callback_unregister against _register, intr instance
		# copies). The other dpdk tests run under TSan; memif runs in
		# the gcc and ASan builds.
		test_args+=(--no-suite dpdk_memif)
		# Not the launchers suite: libpmix's and Open MPI's progress
		# threads are not instrumented, so TSan cannot see their
		# synchronisation with ours; gcc and ASan run it.
		test_args+=(--no-suite launchers)
		# Not the jobs of 7 or more processes (suite many_ranks,
		# tests/meson.build): the threads TSan checks are the same at
		# 3 to 6 ranks, which it runs; gcc and ASan run all of them.
		test_args+=(--no-suite many_ranks)
		# Not the tools suite: its tests drive xport-perf and the
		# Python tools (plot, compare-*) through runs whose threads are
		# those of the unit tests TSan checks; under TSan they cost
		# about 110 s of the default run. gcc and ASan run them.
		test_args+=(--no-suite tools)
		;;
	esac
	if [[ $cfg != gcc ]]; then
		probe_aslr
		[[ -n $sanitizer_wrapper ]] && test_args+=(--wrapper "$sanitizer_wrapper")
	fi

	log "=== $cfg: $dir (CC=$cc ${opts[*]})"
	# Results of an earlier run must not be counted if this one never tests.
	# (With --wrapper, meson names it testlog-<wrapper>.json, hence the glob.)
	rm -f "$dir"/meson-logs/testlog*.json

	local ok=1
	if [[ -f $dir/meson-private/coredata.dat ]]; then
		meson setup --reconfigure "$dir" "${opts[@]}" ||
			CC=$cc CXX=$cxx meson setup --wipe "$dir" "${opts[@]}" || ok=0
	else
		rm -rf "$dir"
		CC=$cc CXX=$cxx meson setup "$dir" "${opts[@]}" || ok=0
	fi
	if ((ok)); then
		meson compile -C "$dir" || ok=0
	fi
	if ((!ok)); then
		log "$cfg: setup or build FAILED"
		summary_args+=(--result "$cfg/build=FAIL")
		failed_steps=$((failed_steps + 1))
		return
	fi

	# The summary reads every result from testlog.json; a run that writes
	# none counts as failed, and so does a meson test that fails with no
	# failed test in its log (an error of meson itself).
	local rc=0
	env "${envs[@]}" meson test -C "$dir" --no-rebuild "${test_args[@]}" || rc=$?
	local logs=("$dir"/meson-logs/testlog*.json)
	[[ -e ${logs[0]} ]] || logs=("$dir/meson-logs/testlog.json") # counted as missing
	local l
	for l in "${logs[@]}"; do
		summary_args+=("$cfg=$l")
	done
	if ((rc != 0)) && [[ -e ${logs[0]} ]] &&
		! grep -qE '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "${logs[@]}"; then
		summary_args+=(--result "$cfg/meson-test-exit-$rc=ERROR")
	fi

	if [[ $cfg == asan || ($cfg == gcc && ${CI_RDMA_GCC:-0} == 1) ]]; then
		# The suite rdma: real verbs on soft-RoCE, the whole suite in
		# one lab VM (run_rdma_suite; tests/rdma/vmlab.sh passes ASAN_*
		# and UBSAN_* in); its own testlog-rdma.json. Once, in the ASan
		# build, which checks what the gcc build would and more: a boot
		# and the suite under emulation cost ~3 min a configuration,
		# and two of them put the default run past its 30 minutes.
		# `bash ci/test.sh gcc` with CI_RDMA_GCC=1 runs it there too.
		# Not under TSan: its 5-15x on top of emulation's 10-50x
		# outlasts the timeouts. The VM runs Debian's kernel, so no
		# ASLR wrapper.
		log "$cfg: the RDMA suite in the lab VM"
		rc=0
		run_rdma_suite "$dir" "${envs[@]}" || rc=$?
		if [[ -e $dir/meson-logs/testlog-rdma.json ]]; then
			summary_args+=("$cfg=$dir/meson-logs/testlog-rdma.json")
			((rc == 0)) || grep -qE '"result": "(FAIL|TIMEOUT|ERROR)"' \
				"$dir/meson-logs/testlog-rdma.json" ||
				summary_args+=(--result "$cfg/rdma-meson-test-exit-$rc=ERROR")
		else
			summary_args+=(--result "$cfg/rdma-no-testlog=FAIL")
		fi
	fi
	if [[ $cfg == gcc ]]; then
		log "$cfg: install-and-consume test"
		if CC=$cc CXX=$cxx bash ci/install-test.sh "$dir"; then
			summary_args+=(--result "$cfg/install-consume=OK")
		else
			summary_args+=(--result "$cfg/install-consume=FAIL")
		fi
	fi
}

# The fuzzers (ASan and UBSan) under the same ASLR fix as the sanitizer
# builds; each target's result is one test, a run that reports none fails.
run_fuzz() {
	probe_aslr
	local res=$out/fuzz-results.txt line any=0
	rm -f "$res"
	FUZZ_WRAPPER=$sanitizer_wrapper bash ci/fuzz.sh --results "$res"
	while IFS= read -r line; do
		summary_args+=(--result "$line")
		any=1
	done <"$res"
	((any)) || summary_args+=(--result "fuzz/no-results=FAIL")
}

# Reserve huge pages while the tests run (as root), so the pools' hugetlb
# path runs for real and not only its fallback; give back what was there.
hugepages_before=
if [[ -w /proc/sys/vm/nr_hugepages ]]; then
	hugepages_before=$(cat /proc/sys/vm/nr_hugepages)
	if ((hugepages_before < 512)); then
		echo 512 >/proc/sys/vm/nr_hugepages 2>/dev/null || true
		trap 'echo "$hugepages_before" >/proc/sys/vm/nr_hugepages' EXIT
	fi
	log "huge pages reserved: $(cat /proc/sys/vm/nr_hugepages) (were $hugepages_before)"
fi

# The one-node Slurm cluster of the launchers suite (tests/launchers),
# before any configuration's tests, so that they run rather than skip.
log "=== Slurm cluster for the launchers suite (tests/slurm/start.sh)"
slurm_rc=0
bash tests/slurm/start.sh || slurm_rc=$?
if ((slurm_rc != 0)); then
	log "the Slurm cluster did not start (exit $slurm_rc): the launchers suite's Slurm cases will skip or fail"
	summary_args+=(--result "slurm/start=FAIL")
fi

total_start=$SECONDS
log "=== lint: layering and formatting (ci/lint.sh)"
if bash ci/lint.sh; then
	summary_args+=(--result "lint/lint=OK")
else
	summary_args+=(--result "lint/lint=FAIL")
fi
for cfg in "${configs[@]}"; do
	start=$SECONDS
	if [[ $cfg == fuzz ]]; then
		run_fuzz
	else
		run_config "$cfg"
	fi
	timings+=("$cfg $((SECONDS - start)) s")
done

echo
durations=$(printf '%s, ' "${timings[@]}")
log "durations: ${durations}total $((SECONDS - total_start)) s"
log "summary:"
python3 ci/summarize-tests.py "${summary_args[@]}"
rc=$?
((failed_steps == 0)) || rc=1
exit $rc
