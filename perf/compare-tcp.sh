#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# compare-tcp.sh: xport's TCP transport beside UCX (ucx_perftest over
# UCX_TLS=tcp) and plain sockets (perf/sock-baseline), measured in one run on
# this machine: 8-byte one-way latency and 1 MiB bandwidth, medians across
# interleaved rounds, and the ratios xport/UCX and xport/socket.
#
# With --transport shm, the same for shared memory between two processes of
# this host: xport's shm transport beside UCX (ucx_perftest over
# UCX_TLS=posix) and Open MPI's vader BTL (perf/mpi_baseline.c, built here
# with mpicc and run by mpirun), with the ratios xport/UCX and xport/vader.
#
# Why rounds: on this shared 2-vCPU machine the spread between rounds is
# often 2-5x (lab BASELINES.md), so figures are only compared when measured
# side by side. Each round runs every measurement once; the order rotates
# from round to round so no tool always runs first or last.
#
# The xport rows switch themselves on: the script runs
# `xprun -n 2 BUILDDIR/perf/xport-perf lat --transport tcp|shm ...` once, and if
# it succeeds and prints a JSON row, xport joins the rounds. Until then its rows
# read "not available yet" with the reason.
#
# --json-out FILE writes every row measured, of every tool and round, as JSON
# lines in xport-perf's schema plus "system" (xport, ucx, sock, openmpi),
# "variant", "round" and "command", after a first {"type":"run",...} object
# naming this script's command line: what perf/plot draws side by side.
#
# Every command runs under `timeout`; background servers are killed on exit,
# interrupt included (trap). Run with --help for the options.
set -uo pipefail
export LC_ALL=C # '.' decimals from awk and printf whatever the user's locale

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROG=perf/compare-tcp.sh

ROUNDS=3
TRANSPORT=tcp # or shm
BUILDDIR= # default: build/ in the repository root
PIN=1
INSTALL=1
CMD_TIMEOUT=60 # seconds, each benchmark command (a normal one takes 1-8 s)
LOGDIR=
KEEP_LOGS=0
JSON_OUT=
ORIG_ARGS=("$@")

# The UCX benchmark; another build of it can be named in the environment.
UCX_PERFTEST=${UCX_PERFTEST:-ucx_perftest}
# What is measured, as BASELINES.md ran UCX (its iteration counts).
UCX_LAT_ARGS=(-t tag_lat -s 8 -n 50000 -w 5000)
UCX_BW_ARGS=(-t tag_bw -s 1048576 -n 3000 -w 300)

# Open MPI (--transport shm), as BASELINES.md ran it: ob1 over the vader BTL.
# Its 18 GB/s at 1 MiB was vader without a single-copy mechanism (copies
# through its shared buffers); vader's default, cross-memory attach (CMA),
# gave 8.9 GB/s there. Both are measured: the first is the baseline, the
# second is the same mechanism as xport's own large messages (process_vm_readv).
# mpi-baseline receives a window into distinct buffers, as xport-perf does;
# 18 GB/s was only reached here with every receive into one buffer (as osu_bw
# and ucx_perftest do: the receiver's copies stay in its cache), so that is
# measured too (--one-buffer).
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
MPI_NOCMA_ARGS=(--mca btl_vader_single_copy_mechanism none)

usage() {
	cat <<EOF
usage: $PROG [--transport tcp|shm] [--rounds N] [--builddir DIR] [--no-pin]
                            [--no-install] [--timeout S] [--logdir DIR]
                            [--json-out FILE] [--help]

Runs, on this machine and in one go, the TCP-over-loopback comparison:
  UCX      ucx_perftest tag_lat 8 B and tag_bw 1 MiB, UCX_TLS=tcp, 127.0.0.1
  socket   sock-baseline lat (blocking), lat-spin (spinning recv), bw (1 MiB)
  xport    BUILDDIR/tools/xprun -n 2 BUILDDIR/perf/xport-perf lat|bw
           --transport tcp --json (used as soon as it works; "not available
           yet" until then)
or, with --transport shm, the shared-memory one (two processes, this host):
  UCX      ucx_perftest tag_lat 8 B and tag_bw 1 MiB, UCX_TLS=posix
  Open MPI mpirun -np 2 --bind-to core --mca pml ob1 --mca btl self,vader
           BUILDDIR/perf/mpi-baseline lat|bw (perf/mpi_baseline.c, built with
           mpicc): 8 B ping-pong, and 1 MiB with a window of 64 without a
           single-copy mechanism (btl_vader_single_copy_mechanism none;
           receives into 64 buffers, as xport-perf, and into one, as
           ucx_perftest) and with vader's default (cross-memory attach)
  xport    BUILDDIR/tools/xprun -n 2 BUILDDIR/perf/xport-perf lat|bw
           --transport shm --json
in N interleaved rounds, then prints the medians across rounds side by side
(8 B one-way latency in us, 1 MiB bandwidth in GB/s = 10^9 B/s), the ratios
xport/UCX and xport/socket (shm: xport/UCX and xport/vader), and the exact
commands it ran.

  --transport T  tcp (default) or shm
  --rounds N     rounds (default $ROUNDS); a default run takes well under 3 minutes
  --builddir D   Meson build directory (default: build/ in the repository
                 root); 'meson setup' and ninja run there when needed
  --no-pin       leave placement to the scheduler (default: initiator/sender
                 on CPU 0, responder/receiver on CPU 1, for every tool)
  --no-install   do not apt-get install missing packages (ucx-utils, build
                 tools; shm: openmpi-bin, libopenmpi-dev); UCX (MPI) rows are
                 skipped with a note if ucx_perftest (mpicc, mpirun) is missing
  --timeout S    bound on each benchmark command (default $CMD_TIMEOUT s)
  --logdir DIR   keep every command's output in DIR (default: a temporary
                 directory, removed at exit unless something failed)
  --json-out F   also write every row measured (each tool, each round) to F
                 as JSON lines: xport-perf's keys (test, transport, protocol,
                 size, iters, lat_us_avg, lat_us_min, lat_us_p50, lat_us_p99,
                 bw_MBps; null where a tool does not measure it) plus system
                 (xport, ucx, sock, openmpi), variant, round and command,
                 after one {"type":"run",...} line with this command line;
                 for perf/plot
  -h, --help     this text

The xprun that starts xport-perf is always BUILDDIR/tools/xprun, built with
it, never one from PATH.

Environment: UCX_PERFTEST (default ucx_perftest) names another UCX build's
benchmark; MPICC and MPIRUN (default mpicc, mpirun) another MPI.

