#!/usr/bin/env python3
"""`make bench`, host side: turns the guest's JSON-lines records into build/bench/results.json,
a table of medians with the rksm / C KSM ratio per workload, and build/bench/memfree.png (the
memory merged over time, both kernels, under TCG and natively: the paper's vmstat trace as a
plot).

usage: bench_report.py [--accel tcg|kvm] [--config bench|test] [--machine "x86_64 4K"]
                       [--native-raw RAW.jsonl...] RAW.jsonl...
       bench_report.py --native RAW.jsonl...   (the User-Mode Linux kernels: results-native.json)
       bench_report.py --lookups CONSOLE.log... (KUnit rksm_lookup's figures from native boots:
                                                results-lookups.json)
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
          "slab_bytes_per_page", "ksmd_cpu_s", "page_size")


def load(paths):
    records = []
    for p in paths:
        if not os.path.exists(p):
            print("bench_report: %s is missing" % p, file=sys.stderr)
            continue
        with open(p) as f:
            rs = [json.loads(line) for line in f if line.strip()]
        # The guest's page size, which the records' counts of pages are in: a file holds the
        # records of one guest, and records written before ksmbench put it in every record take
        # it from those that had it (the running cost's).
        sizes = {r["page_size"] for r in rs if r.get("page_size")}
        if len(sizes) == 1:
            size = sizes.pop()
            for r in rs:
                r.setdefault("page_size", size)
        records += rs
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


def kernel_problems(runs):
    """Lines of either guest's kernel log that make a run invalid."""
    bad = []
    for log in sorted(glob.glob(os.path.join(TOP, "build", runs, "bench-*", "console.log"))):
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


def is_cost(r):
    return r["workload"].startswith("cost-") or r["workload"] == "sparse"


def paired(num, den, key):
    """The median, lowest and highest over the repetitions both have of num's `key` over
    den's (runs of one repetition ran next to each other in time)."""
    a = {r.get("rep"): r[key] for r in num if r.get(key)}
    b = {r.get("rep"): r[key] for r in den if r.get(key)}
    pairs = [a[k] / b[k] for k in a if k in b]
    return (statistics.median(pairs), min(pairs), max(pairs)) if pairs else (None,) * 3


