#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""xport's allreduce beside Open MPI 4.1's, measured in one run on this machine.

    perf/compare-coll.py [--build DIR] [--rounds N] [--ranks N] [--json-out FILE]
                         [--no-install] [--no-pin] [--systems K,K]

Runs, round after round (the order of the systems rotating each round),
`xprun -n N xport-perf allreduce --json` over shared memory (xp_init's
choice) and with XP_TRANSPORTS=tcp, and build/perf/mpi-coll-baseline
(perf/mpi_coll_baseline.c: MPI_Allreduce timed the same way, the same JSON
rows) under mpirun over ob1 + vader, ob1 + tcp and pml ucx with
UCX_TLS=tcp. float32 sum, 8 B to 4 KiB (latency: the median call time)
and 1, 4 and 16 MiB (bus bandwidth, nccl-tests' 2(n-1)/n x size / mean
time). Prints the median over the rounds of each figure, the xport/peer
ratios (of those medians, and "paired": the median of each round's own
ratio) and every command it ran. --systems runs only some of the five.

Placement: with as many CPUs as ranks, each rank on its own CPU
(xport-perf pins itself, CPU k for the k-th rank; mpirun --bind-to core).
With more ranks than CPUs (--ranks 4 or 8 on 2 CPUs) neither side pins
(mpirun --oversubscribe --bind-to none) and the table is a report, not a
comparison: spinning ranks take each other's time.

Missing Open MPI (mpicc, mpirun) is installed with apt-get (openmpi-bin
libopenmpi-dev) unless --no-install; rows whose tool is missing or fails
are skipped with a note. It always runs the build directory's xprun.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

PROG = "compare-coll"
LAT_SIZES = [8, 64, 512, 4096]
BW_SIZES = [1 << 20, 4 << 20, 16 << 20]
SIZES = LAT_SIZES + BW_SIZES
TIMEOUT = 600
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

commands = []  # every command run, in order


def say(msg):
    print(f"{PROG}: {msg}", flush=True)


def size_name(s):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if s >= 1 << shift and s % (1 << shift) == 0:
            return f"{s >> shift} {unit}"
    return f"{s} B"


def run(cmd, env_add=None, log=None):
    """Runs @cmd; returns (status, stdout, stderr). Records it as a shell line."""
    env = dict(os.environ)
    env.update(env_add or {})
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env_add or {}).items())
    line = (shown + " " if shown else "") + shlex.join(cmd)
    commands.append(line)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {TIMEOUT} s"
    except OSError as e:
        return 127, "", str(e)
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"$ {line}\n{p.stderr}\n")
    return p.returncode, p.stdout, p.stderr


def mpi_headers_found(mpicc):
    """Debian's openmpi-bin brings mpicc without mpi.h (libopenmpi-dev has
    it): asked of Open MPI's wrapper; another MPI's compile says itself."""
    p = subprocess.run([mpicc, "--showme:incdirs"], capture_output=True, text=True)
    if p.returncode != 0:
        return True
    return any(os.path.exists(os.path.join(d, "mpi.h")) for d in p.stdout.split())


def ensure_mpi(args):
    """(mpicc, mpirun) paths, or a note saying why there are none."""
    mpicc, mpirun = shutil.which("mpicc"), shutil.which("mpirun")
    if mpicc and mpirun and mpi_headers_found(mpicc):
        return mpicc, mpirun, None
    if args.no_install:
        return None, None, "skipped: mpicc or mpirun not found and --no-install given " \
            "(apt-get install openmpi-bin libopenmpi-dev)"
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    pkgs = ["openmpi-bin", "libopenmpi-dev"]
    say("installing " + " ".join(pkgs) + " (apt-get)")
    rc, _, err = run(sudo + ["apt-get", "install", "-y", "-q", "--no-install-recommends"] + pkgs)
    if rc != 0:
        say("apt-get install failed; running apt-get update and retrying")
        run(sudo + ["apt-get", "update", "-q"])
        rc, _, err = run(sudo + ["apt-get", "install", "-y", "-q", "--no-install-recommends"]
                         + pkgs)
    mpicc, mpirun = shutil.which("mpicc"), shutil.which("mpirun")
    if rc != 0 or not (mpicc and mpirun):
        return None, None, "skipped: Open MPI could not be installed: " + err.strip()[-200:]
    return mpicc, mpirun, None


def build_baseline(args, mpicc, version):
    src = os.path.join(args.src, "perf", "mpi_coll_baseline.c")
    out = os.path.join(args.build, "perf", "mpi-coll-baseline")
    if os.path.exists(out) and os.path.getmtime(out) >= max(
            os.path.getmtime(src), os.path.getmtime(os.path.join(args.src, "perf", "perf_util.h"))):
        return out, None
    rc, _, err = run([mpicc, "-O2", "-std=c11", "-Wall", "-Wextra",
                      "-I" + os.path.join(args.src, "perf"),
                      f"-DXPORT_VERSION_STRING=\"{version}\"", "-o", out, src])
    if rc != 0:
        return None, "failed: mpicc could not build perf/mpi_coll_baseline.c: " + err.strip()[-300:]
    return out, None