Exit status: 0 when every attempted measurement worked (UCX, MPI or xport
rows may be absent, with a note), 1 when one failed, 2 on a usage error.
EOF
}

die_usage() {
	echo "$PROG: $*" >&2
	echo "try $PROG --help" >&2
	exit 2
}

while (($# > 0)); do
	arg=$1
	val=
	case $arg in
	--*=*)
		val=${arg#*=}
		arg=${arg%%=*}
		;;
	esac
	case $arg in
	--rounds | --builddir | --timeout | --logdir | --transport | --json-out)
		if [[ -z $val ]]; then
			(($# >= 2)) || die_usage "$arg needs a value"
			val=$2
			shift
		fi
		;;
	esac
	case $arg in
	--rounds)
		if [[ ! $val =~ ^[0-9]+$ ]] || ((val < 1 || val > 99)); then
			die_usage "--rounds wants a count from 1 to 99"
		fi
		ROUNDS=$val
		;;
	--builddir) BUILDDIR=$val ;;
	--transport)
		case $val in
		tcp | shm) TRANSPORT=$val ;;
		*) die_usage "--transport wants tcp or shm" ;;
		esac
		;;
	--timeout)
		if [[ ! $val =~ ^[0-9]+$ ]] || ((val < 5)); then
			die_usage "--timeout wants seconds, at least 5"
		fi
		CMD_TIMEOUT=$val
		;;
	--logdir)
		LOGDIR=$val
		KEEP_LOGS=1
		;;
	--json-out) JSON_OUT=$val ;;
	--no-pin) PIN=0 ;;
	--no-install) INSTALL=0 ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die_usage "unknown argument '$1'" ;;
	esac
	shift
done

