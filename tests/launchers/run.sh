#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Jobs started by real launchers on this host's one-node Slurm cluster
# (tests/slurm/start.sh), real Open MPI and real torchrun, each checked by
# its program (job_check.c: the size and an allreduce of the ranks;
# torch_check.py the same through the PyTorch backend). Everything talks
# over loopback (XP_SOCKET_IFNAME=lo). One case per run:
#
#   srun-none srun-pmi2 srun-pmix   srun -n 4 --mpi=X: a job of 4, no address
#                 (pmix: every control operation through PMIx)
#   sbatch        a batch script: a step of 4, then two steps of 2 side by side
#   mpirun        mpirun -np 4, no xport variable: formed through PMIx (no
#                 warning about a missing key), every control operation
#                 through PMIx, with no rendezvous socket
#   pmix-control srun-pmix-control  boot_check under mpirun -np 4 (srun
#                 -n 4 --mpi=pmix): the control channel through PMIx alone
#                 (allgathers checked slot by slot, a barrier, lengths that
#                 differ refused on every rank)
#   pmix-rank-leaves srun-pmix-rank-leaves  mpirun -np 4 (srun) where rank 2
#                 refuses its settings while the job forms: the others fail
#                 at once, naming rank 2 and its reason (which PMIx carried)
#   salloc-mpirun mpirun -np 4 inside salloc -n 4: no "launchers disagree"
#   torchrun-adjacent  two torchrun jobs at once on master ports P and P+1
#   collide-none collide-pmi2 collide-pmix  steps 0 and 20 of one job side
#                 by side (collide_steps.sh), whose derived ports coincide:
#                 under --mpi=none step 20 fails at once, both ranks naming
#                 the port; under pmi2 and pmix both form (kernel-chosen
#                 ports published through the launcher)
#   pmi2-rank0-fails pmix-rank0-fails  rank 0 cannot make its id (a wrong
#                 XP_SOCKET_IFNAME on rank 0 alone): every rank fails at
#                 once with rank 0's reason
#
# Usage: run.sh CASE JOB_CHECK [PYTHON PYTHONPATH TORCH_WHY]
# Exits 0 (pass), 1 (fail), 77 (skip: the launcher or the cluster is not
# here, with the reason).
set -uo pipefail

