#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""xport's point-to-point speed beside UCX, plain sockets and Open MPI, in one run.

Rows (--rows takes these names, or tcp, shm, lat, bw, rate for several):
  tcp-lat   TCP 8 B one-way latency p50: xport-perf lat --transport tcp under xprun,
            ucx_perftest tag_lat (UCX_TLS=tcp), sock-baseline lat (blocking recv)
            and lat-spin (spinning recv)
  tcp-bw    TCP 1 MiB bandwidth: xport-perf bw, ucx_perftest tag_bw, sock-baseline bw
  tcp-rate  TCP 8 B message rate: xport-perf rate, ucx_perftest tag_bw -s 8 (its
            overall msg/s), mpi-baseline rate (perf/mpi_baseline.c) over ob1 + tcp
  shm-lat   shared memory 8 B latency: xport-perf shm, UCX_TLS=posix, Open MPI vader
  shm-bw    shared memory 1 MiB bandwidth: a window of 64 into distinct receive
            buffers (xport-perf bw; vader without and with cross-memory attach,
            CMA), and every receive into one buffer (xport-perf bw --one-buffer,
            ucx_perftest, which always does, vader both ways --one-buffer)
  shm-rate  shared memory 8 B message rate: xport-perf rate, UCX posix, vader
  inproc    xport-perf lat --sizes 8 without a launcher: two threads over the
            in-process transport, beside two threads ping-ponging one cache line

Rounds, as this shared 2-vCPU machine differs 2-5x between them: each runs every
measurement once, the order rotating. The table gives each round, the median,
xport/peer as a ratio of medians and "paired", the median of each round's own
ratio (fast and slow spells last seconds: the runs of one round share one more
often than two medians do); "Measures" judges each target on the paired ratio.