# The build directory as given, relative to the caller's directory; printed
# relative to the repository root when it lies inside, since every command
# runs from there.
BUILDDIR=$(realpath -m -- "${BUILDDIR:-$ROOT/build}")
[[ $BUILDDIR == "$ROOT"/* ]] && BUILDDIR=${BUILDDIR#"$ROOT"/}
if [[ -n $LOGDIR ]]; then
	LOGDIR=$(realpath -m -- "$LOGDIR")
fi
if [[ -n $JSON_OUT ]]; then
	JSON_OUT=$(realpath -m -- "$JSON_OUT")
	: >"$JSON_OUT" 2>/dev/null || die_usage "--json-out $JSON_OUT: cannot write it"
fi
cd "$ROOT" || exit 2

# ---------------------------------------------------------------------------
# Processes: everything started here is recorded until reaped, and killed on
# exit. Commands run in the background and are waited for, so an interrupt
# reaches the trap at once instead of after the running command.

declare -A LIVE_PIDS=()
TMP_LOGDIR=
FAILED=0      # a measurement or a step failed: exit status 1
KEEP_TMP=0    # keep the temporary logs (something went wrong, even if skipped)

# shellcheck disable=SC2317 # reached through the trap below
cleanup() {
	local pid
	trap - EXIT INT TERM
	# TERM first: timeout(1) forwards it to its command; KILL would not be.
	for pid in "${!LIVE_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${!LIVE_PIDS[@]}"; do
		for _ in {1..30}; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	if [[ -n $TMP_LOGDIR ]]; then
		if ((FAILED || KEEP_TMP)); then
			echo "$PROG: logs kept in $TMP_LOGDIR" >&2
		else
			rm -rf -- "$TMP_LOGDIR"
		fi
	fi
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted" >&2; FAILED=1; exit 130' INT
trap 'echo "$PROG: terminated" >&2; FAILED=1; exit 143' TERM

if [[ -z $LOGDIR ]]; then
	TMP_LOGDIR=$(mktemp -d /tmp/compare-tcp.XXXXXX) || exit 1
	LOGDIR=$TMP_LOGDIR
else
	mkdir -p -- "$LOGDIR" || exit 1
fi

# start_bg OUT ERR CMD...: runs CMD in the background; its pid in BG_PID.
start_bg() {
	local out=$1 err=$2
	shift 2
	"$@" >"$out" 2>"$err" &
	BG_PID=$!
	LIVE_PIDS[$BG_PID]=1
}

# finish_bg PID: waits for it; returns its exit status.
finish_bg() {
	local rc
	wait "$1"
	rc=$?
	unset "LIVE_PIDS[$1]"
	return $rc
}

# run_fg OUT ERR CMD...: runs CMD to its end; returns its exit status.
run_fg() {
	start_bg "$@"
	finish_bg "$BG_PID"
}

# The commands of round 1 (and of setup), as a reader would type them.
COMMANDS=()
shell_words() {
	local s
	printf -v s '%q ' "$@"
	s=${s//\\,/,} # %q escapes commas (self,vader), which the shell does not need
	printf '%s' "${s% }"
}
record() { # ROUND CMD...: notes the command when in round 1 (or setup, 0)
	local r=$1
	shift
	((r <= 1)) && COMMANDS+=("$(shell_words "$@")")
}

say() { echo "$PROG: $*" >&2; }

# tail_of FILE: its last lines, indented, for a failure message.
tail_of() {
	[[ -s $1 ]] && tail -n 5 -- "$1" | sed 's/^/    | /' >&2
}

# ---------------------------------------------------------------------------
# Setup: packages, build

SUDO=()
((EUID != 0)) && command -v sudo >/dev/null && SUDO=(sudo)

# apt_install PKG...: 0 when installed.
apt_install() {
	local log=$LOGDIR/apt-install.log
	if ((!INSTALL)); then
		return 1
	fi
	if ((EUID != 0 && ${#SUDO[@]} == 0)); then
		say "not root and no sudo: cannot install $*"
		return 1
	fi
	say "installing $* (apt-get)"
	record 0 "${SUDO[@]}" apt-get install -y --no-install-recommends "$@"
	if run_fg "$log" "$log" "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
		timeout -k 10 600 apt-get install -y -q --no-install-recommends "$@"; then
		return 0
	fi
	# Stale package lists are the usual cause: refresh once and retry.
	say "apt-get install failed; running apt-get update and retrying"
	run_fg "$log.update" "$log.update" "${SUDO[@]}" timeout -k 10 600 apt-get update -q &&
		run_fg "$log" "$log" "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
			timeout -k 10 600 apt-get install -y -q --no-install-recommends "$@" &&
		return 0
	tail_of "$log"
	return 1
}

UCX_OK=0
UCX_NOTE=
UCX_VERSION=
if [[ $TRANSPORT == tcp ]]; then
	UCX_TLS_VAL=tcp
else
	UCX_TLS_VAL=posix
fi
if command -v "$UCX_PERFTEST" >/dev/null; then
	UCX_OK=1
elif ((!INSTALL)); then
	UCX_NOTE="skipped: $UCX_PERFTEST not found and --no-install given (apt-get install ucx-utils)"
elif ! apt_install ucx-utils; then
	UCX_NOTE="skipped: ucx-utils could not be installed (apt-get install -y --no-install-recommends ucx-utils; log: $LOGDIR/apt-install.log)"
	KEEP_TMP=1 # a skip, not a failure; the log says why
elif ! command -v "$UCX_PERFTEST" >/dev/null; then
	UCX_NOTE="skipped: ucx-utils is installed but $UCX_PERFTEST is not found (PATH=$PATH)"
else
	UCX_OK=1
fi
if ((UCX_OK)); then
	UCX_VERSION=$(dpkg-query -W -f='${Version}' ucx-utils 2>/dev/null ||
		ucx_info -v 2>/dev/null | sed -n 's/^# Version //p')
else
	say "UCX rows $UCX_NOTE"
fi

if ! command -v meson >/dev/null || ! command -v ninja >/dev/null || ! command -v cc >/dev/null; then
	say "meson, ninja or a C compiler is missing: running ci/install-deps.sh"
	record 0 bash ci/install-deps.sh
	if ((!INSTALL)) || ! run_fg "$LOGDIR/install-deps.log" "$LOGDIR/install-deps.log" \
		timeout -k 10 900 bash ci/install-deps.sh; then
		say "cannot get the build tools (ci/install-deps.sh; --no-install given?)"
		tail_of "$LOGDIR/install-deps.log"
		FAILED=1
		exit 1
	fi
fi

if [[ ! -f $BUILDDIR/build.ninja ]]; then
	say "setting up $BUILDDIR (meson setup)"
	record 0 meson setup "$BUILDDIR"
	if ! run_fg "$LOGDIR/meson-setup.log" "$LOGDIR/meson-setup.log" \
		timeout -k 10 600 meson setup "$BUILDDIR"; then
		say "meson setup $BUILDDIR failed"
		tail_of "$LOGDIR/meson-setup.log"
		FAILED=1
		exit 1
	fi
fi
# Built one at a time: xport-perf follows the work in progress and may not
# build today; the socket baseline (tcp) must not depend on it. xprun is built
# with xport-perf, so that the launcher in the build directory is never older
# than the benchmark it starts.
SOCK=$BUILDDIR/perf/sock-baseline
XP=$BUILDDIR/perf/xport-perf
if [[ $TRANSPORT == tcp ]]; then
	record 0 ninja -C "$BUILDDIR" perf/sock-baseline
	if ! run_fg "$LOGDIR/ninja-sock.log" "$LOGDIR/ninja-sock.log" \
		timeout -k 10 900 ninja -C "$BUILDDIR" perf/sock-baseline; then
		say "building sock-baseline failed"
		tail_of "$LOGDIR/ninja-sock.log"
		FAILED=1
		exit 1
	fi
fi
XP_BUILT=1
record 0 ninja -C "$BUILDDIR" perf/xport-perf tools/xprun
if ! run_fg "$LOGDIR/ninja-xport.log" "$LOGDIR/ninja-xport.log" \
	timeout -k 10 900 ninja -C "$BUILDDIR" perf/xport-perf tools/xprun; then
	XP_BUILT=0
fi

# --- Open MPI (shm) ---------------------------------------------------------
# perf/mpi_baseline.c is compiled by mpicc into the build directory (out of
# git; not a Meson target, as Meson needs no MPI). A failure to install Open
# MPI skips its rows with a note; a failure to compile our program fails.
MPI_OK=0
MPI_NOTE=
MPI_VERSION=
MPI_BIN=$BUILDDIR/perf/mpi-baseline
if [[ $TRANSPORT == shm ]]; then
	if command -v "$MPICC" >/dev/null && command -v "$MPIRUN" >/dev/null; then
		MPI_OK=1
	elif ((!INSTALL)); then
		MPI_NOTE="skipped: $MPICC or $MPIRUN not found and --no-install given (apt-get install openmpi-bin libopenmpi-dev)"
	elif ! apt_install openmpi-bin libopenmpi-dev; then
		MPI_NOTE="skipped: Open MPI could not be installed (apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev; log: $LOGDIR/apt-install.log)"
		KEEP_TMP=1
	elif ! command -v "$MPICC" >/dev/null || ! command -v "$MPIRUN" >/dev/null; then
		MPI_NOTE="skipped: openmpi-bin and libopenmpi-dev are installed but $MPICC or $MPIRUN is not found (PATH=$PATH)"
	else
		MPI_OK=1
	fi
	if ((MPI_OK)); then
		mkdir -p -- "$(dirname -- "$MPI_BIN")"
		# The version meson gives the other programs (meson.project_version()).
		xp_version=$(meson introspect "$BUILDDIR" --projectinfo 2>/dev/null |
			grep -o '"version": *"[^"]*"' | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
		mpi_version_arg=(-DXPORT_VERSION_STRING="\"${xp_version:-unknown}\"")
		record 0 "$MPICC" -O2 -std=c11 -Wall -Wextra "${mpi_version_arg[@]}" -o "$MPI_BIN" \
			perf/mpi_baseline.c
		# Built beside, then moved, so a concurrent run never starts half a file.
		if ! run_fg "$LOGDIR/mpicc.log" "$LOGDIR/mpicc.log" timeout -k 10 300 \
			"$MPICC" -O2 -std=c11 -Wall -Wextra "${mpi_version_arg[@]}" \
			-o "$MPI_BIN.tmp.$$" perf/mpi_baseline.c ||
			! mv -f -- "$MPI_BIN.tmp.$$" "$MPI_BIN"; then
			rm -f -- "$MPI_BIN.tmp.$$"
			MPI_OK=0
			MPI_NOTE="failed: $MPICC could not build perf/mpi_baseline.c (log: $LOGDIR/mpicc.log)"
			say "MPI rows $MPI_NOTE"
			tail_of "$LOGDIR/mpicc.log"
			FAILED=1
		fi
	fi
	if ((MPI_OK)); then
		MPI_VERSION=$(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null ||
			"$MPIRUN" --version 2>/dev/null | sed -n '1s/.* //p')
	elif [[ $MPI_NOTE != failed:* ]]; then
		say "MPI rows $MPI_NOTE"
	fi
fi

# ---------------------------------------------------------------------------
# Placement

if ((PIN)) && ! { taskset -c 0 true && taskset -c 1 true; } 2>/dev/null; then
	say "CPUs 0 and 1 are not both available to this process: running unpinned"
	PIN=0
fi
# xport-perf pins rank r to CPU r % N itself (rank 0 initiates and sends),
# unless told --no-pin; mpirun --bind-to core puts rank r on core r here.
if ((PIN)); then
	UCX_SRV_PIN=(-c 1)
	UCX_CLI_PIN=(-c 0)
	SOCK_PIN=(--pin)
	XP_PIN=()
	MPI_BIND=(--bind-to core)
	if [[ $TRANSPORT == tcp ]]; then
		PIN_NOTE="initiator/sender on CPU 0, responder/receiver on CPU 1 (ucx_perftest client -c 0, server -c 1; sock-baseline --pin: client CPU 0, server CPU 1)"
	else
		PIN_NOTE="initiator/sender on CPU 0, responder/receiver on CPU 1 (ucx_perftest client -c 0, server -c 1; xport-perf rank 0 CPU 0, rank 1 CPU 1; mpirun --bind-to core: rank 0 core 0, rank 1 core 1)"
	fi
else
	UCX_SRV_PIN=()
	UCX_CLI_PIN=()
	SOCK_PIN=()
	XP_PIN=(--no-pin)
	MPI_BIND=(--bind-to none)
	PIN_NOTE="none: the scheduler places every process (--no-pin)"
fi

# ---------------------------------------------------------------------------
# Parsing

# json_num LINE KEY: the number under KEY in one flat JSON line, or nothing
# (null, absent). xport-perf and sock-baseline print exactly this shape.
json_num() {
	sed -n "s/.*\"$2\":\(-\{0,1\}[0-9][0-9.eE+-]*\).*/\1/p" <<<"$1"
}

# json_row FILE TEST SIZE: the first JSON row of that test and size.
json_row() {
	grep -m1 -E "\"test\":\"$2\".*\"size\":$3[,}]" -- "$1"
}

# json_str STRING: STRING as a JSON string, quotes included.
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\t'/\\t}
	printf '"%s"' "$s"
}