def cost_table(records):
    """The running cost (ksmbench.py's part "cost"): per shape and kernel, the medians of
    ksmd's CPU per GiB per full scan once merged, the pages scanned and skipped per pass, the
    time to settle, the scanner's mmap lock holds; C/rksm of the CPU, paired by repetition; and
    the sparse area's timings."""
    groups = {}
    for r in records:
        groups.setdefault((r["workload"], r["impl"], r["threads"]), []).append(r)
    summary = []
    shapes = [w for w in ("cost-chains", "cost-copies", "cost-walk")
              if any(k[0] == w for k in groups)]
    if shapes:
        print()
        print("%-12s %-5s %3s %4s %9s %12s %8s %9s %9s %10s %10s %9s %13s"
              % ("running cost", "impl", "thr", "runs", "settle s", "CPU s/GiB/p", "ns/page",
                 "scanned", "skipped", "lock max", "lock p99", "C/rksm", "(runs' range)"))
    for w in shapes:
        c = groups.get((w, "c", 1), [])
        for impl in ("c", "rust"):
            for t in sorted({k[2] for k in groups if k[0] == w and k[1] == impl}):
                rs = groups[(w, impl, t)]
                ratio, lo, hi = paired(c, rs, "cpu_s_per_gib_pass") if impl == "rust" \
                    else (None,) * 3
                row = {"workload": w, "impl": impl, "threads": t, "runs": len(rs)}
                for k in ("settle_s", "cpu_s_per_gib_pass", "scanned_per_pass",
                          "skipped_per_pass", "lock_max_us", "lock_p99_us", "pass_s"):
                    row[k] = median(rs, k)
                # Per page of the area per pass: comparable with the walk alone (cost-walk).
                # The guest's page size, as ksmbench recorded it (records without it: no figure).
                page = median(rs, "page_size")
                row["ns_per_page"] = (row["cpu_s_per_gib_pass"] * page / 2**30 * 1e9
                                      if row["cpu_s_per_gib_pass"] is not None and page
                                      else None)
                row |= {"c_over_rksm_cpu": ratio, "lowest": lo, "highest": hi}
                summary.append(row)
                print("%-12s %-5s %3d %4d %9s %12s %8s %9s %9s %10s %10s %9s %13s"
                      % (w, impl, t, len(rs), fmt(row["settle_s"], ".2f"),
                         fmt(row["cpu_s_per_gib_pass"], ".4f"), fmt(row["ns_per_page"], ".0f"),
                         fmt(row["scanned_per_pass"], ".0f"), fmt(row["skipped_per_pass"], ".0f"),
                         fmt(row["lock_max_us"], ".0f") + (" us" if row["lock_max_us"] else ""),
                         fmt(row["lock_p99_us"], ".0f") + (" us" if row["lock_p99_us"] else ""),
                         fmt(ratio, ".2f") + ("x" if ratio is not None else ""),
                         "%.2f-%.2f" % (lo, hi) if lo is not None else ""))
    if shapes:
        print("once merging settled (pages_to_scan=2000, sleep_millisecs=0): CPU seconds of every "
              "scanner thread per GiB per full scan, and per page of the area (ns/page); "
              "cost-walk: the page-table walk alone (every page the zero page, which no scan "
              "takes); scanned, skipped: pages per pass; lock: "
              "the scanner's holds of the process's mmap lock; C/rksm: the median over "
              "repetitions of C's CPU over rksm's in the same repetition")
    sparse = [(k, groups[k]) for k in sorted(groups) if k[0] == "sparse"]
    if sparse:
        print()
        print("%-12s %-5s %4s %6s %10s %10s %10s %10s %10s"
              % ("sparse area", "impl", "runs", "GiB", "full scan", "madvise", "prctl off",
                 "run=2", "exit"))
    for (w, impl, t), rs in sparse:
        row = {"workload": w, "impl": impl, "runs": len(rs), "gib": median(rs, "gib")}
        for k in ("full_scan_s", "madvise_s", "prctl_s", "run2_s", "exit_s"):
            row[k] = median(rs, k)
        summary.append(row)
        print("%-12s %-5s %4d %6s %10s %10s %10s %10s %10s"
              % (w, impl, len(rs), fmt(row["gib"], ".0f"),
                 *(fmt(row[k], ".3f") for k in ("full_scan_s", "madvise_s", "prctl_s", "run2_s",
                                                 "exit_s"))))
    if sparse:
        print("seconds (medians), 4096 merged pages spread over the area (tests/vm/sparse.c); "
              "the areas differ where C's unmerge, which visits every address, would take "
              "minutes")
    return summary