Sender/initiator on CPU 0, receiver/responder on CPU 1 for every tool unless
--no-pin. Always the build directory's xprun and xport-perf (ninja builds them
unless --no-build); mpicc builds mpi-baseline there. Missing ucx_perftest,
mpicc, mpirun are installed with apt-get unless --no-install; a row whose tool
is missing or fails says so. Every command runs under --timeout; a background
server is killed on exit, Ctrl-C included. --json-out: every row of every tool
and round in xport-perf's keys plus system (xport, ucx, sock, openmpi),
variant, round and command, for perf/plot. Exit status 0 when every attempted
measurement worked, 1 if one failed, 2 on a usage error. UCX_PERFTEST, MPICC,
MPIRUN in the environment name other builds.
"""
import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

PROG = "compare-p2p"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UCX_PERFTEST = os.environ.get("UCX_PERFTEST", "ucx_perftest")
MPICC = os.environ.get("MPICC", "mpicc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
MIB = 1 << 20

ROWS = {  # name: (title, unit)
    "tcp-lat": ("TCP 8 B one-way latency p50", "us"),
    "tcp-bw": ("TCP 1 MiB bandwidth", "GB/s"),
    "tcp-rate": ("TCP 8 B message rate", "Mmsg/s"),
    "shm-lat": ("shm 8 B one-way latency p50", "us"),
    "shm-bw": ("shm 1 MiB bandwidth", "GB/s"),
    "shm-rate": ("shm 8 B message rate", "Mmsg/s"),
    "inproc": ("in-process 8 B one-way latency p50", "us"),
}
# The key of a test's JSON rows its figure is read from, and the scale to the unit shown.
FIELD = {"lat": ("lat_us_p50", 1.0), "bw": ("bw_MBps", 1e-3), "rate": ("Mmsg_per_s", 1.0)}
# vader without a single-copy mechanism copies through its shared buffers
# (BASELINES.md's 18 GB/s); its default is cross-memory attach (CMA), the
# mechanism of xport's own large shm messages (process_vm_readv).
NOCMA = ["--mca", "btl_vader_single_copy_mechanism", "none"]


# One figure of the table: the JSON row of its measurement that holds it
# (test, size, transport), and for a peer's, the xport figure it is set against.
Fig = namedtuple("Fig", "key label test size transport vs", defaults=[None])
# One command run each round, giving one or more figures. system: the JSON
# "system" (xport, ucx, sock, openmpi); tool: what it needs (xport, sock, ucx,
# mpi); argv: for ucx the client's test arguments only; iters: the iteration
# arguments of a full run and of --quick.
Meas = namedtuple("Meas", "key row system tool variant argv iters figs env", defaults=[{}])


def measurements(c):
    """The table of everything measured, in the order it is shown. A row's
    name says the transport and test (tcp-lat); sizes: 8 B, bw 1 MiB."""
    nopin = [] if c.pin else ["--no-pin"]
    one = ["--one-buffer"]
    quick = {"lat": "1000", "bw": "3", "rate": "4"}  # --iters of --quick

    def its(test):
        return [], ["--iters", quick[test]]

    # xport-perf's bw iterations are windows of 64: 47 make 3008 messages,
    # the volume ucx_perftest is given (-n 3000), so neither side's figure
    # is a shorter run's (slow start, first faults) than the other's.
    def xport_its(test):
        return (["--iters", "47"], ["--iters", quick[test]]) if test == "bw" else its(test)

    def fig(key, row, label, transport, vs=None):
        test = row.split("-")[1]
        return Fig(key, label, test, MIB if test == "bw" else 8, transport, vs)

    def xport(key, row, label, extra=(), variant=None):
        f = fig(key, row, label, row.split("-")[0])
        argv = [c.xprun, "-n", "2", c.xperf, f.test, "--transport", f.transport, "--sizes",
                str(f.size), *extra, *nopin, "--json"]
        return Meas(key, row, "xport", "xport", variant, argv, xport_its(f.test), [f])

    def ucx(key, row, vs, label, n, variant=None):
        f = fig(key, row, label, "tcp" if row.startswith("tcp") else "posix", vs)
        argv = ["-t", "tag_lat" if f.test == "lat" else "tag_bw", "-s", str(f.size)]
        iters = (["-n", str(n), "-w", str(n // 10)], ["-n", str(n // 10), "-w", str(n // 100)])
        return Meas(key, row, "ucx", "ucx", variant, argv, iters, [f], {"UCX_TLS": f.transport})

    def sock(key, row, mode, vs, label, variant=None):
        f = fig(key, row, label, "socket-tcp", vs)
        argv = [c.sock, mode, *(["--pin"] if c.pin else []), "--json"]
        # sock-baseline's bw --iters counts messages.
        n = its(f.test) if f.test == "lat" else ([], ["--iters", "300"])
        return Meas(key, row, "sock", "sock", variant, argv, n, [f])

    def ompi(key, row, vs, label, mca=(), extra=(), variant=None):
        f = fig(key, row, label, "tcp" if row.startswith("tcp") else "vader", vs)
        argv = [MPIRUN, *(["--allow-run-as-root"] if os.geteuid() == 0 else []), "-np", "2",
                "--bind-to", "core" if c.pin else "none", "--mca", "pml", "ob1", "--mca",
                "btl", "self," + f.transport, *mca, c.mpi_bin, f.test, "--size", str(f.size),
                *extra]
        return Meas(key, row, "openmpi", "mpi", variant, argv, its(f.test), [f])

    return [
        xport("xp_tcp_lat", "tcp-lat", "xport tcp"),
        ucx("ucx_tcp_lat", "tcp-lat", "xp_tcp_lat", "UCX tcp tag_lat", 50000),
        sock("sock_lat", "tcp-lat", "lat", "xp_tcp_lat", "socket, blocking recv", "blocking"),
        sock("sock_spin", "tcp-lat", "lat-spin", "xp_tcp_lat", "socket, spinning recv", "spin"),
        # ucx_perftest receives every message into one buffer, sock-baseline
        # too: they stand beside xport's one-buffer row; the row of 64
        # distinct buffers is what an application's window costs.
        xport("xp_tcp_bw", "tcp-bw", "64 buffers: xport tcp", variant="distinct buffers"),
        xport("xp_tcp_bw_1buf", "tcp-bw", "1 buffer: xport tcp", one, "1 receive buffer"),
        ucx("ucx_tcp_bw", "tcp-bw", "xp_tcp_bw_1buf", "1 buffer: UCX tcp tag_bw", 3000,
            "1 receive buffer"),
        sock("sock_bw", "tcp-bw", "bw", "xp_tcp_bw_1buf", "1 buffer: socket",
             "1 receive buffer"),
        xport("xp_tcp_rate", "tcp-rate", "xport tcp"),
        ucx("ucx_tcp_rate", "tcp-rate", "xp_tcp_rate", "UCX tcp tag_bw", 1000000),
        ompi("mpi_tcp_rate", "tcp-rate", "xp_tcp_rate", "Open MPI ob1+tcp"),
        xport("xp_shm_lat", "shm-lat", "xport shm"),
        ucx("ucx_shm_lat", "shm-lat", "xp_shm_lat", "UCX posix tag_lat", 50000),
        ompi("mpi_lat", "shm-lat", "xp_shm_lat", "Open MPI vader"),
        xport("xp_shm_bw", "shm-bw", "64 buffers: xport shm", variant="distinct buffers"),
        ompi("mpi_bw", "shm-bw", "xp_shm_bw", "64 buffers: vader no CMA", NOCMA,
             variant="no CMA, distinct buffers"),
        ompi("mpi_bw_cma", "shm-bw", "xp_shm_bw", "64 buffers: vader CMA",
             variant="CMA, distinct buffers"),
        xport("xp_shm_bw_1buf", "shm-bw", "1 buffer: xport shm", one, "1 receive buffer"),
        ucx("ucx_shm_bw", "shm-bw", "xp_shm_bw_1buf", "1 buffer: UCX posix tag_bw", 3000,
            "1 receive buffer"),
        ompi("mpi_bw_1buf", "shm-bw", "xp_shm_bw_1buf", "1 buffer: vader no CMA", NOCMA, one,
             "no CMA, 1 receive buffer"),
        ompi("mpi_bw_cma_1buf", "shm-bw", "xp_shm_bw_1buf", "1 buffer: vader CMA", (), one,
             "CMA, 1 receive buffer"),
        xport("xp_shm_rate", "shm-rate", "xport shm"),
        ucx("ucx_shm_rate", "shm-rate", "xp_shm_rate", "UCX posix tag_bw", 1000000),
        ompi("mpi_shm_rate", "shm-rate", "xp_shm_rate", "Open MPI vader"),
        # One run gives both rows: the cache-line ping-pong, then xport's.
        Meas("xp_inproc", "inproc", "xport", "xport", None,
             [c.xperf, "lat", "--sizes", "8", *nopin, "--json"], ([], ["--iters", "2000"]),
             [Fig("xp_inproc", "xport inproc (two threads)", "lat", 8, "inproc"),
              Fig("cacheline", "cache line ping-pong (two threads)", "lat", 8,
                  "cacheline-baseline", "xp_inproc")]),
    ]


# The issue's targets: row, what, xport figure, peers (the best of them
# counts), comparison of xport/best with the bound, figures shown beside.
TARGETS = [
    ("tcp-lat", "TCP 8 B latency <= 1.0x UCX", "xp_tcp_lat", ["ucx_tcp_lat"], "<=", 1.0),
    ("tcp-lat", "TCP 8 B latency <= 1.2x spinning socket", "xp_tcp_lat", ["sock_spin"], "<=", 1.2),
    ("tcp-bw", "TCP 1 MiB bandwidth into 1 buffer >= 1.0x UCX", "xp_tcp_bw_1buf",
     ["ucx_tcp_bw"], ">=", 1.0, "xp_tcp_bw"),
    ("shm-bw", "shm 1 MiB bw into 64 buffers >= 1.0x best of vader no CMA, CMA", "xp_shm_bw",
     ["mpi_bw", "mpi_bw_cma"], ">=", 1.0),
    ("shm-bw", "shm 1 MiB bw into 1 buffer >= 1.0x best of UCX posix, vader no CMA, CMA",
     "xp_shm_bw_1buf", ["ucx_shm_bw", "mpi_bw_1buf", "mpi_bw_cma_1buf"], ">=", 1.0),
    ("shm-lat", "shm 8 B latency ahead of UCX posix", "xp_shm_lat", ["ucx_shm_lat"], "<", 1.0),
    ("shm-lat", "shm 8 B latency ahead of Open MPI vader", "xp_shm_lat", ["mpi_lat"], "<", 1.0),
    ("shm-rate", "shm 8 B message rate >= 1.0x UCX posix", "xp_shm_rate", ["ucx_shm_rate"],
     ">=", 1.0, "mpi_shm_rate"),
    ("tcp-rate", "TCP 8 B message rate >= 1.0x UCX tcp", "xp_tcp_rate", ["ucx_tcp_rate"], ">=",
     1.0, "mpi_tcp_rate"),
    ("inproc", "in-process 8 B <= 2x the cache line ping-pong", "xp_inproc", ["cacheline"], "<=",
     2.0),
]


def say(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def shell_line(argv, env=None):
    """The command as one types it at the repository root."""
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    return (pre + " " if pre else "") + shlex.join(str(a) for a in argv)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


# Processes: each in a session of its own, so that a whole job (xprun or
# mpirun and their ranks) is stopped at once; every live one is stopped on
# exit, Ctrl-C and SIGTERM included.
LIVE = set()


def start(argv, env, log):
    """Starts @argv at the repository root, its output into @log.out and .err."""
    with open(log + ".out", "w") as out, open(log + ".err", "w") as err:
        p = subprocess.Popen([str(a) for a in argv], env={**os.environ, **env}, cwd=ROOT,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             start_new_session=True)
    LIVE.add(p)
    return p


def stop(p):
    """TERM first (xprun and mpirun stop their ranks on it), KILL after 3 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
            p.wait(3)
            break
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue
    LIVE.discard(p)


