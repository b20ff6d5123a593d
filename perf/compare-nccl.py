#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The NCCL plugin beside xport's own point-to-point, in one run (issue 27).

    /usr/bin/python3 perf/compare-nccl.py [BUILD] [--rounds N] [--transport tcp|rdma]

Four ways of moving the same messages between two processes of this host
over one transport (XP_TRANSPORTS=tcp; rdma: XP_TRANSPORTS=rdma,tcp, both
lanes on RDMA with TCP watching, endpoints moved to RDMA once connected),
round by round in an order that rotates, so that the machine's drift hits
all alike:

  p2p       xport-perf between the two ranks of a job (xprun -n 2): the
            job's pair
  endpoint  the same, over an endpoint the two ranks make (--endpoints):
            xp_connect's path, without the plugin
  one-way   the same over two endpoints, one per direction (--one-way), as
            NCCL's send and receive comms are: the plugin's shape without
            the plugin
  plugin    xport-nccl-perf: libnccl-net-xport.so's v12 table driven as
            NCCL drives it (a window of grouped receives, matching sends)

Rows: 8 B latency (p50 of the one-way time), 1 MiB bandwidth with 32
messages in flight and 64 MiB with 4, as xport-nccl-perf keeps them. All
three run with XP_THREAD_MODE=multi (the plugin's mode: NCCL calls it from
several threads) and pinned alike: rank or process r on CPU r (xport-perf's
and xport-nccl-perf's default; a plugin's threads share its process's CPU). Prints the median over rounds of each, and paired ratios (the median of
each round's own ratio; latency: below 1 is faster; bandwidth: above 1 is
faster): to p2p, and the plugin's to one-way, which shows what the plugin
itself costs beside what NCCL's one-way comms cost. With every command
line it ran.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROWS = [("lat 8 B", "lat", 8, "lat_us_p50", "us"),
        ("bw 1 MiB", "bw", 1 << 20, "bw_MBps", "MB/s"),
        ("bw 64 MiB", "bw", 64 << 20, "bw_MBps", "MB/s")]
WINDOW = {1 << 20: 32, 64 << 20: 4}


def run(cmd, env):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, timeout=600, check=False)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr[-2000:]}")
    rows = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    return [r for r in rows if r.get("type") != "run"]


def xport_perf_cmds(build, how, transport):
    # --transport names inproc, shm and tcp only: rdma comes of XP_TRANSPORTS.
    base = [f"{build}/tools/xprun", "-n", "2", f"{build}/perf/xport-perf", "--json"] + \
        (["--transport", "tcp"] if transport == "tcp" else []) + how
    return [base + ["lat", "--sizes", "8"],
            base + ["bw", "--sizes", "1m", "--window", str(WINDOW[1 << 20])],
            base + ["bw", "--sizes", "64m", "--window", str(WINDOW[64 << 20])]]


def figures(rows, transport):
    got = {}
    for name, test, size, key, _ in ROWS:
        for r in rows:
            if r.get("test") == test and r.get("size") == size and r.get(key) is not None:
                # A row over another transport than asked is no figure of it.
                if not str(r.get("transport", transport)).startswith(transport):
                    sys.exit(f"a row went over {r.get('transport')}, not {transport}: {r}")
                got[name] = r[key]
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--transport", choices=["tcp", "rdma"], default="tcp")
    a = ap.parse_args()
    transports = "tcp" if a.transport == "tcp" else "rdma,tcp"
    env = dict(os.environ, XP_TRANSPORTS=transports, XP_THREAD_MODE="multi")
    plugin = [f"{a.build}/perf/xport-nccl-perf", "--json",
              f"{a.build}/src/nccl/libnccl-net-xport.so"]
    ways = {"p2p": xport_perf_cmds(a.build, [], a.transport),
            "endpoint": xport_perf_cmds(a.build, ["--endpoints"], a.transport),
            "one-way": xport_perf_cmds(a.build, ["--one-way"], a.transport),
            "plugin": [plugin]}
    for way, cmds in ways.items():
        for c in cmds:
            print(f"# {way}: XP_TRANSPORTS={transports} XP_THREAD_MODE=multi {' '.join(c)}")
    order = list(ways)
    res = {w: [] for w in ways}
    for rnd in range(a.rounds):
        for way in order[rnd % len(order):] + order[:rnd % len(order)]:
            rows = []
            for c in ways[way]:
                rows += run(c, env)
            res[way].append(figures(rows, a.transport))
        print(f"# round {rnd + 1}/{a.rounds} done", file=sys.stderr)
    def paired(way, base, name):
        return statistics.median(res[way][i][name] / res[base][i][name] for i in range(a.rounds))

    print(f"{'row':10} {'unit':5} {'p2p':>9} {'endpoint':>9} {'one-way':>9} {'plugin':>9}"
          f" {'ep/p2p':>7} {'1way/p2p':>8} {'plugin/p2p':>10} {'plugin/1way':>11}")
    for name, _, _, _, unit in ROWS:
        med = {w: statistics.median(r[name] for r in res[w]) for w in ways}
        print(f"{name:10} {unit:5} {med['p2p']:9.3f} {med['endpoint']:9.3f}"
              f" {med['one-way']:9.3f} {med['plugin']:9.3f}"
              f" {paired('endpoint', 'p2p', name):7.3f} {paired('one-way', 'p2p', name):8.3f}"
              f" {paired('plugin', 'p2p', name):10.3f} {paired('plugin', 'one-way', name):11.3f}")


if __name__ == "__main__":
    main()
