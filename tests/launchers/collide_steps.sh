#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Inside a Slurm allocation of 4 tasks (run.sh's collide-* cases): steps 0
# and 20 of one job side by side, whose derived rendezvous ports are the
# same (xpi_slurm_port: step mod 20). Step 0 ("a") holds its rendezvous
# open: its rank 1 joins only after step 20 ("b") has ended, so step 20
# always starts while step 0's rank 0 listens. Steps 1 to 19 are empty.
# Job ids 600 apart would collide too, but Slurm 22.05 lets nobody choose
# a job id (no salloc/sbatch --jobid), and 600 jobs take minutes.
#
# Usage: collide_steps.sh MPI JOB_CHECK DIR
# Writes DIR/a and DIR/b (each step's output, then "rc=N secs=S"), DIR/ids
# ("<job> <step of a> <step of b>").
set -uo pipefail
mpi=$1 job_check=$2 dir=$3

# Each task prints its step, then runs job_check; rank 1 of step 0 first
# waits for DIR/b.done (at most 30 s: the boot timeout).
# shellcheck disable=SC2016 # expanded by each task's bash
task='echo "step $SLURM_JOB_ID.$SLURM_STEP_ID"
if [[ $HOLD == 1 && $SLURM_PROCID == 1 ]]; then
	for _ in $(seq 300); do [[ -e $DIR/b.done ]] && break; sleep 0.1; done
fi
exec "$JOB_CHECK" 2'
export DIR=$dir JOB_CHECK=$job_check

step() { # name hold
	local start=$SECONDS rc=0
	HOLD=$2 srun -n 2 --exact --mpi="$mpi" bash -c "$task" >"$dir/$1" 2>&1 || rc=$?
	echo "rc=$rc secs=$((SECONDS - start))" >>"$dir/$1"
}

step a 1 &
# Step 0 is under way before the empty steps take ids 1 to 19.
for _ in $(seq 50); do
	grep -q "^step " "$dir/a" 2>/dev/null && break
	sleep 0.1
done
for _ in $(seq 19); do srun -n 1 --exact true; done
step b 0
touch "$dir/b.done"
wait
ids() { sed -n 's/^step \([0-9]*\)\.\([0-9]*\)$/\1 \2/p' "$dir/$1" | head -1; }
read -r job sa < <(ids a)
read -r _ sb < <(ids b)
echo "$job $sa $sb" >"$dir/ids"