def finish(p, timeout):
    """Its exit status; 124 when it ran past @timeout seconds and was stopped."""
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        stop(p)
        return 124
    LIVE.discard(p)
    return rc


def run(argv, env, log, timeout):
    """(status, stdout, stderr) of one command run to its end."""
    rc = finish(start(argv, env, log), timeout)
    return rc, read(log + ".out"), read(log + ".err")


def why(rc, err, timeout):
    if rc == 124:
        return f"timed out after {timeout} s"
    # The tool's own first word: not a header (#), nor mpirun's frames and footers.
    said = [ln for ln in err.splitlines()
            if ln.strip() and not re.match(r"(\[\d+\] )?#|-{5}|\[\S+:\d+\]", ln)]
    return f"exited with status {rc}" + (": " + said[0][:160] if said else "")


# Setup: packages, the build, mpi-baseline

def mpi_headers_found(mpicc):
    """Debian's openmpi-bin brings mpicc without mpi.h (libopenmpi-dev has
    it): asked of Open MPI's wrapper; another MPI's compile says itself."""
    try:
        p = subprocess.run([mpicc, "--showme:incdirs"], capture_output=True, text=True)
    except OSError:
        return False
    if p.returncode != 0:
        return True
    return any(os.path.exists(os.path.join(d, "mpi.h")) for d in p.stdout.split())


