#!/usr/bin/env python3
"""Run ksmpages workloads against the running kernel's KSM and check the result (in the guest).

Starts PROCS copies of ksmpages with one pattern, lets ksmd merge at full speed, shows progress,
then checks that merging is real and exact:
  - KSM counters: pages_shared + pages_sharing reach every mapped page (for patterns that merge);
  - page frames: through /proc/<pid>/pagemap, merged pages share frames (as many distinct frames
    as pages_shared, none mapped exclusively) and /proc/<pid>/ksm_merging_pages counts them all;
  - every byte of every page reads back as written;
  - optionally (--cow) a write after the merge stays private to its writer;
  - optionally (--unmerge) MADV_UNMERGEABLE gives every process private pages again (distinct,
    exclusively mapped frames; ksm_merging_pages only drops at ksmd's next scan, as in C KSM).

Prints a progress line per second and either a table (default) or TAP lines (--tap), and can
write its figures as JSON (--json).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import time

KSM = "/sys/kernel/mm/ksm/"
PAGE = os.sysconf("SC_PAGE_SIZE")  # the kernel's page size: ksmpages' pages are of this size
EXCLUSIVE = 1 << 56
PFN_MASK = (1 << 55) - 1
PRESENT = 1 << 63


def ksm_read(name):
    with open(KSM + name) as f:
        return int(f.read().split()[0])


def ksm_write(name, value):
    with open(KSM + name, "w") as f:
        f.write(str(value))


def meminfo(field="MemFree"):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return 0


class Proc:
    def __init__(self, exe, mode, mib, cgroup=None, extra=()):
        def enter_cgroup():
            if cgroup:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))

        self.p = subprocess.Popen([exe, "-m", mode, "-s", str(mib)] + list(extra),
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1,
                                  preexec_fn=enter_cgroup)
        words = self.p.stdout.readline().split()
        if len(words) < 3 or words[0] != "ready":
            raise RuntimeError("ksmpages did not start: %r" % words)
        self.pages, self.addr = int(words[1]), int(words[2], 16)

    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def pfns(self):
        """(frame, exclusively mapped) of every page of the area (frame 0 where not present)."""
        with open("/proc/%d/pagemap" % self.p.pid, "rb") as f:
            f.seek(self.addr // PAGE * 8)
            raw = f.read(self.pages * 8)
        out = []
        for (e,) in struct.iter_unpack("<Q", raw):
            out.append((e & PFN_MASK if e & PRESENT else 0, 1 if e & EXCLUSIVE else 0))
        return out

    def stop(self):
        try:
            self.ask("quit")
        except (BrokenPipeError, OSError):
            pass
        self.p.wait(timeout=30)


def frames(procs):
    """(distinct frames, pages mapped exclusively, pages KSM counts as merging) over `procs`.

    Read from /proc/<pid>/pagemap (frame numbers and the exclusively-mapped bit) and
    /proc/<pid>/ksm_merging_pages. /proc/kpageflags is not used: 6.12's KPF_KSM is set for
    every anonymous page (it tests `mapping & PAGE_MAPPING_KSM` for any bit).
    """
    distinct, exclusive, merging = set(), 0, 0
    for p in procs:
        for pfn, excl in p.pfns():
            distinct.add(pfn)
            exclusive += excl
        with open("/proc/%d/ksm_merging_pages" % p.p.pid) as f:
            merging += int(f.read())
    return len(distinct), exclusive, merging


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="worst",
                    help="comma-separated patterns: best, worst, prefix, random")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--mib", type=int, default=64, help="MiB per process")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--cow", action="store_true")
    ap.add_argument("--unmerge", action="store_true")
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument("--json", help="append a result record to this JSON-lines file")
    ap.add_argument("--label", default="")
    ap.add_argument("--exe", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "../../build/tests/ksmpages"))
    args = ap.parse_args()
    results, checks = [], []
    for mode in args.mode.split(","):
        if mode not in ("best", "worst", "prefix", "random"):
            ap.error("unknown pattern %r" % mode)
        r, c = run_one(args, mode)
        results.append(r)
        checks += c

    if args.tap:
        for ok, what in checks:
            print("%s - %s" % ("ok" if ok else "not ok", what), flush=True)
    else:
        print()
        print("%-26s %10s %9s %9s %10s  %s" % ("workload", "MiB merged", "seconds", "MiB/s",
                                                "MemFree +", "bytes read back"))
        for r in results:
            print("%-26s %10.1f %9.2f %9.1f %10d  %s"
                  % (r["tag"], r["mib_merged"], r["seconds"], r["mib_per_s"],
                     r["memfree_after_mib"] - r["memfree_before_mib"],
                     "all correct" if r["verified"] else "FAILED"))
        for ok, what in checks:
            if not ok:
                print("FAILED: " + what)
    return 0 if all(ok for ok, _ in checks) else 1


def run_one(args, mode):
    checks = []  # (ok, description)

    def check(ok, what):
        checks.append((bool(ok), what))
        return ok

    saved = {k: ksm_read(k) for k in ("pages_to_scan", "sleep_millisecs")}
    ksm_write("run", 2)  # unmerge what earlier runs left, stop ksmd
    ksm_write("pages_to_scan", 100000)
    ksm_write("sleep_millisecs", 0)

    procs = [Proc(args.exe, mode, args.mib) for _ in range(args.procs)]
    pages = procs[0].pages
    total = pages * args.procs
    # What full merging means for each pattern.
    expect_merge = mode != "random"
    free0 = meminfo()
    tag = "%s x%d %d MiB" % (mode, args.procs, args.mib)
    if not args.quiet:
        print("# %s: %d pages per process, MemFree %d MiB; ksmd starts" % (tag, pages, free0),
              flush=True)

    scans0 = ksm_read("full_scans")
    t0 = time.monotonic()
    ksm_write("run", 1)
    trace = []
    next_print = t0
    done_at = None
    while True:
        now = time.monotonic()
        shared, sharing = ksm_read("pages_shared"), ksm_read("pages_sharing")
        merged = shared + sharing
        free = meminfo()
        trace.append((round(now - t0, 2), free, shared, sharing))
        if expect_merge and merged >= total:
            done_at = now
            break
        if not expect_merge and ksm_read("full_scans") >= scans0 + 2:
            done_at = now
            break
        if now - t0 > args.timeout:
            break
        if not args.quiet and now >= next_print:
            print("#   %6.1fs  MemFree %5d MiB  pages_shared %7d  pages_sharing %7d  (%3d%%)"
                  % (now - t0, free, shared, sharing, 100 * merged // total), flush=True)
            next_print = now + 1
        time.sleep(0.05)
    ksm_write("run", 0)
    seconds = (done_at or time.monotonic()) - t0
    shared, sharing = ksm_read("pages_shared"), ksm_read("pages_sharing")
    free1 = meminfo()
    if not args.quiet:
        print("#   %6.1fs  MemFree %5d MiB  pages_shared %7d  pages_sharing %7d  (done)"
              % (seconds, free1, shared, sharing), flush=True)

    if expect_merge:
        check(done_at is not None and shared + sharing == total,
              "%s: pages_shared + pages_sharing = %d of %d pages" % (tag, shared + sharing, total))
        distinct, exclusive, merging = frames(procs)
        check(distinct == shared and exclusive == 0 and merging == total,
              "%s: %d distinct frames for %d pages_shared, %d pages exclusive, %d of %d merging"
              % (tag, distinct, shared, exclusive, merging, total))
    else:
        check(shared + sharing == 0, "%s: nothing merged (%d)" % (tag, shared + sharing))

    answers = [p.ask("verify") for p in procs]
    check(all(a.startswith("ok") for a in answers), "%s: every byte reads back (%s)"
          % (tag, ", ".join(answers)))

    if args.cow:
        a = procs[0].ask("write %d" % (pages // 2))
        answers = [p.ask("verify") for p in procs]
        check(a == "ok" and all(x.startswith("ok") for x in answers),
              "%s: a write after merging stays private to its writer (%s)" % (tag, ", ".join(answers)))

    if args.unmerge:
        answers = [p.ask("unmerge") for p in procs]
        distinct, exclusive, merging = frames(procs)
        verified = [p.ask("verify") for p in procs]
        check(all(a == "ok" for a in answers) and distinct == total and exclusive == total
              and all(v.startswith("ok") for v in verified),
              "%s: after MADV_UNMERGEABLE %d distinct frames, %d exclusive of %d; contents %s"
              % (tag, distinct, exclusive, total, ", ".join(verified)))

    for p in procs:
        p.stop()
    ksm_write("run", 2)
    for k, v in saved.items():
        ksm_write(k, v)

    mib_merged = sharing * PAGE / 2**20
    result = {
        "workload": mode, "label": args.label, "procs": args.procs,
        "mib_per_proc": args.mib, "pages": total, "pages_shared": shared,
        "pages_sharing": sharing, "mib_merged": round(mib_merged, 2),
        "seconds": round(seconds, 3),
        "mib_per_s": round(mib_merged / seconds, 2) if seconds > 0 else 0,
        "memfree_before_mib": free0, "memfree_after_mib": free1,
        "verified": all(ok for ok, _ in checks), "trace": trace,
    }
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")
    result["tag"] = tag
    return result, checks


if __name__ == "__main__":
    sys.exit(main())
