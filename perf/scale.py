#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What forming a job costs as it grows: xp_init's time, descriptors, memory, /dev/shm.

    perf/scale.py [--sizes 16,32,64,128,256] [--transports tcp,shm]
                  [--patterns ring,alltoall,alltoall64k] [--inproc-sizes 1024] [--json-out FILE]
                  [--build DIR] [--timeout S] [--logdir DIR] [--no-build] [--dry-run]

For each job size N, transport (XP_TRANSPORTS=tcp or shm) and pattern, runs
`xprun -n N scale-probe PATTERN` (perf/scale_probe.c): every rank times
xp_init, sends 8 B to its ring neighbour (ring) or to every other rank
(alltoall; alltoall64k sends 64 KiB, past shared memory's inline limit, so
its bulk path is touched too), and with every rank still alive counts its descriptors, its
memory and the shared-memory segments it maps; rank 0 reads /dev/shm's use
(statvfs, the figure before the job subtracted). Then `scale-probe inproc N`
for each --inproc-sizes: an in-process job of N threads, its creation and
an 8 B allreduce. A markdown table of each job, the growth from one size to
the next, the per-peer costs fitted over the sizes (what docs/ARCHITECTURE.md,
"Formation at scale", projects from) and every command run.

All ranks run on this host, so beyond its CPUs they are oversubscribed: the
times are a report of growth, not of speed. The same command before and
after a change to xp_init measures both.