def ensure_tool(c, progs, pkgs, ready=lambda: True):
    """None when @progs are all on PATH (and @ready says the rest is there),
    after installing @pkgs if need be (stale package lists being the usual
    failure, once more after apt-get update); else why not."""
    def found():
        return all(shutil.which(p) for p in progs) and ready()
    how = "apt-get install " + " ".join(pkgs)
    if found() or c.args.no_install:
        return None if found() else f"{' or '.join(progs)} not found, --no-install ({how})"
    apt = ([] if os.geteuid() == 0 else ["sudo", "-n"]) + ["apt-get"]
    cmd = apt + ["install", "-y", "-q", "--no-install-recommends"] + pkgs
    say(f"installing {' '.join(pkgs)} (apt-get)")
    c.commands.append(shell_line(cmd))
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    if run(cmd, env, c.log("apt-install"), 600)[0] != 0:
        run(apt + ["update", "-q"], env, c.log("apt-update"), 600)
        run(cmd, env, c.log("apt-install"), 600)
    return None if found() else f"{' or '.join(progs)} could not be installed ({how}; logs " \
        f"in {c.logdir})"


def build(c, targets, name):
    """None once ninja has built @targets in the build directory, else why not."""
    if c.args.no_build:
        return None
    cmd = ["ninja", "-C", c.build] + targets
    c.commands.append(shell_line(cmd))
    rc, out, _ = run(cmd, {}, c.log("ninja-" + name), 900)
    if rc != 0:
        err = [ln for ln in out.splitlines() if "error" in ln][:1]
        return f"does not build ({shell_line(cmd)}){': ' + err[0] if err else ''}"
    return None


def build_mpi_baseline(c):
    """None once perf/mpi_baseline.c is built by mpicc (not a Meson target:
    Meson needs no MPI), when missing or older than its sources. Built
    beside, then renamed, so that a concurrent run never starts half a file."""
    src = [os.path.join(ROOT, "perf", f) for f in ("mpi_baseline.c", "perf_util.h")]
    out = os.path.join(ROOT, c.mpi_bin)
    if os.path.exists(out) and os.path.getmtime(out) >= max(map(os.path.getmtime, src)):
        return None
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [MPICC, "-O2", "-std=c11", "-Wall", "-Wextra",
           f'-DXPORT_VERSION_STRING="{c.version}"', "-o", c.mpi_bin, "perf/mpi_baseline.c"]
    c.commands.append(shell_line(cmd))
    tmp = f"{c.mpi_bin}.tmp.{os.getpid()}"
    rc, _, err = run(cmd[:-2] + [tmp, cmd[-1]], {}, c.log("mpicc"), 300)
    if rc != 0:
        c.failed = True  # our program, not a missing package
        return f"{MPICC} could not build perf/mpi_baseline.c: {why(rc, err, 300)}"
    os.replace(os.path.join(ROOT, tmp), out)
    return None


