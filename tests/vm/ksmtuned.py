#!/usr/bin/env python3
"""Debian's ksmtuned, unmodified, drives the running kernel's KSM (in the guest). Prints TAP.

ksmtuned (bookworm 4.20150326) sums as "committed" the RSS (`ps -o rsz=`) of the processes whose
command line matches `^qemu-system.*-enable-kvm` (pgrep -f), takes MemFree + Buffers + Cached as
"free", and at each adjust writes run=0 if committed + thres < total and free > thres; else
pages_to_scan = npages + BOOST (free < thres) or + DECAY, clamped to [MIN, MAX], then
sleep_millisecs = max(10, KSM_SLEEP_MSEC * 16777216 / MemTotal) and run=1.

Here thres is set exactly (KSM_THRES_COEF=0, KSM_THRES_CONST), one adjust runs per SIGUSR1 (the
package's own retune signal; KSM_MONITOR_INTERVAL is an hour, so the number of decisions is
fixed) and both inputs stay at least ~G - S_MIB away from the thresholds, so that merging
(which frees at most S_MIB) cannot move a decision, nor what the load process itself takes
(more with larger pages). Free memory is read once the per-CPU page lists, which MemFree does
not count, are cut to a few batches and have given back what they held (settle()):
  committed  a process named qemu-system-x86_64 ... -enable-kvm mapping a memfd (in its RSS and
             in Cached: it moves committed, not free) and S_MIB of equal MADV_MERGEABLE pages;
  free       a ballast process of B_MIB private pages, never mergeable.
Phases: idle (stop x2), committed (decay x2), + ballast (boost x5, up to MAX), ballast gone
(decay x2), nothing (stop x2). Each decision is checked against ksmtuned's rule applied to the
inputs it logged, and against sysfs. `# decisions:` and the record (argument 1, optional; the
log is kept beside it) hold only what C KSM and rksm must share.
"""

import mmap
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from ksmrun import ksm_read, ksm_write  # tests/vm/, this file's directory

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# Debian's package, unpacked by scripts/setup.sh (pinned there), not installed on the host.
SCRIPTS = [os.path.join(TOP, "build/ksmtuned/usr/sbin/ksmtuned")]
MIB, PAGE = 1 << 20, os.sysconf("SC_PAGE_SIZE")
G, S_MIB, B_MIB = 256, 32, 512                # margin, mergeable MiB, ballast MiB (2 G)
BOOST, DECAY, NMIN, NMAX = 300, -50, 64, 1250  # ksmtuned's defaults, left as they are
PHASES = [("idle", 2), ("committed", 2), ("ballast", 5), ("unballast", 2), ("none", 2)]
EXPECT = "stop stop 64 64 364 664 964 1250 1250 1200 1150 stop stop"
PCP = "/proc/sys/vm/percpu_pagelist_high_fraction"