case_=$1 job_check=$2 py=${3:-} pypath=${4:-} torch_why=${5:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
boot_check=$(dirname "$job_check")/boot_check
trap 'rm -rf "$tmp"' EXIT

export XP_SOCKET_IFNAME=lo XP_BOOT_TIMEOUT_MS=30000
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's own traffic on loopback too, and no warning about the host's
# other interfaces.
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
unset XP_ADDR XP_RANK XP_SIZE XP_JOB_KEY MASTER_ADDR MASTER_PORT
# ASan builds: libpmix's own leaks at exit are not ours (the file says
# which). They are told by the function inside libpmix that made them,
# which only the slow unwinder sees (libpmix has no frame pointers); srun
# and mpirun pass both variables on to the ranks.
export LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan-libpmix.supp:print_suppressions=0
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0

# Under ci/test.sh's ASLR fix for sanitizer builds (meson test --wrapper
# 'setarch ... -R': no address randomization for this process tree), the
# ranks that slurmd starts are not in this tree: they get it back through
# a wrapper, or clang 14's ASan may crash at start on kernels with more
# mmap entropy (see ci/test.sh).
persona=$(cat /proc/self/personality 2>/dev/null || echo 0) # hex
if (((16#$persona) & 0x0040000)); then
	# shellcheck disable=SC2016 # expanded by the wrapper
	printf '#!/bin/sh\nexec setarch "$(uname -m)" -R %q "$@"\n' "$job_check" >"$tmp/job_check"
	chmod +x "$tmp/job_check"
	job_check=$tmp/job_check
fi

skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

need_slurm() {
	local out rc=0
	out=$(bash "$here/../slurm/start.sh" 2>&1) || rc=$?
	((rc == 77)) && skip "no Slurm cluster: ${out##*$'\n'}"
	((rc == 0)) || fail "the test cluster did not start: $out"
	export SLURM_CONF=${out##*SLURM_CONF=}
}
need_mpirun() { command -v mpirun >/dev/null || skip "no mpirun (apt-get install openmpi-bin)"; }

# Expects @1 lines "<what>: rank R of N ok" for R = 0..N-1 in file @2.
expect_ok() { # n file what
	local n=$1 f=$2 what=${3:-job_check} r
	for ((r = 0; r < n; r++)); do
		grep -Eq "(^|\]:)$what: rank $r of $n ok" "$f" || { cat "$f"; fail "rank $r of $n did not report ok"; }
	done
}

run() { # timeout-seconds command...: output in $tmp/out
	local t=$1
	shift
	echo "+ $*"
	timeout "$t" "$@" >"$tmp/out" 2>&1
	local rc=$?
	cat "$tmp/out"
	return $rc
}

case $case_ in
srun-none | srun-pmi2 | srun-pmix)
	need_slurm
	XP_LOG_LEVEL=info run 60 srun -n 4 --mpi="${case_#srun-}" "$job_check" 4 || fail "srun failed"
	expect_ok 4 "$tmp/out"
	if [[ $case_ == srun-pmix ]]; then
		# PMIx's key: nobody set one, and nobody is warned.
		grep -q "XP_JOB_KEY is not set" "$tmp/out" && fail "PMIx gave no key"
		[[ $(grep -c "job formed (launcher PMIx, no rendezvous socket" "$tmp/out") == 4 ]] ||
			fail "not every rank formed the job through PMIx alone"
	fi
	;;
sbatch)
	need_slurm
	cat >"$tmp/job.sh" <<SCRIPT
#!/bin/bash
srun -n 4 "$job_check" 4 || exit 1
srun -n 4 "$job_check" 4 || exit 1
srun -n 2 --exact "$job_check" 2 > "$tmp/a" 2>&1 &
srun -n 2 --exact "$job_check" 2 > "$tmp/b" 2>&1 &
wait %1 || exit 1
wait %2 || exit 1
SCRIPT
	run 120 sbatch --wait -n 4 -o "$tmp/job.out" "$tmp/job.sh" || { cat "$tmp/job.out"; fail "the batch job failed"; }
	cat "$tmp/job.out" "$tmp/a" "$tmp/b"
	[[ $(grep -c "^job_check: rank 0 of 4 ok" "$tmp/job.out") == 2 ]] || fail "the two steps of 4 in sequence"
	expect_ok 4 "$tmp/job.out"
	expect_ok 2 "$tmp/a"
	expect_ok 2 "$tmp/b"
	;;
mpirun)
	need_mpirun
	run 60 mpirun -np 4 --oversubscribe -x XP_LOG_LEVEL=info "$job_check" 4 || fail "mpirun failed"
	expect_ok 4 "$tmp/out"
	grep -q "XP_JOB_KEY is not set" "$tmp/out" && fail "not formed through PMIx (a key warning)"
	[[ $(grep -c "job formed (launcher PMIx, no rendezvous socket" "$tmp/out") == 4 ]] ||
		fail "not every rank formed the job through PMIx alone"
	;;
pmix-control | srun-pmix-control)
	if [[ $case_ == srun-* ]]; then
		need_slurm
		launch=(env XP_LOG_LEVEL=info srun -n 4 --mpi=pmix)
	else
		need_mpirun
		launch=(mpirun -np 4 --oversubscribe -x XP_LOG_LEVEL=info)
	fi
	run 60 "${launch[@]}" "$boot_check" 4 mismatch || fail "the launcher failed"
	expect_ok 4 "$tmp/out" boot_check
	[[ $(grep -c "job formed (launcher PMIx, no rendezvous socket" "$tmp/out") == 4 ]] ||
		fail "not every rank formed the job through PMIx alone"
	[[ $(grep -c "^boot_check: rank [0-3]: refused: .*contributed" "$tmp/out") == 4 ]] ||
		fail "not every rank refused the lengths that differ"
	;;
pmix-rank-leaves | srun-pmix-rank-leaves)
	if [[ $case_ == srun-* ]]; then
		need_slurm
		launch=(srun -n 4 --mpi=pmix)
		rank_var=SLURM_PROCID
	else
		need_mpirun
		launch=(mpirun -np 4 --oversubscribe)
		rank_var=OMPI_COMM_WORLD_RANK
	fi
	start=$SECONDS
	# Every rank's exit is held back 3 s: mpirun stops the job at the
	# first rank that fails, and each must have said what it saw first.
	# shellcheck disable=SC2016 # expanded by each rank's bash
	run 60 "${launch[@]}" bash -c \
		'[[ ${!1} == 2 ]] && export XP_TRANSPORTS=bogus; "$0" 4; rc=$?; sleep 3; exit $rc' \
		"$job_check" "$rank_var" && fail "the job formed without rank 2"
	((SECONDS - start <= 15)) || fail "took $((SECONDS - start)) s to fail (boot timeout 30 s)"
	grep -q "^job_check: xp_init: .*XP_TRANSPORTS=bogus is not accepted" "$tmp/out" ||
		fail "rank 2 did not say why"
	[[ $(grep -c "^job_check: xp_init: .*rank 2 left the job: XP_TRANSPORTS=bogus" "$tmp/out") == 3 ]] ||
		fail "not every other rank failed naming rank 2 and its reason"
	;;