def setup(c, tools):
    """Fills c.notes[tool] with why that tool's rows cannot run, if they cannot."""
    if "ucx" in tools:
        c.notes["ucx"] = ensure_tool(c, [UCX_PERFTEST], ["ucx-utils"])
    # One at a time: xport-perf follows work in progress and may not build
    # today, and the socket baseline must not depend on it. xprun is built
    # with xport-perf, so that the launcher is never older than the benchmark.
    if "sock" in tools:
        c.notes["sock"] = build(c, ["perf/sock-baseline"], "sock")
    if "xport" in tools:
        c.notes["xport"] = build(c, ["perf/xport-perf", "tools/xprun"], "xport")
    if os.access(os.path.join(ROOT, c.xperf), os.X_OK):  # mpi-baseline --version says it too
        p = subprocess.run([c.xperf, "--version"], cwd=ROOT, capture_output=True, text=True)
        c.version = (p.stdout.split() or ["unknown"])[-1]
    if "mpi" in tools:
        c.notes["mpi"] = (ensure_tool(c, [MPICC, MPIRUN], ["openmpi-bin", "libopenmpi-dev"],
                                      lambda: mpi_headers_found(MPICC))
                          or build_mpi_baseline(c))
    for tool, path in (("sock", c.sock), ("xport", c.xperf), ("xport", c.xprun)):
        if tool in tools and not c.notes.get(tool) and \
                not os.access(os.path.join(ROOT, path), os.X_OK):
            c.notes[tool] = f"{path} is missing (ninja -C {c.build})"
    for tool, note in c.notes.items():
        if note:
            say(f"{tool} rows not measured: {note}")


# Running one measurement

def json_rows(text):
    """The result rows (not the run record) of a tool printing JSON lines."""
    rows = []
    for line in (ln for ln in text.splitlines() if ln.startswith('{"test":')):
        try:
            rows.append(json.loads(line))
        except ValueError:  # cut short by a killed run: its figure is then missing
            pass
    return rows


def ucx_row(text, f):
    """ucx_perftest's "Final:" line as an xport-perf row. Its columns:
    iterations; latency 50.0%ile, average, overall (us; UCX 1.13 halves
    ping-pong times, so one-way; the 50.0%ile is the median of the last
    min(2048, iterations), libperf.c ucx_perf_calc_result); bandwidth
    average, overall ("MB/s" that are MiB/s: perftest.c divides by
    1024 * 1024); message rate average, overall (msg/s). Bandwidth and rate
    are the overall columns, taken at the sender (the tag_bw client)."""
    for line in text.splitlines():
        col = line.split()
        if len(col) >= 9 and col[0] == "Final:":
            try:
                n, p50, avg, _, _, mibps, _, rate = int(col[1]), *map(float, col[2:9])
            except ValueError:
                return None
            lat = f.test == "lat"
            return {"test": f.test, "transport": f.transport, "protocol": None, "size": f.size,
                    "iters": n, "lat_us_avg": avg if lat else None, "lat_us_min": None,
                    "lat_us_p50": p50 if lat else None, "lat_us_p99": None,
                    "bw_MBps": None if lat else round(mibps * 1.048576, 1),
                    "Mmsg_per_s": None if lat else round(rate / 1e6, 4)}
    return None


def local_ports(listening=False):
    """The local TCP ports in use (only those listening)."""
    ports = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        for ln in read(path).splitlines()[1:]:
            col = ln.split()
            if not listening or col[3] == "0A":
                ports.add(int(col[1].rsplit(":", 1)[1], 16))
    return ports


def ucx_commands(c, m, port):
    """(server argv, client argv) of one ucx_perftest pair."""
    srv = [UCX_PERFTEST, "-p", str(port)] + (["-c", "1"] if c.pin else [])
    cli = [UCX_PERFTEST, "127.0.0.1", "-p", str(port)] + (["-c", "0"] if c.pin else [])
    return srv, cli + m.argv + m.iters[c.args.quick]


def run_ucx(c, m, rnd):
    """(rows, error, command) of a ucx_perftest server and client; the
    client prints the result."""
    # Below the ephemeral range, so no connection made meanwhile takes it.
    port = random.choice(sorted(set(range(20000, 32000)) - local_ports()))
    srv, cli = ucx_commands(c, m, port)
    if rnd == 1:
        c.commands += [shell_line(srv, m.env) + " &", shell_line(cli, m.env)]
    log, deadline = c.log(f"r{rnd}-{m.key}"), time.time() + 20
    server = start(srv, m.env, log + ".server")
    # ucx_perftest has no readiness signal: its socket table entry is polled.
    while port not in local_ports(True) and server.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    if port not in local_ports(True):
        stop(server)
        return None, f"the ucx_perftest server did not listen on port {port}", None
    rc, out, err = run(cli, m.env, log, c.args.timeout)
    # The server ends by itself after its test; after a failed client it might wait.
    if rc != 0 or finish(server, 10) == 124:
        stop(server)
    if rc != 0:
        return None, why(rc, err, c.args.timeout), None
    row = ucx_row(out, m.figs[0])
    return [row] if row else [], None if row else "no 'Final:' line", shell_line(cli, m.env)


