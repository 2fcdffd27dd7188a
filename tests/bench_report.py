#!/usr/bin/env python3
"""`make bench`, host side: turns the guest's JSON-lines records into build/bench/results.json,
a table of medians with the rksm / C KSM ratio per workload, and build/bench/memfree.png (MemFree
over time while merging, both kernels: the paper's vmstat trace as a plot).

usage: bench_report.py [--accel tcg|kvm] [--config bench|test] RAW.jsonl...
"""

import argparse
import glob
import json
import os
import platform
import re
import statistics
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT = os.path.join(TOP, "build", "bench")
PROBLEM = re.compile(r"BUG:|WARNING:|Oops|KASAN|UBSAN|possible circular locking|"
                     r"Kernel panic|INFO: task .* blocked")
FIELDS = ("workload", "impl", "threads", "mib_merged", "seconds", "mib_per_s",
          "slab_bytes_per_page", "ksmd_cpu_s")


def load(paths):
    records = []
    for p in paths:
        if not os.path.exists(p):
            print("bench_report: %s is missing" % p, file=sys.stderr)
            continue
        with open(p) as f:
            records += [json.loads(line) for line in f if line.strip()]
    return records


def host_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def kernel_problems():
    """Lines of either guest's kernel log that make a run invalid."""
    bad = []
    for log in sorted(glob.glob(os.path.join(TOP, "build", "vm", "bench-*", "console.log"))):
        run = os.path.basename(os.path.dirname(log))
        with open(log, errors="replace") as f:
            bad += ["%s: %s" % (run, line.strip()) for line in f if PROBLEM.search(line)]
    return bad


