#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Two builds of xport side by side, in one run: "nothing gets slower".

    /usr/bin/python3 perf/compare-builds.py OLD_BUILD NEW_BUILD [--rounds N]

Runs xport-perf lat and bw in-process, over shm and over TCP, and rate and
allreduce over shm (two processes under each build's own xprun, pinned to
CPUs 0 and 1 by xport-perf's default pinning, the same for both builds),
and bench_core's matching and pool benchmarks (left out when a build has
none), both builds back to back for each case with the first of the two
alternating round by round, so that the machine's drift hits both alike.
Prints the median of the rounds for every row, new/old of the medians and
paired (the median of each round's own new/old; times: below 1 is faster;
bandwidth and rate: above 1 is faster), with every command line it ran.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

SIZES = "8,4096,65536,1m"
CASES = [  # (name, launcher?, xport-perf arguments)
    ("inproc lat", False, ["lat", "--sizes", SIZES]),
    ("inproc bw", False, ["bw", "--sizes", SIZES]),
    ("shm lat", True, ["lat", "--transport", "shm", "--sizes", SIZES]),
    ("shm bw", True, ["bw", "--transport", "shm", "--sizes", SIZES]),
    ("tcp lat", True, ["lat", "--transport", "tcp", "--sizes", SIZES]),
    ("tcp bw", True, ["bw", "--transport", "tcp", "--sizes", SIZES]),
    ("shm rate", True, ["rate", "--transport", "shm", "--sizes", "8,64"]),
    ("shm allred", True, ["allreduce", "--transport", "shm", "--sizes", "8,1024,64k,1m,16m"]),
]
# What each xport-perf test reports as its figure, and its unit.
FIGURE = {"lat": ("lat_us_p50", "us"), "bw": ("bw_MBps", "MB/s"),
          "rate": ("Mmsg_per_s", "Mmsg/s"), "allreduce": ("time_us_p50", "us")}
BENCH_FILTER = "match|pool|mpsc"


def run(cmd):
    print("  $ " + " ".join(cmd), flush=True)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=600, check=False)
    return out.stdout


def perf_rows(build, launcher, args):
    """{(transport, size): value} from one xport-perf run."""
    perf = os.path.join(build, "perf", "xport-perf")
    cmd = [perf] + args + ["--json"]
    if launcher:
        cmd = [os.path.join(build, "tools", "xprun"), "-n", "2"] + cmd
    rows = {}
    for line in run(cmd).splitlines():
        # xprun passes stdout into a pipe unprefixed: every line is a
        # rank's own (an older xprun's "[0] " is taken off).
        line = line.strip()
        if line.startswith("[0]"):
            line = line[3:].strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        # The first object describes the run ({"type": "run", ...}).
        if "test" not in r or r.get("transport") == "cacheline-baseline":
            continue
        if r["test"] in FIGURE:
            rows[(r["test"], r["size"])] = r[FIGURE[r["test"]][0]]
    return rows


def bench_rows(build):
    cmd = [os.path.join(build, "perf", "bench_core"), "--benchmark_filter=" + BENCH_FILTER,
           "--benchmark_format=json", "--benchmark_min_time=0.05"]
    rows = {}
    if not os.access(cmd[0], os.X_OK):  # built with -Dbenchmarks=disabled
        return rows
    data = run(cmd)
    try:
        for b in json.loads(data)["benchmarks"]:
            rows[("bench", b["name"])] = b["real_time"]
    except (ValueError, KeyError):
        pass
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    samples = {}  # (case, key) -> {"old": [...], "new": [...]}, one entry per round
    missing = [b for b in (a.old, a.new)
               if not os.access(os.path.join(b, "perf", "bench_core"), os.X_OK)]
    if missing:
        print(f"# bench_core rows left out: not built in {', '.join(missing)}", flush=True)
    for rnd in range(a.rounds):
        print(f"# round {rnd + 1} of {a.rounds}", flush=True)
        # Each case runs both builds back to back, the first of the two
        # alternating round by round, so that neither always runs first.
        order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
        for name, launcher, args in CASES:
            got = {w: perf_rows(getattr(a, w), launcher, args) for w in order}
            for key in got["old"].keys() & got["new"].keys():
                for w in order:
                    samples.setdefault((name, key), {"old": [], "new": []})[w].append(got[w][key])
        if not missing:
            got = {w: bench_rows(getattr(a, w)) for w in order}
            for key in got["old"].keys() & got["new"].keys():
                for w in order:
                    samples.setdefault(("bench_core", key), {"old": [], "new": []})[w].append(
                        got[w][key])
    print()
    print(f"{'case':<12} {'row':<40} {'old':>10} {'new':>10} {'new/old':>8} {'paired':>7}")
    for (name, key), s in sorted(samples.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        if not s["old"] or not s["new"]:
            continue
        o, n = statistics.median(s["old"]), statistics.median(s["new"])
        row = f"{key[0]} {key[1]}"
        unit = "ns" if key[0] == "bench" else FIGURE[key[0]][1]
        ratio = n / o if o else float("nan")
        # Paired: the median of each round's own new/old, as the host's
        # pace drifts between rounds more than within one.
        paired = statistics.median(y / x for x, y in zip(s["old"], s["new"]) if x)
        print(f"{name:<12} {row:<40} {o:>10.3f} {n:>10.3f} {ratio:>8.3f} {paired:>7.3f}  "
              f"({unit}, {len(s['old'])} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