def plot_cost(columns, path):
    """Draws the running cost (`columns`: a title and its records, TCG and native): per shape,
    the median CPU seconds per GiB per full scan of C and rksm side by side, on a logarithmic
    axis (the walk alone is far below the rest)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    columns = [(title, [r for r in rs if r["workload"].startswith("cost-")])
               for title, rs in columns]
    columns = [(title, rs) for title, rs in columns if rs]
    if not columns:
        return False
    fig, axes = plt.subplots(1, len(columns), squeeze=False, figsize=(6.5 * len(columns), 3.5))
    for col, (title, rs) in enumerate(columns):
        ax = axes[0, col]
        shapes = [w for w in ("cost-chains", "cost-copies", "cost-walk")
                  if any(r["workload"] == w for r in rs)]
        for i, (impl, color, name) in enumerate((("c", "tab:blue", "C KSM"),
                                                 ("rust", "tab:red", "rksm"))):
            ys = [median([r for r in rs if r["workload"] == w and r["impl"] == impl
                          and r["threads"] == 1], "cpu_s_per_gib_pass") for w in shapes]
            xs = [j + (i - 0.5) * 0.4 for j in range(len(shapes))]
            ax.bar([x for x, y in zip(xs, ys) if y], [y for y in ys if y], width=0.4,
                   color=color, label=name)
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels([w[len("cost-"):] for w in shapes])
        ax.set_yscale("log")
        ax.set_ylabel("CPU s per GiB per full scan")
        ax.set_title("running cost once merged, %s" % title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def plot(columns, path):
    """Draws, per workload and per kind of run (`columns`: a title and its records, the TCG runs
    and the native ones), the memory merged over time: pages_sharing (pages saved) as MiB, on a
    logarithmic time axis, so that a run of a second and one of twenty both show their course.
    Each curve is the median run of its kernel by rate."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_report: no matplotlib, no plot", file=sys.stderr)
        return False
    columns = [(title, rs) for title, rs in columns if any(r.get("trace") for r in rs)]
    workloads = [w for w in ("best", "worst", "prefix", "qemu2", "qemu3", "qemu3-memcg")
                 if any(r["workload"] == w and r.get("trace") for _, rs in columns for r in rs)]
    if not workloads:
        return False
    fig, axes = plt.subplots(len(workloads), len(columns), squeeze=False,
                             figsize=(6.5 * len(columns), 3.0 * len(workloads)))
    curves = (("c", 1, "tab:blue", "-", "C KSM"), ("rust", 1, "tab:red", "-", "rksm"),
              ("rust", 2, "tab:red", "--", "rksm, 2 threads"))
    for col, (title, records) in enumerate(columns):
        for row, w in enumerate(workloads):
            ax = axes[row, col]
            drawn = False
            for impl, threads, color, style, name in curves:
                rs = [r for r in records if r["workload"] == w and r["impl"] == impl
                      and r.get("trace") and r["threads"] == threads]
                if not rs:
                    continue
                rs.sort(key=lambda r: r["mib_per_s"])
                r = rs[len(rs) // 2]
                # From the first sample after ksmd started (the axis is logarithmic), in MiB by
                # the guest's page size (a record without it: no curve).
                page_mib = (r.get("page_size") or 0) / 2**20
                pts = [(p[0], p[3] * page_mib) for p in r["trace"] if p[0] > 0 and page_mib]
                if not pts:
                    continue
                ax.step([t for t, _ in pts], [m for _, m in pts], where="post", color=color,
                        linestyle=style, label="%s (%.0f MiB/s)" % (name, r["mib_per_s"]))
                drawn = True
            if not drawn:
                # Not a workload of this kind of run (the QEMU guests run under TCG only).
                ax.set_visible(False)
                continue
            ax.set_title("%s: %s" % (title, w), fontsize=10)
            ax.set_xscale("log")
            ax.legend(loc="upper left", fontsize=8)
            ax.set_xlabel("seconds since ksmd started")
            ax.set_ylabel("MiB merged")
            ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


SPLIT = re.compile(r"rksm_lookup: (\w+) split pages=(\d+) c_hit_ns=(\d+) c_miss_ns=(\d+) "
                   r"rksm_hit_ns=(\d+) rksm_miss_ns=(\d+)")
PRIMITIVES = re.compile(r"rksm_lookup: primitives pages=(\d+) checksum_ns=(\d+) "
                        r"xxhash64_ns=(\d+) compare_ns=(\d+) memcmp_ns=(\d+)")
LOOKUP = re.compile(r"rksm_lookup: (\w+) pages=(\d+) c_ns=(\d+) c_bytes=(\d+) rksm_ns=(\d+) "
                    r"rksm_bytes=(\d+)")


def lookups(logs):
    """The native lookup benchmark: per contents, C's order against rksm's, median over boots.
    A boot counts only if every rksm_lookup case passed (each lookup's answer was checked).
    Rows are per contents and tree size (rksm_lookup_large's trees are beyond any cache)."""
    runs = {}
    bad = []
    for log in logs:
        text = open(log, errors="replace").read()
        if re.search(r"^\s*not ok \d+ ", text, re.M) or not all(
                re.search(r"^ok \d+ %s\s*$" % suite, text, re.M)
                for suite in ("rksm_lookup", "rksm_lookup_large")):
            bad.append(log)
            continue
        for m in LOOKUP.finditer(text):
            runs.setdefault((m.group(1), int(m.group(2))), []).append(
                [int(x) for x in m.groups()[1:]])
    print()
    print("%-8s %6s %5s %14s %14s %14s %14s %9s %13s"
          % ("contents", "pages", "boots", "C order ns", "C bytes", "rksm ns", "rksm bytes",
             "C/rksm", "(boots' range)"))
    summary = []
    order = ("best", "worst", "prefix")
    for w, pages in sorted(runs, key=lambda k: (k[1], order.index(k[0]))):
        rs = runs[(w, pages)]
        ratios = [r[1] / r[3] for r in rs if r[3]]
        row = {"contents": w, "pages": rs[0][0], "boots": len(rs),
               "c_ns": statistics.median(r[1] for r in rs),
               "c_bytes": statistics.median(r[2] for r in rs),
               "rksm_ns": statistics.median(r[3] for r in rs),
               "rksm_bytes": statistics.median(r[4] for r in rs),
               "ratio": statistics.median(ratios) if ratios else None}
        summary.append(row)
        print("%-8s %6d %5d %14.0f %14.0f %14.0f %14.0f %9s %13s"
              % (w, row["pages"], row["boots"], row["c_ns"], row["c_bytes"], row["rksm_ns"],
                 row["rksm_bytes"], fmt(row["ratio"], ".2f") + "x",
                 "%.2f-%.2f" % (min(ratios), max(ratios)) if ratios else ""))
    print("per lookup (copies of tree pages and pages of new contents, every answer checked); "
          "C/rksm: the median over boots of C's order's time over rksm's")
    split = {}
    for log in logs:
        if log in bad:
            continue
        for m in SPLIT.finditer(open(log, errors="replace").read()):
            split.setdefault((m.group(1), int(m.group(2))), []).append(
                [int(x) for x in m.groups()[2:]])
    if split:
        print()
        print("%-8s %6s %5s %11s %11s %9s %11s %11s %9s"
              % ("contents", "pages", "boots", "C hit ns", "rksm hit", "C/rksm", "C miss ns",
                 "rksm miss", "C/rksm"))
    for (w, pages), rs in sorted(split.items(), key=lambda kv: kv[0][1]):
        med = [statistics.median(r[k] for r in rs) for k in range(4)]
        hit = statistics.median(r[0] / r[2] for r in rs if r[2])
        miss = statistics.median(r[1] / r[3] for r in rs if r[3])
        print("%-8s %6d %5d %11.0f %11.0f %8.2fx %11.0f %11.0f %8.2fx"
              % (w, pages, len(rs), med[0], med[2], hit, med[1], med[3], miss))
        for row in summary:
            if row["contents"] == w and row["pages"] == pages:
                row.update({"c_hit_ns": med[0], "c_miss_ns": med[1], "rksm_hit_ns": med[2],
                            "rksm_miss_ns": med[3], "hit_ratio": hit, "miss_ratio": miss})
    if split:
        print("hit: a copy of a tree page, found; miss: new contents, not found (nor inserted)")
    prims = []
    for log in logs:
        if log not in bad:
            prims += [[int(x) for x in m.groups()] for m in
                      PRIMITIVES.finditer(open(log, errors="replace").read())]
    primitives = None
    if prims:
        med = [statistics.median(r[k] for r in prims) for k in range(5)]
        primitives = {"pages": med[0], "boots": len(prims), "checksum_ns": med[1],
                      "xxhash64_ns": med[2], "compare_ns": med[3], "memcmp_ns": med[4]}
        print()
        print("%-34s %5s %9s %9s %9s" % ("per page, whole page read", "boots", "rksm ns", "C ns",
                                          "C/rksm"))
        for what, r, c in (("checksum (C: xxhash64)", med[1], med[2]),
                           ("compare equal pages (C: memcmp)", med[3], med[4])):
            print("%-34s %5d %9.0f %9.0f %8.2fx" % (what, len(prims), r, c, c / r if r else 0))
        print("the median over boots of each boot's fastest of 3 rounds over %d pages" % med[0])
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results-lookups.json"), "w") as f:
        json.dump({"machine": "User-Mode Linux, 1 CPU (host: %s)" % host_cpu(),
                   "summary": summary, "primitives": primitives, "failed_boots": bad}, f,
                  indent=1)
    for b in bad:
        print("FAILED: %s (a case failed or never ran)" % b)
    return 1 if bad or not summary else 0


def main():
    if sys.argv[1:2] == ["--lookups"]:
        return lookups(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--accel", default="tcg")
    ap.add_argument("--config", default="bench")
    ap.add_argument("--machine", default="x86_64 4K",
                    help="the guests' architecture and page size (an arm64 guest is emulated)")
    ap.add_argument("--native", action="store_true",
                    help="the records are of the User-Mode Linux kernels (scripts/um.sh)")
    ap.add_argument("--native-raw", nargs="*", default=[],
                    help="the native runs' records, drawn beside these in the plot")
    ap.add_argument("raw", nargs="+")
    args = ap.parse_args()
    records = load(args.raw)
    if not records:
        print("bench_report: no results", file=sys.stderr)
        return 1
    vm = {"vcpus": 2, "memory_mib": 2048, "numa_nodes": 2, "accel": args.accel,
          "machine": args.machine,
          "host_cpu": host_cpu(), "kernel": "6.12.117",
          "kernel_config": {"bench": "test config without lockdep, DEBUG_VM, DEBUG_LIST, "
                                     "DEBUG_ATOMIC_SLEEP (kernel/config/bench.config)",
                            "test": "test config (lockdep, DEBUG_VM)"}.get(args.config,
                                                                          args.config),
          "knobs": "sleep_millisecs=0 pages_to_scan=100000, others at boot values"}
    if args.native:
        vm |= {"vcpus": 1, "numa_nodes": 1, "accel": "none: User-Mode Linux, a host process",
               "kernel_config": "kernel/config/um.config (tinyconfig + hostfs, swap, KSM, Rust)"}
    name = "-native" if args.native else ""
    rates = [r for r in records if not is_cost(r)]
    costs = [r for r in records if is_cost(r)]
    results = [{k: r.get(k) for k in FIELDS} | {"rep": r.get("rep"),
                                                "merge_mib_per_s": r.get("merge_mib_per_s"),
                                                "verified": r["verified"]}
               for r in rates]
    results += [{k: v for k, v in r.items() if k != "trace"} for r in costs]
    if not args.native:
        print("guests: %s pages, %s, %s kernels%s" % (
            args.machine, args.accel.upper(), args.config,
            " (an emulator's figures, not arm64 hardware's)" if "arm64" in args.machine else ""))
    summary = table(rates) if rates else []
    summary += cost_table(costs)
    problems = kernel_problems("um" if args.native else "vm")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results%s.json" % name), "w") as f:
        json.dump({"vm": vm, "results": results, "summary": summary,
                   "kernel_log_problems": problems}, f, indent=1)
    png = os.path.join(OUT, "memfree%s.png" % name)
    if args.native:
        columns = [("native", rates)]
    else:
        columns = [("TCG", rates), ("native", [r for r in load(args.native_raw)
                                               if not is_cost(r)])]
    drawn = plot(columns, png)
    if args.native:
        cost_columns = [("native", costs)]
    else:
        cost_columns = [("TCG", costs), ("native", [r for r in load(args.native_raw)
                                                    if is_cost(r)])]
    drawn_cost = plot_cost(cost_columns, os.path.join(OUT, "cost%s.png" % name))
    print()
    print("results: build/bench/results%s.json%s%s"
          % (name, ", plot: build/bench/memfree%s.png" % name if drawn else "",
             ", running cost: build/bench/cost%s.png" % name if drawn_cost else ""))
    bad = [r for r in records if not r["verified"]]
    for r in bad:
        print("FAILED check: %s %s thread(s) %s: %s" % (r["impl"], r["workload"], r["threads"],
                                                        r.get("check")))
    for p in problems:
        print("kernel log: " + p)
    return 1 if bad or problems else 0


if __name__ == "__main__":
    sys.exit(main())