def run_json(c, m, rnd):
    """(rows, error, command) of a tool printing xport-perf's JSON rows."""
    argv = m.argv + m.iters[c.args.quick]
    if rnd == 1:
        c.commands.append(shell_line(argv, m.env))
    rc, out, err = run(argv, m.env, c.log(f"r{rnd}-{m.key}"), c.args.timeout)
    if not any(p.startswith(m.system + ":") for p in c.placement):
        # How the tool placed its processes, in its own words (its stderr header).
        c.placement += [f"{m.system}: {ln.split('# ', 1)[1]}" for ln in err.splitlines()
                        if "# " in ln and ("pinned" in ln or "may run on" in ln)][:1]
    if rc != 0:
        return None, why(rc, err, c.args.timeout), None
    return json_rows(out), None, shell_line(argv, m.env)


def pick(rows, f):
    """The figure @f from rows in xport-perf's keys, in the unit shown; or None."""
    key, scale = FIELD[f.test]
    for r in rows:
        if (r.get("test"), r.get("size"), r.get("transport")) == (f.test, f.size, f.transport) \
                and isinstance(r.get(key), (int, float)):
            return r[key] * scale
    return None


def measure(c, m, rnd):
    """Runs @m once: its figures into c.vals (or c.fails), its rows into --json-out."""
    rows, err, cmd = (run_ucx if m.tool == "ucx" else run_json)(c, m, rnd)
    for f in m.figs:
        v = pick(rows or [], f)
        if v is None:
            c.failed = True
            c.fails.setdefault(f.key, []).append(
                f"round {rnd}: {err or f'no {f.test} row of {f.size} B over {f.transport}'}")
            say(f"round {rnd}/{c.args.rounds}: {f.label}: FAILED: {c.fails[f.key][-1]}")
        else:
            c.vals.setdefault(f.key, {})[rnd] = v
            say(f"round {rnd}/{c.args.rounds}: {f.label}: {v:.3f} {ROWS[m.row][1]}")
    if c.json_out and rows:
        head = {"system": m.system, "variant": m.variant, "round": rnd, "command": cmd}
        c.json_out.writelines(json.dumps({**head, **r}) + "\n" for r in rows)
        c.json_out.flush()


def measure_rounds(c, meas):
    """Every measurement once a round, the order rotating; the seconds taken."""
    todo = [m for m in meas if not c.notes.get(m.tool)]
    t0 = time.time()
    for rnd in range(1, c.args.rounds + 1):
        k = (rnd - 1) % len(todo) if todo else 0
        for m in todo[k:] + todo[:k]:
            measure(c, m, rnd)
    return time.time() - t0


# Report

def median(c, key):
    vals = list(c.vals.get(key, {}).values())
    return statistics.median(vals) if vals else None


def ratios(c, xkey, peers, higher):
    """(ratio of medians, paired ratio) of xport to the best of @peers, the
    highest if @higher (bandwidth, rate), else the lowest (latency)."""
    best = max if higher else min
    meds, x = [median(c, p) for p in peers], median(c, xkey)
    by_med = x / best(meds) if x and all(meds) else None
    own = [c.vals[xkey][r] / best(c.vals[p][r] for p in peers) for r in c.vals.get(xkey, {})
           if all(c.vals.get(p, {}).get(r) for p in peers)]
    return by_med, (statistics.median(own) if own else None)


def fmt(v, spec=".3f", none="-"):
    return none if v is None else format(v, spec)