# What --json-out says about each measurement: its system and variant.
json_system() {
	case $1 in
	ucx_*) echo ucx ;;
	sock_*) echo sock ;;
	xp_*) echo xport ;;
	mpi_*) echo openmpi ;;
	esac
}
json_variant() {
	case $1 in
	sock_lat) echo blocking ;;
	sock_spin) echo spin ;;
	mpi_bw) echo "no CMA" ;;
	mpi_bw_1buf) echo "no CMA, 1 receive buffer" ;;
	mpi_bw_cma) echo CMA ;;
	esac
}

# json_out_rows ID ROUND FILE CMD...: with --json-out, appends FILE's result
# rows (not the tools' own run records) with system, variant, round and the
# command that measured them.
json_out_rows() {
	[[ -n $JSON_OUT ]] || return 0
	local id=$1 r=$2 file=$3 head variant
	shift 3
	variant=$(json_variant "$id")
	head="\"system\":\"$(json_system "$id")\",\"variant\":"
	head+=$([[ -n $variant ]] && json_str "$variant" || echo null)
	head+=",\"round\":$r,\"command\":$(json_str "$(shell_words "$@")"),"
	grep -E '^\{"test":' -- "$file" | sed "s|^{|{${head//|/\\|}|" >>"$JSON_OUT"
}

# ---------------------------------------------------------------------------
# Ports

# free_port: a TCP port no local socket uses, below the ephemeral range so
# that a connection made meanwhile does not take it.
free_port() {
	local p hex
	for _ in {1..100}; do
		p=$((20000 + RANDOM % 12000))
		printf -v hex '%04X' "$p"
		if ! awk -v h="$hex" 'FNR > 1 { split($2, a, ":"); if (toupper(a[2]) == h) found = 1 }
			END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# port_listening PORT: 0 when a socket listens on it.
port_listening() {
	local hex
	printf -v hex '%04X' "$1"
	awk -v h="$hex" 'FNR > 1 { split($2, a, ":"); if (toupper(a[2]) == h && $4 == "0A") found = 1 }
		END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# wait_listen PORT PID SECONDS: 0 once PORT listens; 1 if PID ends first or
# time runs out. ucx_perftest has no readiness signal, so its socket table
# entry is polled.
wait_listen() {
	local deadline=$((SECONDS + $3))
	while ((SECONDS < deadline)); do
		port_listening "$1" && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.02
	done
	return 1
}

# ---------------------------------------------------------------------------
# Measurements. Each stores into VAL[ID,ROUND] (latency in us, bandwidth in
# GB/s) or notes a failure.

declare -A VAL=()
declare -A FAILS=()

fail() { # ID ROUND MESSAGE [LOG]
	FAILED=1
	FAILS[$1]=$((${FAILS[$1]:-0} + 1))
	say "round $2: $1 FAILED: $3"
	[[ -n ${4:-} ]] && tail_of "$4"
}

progress() { # ID ROUND VALUE UNIT
	say "round $2/$ROUNDS: $(label "$1"): $3 $4"
}

label() {
	case $1 in
	ucx_lat) echo "UCX tag_lat 8 B" ;;
	ucx_bw) echo "UCX tag_bw 1 MiB" ;;
	sock_lat) echo "socket lat 8 B, blocking" ;;
	sock_spin) echo "socket lat-spin 8 B, spinning" ;;
	sock_bw) echo "socket bw 1 MiB" ;;
	xp_lat) echo "xport lat 8 B" ;;
	xp_bw) echo "xport bw 1 MiB" ;;
	mpi_lat) echo "MPI vader lat 8 B" ;;
	mpi_bw) echo "MPI vader bw 1 MiB, no CMA" ;;
	mpi_bw_1buf) echo "MPI vader bw 1 MiB, no CMA, 1 buf" ;;
	mpi_bw_cma) echo "MPI vader bw 1 MiB, CMA" ;;
	esac
}

