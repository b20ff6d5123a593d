#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Starts a one-node Slurm cluster on this host for the launcher tests
# (tests/launchers/): munged, slurmctld and slurmd, as root, with the
# configuration written to $XPT_SLURM_DIR (default /var/tmp/xport-slurm)
# rather than /etc/slurm, so that a host with a Slurm of its own keeps it.
# Idempotent: daemons already answering are left alone, so every build
# directory and worktree shares one cluster.
#
# Prints "SLURM_CONF=<path>" as its last line; the tests read the same path.
# Exits 0 when `srun hostname` works, 77 (skip) when Slurm or munge is not
# installed or this is not root, 1 when the daemons do not come up (their
# logs are printed).
#
# The node: CPUs=16 on however many cores there are (SlurmdParameters=
# config_overrides), so jobs of 4 tasks and steps side by side fit on a
# 2-core machine without --overcommit; OverSubscribe=FORCE lets jobs share
# them. proctrack/linuxproc and task/none: no cgroups in a container.
set -uo pipefail

dir=${XPT_SLURM_DIR:-/var/tmp/xport-slurm}
conf=$dir/slurm.conf
host=$(hostname -s)

say() { printf 'slurm: %s\n' "$*" >&2; }

for p in munged slurmctld slurmd srun scontrol; do
	if ! command -v "$p" >/dev/null; then
		say "$p not found (apt-get install slurm-wlm munge): skipped"
		exit 77
	fi
done
if ((EUID != 0)); then
	say "not root: the test cluster runs its daemons as root: skipped"
	exit 77
fi

mkdir -p "$dir"/state "$dir"/spool "$dir"/log
new=$(mktemp "$dir/slurm.conf.XXXXXX")
cat >"$new" <<CONF
# Written by tests/slurm/start.sh: a one-node cluster for xport's tests.
ClusterName=xport
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=10
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF

export SLURM_CONF=$conf

up() { timeout 5 srun -N1 -n1 -t 1 true >/dev/null 2>&1; }

# The configuration is the same and the daemons answer: nothing to do.
if cmp -s "$new" "$conf" && up; then
	rm -f "$new"
	say "already running"
	echo "SLURM_CONF=$conf"
	exit 0
fi
mv "$new" "$conf"

# munged: as the munge user, with its key (made once if the package did not).
if ! timeout 5 munge -n </dev/null >/dev/null 2>&1; then
	install -d -o munge -g munge -m 0755 /run/munge
	install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge /etc/munge
	[[ -s /etc/munge/munge.key ]] || runuser -u munge -- mungekey --create
	runuser -u munge -- munged || { say "munged failed to start"; exit 1; }
	for _ in $(seq 50); do
		timeout 5 munge -n </dev/null >/dev/null 2>&1 && break
		sleep 0.1
	done
fi

# Old daemons (another configuration, or hung): stop them by their pid files.
for d in slurmd slurmctld; do
	if [[ -s $dir/$d.pid ]]; then
		pid=$(cat "$dir/$d.pid")
		if kill -0 "$pid" 2>/dev/null && [[ $(cat /proc/"$pid"/comm) == "$d"* ]]; then
			kill "$pid"
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
		rm -f "$dir/$d.pid"
	fi
done

# -c: clear state left by an earlier run (its jobs are gone with it).
slurmctld -c -f "$conf" || { say "slurmctld failed to start"; tail -20 "$dir/log/slurmctld.log" >&2; exit 1; }
slurmd -f "$conf" || { say "slurmd failed to start"; tail -20 "$dir/log/slurmd.log" >&2; exit 1; }

for _ in $(seq 100); do
	if up; then
		scontrol update nodename="$host" state=resume >/dev/null 2>&1
		say "up: one node $host, configuration $conf"
		echo "SLURM_CONF=$conf"
		exit 0
	fi
	sleep 0.2
done
say "the daemons did not come up; their logs end with:"
tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2
exit 1
