#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""xport's PyTorch backend beside Gloo, in one run on this machine (issue 25).

    /usr/bin/python3 perf/compare-torch.py [--rounds N] [--nproc N] [--transport shm|tcp|both]
        [--sizes L] [--quick] [--json-out FILE] [--build DIR] [--no-pin] [--timeout S]

Each round runs, in an order rotating from round to round, one torch job
with backend "xport" per transport (shm: xp_init's choice on one host;
tcp: XP_TRANSPORTS=tcp), one with backend "gloo" (TCP whatever the
transport: the same Gloo run stands beside both), and `xprun -n N
xport-perf allreduce` per transport at the sizes up to 4 KiB (the C
library without the binding). A torch job is this script with --job: N
processes of it (--rank), joined by init_method tcp://127.0.0.1:PORT (a
free port), each running every measurement and rank 0 printing a JSON
line per measurement:
  - all_reduce, float32 sum, at each size (default 4 B to 64 MiB by 4);
  - broadcast from rank 0 and all_gather at 4 KiB and 1 MiB (all_gather's
    size is its output, as nccl-tests count it: each rank gives size/N);
  - a DistributedDataParallel step of an MLP of 402,448 float32 parameters
    (forward, backward with its gradient allreduce, SGD step).
Timing is xport-perf's, so that the binding's overhead reads off directly:
each rank times each call back to back after warmup calls, with no barrier
between calls; a call's time is the slowest rank's (the per-call times are
reduced with MAX after the last call), as nccl-tests report. Timed calls
per size: about 256 MiB in all, 20 to 1000 (perf/perf_util.h), warmup a
tenth, at least 5; --quick a tenth of that and fewer sizes. p50 is the
median call time; algbw = size / mean call time, busbw = algbw x
2(n-1)/n (all_reduce), 1 (broadcast), (n-1)/n (all_gather), nccl-tests'
factors. DDP: the median step time over 100 steps after 10.

The report: markdown tables of the medians over rounds, xport beside Gloo
with the paired ratio xport/gloo (the median of each round's own ratio:
the machine's fast and slow spells last seconds, and both runs of one
round share one more often than two medians do); the binding's overhead,
torch's p50 beside xport-perf's; whether the issue's measures hold; every
command, runnable at the repository root.

Placement: with as many CPUs as ranks, rank r on CPU r (each rank pins
itself with sched_setaffinity, as xport-perf does, and runs torch with one
intra-op thread). With more ranks than CPUs (--nproc 4 on 2) nothing is
pinned and the figures are a report, not a comparison: ranks take each
other's time, and no measure is judged.