# UCX: the server (ucx_perftest -p PORT) and the client (ucx_perftest
# 127.0.0.1 -p PORT -t ...), both under timeout. The client prints the
# result. Its "Final:" row reads: iterations, latency 50.0%ile, latency
# average, latency overall, bandwidth average, bandwidth overall, message
# rate average, overall.
#  - latency: the 50.0%ile column. In UCX 1.13.1 it is the median (-R 50) of
#    the last min(2048, iterations) iterations' times, halved for ping-pong
#    tests (ucx_perf_calc_result, src/tools/perf/lib/libperf.c; TIMING_QUEUE_SIZE
#    2048); "average" and "overall" are means. The median is what sock-baseline
#    and xport-perf report (over all measured iterations), so it is compared.
#  - bandwidth: the "overall" column (bytes over the whole measured run), in
#    "MB/s" that are MiB/s (perftest.c divides by 1024.0 * 1024.0): x 1048576
#    / 10^9 gives GB/s. In tag_bw the client is the sender, so UCX's bandwidth
#    is taken at the sender; sock-baseline and xport-perf take it at the receiver.
ucx_run() { # lat|bw ROUND
	local test=$1 r=$2 id=ucx_$1 port spid rc line v
	local base=$LOGDIR/r$r-$id srv cli args
	if [[ $test == lat ]]; then
		args=("${UCX_LAT_ARGS[@]}")
	else
		args=("${UCX_BW_ARGS[@]}")
	fi
	if ! port=$(free_port); then
		fail "$id" "$r" "no free TCP port found"
		return
	fi
	srv=(env UCX_TLS="$UCX_TLS_VAL" timeout -k 5 "$CMD_TIMEOUT" "$UCX_PERFTEST" -p "$port" "${UCX_SRV_PIN[@]}")
	cli=(env UCX_TLS="$UCX_TLS_VAL" timeout -k 5 "$CMD_TIMEOUT" "$UCX_PERFTEST" 127.0.0.1 -p "$port"
		"${UCX_CLI_PIN[@]}" "${args[@]}")
	if ((r <= 1)); then
		COMMANDS+=("$(shell_words "${srv[@]}") &")
		COMMANDS+=("$(shell_words "${cli[@]}")")
	fi
	start_bg "$base.server.out" "$base.server.err" "${srv[@]}"
	spid=$BG_PID
	if ! wait_listen "$port" "$spid" 20; then
		kill -TERM "$spid" 2>/dev/null
		finish_bg "$spid"
		fail "$id" "$r" "the ucx_perftest server did not listen on port $port" "$base.server.err"
		return
	fi
	run_fg "$base.out" "$base.err" "${cli[@]}"
	rc=$?
	# The server ends by itself after its test; after a failed client it
	# might wait for its timeout.
	((rc != 0)) && kill -TERM "$spid" 2>/dev/null
	finish_bg "$spid"
	if ((rc != 0)); then
		fail "$id" "$r" "ucx_perftest client exited with status $rc" "$base.err"
		return
	fi
	line=$(awk '$1 == "Final:" { print $3, $4, $7 }' "$base.out")
	if [[ $test == lat ]]; then
		v=${line%% *}
	else
		v=$(awk -v m="${line##* }" 'BEGIN { if (m != "") printf "%.4f", m * 1048576 / 1e9 }')
	fi
	if [[ ! $v =~ ^[0-9.]+$ ]]; then
		fail "$id" "$r" "no 'Final:' row in ucx_perftest's output" "$base.out"
		return
	fi
	VAL[$id,$r]=$v
	if [[ -n $JSON_OUT ]]; then
		# As xport-perf's rows: the 50.0%ile and average columns (us), the
		# overall bandwidth in 10^6 B/s; what ucx_perftest does not give
		# is null.
		local n fields avg
		n=$(awk '$1 == "Final:" { print $2 }' "$base.out")
		read -r _ avg _ <<<"$line"
		if [[ $test == lat ]]; then
			fields="\"size\":8,\"iters\":${n:-null},\"lat_us_avg\":${avg:-null},\"lat_us_min\":null,\"lat_us_p50\":$v,\"lat_us_p99\":null,\"bw_MBps\":null"
		else
			fields="\"size\":1048576,\"iters\":${n:-null},\"lat_us_avg\":null,\"lat_us_min\":null,\"lat_us_p50\":null,\"lat_us_p99\":null,\"bw_MBps\":$(awk -v g="$v" 'BEGIN { printf "%.1f", g * 1000 }')"
		fi
		printf '{"system":"ucx","variant":null,"round":%d,"command":%s,"test":"%s","transport":"%s","protocol":null,%s}\n' \
			"$r" "$(json_str "$(shell_words "${cli[@]}")")" "$test" "$UCX_TLS_VAL" "$fields" >>"$JSON_OUT"
	fi
	progress "$id" "$r" "$v" "$([[ $test == lat ]] && echo "us (50.0%ile)" || echo "GB/s")"
}

# JSON-line benchmarks (sock-baseline, xport-perf): ID ROUND TEST SIZE CMD...
json_run() {
	local id=$1 r=$2 test=$3 size=$4 rc row v p99
	shift 4
	local base=$LOGDIR/r$r-$id
	record "$r" "$@"
	run_fg "$base.out" "$base.err" "$@"
	rc=$?
	if ((rc != 0)); then
		fail "$id" "$r" "exited with status $rc" "$base.err"
		return
	fi
	row=$(json_row "$base.out" "$test" "$size")
	if [[ $test == lat ]]; then
		v=$(json_num "$row" lat_us_p50)
		p99=$(json_num "$row" lat_us_p99)
		[[ -n $p99 ]] && VAL[${id}_p99,$r]=$p99
	else
		v=$(json_num "$row" bw_MBps)
		[[ -n $v ]] && v=$(awk -v m="$v" 'BEGIN { printf "%.4f", m / 1000 }')
	fi
	if [[ -z $v ]]; then
		fail "$id" "$r" "no JSON row for $test $size B with a figure" "$base.out"
		return
	fi
	VAL[$id,$r]=$v
	json_out_rows "$id" "$r" "$base.out" "$@"
	progress "$id" "$r" "$v" "$([[ $test == lat ]] && echo "us (p50)" || echo "GB/s")"
}

sock_run() { # lat|lat-spin|bw ROUND
	local mode=$1 r=$2
	local cmd=(timeout -k 5 "$CMD_TIMEOUT" "$SOCK" "$mode" "${SOCK_PIN[@]}" --json)
	case $mode in
	lat) json_run sock_lat "$r" lat 8 "${cmd[@]}" ;;
	lat-spin) json_run sock_spin "$r" lat 8 "${cmd[@]}" ;;
	bw) json_run sock_bw "$r" bw 1048576 "${cmd[@]}" ;;
	esac
}