def parse_rows(text):
    rows = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            rows.append(obj)
    return rows


def main():
    ap = argparse.ArgumentParser(prog="perf/compare-coll.py",
                                 description="xport allreduce beside Open MPI 4.1, one run, "
                                 "interleaved rounds, medians and ratios.")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=os.path.join(here, "build"), metavar="DIR",
                    help="Meson build directory (default: build/ of this checkout)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--ranks", type=int, default=2, choices=[2, 4, 8],
                    help="ranks (default 2; with more ranks than CPUs: report only)")
    ap.add_argument("--json-out", metavar="FILE", help="every row of every round, for perf/plot")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get install Open MPI")
    ap.add_argument("--no-pin", action="store_true", help="pin neither side")
    ap.add_argument("--systems", metavar="K,K", help="only these systems (keys: xport-shm, "
                    "xport-tcp, ompi-vader, ompi-tcp, ompi-ucx-tcp)")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 100:
        ap.error("--rounds wants 1 to 100")
    args.src = here
    args.build = os.path.abspath(args.build)
    xprun = os.path.join(args.build, "tools", "xprun")
    perf = os.path.join(args.build, "perf", "xport-perf")
    for p in (xprun, perf):
        if not os.access(p, os.X_OK):
            print(f"{PROG}: {p} is missing: build first (meson setup build && ninja -C build)",
                  file=sys.stderr)
            return 2
    version = subprocess.run([perf, "--version"], capture_output=True,
                             text=True).stdout.split()[-1]
    n = args.ranks
    ncpus = len(os.sched_getaffinity(0))
    over = n > ncpus
    pin = not args.no_pin and not over
    log = os.path.join(args.build, "compare-coll.log")
    open(log, "w").close()
    sizes = ",".join(str(s) for s in SIZES)

    systems = []  # (key, label, cmd, env, note)
    xp_cmd = [xprun, "-n", str(n), perf, "allreduce", "--json", "--sizes", sizes]
    if not pin:
        xp_cmd.append("--no-pin")
    systems.append(("xport-shm", "xport shm", xp_cmd, {}, None))
    systems.append(("xport-tcp", "xport tcp", xp_cmd, {"XP_TRANSPORTS": "tcp"}, None))

    mpicc, mpirun, mpi_note = ensure_mpi(args)
    base = None
    if mpicc:
        base, mpi_note = build_baseline(args, mpicc, version)
    mpi_env = dict(ROOT_ENV) if os.geteuid() == 0 else {}
    mpi_head = [mpirun or "mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    mpi_head += ["-np", str(n)]
    mpi_head += ["--bind-to", "core"] if pin else ["--oversubscribe", "--bind-to", "none"]
    variants = [
        ("ompi-vader", "ompi ob1+vader", ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"],
         "vader"),
        ("ompi-tcp", "ompi ob1+tcp", ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp"], "tcp"),
        # Open MPI 4.1 takes pml ucx only over the devices of pml_ucx_tls and
        # pml_ucx_devices (InfiniBand by default); "any" lets it run over TCP.
        ("ompi-ucx-tcp", "ompi ucx tcp", ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any",
                                          "--mca", "pml_ucx_devices", "any", "-x", "UCX_TLS=tcp"],
         "ucx-tcp"),
    ]
    for key, label, mca, tl in variants:
        cmd = mpi_head + mca + [base or "mpi-coll-baseline", "--transport", tl, "--sizes", sizes]
        systems.append((key, label, cmd, mpi_env, mpi_note))
    if args.systems:
        wanted = args.systems.split(",")
        unknown = [k for k in wanted if k not in [s[0] for s in systems]]
        if unknown:
            ap.error(f"--systems: unknown {','.join(unknown)}")
        systems = [s for s in systems if s[0] in wanted]

    print(f"# compare-coll: allreduce float32 sum, {n} ranks, {args.rounds} interleaved rounds "
          f"(order rotating), medians over rounds; xport {version}")
    if pin:
        print("# placement: one rank per CPU: xport-perf pins itself (the k-th rank of the host "
              "to its k-th CPU, sched_setaffinity); mpirun --bind-to core (rank k on core k)")
    else:
        why = "--no-pin" if args.no_pin else f"{n} ranks on {ncpus} CPUs: OVERSUBSCRIBED"
        print(f"# placement: NOT pinned ({why}); xport-perf --no-pin or unpinned by itself, "
              "mpirun --oversubscribe --bind-to none")
        if over:
            print("# REPORT ONLY: spinning ranks share CPUs; the figures do not compare the "
                  "libraries")

    # results[key][size] = [(p50, busbw), ...] one per round
    results = {s[0]: {} for s in systems}
    notes = {s[0]: s[4] for s in systems}
    algos = {}
    by_round = {}  # (key, size) -> {round: (p50, busbw)}
    all_rows = []
    t_start = time.time()
    for rnd in range(args.rounds):
        order = systems[rnd % len(systems):] + systems[:rnd % len(systems)]
        for key, label, cmd, env, note in order:
            if notes[key]:
                continue
            say(f"round {rnd + 1}/{args.rounds}: {label}")
            rc, out, err = run(cmd, env, log)
            rows = parse_rows(out)
            data = [r for r in rows if r.get("test") == "allreduce"]
            if rc != 0 or not data:
                tail = err.strip().splitlines()[-3:]
                notes[key] = f"failed (status {rc}): " + " | ".join(tail)
                say(f"{label}: {notes[key]}")
                continue
            for r in rows:
                r["round"] = rnd + 1
                r["variant"] = label
                if r.get("type") != "run":
                    r.setdefault("system", "xport")
                all_rows.append(r)
            for r in data:
                results[key].setdefault(r["size"], []).append(
                    (r["time_us_p50"], r["busbw_GBps"], r["time_us_avg"]))
                by_round.setdefault((key, r["size"]), {})[rnd] = (r["time_us_p50"],
                                                                   r["busbw_GBps"])
                algos.setdefault(key, {})[r["size"]] = r.get("algorithm")
    elapsed = time.time() - t_start

    def med(key, size, idx):
        vals = [v[idx] for v in results[key].get(size, []) if v[idx] is not None]
        return statistics.median(vals) if vals else None

    def paired(a, b, size, idx):
        """Median over rounds of each round's a/b: the machine's slow and fast
        spells last seconds, so two runs of one round are more often in the
        same spell than the medians of all rounds are."""
        ra, rb = by_round.get((a, size), {}), by_round.get((b, size), {})
        vals = [ra[r][idx] / rb[r][idx] for r in ra if r in rb and ra[r][idx] and rb[r][idx]]
        return statistics.median(vals) if vals else None

    keys = [s[0] for s in systems]
    labels = {s[0]: s[1] for s in systems}
    pairs = [(a, b) for a, b in [("xport-shm", "ompi-vader"), ("xport-tcp", "ompi-tcp"),
                                 ("xport-tcp", "ompi-ucx-tcp")] if a in keys and b in keys]
    head = ["size", "figure"] + [labels[k] for k in keys]
    if not over:
        head += [f"{labels[a].split()[1]}/{labels[b].split(' ', 1)[1]}" for a, b in pairs]
        head += [f"paired {labels[a].split()[1]}/{labels[b].split(' ', 1)[1]}" for a, b in pairs]
    table = []
    for s in SIZES:
        lat = s in LAT_SIZES
        idx = 0 if lat else 1
        row = [size_name(s), "p50 us" if lat else "busbw GB/s"]
        for k in keys:
            v = med(k, s, idx)
            row.append("-" if v is None else (f"{v:.2f}" if lat else f"{v:.3f}"))
        if not over:
            for a, b in pairs:
                va, vb = med(a, s, idx), med(b, s, idx)
                row.append("-" if not va or not vb else f"{va / vb:.2f}")
            for a, b in pairs:
                v = paired(a, b, s, idx)
                row.append("-" if v is None else f"{v:.2f}")
        table.append(row)
    widths = [max(len(str(r[i])) for r in [head] + table) for i in range(len(head))]
    print()
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for r in table:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
    print()
    print("# p50 us: median over rounds of the median call time (a call's time is the slowest "
          "rank's);")
    print("#   ratio > 1: xport slower. busbw GB/s: median over rounds of 2(n-1)/n x size / mean "
          "call time (nccl-tests);")
    print("#   ratio < 1: xport slower.")
    print("# paired: the median over rounds of that round's ratio (both runs of a round are "
          "more often in one of the")
    print("#   machine's fast or slow spells, which last seconds, than the medians of all "
          "rounds are).")
    for k in ("xport-shm", "xport-tcp"):
        if algos.get(k):
            print(f"# {labels[k]} algorithm by size: " + ", ".join(
                f"{size_name(s)} {a}" for s, a in sorted(algos[k].items())))
    for k in keys:
        if notes[k]:
            print(f"# {labels[k]}: {notes[k]}")
    print(f"# {elapsed:.0f} s of measurement; stderr of every command in {log}")
    print("# commands run:")
    seen = set()
    for c in commands:
        if c not in seen:
            seen.add(c)
            print(f"#   {c}")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            f.write(json.dumps({"type": "run", "system": "compare-coll",
                                "command": shlex.join(sys.argv), "ranks": n}) + "\n")
            for r in all_rows:
                f.write(json.dumps(r) + "\n")
        say(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