The soft descriptor limit is raised to the hard one for the jobs, and the
output says if the hard one is below what today's full mesh needs (about
4 per rank at rank 0 and in xprun). A job that fails (a limit, a timeout)
is a row saying why, and the larger sizes of its transport and pattern are
skipped; the rest still run. --json-out: one {"type":"run"} line, then one
line per job ({"type":"scale"} or {"type":"scale-inproc"}, with "error"
for one that failed); perf/plot does not draw them (they have no message
size). Exit status 0 when every job ran, 1 if one failed, 2 on a usage
error. Builds build/perf/scale-probe and build/tools/xprun with ninja unless
--no-build. With the defaults, about 3 minutes on this 2-CPU machine.
"""
import argparse
import importlib.util
import json
import math
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PROG = "scale"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRANSPORTS = ("tcp", "shm")
PATTERNS = ("ring", "alltoall", "alltoall64k")
MIB = 1 << 20


def say(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def load_sibling(name):
    """Another script of perf/ as a module (its main() runs only as a
    program): compare-p2p.py's process handling serves here unchanged."""
    spec = importlib.util.spec_from_file_location(
        name.replace("-", "_"), os.path.join(ROOT, "perf", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# shell_line(argv, env): the command as typed at the repository root;
# read(path); run(argv, env, log, timeout): (status, stdout, stderr) of a
# command in a session of its own, stopped (status 124) past the timeout;
# LIVE and stop(): what is still running, to stop on Ctrl-C.
P2P = load_sibling("compare-p2p")
shell_line, read, run = P2P.shell_line, P2P.read, P2P.run


def devshm_used():
    """Bytes in use in /dev/shm now (tmpfs counts unlinked segments while
    they are mapped)."""
    v = os.statvfs("/dev/shm")
    return (v.f_blocks - v.f_bfree) * v.f_frsize


def why(rc, err, timeout):
    """A failed job's reason in a line: the limit it hit if the ranks named
    one, else the first thing the probe or xprun said."""
    if rc == 124:
        return f"timed out after {timeout} s"
    for words, name in (("Too many open files", "EMFILE, the descriptor limit"),
                        ("Cannot allocate memory", "ENOMEM"),
                        ("Resource temporarily unavailable", "EAGAIN (threads or processes)"),
                        ("No space left on device", "ENOSPC (/dev/shm full?)")):
        if words in err:
            return f"exited with status {rc}: {name}: " + next(
                ln for ln in err.splitlines() if words in ln)[:200]
    said = [ln for ln in err.splitlines() if "scale-probe" in ln or "xprun:" in ln]
    said = said or [ln for ln in err.splitlines() if ln.strip()]
    return f"exited with status {rc}" + (": " + said[0][:200] if said else "")


def json_lines(text):
    out = []
    for ln in text.splitlines():
        if ln.startswith("{"):
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
    return out


def summarize(lines, n, transport, pattern, shm_before):
    """One job's row from the probe's lines; raises ValueError when they
    are not a whole job."""
    ranks = sorted((r for r in lines if r.get("type") == "rank"), key=lambda r: r["rank"])
    job = next((r for r in lines if r.get("type") == "job"), None)
    if [r["rank"] for r in ranks] != list(range(n)) or job is None:
        raise ValueError(f"{len(ranks)} rank lines of {n}" + ("" if job else ", no job line"))
    others = ranks[1:] or ranks
    init = [r["init_ns"] / 1e9 for r in ranks]
    served = sorted({r["transport"] for r in ranks})
    used = job["devshm_used_bytes"]

    def kinds(r):
        return {k[4:]: r[k] for k in ("fds_socket", "fds_pipe", "fds_pidfd", "fds_anon",
                                      "fds_file")}
    return {
        "type": "scale", "ranks": n, "transport": transport, "pattern": pattern,
        "served_by": served,
        "init_s_max": max(init), "init_s_median": statistics.median(init),
        # One clock for every process of the host (CLOCK_MONOTONIC_RAW): from
        # the first rank entering xp_init to the last leaving it.
        "formation_s": (max(r["init_start_ns"] + r["init_ns"] for r in ranks)
                        - min(r["init_start_ns"] for r in ranks)) / 1e9,
        # From the last rank entering xp_init to the last leaving it: what
        # forming costs once every rank is there, without the launcher's
        # spawning, which on an oversubscribed host grows with the load.
        "after_last_s": (max(r["init_start_ns"] + r["init_ns"] for r in ranks)
                         - max(r["init_start_ns"] for r in ranks)) / 1e9,
        # The CPU every rank spent in xp_init, summed: what forming costs on
        # a host with more ranks than CPUs, apart from the waiting for them.
        "init_cpu_s_sum": sum(r.get("init_cpu_ns", 0) for r in ranks) / 1e9,
        "init_sys_s_sum": sum(r.get("init_sys_ns", 0) for r in ranks) / 1e9,
        "exchange_ms_max": max(r["exchange_ns"] for r in ranks) / 1e6,
        "fds_rank0": ranks[0]["fds"], "fds_rank0_kinds": kinds(ranks[0]),
        "fds_others_max": max(r["fds"] for r in others),
        "fds_others_median": statistics.median(r["fds"] for r in others),
        "fds_others_max_kinds": kinds(max(others, key=lambda r: r["fds"])),
        "rss_MiB_median": statistics.median(r["rss_kB"] for r in ranks) / 1024,
        "rss_MiB_max": max(r["rss_kB"] for r in ranks) / 1024,
        "hwm_MiB_max": max(r["hwm_kB"] for r in ranks) / 1024,
        "shm_map_MiB_max": max(r["shm_map_kB"] for r in ranks) / 1024,
        # Proportional shares: their sum is what the segments hold in pages.
        "shm_pss_MiB_sum": sum(r["shm_pss_kB"] for r in ranks) / 1024,
        "devshm_MiB": None if used < 0 else (used - shm_before) / MIB,
        # Payload bytes over each rank's open TCP sockets (TCP_INFO): at
        # rank 0 mostly the bootstrap's allgather tables, sent to every rank.
        "tcp_sent_rank0": ranks[0]["tcp_sent"],
        "tcp_received_others_max": max(r["tcp_received"] for r in others),
    }


def fit(xs, ys):
    """Least squares y = a + b x: (a, b); b alone through (x, y) for one point."""
    if len(xs) == 1:
        return 0.0, ys[0] / xs[0] if xs[0] else 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def in_root(path):
    """@path relative to the repository root if inside it: commands run
    there, and print shorter."""
    a = os.path.abspath(path)
    return os.path.relpath(a, ROOT) if os.path.commonpath([a, ROOT]) == ROOT else a


class Ctx:
    """What a run shares: options, the programs, what it measured."""

    def __init__(self, args):
        self.args = args
        self.build = in_root(args.build)
        self.xprun, self.probe = (os.path.join(self.build, *p) for p in (
            ("tools", "xprun"), ("perf", "scale-probe")))
        self.commands, self.jobs, self.inproc, self.notes = [], [], [], []
        self.failed, self.json_out, self.logdir = False, None, args.logdir
        # The library must give up before this script does, so that a slow
        # formation fails with the library's own message.
        ms = str(max(5, args.timeout - 15) * 1000)
        self.xp_env = {"XP_BOOT_TIMEOUT_MS": ms, "XP_TIMEOUT_MS": ms}

    def log(self, name):
        return os.path.join(self.logdir, name)

    def emit(self, row):
        if self.json_out:
            self.json_out.write(json.dumps(row) + "\n")
            self.json_out.flush()

    def job_command(self, n, transport, pattern):
        env = {"XP_TRANSPORTS": transport, **self.xp_env}
        return [self.xprun, "-n", str(n), self.probe, pattern], env


def raise_nofile(c):
    """Soft descriptor limit up to the hard one, for this script's children;
    a note when the hard one is short of what the largest job needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    need = 4 * max(c.args.sizes, default=0) + 64
    lim = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    c.limit_note = f"descriptors: soft limit {soft} raised to {lim}" if soft != hard else \
        f"descriptors: limit {lim}"
    if hard != resource.RLIM_INFINITY and hard < need:
        c.notes.append(f"the hard descriptor limit {hard} is below the {need} that today's "
                       f"full mesh needs at {max(c.args.sizes)} ranks: expect EMFILE")


def measure_job(c, n, transport, pattern):
    argv, env = c.job_command(n, transport, pattern)
    cmd = shell_line(argv, env)
    c.commands.append(cmd)
    before = devshm_used()
    t0 = time.time()
    rc, out, err = run(argv, env, c.log(f"n{n}-{transport}-{pattern}"), c.args.timeout)
    wall = time.time() - t0
    row = None
    try:
        if rc == 0:
            row = summarize(json_lines(out), n, transport, pattern, before)
    except (ValueError, KeyError, TypeError) as e:
        err = f"{err}\nscale-probe: output not understood: {e}"
    if row is None:
        row = {"type": "scale", "ranks": n, "transport": transport, "pattern": pattern,
               "error": why(rc, err, c.args.timeout) if rc != 0 else err.splitlines()[-1]}
        c.failed = True
        say(f"N={n} {transport} {pattern}: FAILED: {row['error']}")
    else:
        say(f"N={n} {transport} {pattern}: xp_init max {row['init_s_max']:.3f} s, fds rank 0 "
            f"{row['fds_rank0']}, others <= {row['fds_others_max']} ({wall:.1f} s)")
    row["wall_s"] = round(wall, 3)
    row["command"] = cmd
    c.jobs.append(row)
    c.emit(row)
    return "error" not in row


def measure_inproc(c, n):
    argv = [c.probe, "inproc", str(n)]
    cmd = shell_line(argv, c.xp_env)
    c.commands.append(cmd)
    rc, out, err = run(argv, c.xp_env, c.log(f"inproc-{n}"), c.args.timeout)
    got = [r for r in json_lines(out) if r.get("type") == "inproc"]
    if rc == 0 and got:
        row = {**got[0], "type": "scale-inproc"}
        say(f"in-process N={n}: created in {row['create_ns'] / 1e6:.1f} ms, allreduce "
            f"{row['allreduce_ns'] / 1e6:.1f} ms")
    else:
        row = {"type": "scale-inproc", "ranks": n,
               "error": why(rc, err, c.args.timeout) if rc != 0 else "no inproc line"}
        c.failed = True
        say(f"in-process N={n}: FAILED: {row['error']}")
    row["command"] = cmd
    c.inproc.append(row)
    c.emit(row)


def print_jobs(c):
    print("| N | transport | pattern | xp_init max (s) | xp_init median (s) | formation (s) "
          "| after the last arrival (s) | xp_init CPU, all ranks (s) | of it in the kernel (s) | exchange max (ms) | fds rank 0 | fds others max "
          "| RSS median (MiB) | RSS max (MiB) | shm mapped/rank (MiB) | /dev/shm (MiB) |")
    print("|" + "---:|" * 3 + "---:|" * 13)
    for r in c.jobs:
        head = f"| {r['ranks']} | {r['transport']} | {r['pattern']} |"
        if "error" in r:
            print(f"{head} FAILED: {r['error']} |")
            continue
        served = "" if r["served_by"] == [r["transport"]] else \
            f" (served by {','.join(r['served_by'])})"
        print(f"{head} {r['init_s_max']:.3f}{served} | {r['init_s_median']:.3f} "
              f"| {r['formation_s']:.3f} | {r.get('after_last_s', float('nan')):.3f} "
              f"| {r.get('init_cpu_s_sum', float('nan')):.3f} "
              f"| {r.get('init_sys_s_sum', float('nan')):.3f} "
              f"| {r['exchange_ms_max']:.1f} | {r['fds_rank0']} "
              f"| {r['fds_others_max']} | {r['rss_MiB_median']:.1f} | {r['rss_MiB_max']:.1f} "
              f"| {r['shm_map_MiB_max']:.1f} | {fmt(r['devshm_MiB'], '.1f')} |")


def series(c):
    """The measured jobs by (transport, pattern), in size order."""
    out = {}
    for r in c.jobs:
        if "error" not in r:
            out.setdefault((r["transport"], r["pattern"]), []).append(r)
    return out


def print_growth(c):
    """Each doubling (or any step) of N: how much each cost grew, and the
    exponent k of N^k that growth means."""
    print("| transport | pattern | N | xp_init max x | exponent | fds rank 0 x "
          "| /dev/shm x |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (t, p), rows in series(c).items():
        for a, b in zip(rows, rows[1:]):
            step = math.log(b["ranks"] / a["ranks"])
            g = b["init_s_max"] / a["init_s_max"]
            shm = "-" if not a["devshm_MiB"] or a["devshm_MiB"] <= 0 or b["devshm_MiB"] is None \
                else f"{b['devshm_MiB'] / a['devshm_MiB']:.2f}"
            print(f"| {t} | {p} | {a['ranks']} → {b['ranks']} | {g:.2f} "
                  f"| {math.log(g) / step:.2f} | {b['fds_rank0'] / a['fds_rank0']:.2f} "
                  f"| {shm} |")


def per_step(c):
    """The per-step costs the model (docs/ARCHITECTURE.md, "Formation at
    scale") projects from, fitted over the sizes by least squares as
    a + b (N-1), peers = N-1: descriptors and RSS per rank; the size of one
    shm segment (a rank maps N of them, its own and each peer's); /dev/shm
    per rank; rank 0's bytes sent over TCP divided by (N-1)^2 (so a is its
    bytes per pair, b per (N-1)^3). And xp_init's slowest time over N(N-1),
    the connections made one after another if formation is a chain."""
    fits = []
    for (t, p), rows in series(c).items():
        peers = [r["ranks"] - 1 for r in rows]
        f = {"transport": t, "pattern": p, "sizes": [r["ranks"] for r in rows]}
        for key, ys in (
                ("fds_rank0", [r["fds_rank0"] for r in rows]),
                ("fds_others", [r["fds_others_max"] for r in rows]),
                ("rss_kB", [r["rss_MiB_median"] * 1024 for r in rows]),
                ("shm_segment_kB", [r["shm_map_MiB_max"] * 1024 / r["ranks"] for r in rows]),
                ("devshm_B_per_rank", [(r["devshm_MiB"] or 0) * MIB / r["ranks"] for r in rows]),
                ("rank0_sent_B_per_pair", [r["tcp_sent_rank0"] / (r["ranks"] - 1) ** 2
                                           for r in rows])):
            a, b = fit(peers, ys)
            f[key] = {"fixed": round(a, 3), "per_peer": round(b, 3)}
        f["init_us_per_conn"] = [round(r["init_s_max"] * 1e6 / (r["ranks"] * (r["ranks"] - 1)),
                                       1) for r in rows]
        fits.append(f)
    return fits


def print_fits(fits):
    print("| transport | pattern | fds rank 0 | fds others | RSS/rank (KiB) | shm segment (KiB) "
          "| /dev/shm/rank (B) | rank 0 sent/(N-1)² (B) | xp_init max/N(N-1) (us), by N |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in fits:
        def ab(key, spec):
            return f"{f[key]['fixed']:{spec}} + {f[key]['per_peer']:{spec}}/peer"
        by_n = ", ".join(f"{n}: {v}" for n, v in zip(f["sizes"], f["init_us_per_conn"]))
        print(f"| {f['transport']} | {f['pattern']} | {ab('fds_rank0', '.1f')} "
              f"| {ab('fds_others', '.1f')} | {ab('rss_kB', '.0f')} "
              f"| {ab('shm_segment_kB', '.0f')} | {ab('devshm_B_per_rank', '.0f')} "
              f"| {ab('rank0_sent_B_per_pair', '.1f')} | {by_n} |")


def print_traffic(c):
    """What rank 0 sent over TCP by the end of the exchange: the bootstrap's
    allgathers (each rank's part to rank 0, the whole table to every rank)
    and its own share of the pattern, against N-1 squared and cubed."""
    print("| N | transport | pattern | rank 0 sent (MiB) | per (N-1)² (B) | per (N-1)³ (B) "
          "| received, other rank max (KiB) |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for r in c.jobs:
        if "error" not in r:
            p = r["ranks"] - 1
            print(f"| {r['ranks']} | {r['transport']} | {r['pattern']} "
                  f"| {r['tcp_sent_rank0'] / MIB:.2f} | {r['tcp_sent_rank0'] / p ** 2:.0f} "
                  f"| {r['tcp_sent_rank0'] / p ** 3:.1f} "
                  f"| {r['tcp_received_others_max'] / 1024:.1f} |")


def print_inproc(c):
    print("| N | create (ms) | 8 B allreduce (ms) | fds | RSS before (MiB) | RSS after "
          "(MiB) | peak RSS (MiB) | peak per rank (KiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in c.inproc:
        if "error" in r:
            print(f"| {r['ranks']} | FAILED: {r['error']} |")
            continue
        per = (r["hwm_kB"] - r["rss_before_kB"]) / r["ranks"]
        print(f"| {r['ranks']} | {r['create_ns'] / 1e6:.1f} | {r['allreduce_ns'] / 1e6:.1f} "
              f"| {r['fds']} | {r['rss_before_kB'] / 1024:.1f} | {r['rss_kB'] / 1024:.1f} "
              f"| {r['hwm_kB'] / 1024:.1f} | {per:.0f} |")


def print_measures(c):
    """Issue 26's measures, those this run has the rows for: 256 ranks over
    TCP after a ring, each rank at most 32 descriptors; formation at most
    linear from 64 to 256 ranks (x4); in-process jobs of 1,024 ranks that
    form and run an 8 B allreduce."""
    by = {(r["ranks"], r["transport"], r["pattern"]): r for r in c.jobs if "error" not in r}
    out = []
    r = by.get((256, "tcp", "ring"))
    if r:
        most = max(r["fds_rank0"], r["fds_others_max"])
        out.append(f"- 256 ranks over TCP after a ring, no rank above 32 descriptors: "
                   f"{'met' if most <= 32 else 'NOT MET'} (the most: {most})")
    a, b = by.get((64, "tcp", "ring")), by.get((256, "tcp", "ring"))
    if a and b:
        g = b["init_s_max"] / a["init_s_max"]
        out.append(f"- formation at most linear from 64 to 256 ranks (tcp, ring), by the "
                   f"slowest xp_init: {'met' if g <= 4 else 'NOT MET'} (x{g:.1f}; linear: x4)")
        if "after_last_s" in a and a["after_last_s"] > 0:
            g = b["after_last_s"] / a["after_last_s"]
            out.append(f"- the same, from the last rank's arrival (spawning left out): "
                       f"{'met' if g <= 4 else 'NOT MET'} (x{g:.1f}; linear: x4)")
        if a.get("init_cpu_s_sum", 0) > 0:
            g = b["init_cpu_s_sum"] / a["init_cpu_s_sum"]
            out.append(f"- the same, by the CPU all ranks spent in xp_init: "
                       f"{'met' if g <= 4 else 'NOT MET'} (x{g:.1f}; linear: x4)")
    big = [r for r in c.inproc if r["ranks"] >= 1024]
    if big:
        ok = all("error" not in r for r in big)
        out.append("- in-process jobs of 1,024 ranks form and run an 8 B allreduce: "
                   + ("met" if ok else "NOT MET"))
    if out:
        print("\nIssue 26's measures:\n" + "\n".join(out))


def machine_line():
    model = next((ln.split(":", 1)[1].strip() for ln in read("/proc/cpuinfo").splitlines()
                  if ln.startswith("model name")), "unknown")
    mem = next((ln.split()[1] for ln in read("/proc/meminfo").splitlines()
                if ln.startswith("MemTotal:")), "0")
    head = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], text=True,
                          capture_output=True).stdout.strip() or "unknown"
    return (f"machine: {os.cpu_count()} CPUs ({model}), {int(mem) // 1024} MiB, kernel "
            f"{os.uname().release}; xport at {head}")


def report(c, fits, elapsed, load_before):
    print(f"== forming xport jobs as they grow: {len(c.jobs)} jobs of processes, "
          f"{len(c.inproc)} in-process, {elapsed:.0f} s ==")
    print(machine_line())
    print(f"load: {load_before} before, {' '.join(read('/proc/loadavg').split()[:3])} after; "
          f"{c.limit_note}; every rank on this host: more ranks than CPUs is oversubscribed, "
          "the times show growth, not speed")
    for note in c.notes:
        print(f"NOTE: {note}")
    if c.jobs:
        print("\nJobs of processes (xprun; XP_TRANSPORTS as named):\n")
        print_jobs(c)
        print("\nxp_init max, fds: the slowest rank's time and rank 0's descriptors; fds "
              "others: the most any other rank holds;\nformation: first rank into xp_init "
              "to last out; after the last arrival: the last rank into xp_init to the last out\n"
              "(the launcher's spawning left out); xp_init CPU: summed over the ranks, and the kernel's part of it; exchange: the pattern's messages, slowest "
              "rank (over tcp\nit makes the pairs); shm mapped:\n"
              "the segments one rank maps (sparse: address space, not memory); /dev/shm: "
              "what it holds in use during the job\n(statvfs, the use before the job "
              "subtracted).")
    if any("error" not in r for r in c.jobs):
        print("\nBytes over TCP (TCP_INFO of each rank's sockets still open after the exchange: "
              "the bootstrap's\nclose at the end of xp_init; over tcp the transport's "
              "handshakes and the pattern):\n")
        print_traffic(c)
    if any(len(rows) > 1 for rows in series(c).values()):
        print("\nGrowth from one size to the next (x: ratio; exponent k: cost ~ N^k):\n")
        print_growth(c)
    if fits:
        print("\nPer-step costs, least squares over the sizes (a + b per peer, peers = N-1; "
              "fds others: the max rank;\nshm segment: mapped per rank / N; rank 0 sent: "
              "bytes per pair, + per (N-1)³):\n")
        print_fits(fits)
    if c.inproc:
        print("\nIn-process jobs (scale-probe inproc N: xp_local_job_create, one thread a "
              "rank, 8 B float64 allreduce):\n")
        print_inproc(c)
    print_measures(c)
    print(f"\ncommands, run from {ROOT}:")
    for cmd in c.commands:
        print(f"  {cmd}")


def sizes(ap, spec, name, lo, hi):
    if spec.strip() in ("", "none"):
        return []
    try:
        out = [int(s) for s in spec.split(",")]
    except ValueError:
        ap.error(f"{name}: a comma list of numbers, not '{spec}'")
    if any(not lo <= n <= hi for n in out):
        ap.error(f"{name}: each size {lo} to {hi}")
    return sorted(set(out))


def choices(ap, spec, name, allowed):
    out = spec.split(",")
    bad = [s for s in out if s not in allowed]
    if bad:
        ap.error(f"{name}: no '{bad[0]}' (choose from {', '.join(allowed)})")
    return list(dict.fromkeys(out))


def parse_args():
    doc = __doc__.split("\n")
    ap = argparse.ArgumentParser(prog="perf/scale.py", description=doc[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(doc[2:]))
    flag = {"action": "store_true"}
    for name, kw, what in (
            ("--sizes", {"default": "16,32,64,128,256", "metavar": "N,N"},
             "job sizes, 2 to 1024 (xprun's bound; default 16,32,64,128,256; none: no jobs "
             "of processes)"),
            ("--transports", {"default": "tcp,shm", "metavar": "T,T"},
             "XP_TRANSPORTS of each job: tcp, shm (default both)"),
            ("--patterns", {"default": "ring,alltoall", "metavar": "P,P"},
             "ring, alltoall, alltoall64k (64 KiB to every peer; default ring,alltoall)"),
            ("--inproc-sizes", {"default": "1024", "metavar": "N,N"},
             "in-process jobs, 1 to 4096 threads (default 1024; none: skip)"),
            ("--build", {"default": os.path.join(ROOT, "build"), "metavar": "DIR"},
             "Meson build directory (default: build/ of this checkout)"),
            ("--timeout", {"type": int, "default": 300, "metavar": "S"},
             "bound on each job, s (default 300; the library's boot and wait timeouts are "
             "15 s shorter)"),
            ("--json-out", {"metavar": "FILE"}, "one JSON line per job"),
            ("--logdir", {"metavar": "DIR"}, "keep every job's output in DIR (default: a "
             "temporary directory, removed unless something failed)"),
            ("--dry-run", flag, "print the commands, run none"),
            ("--no-build", flag, "the build's programs as they are")):
        ap.add_argument(name, help=what, **kw)
    args = ap.parse_args()
    args.sizes = sizes(ap, args.sizes, "--sizes", 2, 1024)
    args.inproc_sizes = sizes(ap, args.inproc_sizes, "--inproc-sizes", 1, 4096)
    args.transports = choices(ap, args.transports, "--transports", TRANSPORTS)
    args.patterns = choices(ap, args.patterns, "--patterns", PATTERNS)
    if args.timeout < 20:
        ap.error("--timeout wants at least 20 s")
    return args


def main():
    args = parse_args()
    c = Ctx(args)
    plan = [(n, t, p) for n in args.sizes for t in args.transports for p in args.patterns]
    if args.dry_run:
        for n, t, p in plan:
            print(shell_line(*c.job_command(n, t, p)))
        for n in args.inproc_sizes:
            print(shell_line([c.probe, "inproc", str(n)], c.xp_env))
        return 0
    c.logdir = args.logdir or tempfile.mkdtemp(prefix=PROG + ".")
    os.makedirs(c.logdir, exist_ok=True)
    raise_nofile(c)
    try:
        measure_all(c, plan)
    except KeyboardInterrupt:
        c.failed = True
        say("interrupted")
        return 130
    finally:
        wind_up(c)
    return 1 if c.failed else 0


def measure_all(c, plan):
    """Builds, runs every job of @plan and the in-process ones, reports."""
    args = c.args
    if not args.no_build:
        cmd = ["ninja", "-C", c.build, "perf/scale-probe", "tools/xprun"]
        c.commands.append(shell_line(cmd))
        if run(cmd, {}, c.log("ninja"), 900)[0] != 0:
            say(f"{shell_line(cmd)} failed (log in {c.logdir})")
            c.failed = True
            return
    if args.json_out:
        c.json_out = open(args.json_out, "w", encoding="utf-8")
        c.emit({"type": "run", "system": "scale", "tool": "scale.py",
                "command": shlex.join(["perf/scale.py"] + sys.argv[1:]),
                "sizes": args.sizes, "transports": args.transports,
                "patterns": args.patterns, "inproc_sizes": args.inproc_sizes})
    load_before = " ".join(read("/proc/loadavg").split()[:3])
    t0 = time.time()
    broken = {}  # (transport, pattern): the size that failed
    for n, t, p in plan:
        if (t, p) in broken:
            row = {"type": "scale", "ranks": n, "transport": t, "pattern": p,
                   "error": f"skipped: N={broken[t, p]} failed"}
            c.jobs.append(row)
            c.emit(row)
        elif not measure_job(c, n, t, p):
            broken[t, p] = n
    for n in args.inproc_sizes:
        measure_inproc(c, n)
    fits = per_step(c)
    c.emit({"type": "scale-fits", "fits": fits})
    report(c, fits, time.time() - t0, load_before)
    if args.json_out:
        say(f"wrote {args.json_out}")


def wind_up(c):
    """Stops whatever still runs (Ctrl-C), closes --json-out, and keeps the
    logs where --logdir asked or something failed."""
    for p in list(P2P.LIVE):
        P2P.stop(p)
    if c.json_out:
        c.json_out.close()
    if c.args.logdir or c.failed:
        say(f"logs {'in' if c.args.logdir else 'kept in'} {c.logdir}")
    else:
        shutil.rmtree(c.logdir, ignore_errors=True)


if __name__ == "__main__":
    # SIGTERM unwinds as Ctrl-C does: a running job is stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