# Open MPI (shm): mpi-baseline prints xport-perf's JSON rows. Bound to cores
# like the others, ob1 over vader; for bandwidth without a single-copy
# mechanism (the 18 GB/s of BASELINES.md) and with vader's default (CMA).
mpi_run() { # lat|bw|bw_1buf|bw_cma ROUND
	local test=$1 r=$2
	local cmd=(timeout -k 5 "$CMD_TIMEOUT" "$MPIRUN" --allow-run-as-root -np 2 "${MPI_BIND[@]}"
		--mca pml ob1 --mca btl "self,vader")
	case $test in
	lat) json_run mpi_lat "$r" lat 8 "${cmd[@]}" "$MPI_BIN" lat ;;
	bw) json_run mpi_bw "$r" bw 1048576 "${cmd[@]}" "${MPI_NOCMA_ARGS[@]}" "$MPI_BIN" bw ;;
	bw_1buf)
		json_run mpi_bw_1buf "$r" bw 1048576 "${cmd[@]}" "${MPI_NOCMA_ARGS[@]}" "$MPI_BIN" bw \
			--one-buffer
		;;
	bw_cma) json_run mpi_bw_cma "$r" bw 1048576 "${cmd[@]}" "$MPI_BIN" bw ;;
	esac
	# How mpirun placed the ranks, in the program's words (header on stderr).
	if [[ -z $MPI_HEADER && -f $LOGDIR/r$r-mpi_$test.err ]]; then
		MPI_HEADER=$(grep -m1 -E "^# rank 0 may run" "$LOGDIR/r$r-mpi_$test.err")
	fi
}
MPI_HEADER=

# --- xport ------------------------------------------------------------------
# Off until `xprun -n 2 BUILDDIR/perf/xport-perf lat --transport tcp|shm` works.
XPORT_OK=0
XPORT_NOTE=
XPRUN=
XPORT_HEADER=

# The launcher built beside xport-perf (ninja above), never one from PATH:
# an installed xprun may be older than the benchmark it would start.
find_xprun() {
	[[ -x $BUILDDIR/tools/xprun ]] && echo "$BUILDDIR/tools/xprun"
}

xport_detect() {
	local rc msg row out=$LOGDIR/xport-detect.out err=$LOGDIR/xport-detect.err
	if ((!XP_BUILT)) || [[ ! -x $XP ]]; then
		msg=$(grep -m1 -E 'error:' "$LOGDIR/ninja-xport.log" 2>/dev/null)
		XPORT_NOTE="not available yet: $XP does not build today (ninja -C $BUILDDIR perf/xport-perf)${msg:+: $msg}"
		return 1
	fi
	XPRUN=$(find_xprun)
	if [[ -z $XPRUN ]]; then
		# Still ask xport-perf itself, for its own word on the transport.
		run_fg "$out" "$err" timeout -k 5 20 "$XP" lat --transport "$TRANSPORT" --sizes 8 --iters 10 --json
		msg=$(grep -m1 -v '^#' "$err")
		XPORT_NOTE="not available yet: no $BUILDDIR/tools/xprun${msg:+; $XP says: $msg}"
		return 1
	fi
	run_fg "$out" "$err" timeout -k 5 "$CMD_TIMEOUT" "$XPRUN" -n 2 "$XP" lat --transport "$TRANSPORT" \
		"${XP_PIN[@]}" --sizes 8 --iters 100 --json
	rc=$?
	row=$(json_row "$out" lat 8)
	if ((rc != 0)) || [[ -z $(json_num "$row" lat_us_p50) ]]; then
		msg=$(grep -m1 -v '^#' "$err")
		XPORT_NOTE="not available yet: '$XPRUN -n 2 $XP lat --transport $TRANSPORT' exited with status $rc${msg:+: $msg}"
		return 1
	fi
	# How xport-perf placed its ranks, in its own words (header on stderr).
	XPORT_HEADER=$(grep -m3 -iE '^(\[[0-9]+\] )?# .*(pinned|transport)' "$err")
	return 0
}

xport_run() { # lat|bw ROUND
	local test=$1 r=$2
	local cmd=(timeout -k 5 "$CMD_TIMEOUT" "$XPRUN" -n 2 "$XP" "$test" --transport "$TRANSPORT"
		"${XP_PIN[@]}")
	if [[ $test == lat ]]; then
		json_run xp_lat "$r" lat 8 "${cmd[@]}" --sizes 8 --json
	else
		json_run xp_bw "$r" bw 1048576 "${cmd[@]}" --sizes 1048576 --json
	fi
}

if xport_detect; then
	XPORT_OK=1
	say "xport ${TRANSPORT^^}: available ($XPRUN)"
else
	say "xport rows: $XPORT_NOTE"
fi

# ---------------------------------------------------------------------------
# Rounds

TESTS=()
if [[ $TRANSPORT == tcp ]]; then
	((UCX_OK)) && TESTS+=(ucx_lat)
	TESTS+=(sock_lat sock_spin)
	((XPORT_OK)) && TESTS+=(xp_lat)
	((UCX_OK)) && TESTS+=(ucx_bw)
	TESTS+=(sock_bw)
	((XPORT_OK)) && TESTS+=(xp_bw)
else
	((UCX_OK)) && TESTS+=(ucx_lat)
	((XPORT_OK)) && TESTS+=(xp_lat)
	((MPI_OK)) && TESTS+=(mpi_lat)
	((UCX_OK)) && TESTS+=(ucx_bw)
	((XPORT_OK)) && TESTS+=(xp_bw)
	((MPI_OK)) && TESTS+=(mpi_bw mpi_bw_1buf mpi_bw_cma)
fi

run_test() { # ID ROUND
	case $1 in
	ucx_lat) ucx_run lat "$2" ;;
	ucx_bw) ucx_run bw "$2" ;;
	sock_lat) sock_run lat "$2" ;;
	sock_spin) sock_run lat-spin "$2" ;;
	sock_bw) sock_run bw "$2" ;;
	xp_lat) xport_run lat "$2" ;;
	xp_bw) xport_run bw "$2" ;;
	mpi_lat) mpi_run lat "$2" ;;
	mpi_bw) mpi_run bw "$2" ;;
	mpi_bw_1buf) mpi_run bw_1buf "$2" ;;
	mpi_bw_cma) mpi_run bw_cma "$2" ;;
	esac
}

if [[ -n $JSON_OUT ]]; then
	printf '{"type":"run","system":"compare-tcp","tool":"compare-tcp.sh","command":%s,"transport":"%s","rounds":%d}\n' \
		"$(json_str "$(shell_words "$PROG" "${ORIG_ARGS[@]}")")" "$TRANSPORT" "$ROUNDS" >"$JSON_OUT"