def median(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def paired_ratio(num, den):
    """The median, lowest and highest of the ratios of `num`'s rate to `den`'s over the
    repetitions both have (runs of one repetition ran next to each other in time, see
    scripts/bench.sh); the ratio of the medians if they share none."""
    a = {r.get("rep"): r["mib_per_s"] for r in num if r.get("mib_per_s")}
    b = {r.get("rep"): r["mib_per_s"] for r in den if r.get("mib_per_s")}
    pairs = [a[k] / b[k] for k in a if k in b]
    if pairs:
        return statistics.median(pairs), min(pairs), max(pairs)
    ma, mb = median(num, "mib_per_s"), median(den, "mib_per_s")
    return (ma / mb, None, None) if ma and mb else (None, None, None)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(records):
    groups = {}
    for r in records:
        groups.setdefault((r["workload"], r["impl"], r["threads"]), []).append(r)
    order = []
    for r in records:
        if r["workload"] not in order:
            order.append(r["workload"])
    print()
    print("%-14s %-5s %3s %4s %10s %9s %9s %10s %9s %9s %9s %13s"
          % ("workload", "impl", "thr", "runs", "MiB merged", "seconds", "MiB/s", "merge MiB/s",
             "B/page", "ksmd CPU", "rksm/C", "(runs' range)"))
    summary = []
    for w in order:
        c = groups.get((w, "c", 1), [])
        for impl in ("c", "rust"):
            for t in sorted({k[2] for k in groups if k[0] == w and k[1] == impl}):
                rs = groups[(w, impl, t)]
                rate = median(rs, "mib_per_s")
                ratio, lo, hi = paired_ratio(rs, c) if impl == "rust" and c else (None,) * 3
                spread = "%.2f-%.2f" % (lo, hi) if lo is not None else ""
                print("%-14s %-5s %3d %4d %10s %9s %9s %10s %9s %9s %9s %13s"
                      % (w, impl, t, len(rs), fmt(median(rs, "mib_merged"), ".1f"),
                         fmt(median(rs, "seconds"), ".2f"), fmt(rate, ".1f"),
                         fmt(median(rs, "merge_mib_per_s"), ".1f"),
                         fmt(median(rs, "slab_bytes_per_page"), ".1f"),
                         fmt(median(rs, "ksmd_cpu_s"), ".2f"),
                         fmt(ratio, ".2f") + ("x" if ratio is not None else ""), spread))
                summary.append({"workload": w, "impl": impl, "threads": t, "runs": len(rs),
                                "median_mib_per_s": rate,
                                "median_merge_mib_per_s": median(rs, "merge_mib_per_s"),
                                "median_seconds": median(rs, "seconds"),
                                "median_slab_bytes_per_page": median(rs, "slab_bytes_per_page"),
                                "ratio_to_c": ratio, "ratio_lowest": lo, "ratio_highest": hi})
    # Scanner threads: 2 against 1 on rksm, run by run.
    for w in order:
        one, two = groups.get((w, "rust", 1)), groups.get((w, "rust", 2))
        if one and two:
            ratio, lo, hi = paired_ratio(two, one)
            print("%s: rksm 2 threads / 1 thread = %.2fx%s"
                  % (w, ratio, " (runs %.2f-%.2f)" % (lo, hi) if lo is not None else ""))
    print("rksm/C: the median over repetitions of rksm's rate over C's in the same repetition "
          "(the kernels take turns)")
    return summary


def plot(records, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_report: no matplotlib, no plot", file=sys.stderr)
        return False
    workloads = [w for w in ("best", "worst", "prefix", "qemu2")
                 if any(r["workload"] == w and r.get("trace") for r in records)]
    if not workloads:
        return False
    fig, axes = plt.subplots(len(workloads), 1, figsize=(9, 3.2 * len(workloads)), squeeze=False)
    for ax, w in zip(axes[:, 0], workloads):
        for impl, color in (("c", "tab:blue"), ("rust", "tab:red")):
            rs = [r for r in records if r["workload"] == w and r["impl"] == impl
                  and r.get("trace") and r["threads"] == 1]
            if not rs:
                continue
            # The median run by rate, so the curve is a typical one.
            rs.sort(key=lambda r: r["mib_per_s"])
            r = rs[len(rs) // 2]
            t = [p[0] for p in r["trace"]]
            free = [p[1] for p in r["trace"]]
            ax.plot(t, free, color=color, label="%s (%.1f MiB/s)"
                    % ("C KSM" if impl == "c" else "rksm", r["mib_per_s"]))
        ax.set_title(w)
        ax.set_xlabel("seconds since ksmd started")
        ax.set_ylabel("MemFree (MiB)")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accel", default="tcg")
    ap.add_argument("--config", default="bench")
    ap.add_argument("raw", nargs="+")
    args = ap.parse_args()
    records = load(args.raw)
    if not records:
        print("bench_report: no results", file=sys.stderr)
        return 1
    vm = {"vcpus": 2, "memory_mib": 2048, "numa_nodes": 2, "accel": args.accel,
          "host_cpu": host_cpu(), "kernel": "6.12.117",
          "kernel_config": {"bench": "test config without lockdep, DEBUG_VM, DEBUG_LIST, "
                                     "DEBUG_ATOMIC_SLEEP (kernel/config/bench.config)",
                            "test": "test config (lockdep, DEBUG_VM)"}.get(args.config,
                                                                          args.config),
          "knobs": "sleep_millisecs=0 pages_to_scan=100000, others at boot values"}
    results = [{k: r.get(k) for k in FIELDS} | {"rep": r.get("rep"),
                                                "merge_mib_per_s": r.get("merge_mib_per_s"),
                                                "verified": r["verified"]}
               for r in records]
    summary = table(records)
    problems = kernel_problems()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"vm": vm, "results": results, "summary": summary,
                   "kernel_log_problems": problems}, f, indent=1)
    png = os.path.join(OUT, "memfree.png")
    drawn = plot(records, png)
    print()
    print("results: build/bench/results.json%s" % (", plot: build/bench/memfree.png" if drawn
                                                   else ""))
    bad = [r for r in records if not r["verified"]]
    for r in bad:
        print("FAILED check: %s %s thread(s) %s: %s" % (r["impl"], r["workload"], r["threads"],
                                                        r.get("check")))
    for p in problems:
        print("kernel log: " + p)
    return 1 if bad or problems else 0


if __name__ == "__main__":
    sys.exit(main())
