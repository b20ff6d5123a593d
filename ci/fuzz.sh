#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds the libFuzzer targets (tests/fuzz/fuzz_<name>.c) with clang in
# build-ci/fuzz and runs each for a bounded time on top of its committed
# corpus (tests/fuzz/corpus_<name>), as many at once as there are CPUs
# ($FUZZ_JOBS), each for its whole time. New inputs go to
# a scratch directory, never into the committed corpus; a crash, leak or
# sanitizer report is saved as build-ci/fuzz/artifacts/<name>-crash-<sha1>
# and fails that target.
#
# Usage: bash ci/fuzz.sh [--seconds N] [--merge] [--results FILE] [NAME...]
#   NAME         targets to run (default: every tests/fuzz/fuzz_*.c)
#   --seconds N  how long each target runs (default 20, or $FUZZ_SECONDS)
#   --merge      afterwards, add to tests/fuzz/corpus_<name> the inputs of
#                this run that reach new coverage (libFuzzer -merge=1),
#                to be reviewed and committed:
#                  bash ci/fuzz.sh --merge && git add tests/fuzz/corpus_*
#                Only inputs that add coverage are kept, so the committed
#                corpus stays at tens of files per target.
#   --results F  also write one line "fuzz/<name>=OK|FAIL" per target to F
#                (ci/test.sh counts them as tests)
# $FUZZ_WRAPPER, if set, prefixes each fuzzer's command line (ci/test.sh
# passes its setarch wrapper when the sanitizers need ASLR off).
#
# Prints one line per target and, last, "fuzz: N passed, N failed". Exits 1
# if any target failed or the build did.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
dir=build-ci/fuzz
seconds=${FUZZ_SECONDS:-20}
merge=0
results=
names=()
while (($#)); do
	case $1 in
	--seconds)
		seconds=${2:?--seconds needs a number}
		shift
		;;
	--merge) merge=1 ;;
	--results)
		results=${2:?--results needs a file}
		shift
		;;
	-*)
		sed -n '4,24s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	*) names+=("$1") ;;
	esac
	shift
done
if ((${#names[@]} == 0)); then
	for f in tests/fuzz/fuzz_*.c; do
		n=${f#tests/fuzz/fuzz_}
		names+=("${n%.c}")
	done
fi
mkdir -p build-ci
[[ -n $results ]] && : >"$results"

log() { printf 'fuzz: %s\n' "$*"; }
record() { # name result
	[[ -n $results ]] && echo "fuzz/$1=$2" >>"$results"
	return 0
}

# Fuzzers need clang; the build has no sanitizer option, so meson.build
# gives the fuzzers ASan and UBSan itself.
ok=1
if [[ -f $dir/meson-private/coredata.dat ]]; then
	meson setup --reconfigure "$dir" >"$dir.setup.log" 2>&1 || ok=0
else
	rm -rf "$dir"
	CC=clang CXX=clang++ meson setup "$dir" >"$dir.setup.log" 2>&1 || ok=0
fi
targets=()
for n in "${names[@]}"; do
	targets+=("tests/fuzz_$n")
done
if ((ok)); then
	ninja -C "$dir" -j2 "${targets[@]}" >"$dir.build.log" 2>&1 || ok=0
fi
if ((!ok)); then
	log "setup or build FAILED (see $dir.setup.log, $dir.build.log):"
	tail -20 "$dir.setup.log" "$dir.build.log" 2>/dev/null
	for n in "${names[@]}"; do
		record "$n" FAIL
	done
	log "0 passed, ${#names[@]} failed"
	exit 1
fi

# Meson 1.0 sets no sanitizer options: without halt_on_error UBSan only
# prints; libFuzzer itself treats an ASan report as a crash.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
read -r -a wrapper <<<"${FUZZ_WRAPPER:-}"
mkdir -p "$dir/artifacts"
# The targets run side by side, as many at a time as there are CPUs
# ($FUZZ_JOBS): each still gets its full time, the run takes a fraction.
run_target() { # name: runs one target, writes its exit status to $dir/rc_<name>
	local n=$1 corpus=tests/fuzz/corpus_$1 work=$dir/new/$1
	rm -rf "$work"
	mkdir -p "$work" "$corpus"
	# The first corpus directory receives new inputs: the scratch one.
	"${wrapper[@]}" "$dir/tests/fuzz_$n" -max_total_time="$seconds" -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$dir/artifacts/$n-" \
		"$work" "$corpus" >"$dir/fuzz_$n.log" 2>&1
	echo $? >"$dir/rc_$n"
}
parallel=${FUZZ_JOBS:-$(nproc)}
for n in "${names[@]}"; do
	while (($(jobs -rp | wc -l) >= parallel)); do
		wait -n
	done
	run_target "$n" &
done
wait

passed=0 failed=0
for n in "${names[@]}"; do
	corpus=tests/fuzz/corpus_$n
	work=$dir/new/$n
	out=$dir/fuzz_$n.log
	rc=$(cat "$dir/rc_$n" 2>/dev/null || echo 1)
	cov=$(grep -Eo 'cov: [0-9]+' "$out" | tail -1)
	runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$out" | grep -Eo '[0-9]+$')
	if ((rc == 0)); then
		log "$n: OK (${cov:-cov: ?}, ${runs:-?} runs in $seconds s, $(find "$work" -type f | wc -l) new inputs)"
		record "$n" OK
		passed=$((passed + 1))
	else
		log "$n: FAILED (exit $rc; $out):"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|.*(Test unit written|deadly signal|ABRT))' "$out" |
			head -10
		record "$n" FAIL
		failed=$((failed + 1))
		continue
	fi
	if ((merge)); then
		before=$(find "$corpus" -type f | wc -l)
		if "${wrapper[@]}" "$dir/tests/fuzz_$n" -merge=1 "$corpus" "$work" \
			>"$dir/merge_$n.log" 2>&1; then
			log "$n: corpus $before -> $(find "$corpus" -type f | wc -l) files ($corpus)"
		else
			log "$n: merge FAILED ($dir/merge_$n.log)"
		fi
	fi
done
log "$passed passed, $failed failed"
((failed == 0))