salloc-mpirun)
	need_mpirun
	need_slurm
	run 120 salloc -n 4 mpirun -np 4 --oversubscribe "$job_check" 4 || fail "salloc mpirun failed"
	expect_ok 4 "$tmp/out"
	grep -q "launchers disagree" "$tmp/out" && fail "warned that launchers disagree"
	;;
torchrun-adjacent)
	[[ -n $torch_why ]] && skip "PyTorch backend $torch_why"
	[[ -x $py ]] || skip "no Python with torch"
	# Two free ports P and P+1: one job's MASTER_PORT is the other's + 1.
	p=$("$py" - <<'PY'
import socket
for base in range(29600, 30600, 7):
    try:
        a = socket.socket(); a.bind(("127.0.0.1", base))
        b = socket.socket(); b.bind(("127.0.0.1", base + 1))
        a.close(); b.close(); print(base); break
    except OSError:
        pass
PY
)
	[[ -n $p ]] || skip "no two adjacent free ports"
	tr=("$py" -m torch.distributed.run --redirects 1 --tee 1 --nnodes 1 --nproc_per_node 2
		--master_addr 127.0.0.1)
	for port in "$p" "$((p + 1))"; do
		echo "+ torchrun --master_port $port torch_check.py 2"
		PYTHONPATH=$pypath timeout 120 "${tr[@]}" --master_port "$port" \
			"$here/torch_check.py" 2 >"$tmp/t$port" 2>&1 &
	done
	rc=0
	wait %1 || rc=1
	wait %2 || rc=1
	cat "$tmp/t$p" "$tmp/t$((p + 1))"
	((rc == 0)) || fail "a torchrun job failed"
	expect_ok 2 "$tmp/t$p" torch_check
	expect_ok 2 "$tmp/t$((p + 1))" torch_check
	;;
collide-none | collide-pmi2 | collide-pmix)
	need_slurm
	mpi=${case_#collide-}
	# The log line "job formed (launcher ...)" says how each rank formed it.
	export XP_LOG_LEVEL=info
	run 120 salloc -n 4 bash "$here/collide_steps.sh" "$mpi" "$job_check" "$tmp" ||
		fail "the allocation failed"
	echo "--- step a"; cat "$tmp/a"; echo "--- step b"; cat "$tmp/b"
	read -r job sa sb <"$tmp/ids" || fail "no step ids"
	# The premise: the two steps' derived ports are the same.
	((sa % 20 == sb % 20 && sa != sb)) || fail "steps $sa and $sb do not share a derived port"
	port=$((20000 + job % 600 * 20 + sa % 20))
	echo "steps $job.$sa and $job.$sb: derived port $port for both"
	expect_ok 2 "$tmp/a"
	secs=$(sed -n 's/^rc=[0-9]* secs=//p' "$tmp/b")
	if [[ $mpi == none ]]; then
		# The colliding step fails at once, every rank naming the port.
		grep -q "^rc=0 " "$tmp/b" && fail "step $sb formed on a port step $sa held"
		((secs <= 5)) || fail "step $sb took $secs s to fail (boot timeout 30 s)"
		[[ $(grep -c "^job_check: xp_init: .*[: ]${port}[ )]" "$tmp/b") == 2 ]] ||
			fail "not both ranks of step $sb failed naming port $port"
	else
		# Both form, through the launcher's service, not the port.
		expect_ok 2 "$tmp/b"
		want=$([[ $mpi == pmi2 ]] && echo "Slurm (PMI-2)" || echo PMIx)
		[[ $(cat "$tmp/a" "$tmp/b" | grep -c "job formed (launcher $want,") == 4 ]] ||
			fail "not every rank formed its job through $want"
	fi
	;;
pmi2-rank0-fails | pmix-rank0-fails)
	need_slurm
	mpi=${case_%-rank0-fails}
	start=$SECONDS
	# shellcheck disable=SC2016 # expanded by each task's bash
	run 60 srun -n 3 --mpi="$mpi" bash -c \
		'[[ $SLURM_PROCID == 0 ]] && export XP_SOCKET_IFNAME=xp-no-such0; exec "$0" 3' \
		"$job_check" && fail "the job formed without rank 0"
	((SECONDS - start <= 10)) || fail "took $((SECONDS - start)) s to fail (boot timeout 30 s)"
	[[ $(grep -c "^job_check: xp_init: .*XP_SOCKET_IFNAME=xp-no-such0" "$tmp/out") == 3 ]] ||
		fail "not every rank failed with rank 0's reason"
	;;
*)
	echo "run.sh: unknown case $case_" >&2
	exit 2
	;;
esac
echo "ok: $case_"
