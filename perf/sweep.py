#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Sweeps one setting over interleaved rounds of an xport-perf command.

    perf/sweep.py [--build DIR] [--rounds N] [--field F] VAR=V1,V2,... -- XPORT-PERF ARGS...

Runs `DIR/tools/xprun -n 2 DIR/perf/xport-perf ARGS --json` once per value
of VAR (the environment variable, e.g. XP_COLL_SEGMENT or XP_TCP_SOCKBUF;
the value "unset" leaves it out) in each round, the order of the values
rotating from round to round, and prints per value the median over the
rounds of FIELD (default busbw_GBps; lat_us_p50, bw_MBps, ... for the
point-to-point tests) for each size. On this noisy machine only figures
of one run compare: each value is measured in every round, side by side.
Other XP_* variables of the caller apply to every run.

Example (what chose the default ring segment, src/coll/cost.c):
    XP_TRANSPORTS=tcp perf/sweep.py --rounds 4 XP_COLL_SEGMENT=64k,384k,1m -- \\
        allreduce --sizes 1m,2m,4m,8m,16m --iters 100
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=os.path.join(here, "build"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--field", default="busbw_GBps")
    ap.add_argument("sweep", metavar="VAR=V1,V2,...")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if "=" not in a.sweep:
        ap.error("the sweep is VAR=V1,V2,...")
    var, values = a.sweep.split("=", 1)
    values = values.split(",")
    args = [x for x in a.args if x != "--"]
    cmd = [os.path.join(a.build, "tools", "xprun"), "-n", "2",
           os.path.join(a.build, "perf", "xport-perf")] + args + ["--json"]
    got = {v: {} for v in values}  # value -> size -> [figures]
    for rnd in range(a.rounds):
        order = values[rnd % len(values):] + values[:rnd % len(values)]
        for v in order:
            env = dict(os.environ)
            env.pop(var, None)
            if v != "unset":
                env[var] = v
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                sys.exit(f"sweep: {var}={v}: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
            for line in p.stdout.splitlines():
                if not line.startswith("{"):
                    continue
                row = json.loads(line)
                if a.field in row and "size" in row:
                    got[v].setdefault(row["size"], []).append(float(row[a.field]))
    sizes = sorted({s for v in values for s in got[v]})
    print(f"# {a.field}, median of {a.rounds} interleaved rounds: {' '.join(cmd)}")
    print(f"{var:>20} " + " ".join(f"{s:>10}" for s in sizes))
    for v in values:
        print(f"{v:>20} " + " ".join(
            f"{statistics.median(got[v][s]):>10.3f}" if got[v].get(s) else f"{'-':>10}"
            for s in sizes))


if __name__ == "__main__":
    main()