fi
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$SECONDS
n=${#TESTS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
	for ((k = 0; k < n; k++)); do
		run_test "${TESTS[(k + r - 1) % n]}" "$r"
	done
done
ELAPSED=$((SECONDS - START))

# ---------------------------------------------------------------------------
# Report

# median ID: of the rounds that worked, or nothing.
median() {
	local r
	for ((r = 1; r <= ROUNDS; r++)); do
		[[ -n ${VAL[$1,$r]:-} ]] && echo "${VAL[$1,$r]}"
	done | sort -g | awk '{ a[NR] = $1 }
		END { if (NR == 0) exit
		      if (NR % 2) printf "%.4f\n", a[(NR + 1) / 2]
		      else printf "%.4f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# fmt VALUE DECIMALS: the value, or "-".
fmt() {
	if [[ -n $1 ]]; then
		printf "%.*f" "$2" "$1"
	else
		printf -- "-"
	fi
}

# ratio A B: A/B, or "n/a".
ratio() {
	if [[ -n $1 && -n $2 ]]; then
		awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "n/a" }'
	else
		printf "n/a"
	fi
}

declare -A MED=()
for id in ucx_lat ucx_bw sock_lat sock_spin sock_bw xp_lat xp_bw sock_lat_p99 sock_spin_p99 \
	xp_lat_p99 mpi_lat mpi_lat_p99 mpi_bw mpi_bw_1buf mpi_bw_cma; do
	MED[$id]=$(median "$id")
done

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo
if [[ $TRANSPORT == tcp ]]; then
	echo "== TCP over loopback: xport vs UCX vs plain sockets, $ROUNDS interleaved round$( ((ROUNDS > 1)) && echo s), ${ELAPSED} s =="
	echo "machine: $(nproc) CPUs (${cpu_model:-unknown}), kernel $(uname -r)${UCX_VERSION:+, ucx-utils $UCX_VERSION}"
else
	echo "== Shared memory, two processes on this host: xport vs UCX posix vs Open MPI vader, $ROUNDS interleaved round$( ((ROUNDS > 1)) && echo s), ${ELAPSED} s =="
	echo "machine: $(nproc) CPUs (${cpu_model:-unknown}), kernel $(uname -r)${UCX_VERSION:+, ucx-utils $UCX_VERSION}${MPI_VERSION:+, openmpi-bin $MPI_VERSION}"
	# Spinning transports on 2 vCPUs suffer most from other jobs.
	echo "load:    average $LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after (1, 5, 15 min)"
fi
echo "pinning: $PIN_NOTE"
if ((XPORT_OK)); then
	echo "xport:   placement as xport-perf reports it under xprun:"
	while IFS= read -r line; do
		[[ -n $line ]] && echo "         $line"
	done <<<"$XPORT_HEADER"
fi
if ((MPI_OK)) && [[ -n $MPI_HEADER ]]; then
	echo "MPI:     placement as mpi-baseline reports it under mpirun:"
	echo "         $MPI_HEADER"
fi
echo

# Per round, so the spread is visible beside the medians.
if [[ $TRANSPORT == tcp ]]; then
	rows=(ucx_lat sock_lat sock_spin xp_lat ucx_bw sock_bw xp_bw)
	lw=34
else
	rows=(ucx_lat xp_lat mpi_lat ucx_bw xp_bw mpi_bw mpi_bw_1buf mpi_bw_cma)
	lw=40
fi
printf "%-*s" "$lw" "per round"
for ((r = 1; r <= ROUNDS; r++)); do printf " %9s" "round $r"; done
printf " %9s\n" "median"
for id in "${rows[@]}"; do
	case $id in
	ucx_*) ((UCX_OK)) || continue ;;
	xp_*) ((XPORT_OK)) || continue ;;
	mpi_*) ((MPI_OK)) || continue ;;
	esac
	case $id in
	*_bw | *_bw_*) unit="GB/s" ;;
	*) unit="us" ;;
	esac
	printf "%-*s" "$lw" "$(label "$id") ($unit)"
	for ((r = 1; r <= ROUNDS; r++)); do
		v=${VAL[$id,$r]:-}
		printf " %9s" "$(if [[ -n $v ]]; then fmt "$v" 3; else echo FAIL; fi)"
	done
	printf " %9s\n" "$(fmt "${MED[$id]}" 3)"
done
echo

# Side by side: medians across rounds.
printf "%-44s %12s %12s %12s\n" "medians across rounds" "8 B p50 us" "8 B p99 us" "1 MiB GB/s"
row() { # LABEL LAT P99 BW [NOTE]
	printf "%-44s %12s %12s %12s%s\n" "$1" "$2" "$3" "$4" "${5:+  $5}"
}
if [[ $TRANSPORT == tcp ]]; then
	if ((XPORT_OK)); then
		row "xport tcp (xport-perf under xprun)" "$(fmt "${MED[xp_lat]}" 2)" \
			"$(fmt "${MED[xp_lat_p99]}" 2)" "$(fmt "${MED[xp_bw]}" 2)"
	else
		row "xport tcp (xport-perf under xprun)" "n/a" "n/a" "n/a"
	fi
	if ((UCX_OK)); then
		row "UCX ${UCX_VERSION%%-*} tag, UCX_TLS=tcp (ucx_perftest)" "$(fmt "${MED[ucx_lat]}" 2)" "-" \
			"$(fmt "${MED[ucx_bw]}" 2)"
	else
		row "UCX tag, UCX_TLS=tcp (ucx_perftest)" "n/a" "n/a" "n/a"
	fi
	row "socket, blocking (sock-baseline lat, bw)" "$(fmt "${MED[sock_lat]}" 2)" \
		"$(fmt "${MED[sock_lat_p99]}" 2)" "$(fmt "${MED[sock_bw]}" 2)"
	row "socket, spinning recv (sock-baseline lat-spin)" "$(fmt "${MED[sock_spin]}" 2)" \
		"$(fmt "${MED[sock_spin_p99]}" 2)" "-"
	echo
	if ((!XPORT_OK || !UCX_OK)); then
		((XPORT_OK)) || echo "xport rows: $XPORT_NOTE"
		((UCX_OK)) || echo "UCX rows: $UCX_NOTE"
		echo
	fi

	printf "%-44s %12s %12s\n" "ratios (medians)" "8 B latency" "1 MiB bw"
	printf "%-44s %12s %12s\n" "xport / UCX" "$(ratio "${MED[xp_lat]}" "${MED[ucx_lat]}")" \
		"$(ratio "${MED[xp_bw]}" "${MED[ucx_bw]}")"
	printf "%-44s %12s %12s\n" "xport / socket, blocking" "$(ratio "${MED[xp_lat]}" "${MED[sock_lat]}")" \
		"$(ratio "${MED[xp_bw]}" "${MED[sock_bw]}")"
	printf "%-44s %12s %12s\n" "xport / socket, spinning recv" \
		"$(ratio "${MED[xp_lat]}" "${MED[sock_spin]}")" "-"
	echo "(latency: below 1 means xport is faster; bandwidth: above 1 means xport is faster)"
	((XPORT_OK)) || echo "(ratios need the xport rows: not available yet)"
	echo

	cat <<EOF