def print_table(c, meas, rounds):
    """Per round, the median, and for peers xport/peer: of medians, paired."""
    w = max(len(f.label) for m in meas for f in m.figs) + 4
    print(f"{'':{w}}" + "".join(f"{'round ' + str(r):>9}" for r in rounds)
          + f"{'median':>9}{'ratio':>8}{'paired':>8}")
    for row, (title, unit) in ROWS.items():
        figs = [(m, f) for m in meas if m.row == row for f in m.figs]
        if figs:
            print(f"{title} ({unit}):")
        for m, f in figs:
            line = f"  {f.label:{w - 2}}"
            if f.key not in c.vals:
                why_not = c.notes.get(m.tool) or (c.fails.get(f.key) or ["no figure"])[-1]
                print(f"{line}not measured: {why_not}")
                continue
            line += "".join(f"{fmt(c.vals[f.key].get(r), '.3f', 'FAIL'):>9}" for r in rounds)
            line += f"{fmt(median(c, f.key)):>9}"
            if f.vs:
                by_med, paired = ratios(c, f.vs, [f.key], unit != "us")
                line += f"{fmt(by_med, '.2f'):>8}{fmt(paired, '.2f'):>8}"
            print(line)
    print("(ratio: xport's median / this one's; paired: the median of each round's own ratio. "
          "Latency: below 1,\nbandwidth and rate: above 1 mean xport is faster)")


def print_measures(c, meas):
    """Each target of the issue: the figures, the ratios, met or not."""
    figs = {f.key: f for m in meas for f in m.figs}
    print("Measures (judged on the paired ratio):")
    for row, what, xkey, peers, op, bound, *beside in TARGETS:
        if row not in {m.row for m in meas}:
            continue
        higher = op == ">="
        by_med, paired = ratios(c, xkey, peers, higher)
        missing = [figs[k].label for k in [xkey] + peers if k not in c.vals]
        if missing or paired is None:
            verdict = "NOT MEASURED (" + (", ".join(missing) or "no round measured all") + ")"
        else:
            ok = {"<=": paired <= bound, "<": paired < bound, ">=": paired >= bound}[op]
            verdict = "met" if ok else "NOT MET"
        print(f"- {what}: {verdict}")
        shown = ", ".join(f"{figs[k].label} {fmt(median(c, k), '.3f', 'n/a')}"
                          for k in [xkey] + peers + beside)
        print(f"    {shown} {ROWS[row][1]}")
        print(f"    xport/{'best' if len(peers) > 1 else 'peer'}: paired {fmt(paired)}x, "
              f"medians {fmt(by_med)}x (wanted {op} {bound})")
        for k in beside:
            b_med, b_paired = ratios(c, xkey, [k], higher)
            print(f"    beside, xport/{figs[k].label}: paired {fmt(b_paired)}x, "
                  f"medians {fmt(b_med)}x")


def machine_line(c):
    model = next((ln.split(":", 1)[1].strip() for ln in read("/proc/cpuinfo").splitlines()
                  if ln.startswith("model name")), "unknown")
    pkgs = [(pkg, subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], text=True,
                                 capture_output=True)) for pkg in ("ucx-utils", "openmpi-bin")]
    return (f"machine: {os.cpu_count()} CPUs ({model}), kernel {os.uname().release}, "
            f"xport {c.version}, " + ", ".join(
                f"{k} {p.stdout.strip() if p.returncode == 0 else 'not installed'}"
                for k, p in pkgs))


def report(c, meas, elapsed, load_before):
    n = c.args.rounds
    print(f"== xport point to point beside UCX, sockets and Open MPI: {n} interleaved "
          f"round{'s' if n > 1 else ''} (order rotating), {elapsed:.0f} s ==")
    load_after = " ".join(read("/proc/loadavg").split()[:3])
    print(machine_line(c))
    print(f"load:    {load_before} before, {load_after} after (1, 5, 15 min averages)")
    print("pinning: " + "\n         ".join([c.pin_note] + c.placement) + "\n")
    print_table(c, meas, range(1, n + 1))
    print()
    print_measures(c, meas)
    print()
    print("how the figures are read: latency is one-way (half the round trip), the median "
          "(UCX: its 50.0%ile\ncolumn, over the last 2048 round trips); bandwidth in GB/s = "
          "10^9 B/s and rate in 10^6 messages/s\nat the receiver (UCX: its overall columns, "
          "at the sender; its \"MB/s\" are MiB/s); 64 sends in flight.")
    print(f"commands (round 1; later rounds differ only in the UCX port), run from {ROOT}:")
    for cmd in c.commands:
        print(f"  {cmd}")



