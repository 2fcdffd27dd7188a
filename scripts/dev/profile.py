#!/usr/bin/env python3
"""Guest side of a merge-phase profile (a development tool, not part of `make test`/`make bench`).

Starts PROCS ksmpages processes of MIB MiB in MODE, runs ksmd at full speed with THREADS threads,
waits DELAY seconds after `run=1`, then samples every CPU with `perf record -e cpu-clock` for DUR
seconds (DUR=0: until every page is merged; PASS1=1: the first pass, from `run=1` on; WHOLE=1: from `run=1` until every page is merged), and writes to OUT the share of each command and the symbols of the ksmd threads. Run it in the VM, for instance:

  KERNEL=build/bzImage-bench-rust scripts/vm.sh with
  CMD="python3 /work/main/scripts/dev/profile.py best build/prof-best-rust.txt"
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "vm"))
from ksmrun import Proc, ksm_read, ksm_write  # noqa: E402
from ksmbench import full_speed  # noqa: E402


def main():
    mode, out = sys.argv[1], sys.argv[2]
    mib = int(os.environ.get("MIB", "256"))
    procs_n = int(os.environ.get("PROCS", "2"))
    threads = int(os.environ.get("THREADS", "1"))
    delay = float(os.environ.get("DELAY", "3"))
    dur = float(os.environ.get("DUR", "2"))
    with open("/proc/sys/kernel/kptr_restrict", "w") as f:
        f.write("0")
    with open("/proc/sys/kernel/perf_event_paranoid", "w") as f:
        f.write("-1")
    full_speed(threads)
    exe = os.path.join(TOP, "build", "tests", "ksmpages")
    procs = [Proc(exe, mode, mib) for _ in range(procs_n)]
    pass1 = os.environ.get("PASS1") == "1"
    # WHOLE=1: from `run=1` until every page is merged (ksmwatch, being sampled, writes run=1).
    whole = os.environ.get("WHOLE") == "1"
    if whole:
        dur = 0
    if not pass1 and not whole:
        ksm_write("run", 1)
        time.sleep(delay)
    before = ksm_read("pages_sharing")
    data = "/tmp/perf.data"
    total = sum(p.pages for p in procs)
    # DUR=0: sample until every page is merged (or a minute went by). PASS1=1: sample the first
    # pass only (the command being sampled starts ksmd and waits for full_scans to grow).
    pass1_wait = ("import time\n"
                  "def r(n): return int(open('/sys/kernel/mm/ksm/' + n).read())\n"
                  "s = r('full_scans')\n"
                  "open('/sys/kernel/mm/ksm/run', 'w').write('1')\n"
                  "while r('full_scans') == s:\n"
                  "    time.sleep(0.01)\n")
    wait = pass1_wait if pass1 else ("import time\n"
            "def r(n): return int(open('/sys/kernel/mm/ksm/' + n).read())\n"
            "t = time.monotonic()\n"
            "while r('pages_shared') + r('pages_sharing') < %d and time.monotonic() - t < 60:\n"
            "    time.sleep(0.05)\n" % total) if dur == 0 else "import time; time.sleep(%s)" % dur
    t0 = time.monotonic()
    graph = ["-g"] if os.environ.get("CALLGRAPH") else []
    # A fixed duration is slept by sleep(1): a Python interpreter starting takes a vCPU for
    # a good part of a second under TCG, and would be sampled instead of the scanner threads.
    # Until every page is merged, ksmwatch (C) waits (it writes run=1 again, which changes
    # nothing).
    if pass1:
        what = ["python3", "-c", wait]
    elif dur > 0:
        what = ["sleep", str(dur)]
    else:
        what = [os.path.join(TOP, "build", "tests", "ksmwatch"), "total", str(total), "10", "60"]
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-a", "-o", data] + graph
                   + what, check=True)
    dur = time.monotonic() - t0
    after = ksm_read("pages_sharing")
    comms = subprocess.run(["perf", "report", "-i", data, "--sort", "comm", "--stdio"],
                           capture_output=True, text=True)
    names = sorted({line.split()[-1] for line in comms.stdout.splitlines()
                    if line.strip() and not line.startswith("#")
                    and line.split()[-1].startswith("ksmd")})
    children = ["--children", "-g", "none"] if graph else []
    rep = subprocess.run(["perf", "report", "-i", data, "--sort", "sym", "--stdio",
                          "--comms", ",".join(names) or "ksmd"] + children,
                         capture_output=True, text=True)
    with open(os.path.join(TOP, out), "w") as f:
        f.write("# %s threads=%d: pages_sharing %d -> %d during the sample\n"
                % (mode, threads, before, after))
        f.write(comms.stdout)
        f.write(rep.stdout)
    ksm_write("run", 2)
    for p in procs:
        p.stop()
    print("pages_sharing %d -> %d in %.1f s" % (before, after, dur))


if __name__ == "__main__":
    main()
