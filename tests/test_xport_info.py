#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""xport-info against the build: its version is the project's, it lists
the transports this build has (and not the others) and probes them, it
shows every setting with its origin, it refuses a bad one naming it, and
under xprun it reports the route of every pair of ranks as xp_init chose.

usage: test_xport_info.py XPORT_INFO XPRUN VERSION BUILT
  BUILT: the backends meson built, comma-separated (e.g. "shm,tcp")
"""
import json
import os
import subprocess
import sys

info, xprun, version, built = sys.argv[1:5]
built = set(filter(None, built.split(",")))
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args, env_extra=None, expect=0):
    env = {k: v for k, v in os.environ.items() if not k.startswith("XP_")}
    env.update(env_extra or {})
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == expect,
          f"{' '.join(args)} {env_extra or ''}: exit {p.returncode}, want {expect}: {p.stderr}")
    return p


p = run([info, "--version"])
check(p.stdout.strip() == f"xport-info (xport) {version}", f"--version says {p.stdout!r}")

d = json.loads(run([info, "--json"]).stdout)
check(d["version"] == version, f"version {d['version']} is not meson's {version}")
names = {t["name"]: t for t in d["transports"]}
check(set(names) == {"inproc", "shm", "tcp", "rdma", "dpdk"}, f"transports {sorted(names)}")
for name, t in names.items():
    want_built = name == "inproc" or name in built
    check(t["built"] == want_built, f"{name}: built {t['built']}, meson says {want_built}")
    if not t["built"]:
        check(not t["usable"] and "not in this build" in t["note"], f"{name}: {t}")
    check(t["note"] != "", f"{name} has no note")
# This host has /dev/shm and io_uring: the probes must say so (a usable
# backend names what it found, an unusable one why not).
check(names["shm"]["usable"], f"shm not usable here: {names['shm']['note']}")
if "tcp" in built:
    check(names["tcp"]["usable"], f"tcp not usable here: {names['tcp']['note']}")
check(d["not_built"] == ", ".join(n for n in ("rdma", "dpdk") if n not in built),
      f"not_built {d['not_built']!r}")

settings = {s["variable"]: s for s in d["settings"]}
for var in ("XP_TIMEOUT_MS", "XP_JOB_KEY", "XP_SOCKET_IFNAME", "XP_BOOT_TIMEOUT_MS",
            "XP_TRANSPORTS", "XP_SHM_CMA_MIN", "XP_TCP_ZC", "XP_POOL_MAX_BYTES",
            "XP_UNEXPECTED_MAX_BYTES", "XP_RNDV_THRESHOLD", "XP_THREAD_MODE",
            "XP_HUGEPAGES", "XP_LOG_LEVEL", "XP_DEBUG", "XP_DPDK_EAL", "XP_DPDK_IP",
            "XP_DPDK_PORT", "XP_DPDK_UDP_PORT", "XP_DPDK_NEIGHBOURS", "XP_DPDK_DROP",
            "XP_DPDK_PEER_TIMEOUT_MS"):
    check(var in settings, f"{var} missing from the settings")
check(all(s["origin"] == "default" for s in d["settings"]), "a setting not from its default")
check(settings["XP_TIMEOUT_MS"]["value"] == "30000", "XP_TIMEOUT_MS default")
check(settings["XP_DPDK_UDP_PORT"]["value"] == "47100", "XP_DPDK_UDP_PORT default")
check(settings["XP_DPDK_PEER_TIMEOUT_MS"]["value"] == "10000", "XP_DPDK_PEER_TIMEOUT_MS default")
check(settings["XP_DPDK_EAL"]["value"] == "(unset)", "XP_DPDK_EAL default")
check(d["settings_ok"] is True, "settings_ok")

# Origins and values from the environment; a secret is never shown.
d = json.loads(run([info, "--json"], {"XP_TIMEOUT_MS": "1234", "XP_JOB_KEY": "hunter2"}).stdout)
settings = {s["variable"]: s for s in d["settings"]}
check(settings["XP_TIMEOUT_MS"]["origin"] == "environment", "XP_TIMEOUT_MS origin")
check(settings["XP_TIMEOUT_MS"]["value"] == "1234", "XP_TIMEOUT_MS value")
check("hunter2" not in json.dumps(d), "the job key is shown")

# A bad value: marked, named, exit 1, no job formed.
p = run([info, "--json"], {"XP_TCP_ZC": "yes"}, expect=1)
d = json.loads(p.stdout)
s = {s["variable"]: s for s in d["settings"]}["XP_TCP_ZC"]
check("XP_TCP_ZC=yes" in s.get("error", "") and "auto, off, on" in s.get("error", ""),
      f"XP_TCP_ZC error {s}")
check(d["settings_ok"] is False, "settings_ok with a bad value")

# Under xprun: every pair, over what xp_init chose.
for transports, want in (("", "shm"), ("tcp", "tcp")):
    if want not in built:
        continue
    env = {"XP_TRANSPORTS": transports} if transports else {}
    p = run([xprun, "-n", "3", info, "--json"], env)
    # xprun may prefix lines with "[rank] " (not when its output is a file).
    lines = [l.split("] ", 1)[1] if l.startswith("[") else l for l in p.stdout.splitlines()]
    d = json.loads("\n".join(lines))
    routes = d["job"]["routes"]
    pairs = {(r["from"], r["to"]) for r in routes}
    check(pairs == {(a, b) for a in range(3) for b in range(3) if a != b}, f"pairs {pairs}")
    check(all(r["messages"] == want and r["payloads"] == want for r in routes),
          f"XP_TRANSPORTS={transports!r}: routes {routes}")
    check(all(r["rndv_threshold"] > 0 for r in routes), "a zero threshold")

if fails:
    print(f"{len(fails)} checks failed", file=sys.stderr)
    sys.exit(1)
print("xport-info: ok")