how the figures are read:
- latency is one-way, half the round trip, median (p50) over the iterations.
  UCX: the "50.0%ile" column of ucx_perftest's Final row: in UCX 1.13 the median
  of the last min(2048, iterations) round trips, halved (libperf.c,
  ucx_perf_calc_result); "average"/"overall" are means and are not used.
- bandwidth in GB/s = 10^9 B/s. UCX prints "MB/s" meaning MiB/s: its "overall"
  column x 1048576 / 10^9; it is taken at the sender (the tag_bw client).
  sock-baseline and xport-perf take it at the receiver (10^6 B/s / 1000).
- sock-baseline lat sleeps in recv: with the two processes on different vCPUs
  every message pays a cross-vCPU wake-up (BASELINES.md), which spinning
  transports (UCX, lat-spin) do not.
- rounds vary a lot on this shared machine: compare only figures of one run.
EOF
else
	if ((XPORT_OK)); then
		row "xport shm (xport-perf under xprun)" "$(fmt "${MED[xp_lat]}" 2)" \
			"$(fmt "${MED[xp_lat_p99]}" 2)" "$(fmt "${MED[xp_bw]}" 2)"
	else
		row "xport shm (xport-perf under xprun)" "n/a" "n/a" "n/a"
	fi
	if ((UCX_OK)); then
		row "UCX ${UCX_VERSION%%-*}, UCX_TLS=posix (ucx_perftest)" "$(fmt "${MED[ucx_lat]}" 2)" "-" \
			"$(fmt "${MED[ucx_bw]}" 2)"
	else
		row "UCX, UCX_TLS=posix (ucx_perftest)" "n/a" "n/a" "n/a"
	fi
	if ((MPI_OK)); then
		row "Open MPI ${MPI_VERSION%%-*} ob1+vader (mpi-baseline)" "$(fmt "${MED[mpi_lat]}" 2)" \
			"$(fmt "${MED[mpi_lat_p99]}" 2)" "$(fmt "${MED[mpi_bw]}" 2)" "(bw: no CMA)"
		row "Open MPI vader, no CMA, 1 receive buffer" "-" "-" "$(fmt "${MED[mpi_bw_1buf]}" 2)"
		row "Open MPI vader, CMA (vader's default)" "-" "-" "$(fmt "${MED[mpi_bw_cma]}" 2)"
	else
		row "Open MPI ob1+vader (mpi-baseline)" "n/a" "n/a" "n/a"
	fi
	echo
	if ((!XPORT_OK || !UCX_OK || !MPI_OK)); then
		((XPORT_OK)) || echo "xport rows: $XPORT_NOTE"
		((UCX_OK)) || echo "UCX rows: $UCX_NOTE"
		((MPI_OK)) || echo "MPI rows: $MPI_NOTE"
		echo
	fi

	printf "%-44s %12s %12s\n" "ratios (medians)" "8 B latency" "1 MiB bw"
	printf "%-44s %12s %12s\n" "xport / UCX posix" "$(ratio "${MED[xp_lat]}" "${MED[ucx_lat]}")" \
		"$(ratio "${MED[xp_bw]}" "${MED[ucx_bw]}")"
	printf "%-44s %12s %12s\n" "xport / Open MPI vader (bw: no CMA)" \
		"$(ratio "${MED[xp_lat]}" "${MED[mpi_lat]}")" "$(ratio "${MED[xp_bw]}" "${MED[mpi_bw]}")"
	printf "%-44s %12s %12s\n" "xport / Open MPI vader, 1 receive buffer" "-" \
		"$(ratio "${MED[xp_bw]}" "${MED[mpi_bw_1buf]}")"
	printf "%-44s %12s %12s\n" "xport / Open MPI vader, CMA" "-" \
		"$(ratio "${MED[xp_bw]}" "${MED[mpi_bw_cma]}")"
	echo "(latency: below 1 means xport is faster; bandwidth: above 1 means xport is faster)"
	((XPORT_OK)) || echo "(ratios need the xport rows: not available yet)"
	echo

	cat <<EOF
how the figures are read:
- latency is one-way, half the round trip, median (p50) over the iterations.
  UCX: the "50.0%ile" column of ucx_perftest's Final row: in UCX 1.13 the median
  of the last min(2048, iterations) round trips, halved (libperf.c,
  ucx_perf_calc_result); "average"/"overall" are means and are not used.
  xport-perf and mpi-baseline: p50 over all round trips after a warmup (10000
  and 1000 here), one clock read in each round trip, receives posted first.
- bandwidth in GB/s = 10^9 B/s. UCX prints "MB/s" meaning MiB/s: its "overall"
  column x 1048576 / 10^9; it is taken at the sender (the tag_bw client), which
  sends one buffer into one receive buffer (both stay in cache).
  xport-perf and mpi-baseline take it at the receiver (10^6 B/s / 1000): a
  window of 64 x 1 MiB into 64 distinct receive buffers (64 MiB, beyond the
  caches), from the round's go to its last completion, median over rounds;
  "1 receive buffer" is mpi-baseline --one-buffer: the window into one buffer,
  as ucx_perftest and osu_bw do. mpi-baseline's go is a zero-byte MPI
  message; xport-perf's an out-of-band barrier (~12 us, inside the interval:
  a slight understatement).
- Open MPI: 8 B with vader as it comes; 1 MiB with
  btl_vader_single_copy_mechanism none (copies through vader's shared buffers;
  BASELINES.md's 18 GB/s, which only the one-buffer run approaches) and with
  vader's default single copy, cross-memory attach (CMA: process_vm_readv,
  which xport's shm transport uses from 256 KiB).
- every process spins while it waits: on 2 vCPUs any other job running costs
  a lot (see the load line); rounds vary: compare only figures of one run.
EOF
fi
echo

echo "commands (round 1; later rounds differ only in the UCX port), run from $ROOT:"
for c in "${COMMANDS[@]}"; do
	echo "  $c"
done
if ((${#FAILS[@]} > 0)); then
	echo
	for id in "${!FAILS[@]}"; do
		echo "FAILED: $(label "$id"): ${FAILS[$id]} of $ROUNDS rounds (logs: $LOGDIR)"
	done
fi
((KEEP_LOGS)) && echo "logs: $LOGDIR"
((FAILED)) && exit 1
exit 0