class Ctx:
    """What a run shares: options, paths (relative to the repository root,
    where every command runs, when inside it), notes, figures."""

    def __init__(self, args):
        self.args = args
        b = os.path.abspath(args.build)
        self.build = os.path.relpath(b, ROOT) if b.startswith(ROOT + os.sep) else b
        self.xprun = os.path.join(self.build, "tools", "xprun")
        self.xperf = os.path.join(self.build, "perf", "xport-perf")
        self.sock = os.path.join(self.build, "perf", "sock-baseline")
        self.mpi_bin = os.path.join(self.build, "perf", "mpi-baseline")
        self.pin = not args.no_pin and {0, 1} <= os.sched_getaffinity(0)
        self.pin_note = (
            "initiator/sender on CPU 0, responder/receiver on CPU 1 (xport-perf pins itself; "
            "ucx_perftest client -c 0, server -c 1; sock-baseline --pin; mpirun --bind-to core)"
            if self.pin else "none: the scheduler places every process (" +
            ("--no-pin)" if args.no_pin else "CPUs 0 and 1 are not both available)"))
        self.notes, self.vals, self.fails = {}, {}, {}  # by tool; by figure and round; by figure
        self.commands, self.placement, self.failed = [], [], False
        self.version, self.json_out, self.logdir = "unknown", None, args.logdir

    def log(self, name):
        return os.path.join(self.logdir, name)


def rows_wanted(ap, spec):
    if not spec:
        return list(ROWS)
    out = set()
    for tok in spec.split(","):
        hit = {r for r in ROWS if r == tok or tok in r.split("-")}
        if not hit:
            ap.error(f"--rows: no row '{tok}' (rows: {', '.join(ROWS)}; or tcp, shm, lat, bw, "
                     "rate)")
        out |= hit
    return [r for r in ROWS if r in out]


def parse_args():
    doc = __doc__.split("\n")
    ap = argparse.ArgumentParser(prog="perf/compare-p2p.py", description=doc[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(doc[2:]))
    ap.add_argument("--rows", metavar="R,R", help="only these rows (default: all)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), metavar="DIR",
                    help="Meson build directory (default: build/ of this checkout)")
    ap.add_argument("--no-pin", action="store_true", help="leave placement to the scheduler")
    ap.add_argument("--no-install", action="store_true", help="apt-get install nothing")
    ap.add_argument("--no-build", action="store_true", help="the build's programs as they are")
    ap.add_argument("--timeout", type=int, default=60, metavar="S",
                    help="bound on each benchmark command (default 60 s)")
    ap.add_argument("--quick", action="store_true", help="a tenth of the iterations (smoke run)")
    ap.add_argument("--logdir", metavar="DIR", help="keep every command's output in DIR "
                    "(default: a temporary directory, removed unless something failed)")
    ap.add_argument("--json-out", metavar="FILE", help="every row of every round, for perf/plot")
    ap.add_argument("--dry-run", action="store_true", help="print one round's commands, run none")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 99:
        ap.error("--rounds wants 1 to 99")
    if args.timeout < 5:
        ap.error("--timeout wants at least 5 s")
    args.rows = rows_wanted(ap, args.rows)
    return args


def dry_run(c, meas):
    print(f"# {PROG} --dry-run: the commands of one round, at {ROOT}; pinning: {c.pin_note}")
    for m in meas:
        if m.tool == "ucx":
            srv, cli = ucx_commands(c, m, "PORT")
            print(shell_line(srv, m.env) + " &\n" + shell_line(cli, m.env))
        else:
            print(shell_line(m.argv + m.iters[c.args.quick], m.env))
    return 0


def main():
    args = parse_args()
    c = Ctx(args)
    meas = [m for m in measurements(c) if m.row in args.rows]
    if args.dry_run:
        return dry_run(c, meas)
    c.logdir = args.logdir or tempfile.mkdtemp(prefix=PROG + ".")
    os.makedirs(c.logdir, exist_ok=True)
    try:
        if args.json_out:
            c.json_out = open(args.json_out, "w", encoding="utf-8")
            c.json_out.write(json.dumps({
                "type": "run", "system": PROG, "tool": "compare-p2p.py",
                "command": shlex.join(["perf/compare-p2p.py"] + sys.argv[1:]),
                "rows": args.rows, "rounds": args.rounds}) + "\n")
        setup(c, {m.tool for m in meas})
        load_before = " ".join(read("/proc/loadavg").split()[:3])
        elapsed = measure_rounds(c, meas)
        report(c, meas, elapsed, load_before)
        if args.json_out:
            say(f"wrote {args.json_out}")
    except KeyboardInterrupt:
        c.failed = True
        say("interrupted")
        return 130
    finally:
        for p in list(LIVE):
            stop(p)
        if args.logdir:
            print(f"logs: {c.logdir}")
        elif c.failed or any(c.notes.values()):
            say(f"logs kept in {c.logdir}")
        else:
            shutil.rmtree(c.logdir, ignore_errors=True)
    return 1 if c.failed else 0


if __name__ == "__main__":
    # SIGTERM unwinds as Ctrl-C does: every live command is stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