def child(args):
    """The pressure processes: this file, run again under another argv[0]."""
    if args[0] == "load":                     # load MEMFD_MIB S_MIB -enable-kvm
        fd = os.memfd_create("guest-ram")
        os.ftruncate(fd, int(args[1]) * MIB)
        shm = mmap.mmap(fd, int(args[1]) * MIB, mmap.MAP_SHARED)
        anon = mmap.mmap(-1, int(args[2]) * MIB, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        anon.madvise(mmap.MADV_MERGEABLE)
        for m, fill in ((shm, b"\1" * MIB), (anon, b"Z" * MIB)):
            for off in range(0, len(m), MIB):
                m[off:off + MIB] = fill
    else:                                     # ballast B_MIB
        blob = b"\1" * (int(args[1]) * MIB)   # noqa: F841 (held until stdin closes)
    print("ready", flush=True)
    sys.stdin.read()


class Tap:
    n = failed = 0

    def check(self, ok, what):
        self.n += 1
        self.failed += not ok
        print("%s %d - %s" % ("ok" if ok else "not ok", self.n, what), flush=True)
        return bool(ok)


tap = Tap()


def meminfo(*fields):
    with open("/proc/meminfo") as f:
        return sum(int(line.split()[1]) for line in f if line.split(":")[0] in fields)


def spawn(argv0, *args):
    # argv[0] without a slash makes Python look for its prefix by that name: give it its own.
    env = dict(os.environ, PYTHONHOME=sys.prefix + ":" + sys.exec_prefix)
    p = subprocess.Popen([argv0, os.path.abspath(__file__)] + [str(a) for a in args], env=env,
                         executable=sys.executable, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError("%s did not start" % argv0)
    return p


def end(p):
    p.stdin.close()
    p.wait(timeout=60)


def sleep_children(pid):
    n = 0
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        n += "(sleep)" in st and st[st.rindex(")") + 2:].split()[1] == str(pid)
    return n


def adjust(loop, log, k):
    """The k-th adjust (from 0): SIGUSR1 once the loop has started its k+1-th `sleep` (a signal
    that comes before its `wait` only runs the trap: sent again after 10 s without an adjust).
    Returns (committed, free, ("stop",) or ("start", npages, sleep)) as ksmtuned logged them."""
    for _ in range(300):
        if sleep_children(loop) > k:
            break
        time.sleep(0.1)
    for _ in range(3):
        os.kill(loop, signal.SIGUSR1)
        for tick in range(1200):
            text = open(log).read()
            ins = re.findall(r": committed (\d+) free (\d+)$", text, re.M)
            outs = re.findall(r": (?:\d+ < \d+ and free > \d+, (stop) ksm|KSMCTL start (\d+) "
                              r"(\d+))$", text, re.M)
            if len(ins) > k and len(outs) > k:
                o = outs[k]
                d = ("stop",) if o[0] else ("start", int(o[1]), int(o[2]))
                return int(ins[k][0]), int(ins[k][1]), d
            if len(ins) <= k and tick > 100:
                break
            time.sleep(0.1)
    raise RuntimeError("ksmtuned made no adjust %d" % (k + 1))


def pcp_lists():
    """(pages held, their floor): the per-CPU page lists of every zone in /proc/zoneinfo, and
    what they may hold once each is at its floor, four batches (zone_highsize())."""
    held = floor = count = 0
    with open("/proc/zoneinfo") as f:
        for line in f:
            key, _, value = line.strip().partition(":")
            if key == "count":                # only a pageset has count: and batch: lines
                count = int(value)
            elif key == "batch":
                held, floor = held + count, floor + 4 * int(value)
    return held, floor


def settle(limit=240):
    """Waits until the per-CPU lists hold no more than their floor. Writing the fraction only
    lowers each list's limit: a list gives back what it holds above it when its CPU next frees
    a page there, or a batch at a time as the CPU's vmstat work decays it, so free memory would
    rise for a minute or more (Documentation/mm/rksm-measurements.rst). A little memory
    touched on each CPU (so on its node) and freed on each CPU makes both happen. Returns
    (held before, held after, floor) in KiB and the seconds waited."""
    t0, cpus = time.monotonic(), os.sched_getaffinity(0)
    before = held = floor = None
    while True:
        held, floor = pcp_lists()
        before = held if before is None else before
        if held <= floor or time.monotonic() - t0 > limit:
            break
        for a, b in ((a, b) for a in sorted(cpus) for b in sorted(cpus)):
            os.sched_setaffinity(0, {a})      # pages of a's node, freed to b's list of them
            m = mmap.mmap(-1, MIB, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            m.write(b"\1" * MIB)
            os.sched_setaffinity(0, {b})
            m.close()
        os.sched_setaffinity(0, cpus)
        time.sleep(1)
    kib = PAGE // 1024
    return before * kib, held * kib, floor * kib, time.monotonic() - t0


def main():
    script = next((s for s in SCRIPTS if os.path.exists(s)), None)
    # Pages freed go first to per-CPU lists, which MemFree does not count; by default a list
    # grows up to an eighth of its zone, so free memory came and went between phases
    # (Documentation/mm/rksm-measurements.rst). A high fraction keeps each list at a few
    # batches for the test, once the lists have given back what they held.
    with open(PCP) as f:
        pcp = f.read().strip()
    with open(PCP, "w") as f:
        f.write(str(1 << 30))
    try:
        before, held, floor, waited = settle()
        if not tap.check(held <= floor, "per-CPU page lists at their floor: %d KiB (was %d KiB, "
                         "floor %d KiB) after %.0f s" % (held, before, floor, waited)):
            print("1..%d" % tap.n)
            return 1
        return decide(script)
    finally:
        with open(PCP, "w") as f:
            f.write(pcp)


def decide(script):
    total, free0 = meminfo("MemTotal"), meminfo("MemFree", "Buffers", "Cached")
    thres = free0 - G * 1024                  # KiB, as ksmtuned counts
    memfd_mib = (total - free0) // 1024 + G + 64
    sleep = max(10, 10 * 16 * 1024 * 1024 // total)
    print("# %s; MemTotal %d KiB, free %d KiB: thres %d KiB, memfd %d MiB, ballast %d MiB"
          % (script, total, free0, thres, memfd_mib, B_MIB))
    # What cannot be reclaimed (no swap) must fit: what is in use, the memfd, S, the ballast.
    if not (tap.check(script, "ksmtuned's script found (%s)" % " or ".join(SCRIPTS)) and
            tap.check(2 * memfd_mib - G - 64 + S_MIB + B_MIB + 128 < total // 1024,
                      "room for the memfd and the ballast")):
        print("1..%d" % tap.n)
        return 1
    saved = {k: ksm_read(k) for k in ("run", "pages_to_scan", "sleep_millisecs")}
    tmp = os.path.dirname(os.path.abspath(sys.argv[1])) if len(sys.argv) > 1 else tempfile.mkdtemp()
    log, pidf, errf = (os.path.join(tmp, "ksmtuned." + x) for x in ("log", "pid", "err"))
    for f in (log, pidf):
        if os.path.exists(f):
            os.unlink(f)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KSM_")}
    env.update(KSM_MONITOR_INTERVAL="3600", KSM_THRES_COEF="0", KSM_THRES_CONST=str(thres),
               DEBUG="1", LOGFILE=log, PIDFILE=pidf)
    with open(errf, "w") as err:              # its stdout and stderr: nothing expected
        tuned = subprocess.Popen(["bash", script], env=env, start_new_session=True, stdout=err,
                                 stderr=err)
    tuned.wait(timeout=60)
    procs, seen, npages, k = {}, [], 0, 0
    try:
        loop, head = int(open(pidf).read()), open(log).read()
        tap.check(all(re.search(r": %s %d$" % kv, head, re.M) for kv in (
            ("total", total), ("sleep", sleep), ("thres", thres))), "ksmtuned reads total %d, "
            "sleep %d, thres %d KiB from this environment" % (total, sleep, thres))
        for phase, n in PHASES:
            if phase == "committed":
                procs["load"] = spawn("qemu-system-x86_64", "load", memfd_mib, S_MIB,
                                      "-enable-kvm")
            elif phase == "ballast":
                procs["ballast"] = spawn("ksmtuned-ballast", "ballast", B_MIB)
            elif phase != "idle":
                end(procs.pop("ballast" if phase == "unballast" else "load"))
            for _ in range(n):
                c, f, d = adjust(loop, log, k)
                k += 1
                stop = c + thres < total and f > thres
                if not stop:
                    npages = min(NMAX, max(NMIN, npages + (BOOST if f < thres else DECAY)))
                want = ("stop",) if stop else ("start", npages, sleep)
                got = tuple(ksm_read(x) for x in ("run", "pages_to_scan", "sleep_millisecs"))
                tap.check(d == want, "%s: committed %d KiB, free %d KiB: ksmtuned %s, its rule "
                          "%s" % (phase, c, f, d, want))
                tap.check(got[0] == 0 if d[0] == "stop" else got == (1,) + tuple(d[1:]),
                          "%s: sysfs run,pages_to_scan,sleep_millisecs %s"
                          % (phase, ",".join(map(str, got))))
                seen.append((phase, d, c + thres < total, f > thres))
            if phase == "ballast":            # ksmd at MAX pages: the equal pages merge
                pid, want, t0 = procs["load"].pid, S_MIB * MIB // PAGE, time.monotonic()
                while time.monotonic() - t0 < 300:
                    merging = int(open("/proc/%d/ksm_merging_pages" % pid).read())
                    if merging >= want * 9 // 10:
                        break
                    time.sleep(1)
                tap.check(merging >= want * 9 // 10, "merging under ksmtuned: %d of %d pages "
                          "in %.0f s" % (merging, want, time.monotonic() - t0))
    finally:
        for p in procs.values():
            end(p)
        try:
            os.killpg(tuned.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        for name in ("pages_to_scan", "sleep_millisecs", "run"):
            ksm_write(name, saved[name])
    decisions = " ".join("stop" if d[0] == "stop" else str(d[1]) for _, d, _, _ in seen)
    print("# decisions: " + decisions)
    print("# inputs (committed+thres<total/free>thres): " + " ".join(
        "%s/%s" % ("ny"[a], "ny"[b]) for _, _, a, b in seen))
    tap.check(decisions == EXPECT, "the decisions are the designed ones: " + EXPECT)
    out = open(errf).read().strip()
    tap.check(not out, "ksmtuned printed nothing" + (": " + out[:200] if out else ""))
    tap.check({k: ksm_read(k) for k in saved} == saved, "run, pages_to_scan, sleep_millisecs restored")
    if len(sys.argv) > 1:                     # what tests/report.py can compare across kernels
        with open(sys.argv[1], "w") as f:
            for i, (phase, d, a, b) in enumerate(seen):
                f.write("adjust %d %s %s committed+thres<total=%s free>thres=%s\n" % (
                    i + 1, phase, "stop" if d[0] == "stop" else "start %d" % d[1], a, b))
    print("1..%d" % tap.n)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # killed by `timeout`: clean up
    if len(sys.argv) > 1 and sys.argv[1] in ("load", "ballast"):
        child(sys.argv[1:])
    else:
        sys.exit(main())
