#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Counts test results from meson's testlog.json files.

Usage: summarize-tests.py [--result NAME=RESULT]... [[LABEL=]testlog.json]...

Each testlog.json (meson-logs/testlog.json: one JSON object per line, one per
test run, with a "result" field) is counted under its LABEL (default: the
path). --result adds one synthetic result, e.g. "gcc/install-consume=OK" or
"asan/build=FAIL", for steps that are not meson tests. A testlog.json that is
missing or unreadable counts as one failure, so a step that never ran cannot
vanish from the total.

Prints one line per label, then, as the very last line,
"N passed, N failed, N skipped". Exits 1 if anything failed, else 0.
"""
import json
import sys

PASSED = {"OK", "EXPECTEDFAIL"}
SKIPPED = {"SKIP"}
# FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS and anything unknown count as failed.


def classify(result):
    if result in PASSED:
        return "passed"
    if result in SKIPPED:
        return "skipped"
    return "failed"


def main(argv):
    groups = {}  # label -> {"passed": n, "failed": n, "skipped": n, "failures": [...]}
    order = []

    def group(label):
        if label not in groups:
            groups[label] = {"passed": 0, "failed": 0, "skipped": 0, "failures": []}
            order.append(label)
        return groups[label]

    def add(label, name, result):
        g = group(label)
        kind = classify(result)
        g[kind] += 1
        if kind == "failed":
            g["failures"].append("%s (%s)" % (name, result))

    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--result":
            if not args:
                sys.exit("summarize-tests: --result needs NAME=RESULT")
            spec = args.pop(0)
            name, _, result = spec.rpartition("=")
            label, _, test = name.partition("/")
            add(label, test or name, result.strip().upper())
            continue
        label, sep, path = arg.partition("=")
        if not sep:
            label, path = arg, arg
        group(label)
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        obj = json.loads(line)
                        name, result = obj.get("name", "?"), str(obj["result"])
                    except (ValueError, KeyError, AttributeError):
                        add(label, "%s:%d" % (path, lineno), "UNPARSABLE")
                        continue
                    add(label, name, result)
        except OSError as e:
            add(label, path, "NO-LOG: " + (e.strerror or str(e)))

    total = {"passed": 0, "failed": 0, "skipped": 0}
    width = max((len(l) for l in order), default=0)
    for label in order:
        g = groups[label]
        for k in total:
            total[k] += g[k]
        print("%-*s  %d passed, %d failed, %d skipped" % (width + 1, label + ":", g["passed"],
                                                        g["failed"], g["skipped"]))
        for failure in g["failures"]:
            print("%-*s    failed: %s" % (width + 1, "", failure))
    print("%d passed, %d failed, %d skipped" % (total["passed"], total["failed"], total["skipped"]))
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