Run with Debian's /usr/bin/python3 (the torch the backend was built for);
commands get PYTHONPATH=BUILD/python. --json-out: every row of every job
and round, xport-perf's keys plus system (xport-torch, gloo, xport),
variant, round and command, for perf/plot. Exit status 0 when every
measurement worked, 1 if one failed, 2 on a usage error.
"""
import argparse
import importlib.util
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PROG = "compare-torch"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIB, MIB = 1 << 10, 1 << 20
SIZES = [4 << (2 * k) for k in range(13)]  # 4 B .. 64 MiB
QUICK_SIZES = [4, 64, 4 * KIB, MIB]
MOVE_SIZES = [4 * KIB, MIB]  # broadcast, all_gather
SMALL = 4 * KIB  # the binding's overhead and the latency measures: sizes up to this
BUSBW = {"allreduce": lambda n: 2 * (n - 1) / n, "bcast": lambda n: 1.0,
         "allgather": lambda n: (n - 1) / n}
DDP_STEPS = (10, 100)  # warmup, timed

# The process handling of perf/compare-p2p.py (each command in a session
# of its own, stopped whole on a timeout or Ctrl-C; output in a log
# directory): one copy, loaded from its file, as its name is no module's.
_spec = importlib.util.spec_from_file_location("compare_p2p",
                                               os.path.join(ROOT, "perf", "compare-p2p.py"))
p2p = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(p2p)


def say(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def size_name(s):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if s >= 1 << shift and s % (1 << shift) == 0:
            return f"{s >> shift} {unit}"
    return f"{s} B"


def parse_sizes(text):
    """Sizes in bytes from "4,64,4k,1m"; whole float32 elements."""
    out = []
    for tok in text.split(","):
        tok = tok.strip().lower()
        mul = {"k": KIB, "m": MIB}.get(tok[-1:], 1)
        digits = tok[:-1] if mul > 1 else tok
        if not digits.isdigit() or int(digits) * mul < 4 or int(digits) * mul % 4 \
                or int(digits) * mul > 256 * MIB:
            raise argparse.ArgumentTypeError(f"'{tok}': sizes are 4 B to 256m, whole float32 "
                                             "elements (multiples of 4)")
        out.append(int(digits) * mul)
    return sorted(set(out))


def plan(nbytes, quick):
    """(timed calls, warmup calls) for a call of @nbytes: perf/perf_util.h's
    perf_coll_iters and perf_coll_warmup, so that torch's rows and
    xport-perf's compare call for call; --quick a tenth."""
    iters = min(1000, max(20, (256 * MIB) // nbytes))
    if quick:
        return max(5, iters // 10), 2
    return iters, max(5, iters // 10)


# ---------------------------------------------------------------------------
# One rank of a torch job (--job BACKEND --rank R)

def rank_main(a):
    n, me = a.nproc, a.rank
    cpus = sorted(os.sched_getaffinity(0))
    if a.pin and n <= len(cpus):
        # Before torch starts its threads, so that they inherit it.
        os.sched_setaffinity(0, {cpus[me % len(cpus)]})
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    if a.job == "xport":
        import xport.torch  # noqa: F401 (registers the backend)
    from datetime import timedelta

    # One intra-op thread: the ranks have one CPU each (or share them).
    torch.set_num_threads(1)
    dist.init_process_group(a.job, init_method=a.init, rank=me, world_size=n,
                            timeout=timedelta(seconds=120))
    transports = "tcp" if a.job == "gloo" else os.environ.get("XP_TRANSPORTS", "shm")
    system = "gloo" if a.job == "gloo" else "xport-torch"

    def clock():
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)

    def timed(call, iters, warm):
        """Per-call times (ns) of the slowest rank, after @warm untimed calls."""
        t = torch.zeros(iters, dtype=torch.float64)
        for i in range(warm + iters):
            t0 = clock()
            call()
            t1 = clock()
            if i >= warm:
                t[i - warm] = t1 - t0
        # The reduction of the times is no timed call's.
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return sorted(t.tolist())

    def row(test, size, tm, warm, **extra):
        if me != 0:
            return
        avg = sum(tm) / len(tm)

        def pct(p):  # nearest rank, as perf_util.h's pct_index
            return tm[max(0, min(len(tm), -(-len(tm) * p // 100)) - 1)]
        r = {"test": test, "size": size, "iters": len(tm), "warmup": warm,
             "time_us_avg": round(avg / 1e3, 3), "time_us_min": round(tm[0] / 1e3, 3),
             "time_us_p50": round(pct(50) / 1e3, 3), "time_us_p99": round(pct(99) / 1e3, 3)}
        if test in BUSBW:
            algbw = size / avg  # bytes per ns = GB/s
            r.update(algbw_GBps=round(algbw, 6), busbw_GBps=round(algbw * BUSBW[test](n), 6))
        r.update(extra, algorithm=None, transports=transports, ranks=n, system=system)
        # xport-perf's compact form: readers find rows by '{"test":'.
        print(json.dumps(r, separators=(",", ":")), flush=True)

    def check(what, got, want):
        if not torch.equal(got, want):
            sys.exit(f"{PROG}: rank {me}: {what} gave a wrong result")

    for size in a.sizes:
        iters, warm = plan(size, a.quick)
        # Zeros: a sum repeated a thousand times stays finite and normal.
        buf = torch.zeros(size // 4, dtype=torch.float32)
        tm = timed(lambda: dist.all_reduce(buf), iters, warm)
        row("allreduce", size, tm, warm, count=size // 4, dtype="float32", op="sum")
        # Once per size, a result to check, so that a broken path fails the run.
        buf.fill_(me + 1)
        dist.all_reduce(buf)
        check(f"all_reduce of {size} B", buf, torch.full_like(buf, n * (n + 1) / 2))
    for size in MOVE_SIZES:
        iters, warm = plan(size, a.quick)
        buf = torch.full((size // 4,), float(me), dtype=torch.float32)
        tm = timed(lambda: dist.broadcast(buf, 0), iters, warm)
        row("bcast", size, tm, warm, count=size // 4, dtype="float32")
        check(f"broadcast of {size} B", buf, torch.zeros_like(buf))
        # Every rank's block a row of one tensor, as DDP-like code gathers.
        out = torch.empty(n, size // 4 // n, dtype=torch.float32)
        mine = torch.full((size // 4 // n,), float(me), dtype=torch.float32)
        blocks = list(out.unbind(0))
        tm = timed(lambda: dist.all_gather(blocks, mine), iters, warm)
        row("allgather", size, tm, warm, count=size // 4, dtype="float32")
        check(f"all_gather of {size} B", out,
              torch.arange(n, dtype=torch.float32)[:, None].expand_as(out))

    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 16))
    net = DDP(model)  # torch's default buckets, as a user gets them
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(100 + me)
    x, y = torch.randn(64, 256, generator=g), torch.randn(64, 16, generator=g)

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    warm, iters = (3, 10) if a.quick else DDP_STEPS
    tm = timed(step, iters, warm)
    nparams = sum(p.numel() for p in model.parameters())
    # size: the gradient bytes each step allreduces.
    row("ddp", nparams * 4, tm, warm, params=nparams, batch=64)
    if a.job == "gloo":
        # torch 1.13's teardown of a Gloo group under DDP can deadlock: the
        # Reducer's destructor joins Gloo's worker thread holding the GIL,
        # while that thread waits for the GIL to free a tensor (seen here in
        # gdb: ~ProcessGroupGloo in std::thread::join, the worker in
        # PyEval_AcquireThread). The last collective has completed on every
        # rank, so nothing is lost by leaving at once.
        sys.stdout.flush()
        os._exit(0)
    # xport's group is finalized at exit (collective, python/xport/torch.py).
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_main(a):
    """--job without --rank: starts the N ranks; the first failing one's
    status, the others stopped then (they would wait for it until their
    timeout)."""
    init = f"tcp://127.0.0.1:{free_port()}"
    argv = [sys.executable, os.path.abspath(__file__), "--job", a.job, "--nproc", str(a.nproc),
            "--sizes", ",".join(map(str, a.sizes)), "--init", init]
    argv += (["--quick"] if a.quick else []) + ([] if a.pin else ["--no-pin"])
    ranks = []
    try:
        for r in range(a.nproc):
            ranks.append(subprocess.Popen(argv + ["--rank", str(r)], stdin=subprocess.DEVNULL))
        while True:
            live = [p for p in ranks if p.poll() is None]  # polls every rank
            rc = next((p.returncode for p in ranks if p.returncode), 0)
            if rc or not live:
                break
            time.sleep(0.05)
    finally:
        # A rank stuck in a collective with a failed one, or a job stopped:
        # nothing outlives it.
        for p in ranks:
            if p.poll() is None:
                p.kill()
            p.wait()
    return 1 if rc < 0 else rc


# ---------------------------------------------------------------------------
# The comparison

class Run:
    """Options, paths (relative to the repository root, where every command
    runs), the figures: vals[(key, test, size, figure)][round]."""

    def __init__(self, a):
        self.a = a
        b = os.path.abspath(a.build)
        self.build = os.path.relpath(b, ROOT) if b.startswith(ROOT + os.sep) else b
        ncpus = len(os.sched_getaffinity(0))
        self.over = a.nproc > ncpus
        self.pin = a.pin and not self.over
        self.ncpus = ncpus
        self.vals, self.fails, self.commands = {}, [], []
        self.logdir = tempfile.mkdtemp(prefix=PROG + ".")
        self.json_out = None

    def log(self, name):
        return os.path.join(self.logdir, name)


def systems(c):
    """[(key, label, argv, env)]: what each round runs."""
    a = c.a
    trs = ["shm", "tcp"] if a.transport == "both" else [a.transport]
    py_env = {"PYTHONPATH": os.path.join(c.build, "python")}

    def job(backend):
        return [sys.executable, "perf/compare-torch.py", "--job", backend, "--nproc",
                str(a.nproc), "--sizes", ",".join(map(str, a.sizes))] \
            + (["--quick"] if a.quick else []) + ([] if c.pin else ["--no-pin"])
    out = []
    for tr in trs:
        env = dict(py_env, **({"XP_TRANSPORTS": "tcp"} if tr == "tcp" else {}))
        out.append((f"xport-{tr}", f"torch xport {tr}", job("xport"), env))
    out.append(("gloo", "torch gloo", job("gloo"), py_env))
    small = [s for s in a.sizes if s <= SMALL]
    if small:
        iters = plan(small[-1], a.quick)
        perf = [os.path.join(c.build, "tools", "xprun"), "-n", str(a.nproc),
                os.path.join(c.build, "perf", "xport-perf"), "allreduce", "--sizes",
                ",".join(map(str, small)), "--json"] + ([] if c.pin else ["--no-pin"])
        # Sizes up to 4 KiB have one plan: the same counts as the torch job's.
        perf += ["--iters", str(iters[0]), "--warmup", str(iters[1])]
        for tr in trs:
            out.append((f"perf-{tr}", f"xport-perf {tr}", perf,
                        {"XP_TRANSPORTS": "tcp"} if tr == "tcp" else {}))
    return out


def measure(c, key, label, argv, env, rnd):
    cmd = p2p.shell_line(argv, env)
    if rnd == 1:
        c.commands.append(cmd)
    rc, out, err = p2p.run(argv, env, c.log(f"r{rnd}-{key}"), c.a.timeout)
    rows = p2p.json_rows(out)
    if rc != 0 or not rows:
        c.fails.append(f"round {rnd}: {label}: " + (p2p.why(rc, err, c.a.timeout) if rc
                                                     else "no rows"))
        say(c.fails[-1])
        return
    say(f"round {rnd}/{c.a.rounds}: {label}: {len(rows)} rows")
    for r in rows:
        for fig in ("time_us_p50", "busbw_GBps"):
            if isinstance(r.get(fig), (int, float)):
                c.vals.setdefault((key, r["test"], r["size"], fig), {})[rnd] = r[fig]
    if c.json_out:
        head = {"system": "xport", "variant": label, "round": rnd, "command": cmd}
        c.json_out.writelines(json.dumps({**head, **r}) + "\n" for r in rows)
        c.json_out.flush()


def med(c, k):
    v = list(c.vals.get(k, {}).values())
    return statistics.median(v) if v else None


def paired(c, ka, kb):
    ra, rb = c.vals.get(ka, {}), c.vals.get(kb, {})
    v = [ra[r] / rb[r] for r in ra if r in rb and rb[r]]
    return statistics.median(v) if v else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def figures(c):
    """[(row title, test, size, figure key, format)] of one transport's table."""
    out = [(f"all_reduce {size_name(s)} p50 us", "allreduce", s, "time_us_p50", ".2f")
           for s in c.a.sizes]
    out += [(f"all_reduce {size_name(s)} busbw GB/s", "allreduce", s, "busbw_GBps", ".3f")
            for s in c.a.sizes if s >= MIB]
    for test, name in (("bcast", "broadcast"), ("allgather", "all_gather")):
        out.append((f"{name} 4 KiB p50 us", test, 4 * KIB, "time_us_p50", ".2f"))
        out.append((f"{name} 1 MiB busbw GB/s", test, MIB, "busbw_GBps", ".3f"))
    out.append(("DDP step p50 us", "ddp", None, "time_us_p50", ".0f"))
    return out


def ddp_size(c, key):
    return next((k[2] for k in c.vals if k[0] == key and k[1] == "ddp"), None)


def measures(c, tr):
    """[(what, verdict, detail)] of the issue's measures for transport @tr."""
    x, g = f"xport-{tr}", "gloo"
    bound = 0.1 if tr == "shm" else 0.5
    out = []

    def judge(what, keys, ok):
        rs = [(k, paired(c, (x,) + k, (g,) + k)) for k in keys]
        got = [(k, r) for k, r in rs if r is not None]
        if not got or len(got) < len(rs):
            return out.append((what, "NOT MEASURED", ""))
        bad = [f"{size_name(k[1]) if k[1] else ''} {r:.3f}".strip() for k, r in got if not ok(r)]
        verdict = "met" if not bad else "NOT MET"
        if c.over:
            verdict = f"report only ({c.a.nproc} ranks on {c.ncpus} CPUs)"
        detail = ", ".join(f"{size_name(k[1]) if k[0] != 'ddp' else 'step'} {r:.3f}"
                           for k, r in got)
        out.append((what, verdict, "paired xport/gloo: " + detail))

    small = [s for s in c.a.sizes if s <= SMALL]
    judge(f"{tr}: all_reduce p50 at 4 B-4 KiB <= {bound:g} x Gloo's",
          [("allreduce", s, "time_us_p50") for s in small], lambda r: r <= bound)
    judge(f"{tr}: all_reduce busbw from 1 MiB >= Gloo's",
          [("allreduce", s, "busbw_GBps") for s in c.a.sizes if s >= MIB], lambda r: r >= 1)
    judge(f"{tr}: DDP step <= Gloo's", [("ddp", ddp_size(c, x), "time_us_p50")],
          lambda r: r <= 1)
    return out


def report(c, syst, elapsed):
    a = c.a
    trs = [k.split("-")[1] for k, *_ in syst if k.startswith("xport-")]
    print(f"## xport's torch backend beside Gloo: {a.nproc} ranks, {a.rounds} interleaved "
          f"round{'s' if a.rounds > 1 else ''} (order rotating), {elapsed:.0f} s")
    if c.pin:
        placement = "rank r on CPU r (sched_setaffinity), torch with 1 thread"
    elif c.over:
        placement = f"NOT pinned: {a.nproc} ranks on {c.ncpus} CPUs, OVERSUBSCRIBED, REPORT ONLY"
    else:
        placement = "NOT pinned (--no-pin)"
    load = " ".join(p2p.read("/proc/loadavg").split()[:3])
    print(f"machine: {c.ncpus} CPUs, load {load} (1, 5, 15 min); placement: {placement}")
    for tr in trs:
        x = f"xport-{tr}"
        print(f"\n### {tr}: xport over {tr}, Gloo over TCP (medians over rounds)\n")
        print("| row | xport | gloo | paired xport/gloo |")
        print("|---|---:|---:|---:|")
        for title, test, size, fig, spec in figures(c):
            size = ddp_size(c, x) if test == "ddp" else size
            kx, kg = (x, test, size, fig), ("gloo", test, size, fig)
            print(f"| {title} | {fmt(med(c, kx), spec)} | {fmt(med(c, kg), spec)} | "
                  f"{fmt(paired(c, kx, kg), '.3f')} |")
    small = [s for s in a.sizes if s <= SMALL]
    if small:
        print("\n### the binding's overhead: all_reduce p50 us through torch and through "
              "xport-perf (the C API)\n")
        print("| size | transport | xport-perf | torch xport | torch - xport-perf | "
              "paired torch/xport-perf |")
        print("|---:|---|---:|---:|---:|---:|")
        for tr in trs:
            for s in small:
                kt, kp = (f"xport-{tr}", "allreduce", s, "time_us_p50"), \
                    (f"perf-{tr}", "allreduce", s, "time_us_p50")
                mt, mp = med(c, kt), med(c, kp)
                diff = None if mt is None or mp is None else mt - mp
                print(f"| {size_name(s)} | {tr} | {fmt(mp, '.2f')} | {fmt(mt, '.2f')} | "
                      f"{fmt(diff, '+.2f')} | {fmt(paired(c, kt, kp), '.3f')} |")
    print("\np50 us: the median over rounds of a job's median call time (a call's time is the "
          "slowest rank's);\nbusbw GB/s (10^9 B/s): size / mean call time x the nccl-tests "
          "factor. paired: the median of each\nround's own ratio; times below 1 and busbw "
          "above 1 mean xport is faster.")
    print("\n### measures (issue 25), judged on the paired ratio\n")
    for tr in trs:
        for what, verdict, detail in measures(c, tr):
            print(f"- {what}: **{verdict}**" + (f" ({detail})" if detail else ""))
    for f in c.fails:
        print(f"- FAILED {f}")
    print(f"\ncommands (round 1), run at {ROOT}:\n")
    for cmd in c.commands:
        print(f"    {cmd}")


def compare(a):
    c = Run(a)
    need = [os.path.join(c.build, "tools", "xprun"), os.path.join(c.build, "perf", "xport-perf")]
    for p in need + [os.path.join(c.build, "python", "xport", "torch.py")]:
        if not os.path.exists(os.path.join(ROOT, p)):
            say(f"{p} is missing: build first (meson setup build && ninja -C build); the "
                "torch backend needs torch, pybind11-dev and python3-dev")
            return 2
    syst = systems(c)
    try:
        if a.json_out:
            c.json_out = open(a.json_out, "w", encoding="utf-8")
            # The run record first: perf/plot prints its command under the charts.
            record = {"type": "run", "system": PROG, "tool": "compare-torch.py", "ranks": a.nproc,
                      "command": shlex.join(["perf/compare-torch.py"] + sys.argv[1:]),
                      "rounds": a.rounds}
            c.json_out.write(json.dumps(record) + "\n")
        t0 = time.time()
        for rnd in range(1, a.rounds + 1):
            k = (rnd - 1) % len(syst)
            for key, label, argv, env in syst[k:] + syst[:k]:
                measure(c, key, label, argv, env, rnd)
        report(c, syst, time.time() - t0)
        if a.json_out:
            say(f"wrote {a.json_out}")
    except KeyboardInterrupt:
        say("interrupted")
        c.fails.append("interrupted")
        return 130
    finally:
        for p in list(p2p.LIVE):
            p2p.stop(p)
        if c.json_out:
            c.json_out.close()
        if c.fails:
            say(f"logs kept in {c.logdir}")
        else:
            shutil.rmtree(c.logdir, ignore_errors=True)
    return 1 if c.fails else 0


def parse_args():
    doc = __doc__.split("\n")
    ap = argparse.ArgumentParser(prog="perf/compare-torch.py", description=doc[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(doc[2:]))
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--nproc", type=int, default=2, help="ranks (default 2; more than the "
                    "CPUs: oversubscribed, report only)")
    ap.add_argument("--transport", choices=["shm", "tcp", "both"], default="both",
                    help="xport's transport (default both; Gloo is TCP always)")
    ap.add_argument("--sizes", type=parse_sizes, metavar="L",
                    help="all_reduce sizes, e.g. 4,64,4k,1m (default 4 B to 64 MiB by 4)")
    ap.add_argument("--quick", action="store_true", help="a tenth of the calls, sizes 4 B, "
                    "64 B, 4 KiB, 1 MiB unless --sizes (a smoke run)")
    ap.add_argument("--json-out", metavar="FILE", help="every row of every round, for perf/plot")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), metavar="DIR",
                    help="Meson build directory (default: build/ of this checkout)")
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="pin no rank")
    ap.add_argument("--timeout", type=int, default=600, metavar="S",
                    help="bound on each command (default 600 s)")
    # A torch job: the driver runs these; by hand they rerun one job.
    ap.add_argument("--job", choices=["xport", "gloo"], help="run one torch job with this "
                    "backend, printing its JSON rows")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not 1 <= a.rounds <= 99:
        ap.error("--rounds wants 1 to 99")
    if not 2 <= a.nproc <= 64:
        ap.error("--nproc wants 2 to 64")
    if a.sizes is None:
        a.sizes = QUICK_SIZES if a.quick else SIZES
    return a


def main():
    a = parse_args()
    if a.job and a.rank is not None:
        return rank_main(a)
    # SIGTERM unwinds as Ctrl-C does: every live command or rank is
    # stopped. Not in a rank, which SIGTERM must end even when its main
    # thread is stuck in torch holding the GIL.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if a.job:
        return job_main(a)
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
