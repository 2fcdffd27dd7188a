#!/usr/bin/env python3
"""Guest side of a phase timing (a development tool, not part of `make test`/`make bench`).

Starts PROCS ksmpages processes of MIB MiB in each MODE, runs ksmd at full speed with THREADS
scanner threads, and prints, per run, when the first pass ended, when the first page merged and
when every page was merged (seconds from `run=1`, from tests/vm/ksmwatch.c's samples every
INTERVAL_MS, default 10 as in the benchmark), and the CPU time of ksmd and of ksmwatch. Run it in the VM, for instance:

  KERNEL=build/bzImage-bench-rust scripts/vm.sh with
  CMD="MODES=prefix,worst THREADS=2 REPS=2 python3 /work/main/scripts/dev/phases.py"
"""

import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "vm"))
from ksmrun import Proc, ksm_write  # noqa: E402
from ksmbench import full_speed, ksmd_cpu  # noqa: E402


def run(mode, mib, procs_n, threads):
    full_speed(threads)
    exe = os.path.join(TOP, "build", "tests", "ksmpages")
    procs = [Proc(exe, mode, mib) for _ in range(procs_n)]
    total = sum(p.pages for p in procs)
    cpu0 = ksmd_cpu()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([os.path.join(TOP, "build", "tests", "ksmwatch"), "total", str(total),
                          os.environ.get("INTERVAL_MS", "10"), "120"],
                         capture_output=True, text=True, check=True).stdout
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ksmd_cpu() - cpu0
    watch = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    pass1 = first = done = None
    for line in out.splitlines():
        w = line.split()
        if w[0] == "done":
            done = float(w[1])
        elif w[0] != "timeout" and len(w) >= 4:
            t, sharing, scans = float(w[0]), int(w[2]), int(w[3])
            if pass1 is None and scans >= 1:
                pass1 = t
            if first is None and sharing > 0:
                first = t
    for p in procs:
        p.stop()
    ksm_write("run", 2)
    print("%-7s %dT  pass 1 ends %5.3f  first merge %5.3f  all merged %5.3f  ksmd cpu %.2f"
          "  ksmwatch cpu %.3f" % (mode, threads, pass1 or -1, first or -1, done or -1, cpu,
                                   watch), flush=True)


def main():
    mib = int(os.environ.get("MIB", "256"))
    procs_n = int(os.environ.get("PROCS", "2"))
    reps = int(os.environ.get("REPS", "2"))
    for mode in os.environ.get("MODES", "best,worst,prefix").split(","):
        for threads in [int(t) for t in os.environ.get("THREADS", "1").split(",")]:
            for _ in range(reps):
                run(mode, mib, procs_n, threads)


if __name__ == "__main__":
    main()
