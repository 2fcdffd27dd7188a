#!/usr/bin/env python3
"""`make bench`, guest side: merge speed of the running kernel's KSM (C KSM or rksm).

Runs each workload REPS times with ksmd at full speed (sleep_millisecs=0, pages_to_scan=100000,
other knobs at their boot values) and appends one JSON record per run to OUT:

  ksmpages best / worst / prefix   PROCS processes of MIB MiB each (tests/vm/ksmpages.c)
  ksm_tests -P / -H                the kernel's own selftest, its "Average speed" line
  qemu2 / qemu3                    two QEMU guests booted, merged; then a third booted, merged
  qemu3-memcg                      rksm only: the three guests again, each QEMU in a memory
                                   cgroup of its own under merge_scope=memcg
  cost-chains / cost-copies        the running cost (part "cost"): one process of MIB MiB, one
                                   page in four a copy of 64 contents (chains) or of
                                   as many as give each four copies (copies),
                                   the rest unique (tests/vm/ksmpages.c); and the page-table
                                   walk alone (cost-walk: every page zero, merged with the zero
                                   page by use_zero_pages, which no scan takes); once merging settled,
                                   ksmd's CPU per GiB per full scan, pages scanned and skipped
                                   per pass, and the longest and 99th-percentile hold of the
                                   process's mmap lock by a scanner thread (trace events)
  sparse                           (part "cost") tests/vm/sparse.c over SPARSE_GIB: seconds per
                                   full scan, MADV_UNMERGEABLE, PR_SET_MEMORY_MERGE off, run=2
                                   and exit of a sparse area holding 4096 merged pages

Every ksmpages run is checked as `make test` checks it: the counters reach every page, the page
frames agree (as many distinct frames as pages_shared, none mapped exclusively) and every byte
reads back; the QEMU guests check every byte of their own memory after merging, and
qemu3-memcg also checks by page frames that no frame of a guest's memory is mapped by another
guest (qemu3, under merge_scope=global, must show some: the control). A run whose
check fails is recorded with "verified": false and makes the script exit 1.

Per run: seconds from `run=1` to fully merged ("seconds"), the same from the first merged page
("merge_seconds", the paper's rate while merging), ksmd CPU time (all of its threads), the
growth of the kernel's slab per tracked page, and MemFree over time for the plot; every record
holds the guest's page size ("page_size"), which its counts of pages are in.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ksmrun import KSM, PAGE, Proc, frames, ksm_read, ksm_write  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HZ = os.sysconf("SC_CLK_TCK")


def say(msg):
    print("# " + msg, flush=True)


def ksmd_cpu():
    """CPU seconds used so far by ksmd and its helper threads (every kthread named ksmd*)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        if comm.startswith("ksmd"):
            fields = stat[stat.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / HZ


def slab_kib():
    return meminfo_kib("Slab")


def meminfo_kib(field):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def threads_knob():
    return os.path.exists("/sys/kernel/mm/ksm/scan_threads")


def full_speed(threads):
    ksm_write("run", 2)
    ksm_write("pages_to_scan", 100000)
    ksm_write("sleep_millisecs", 0)
    if threads_knob():
        ksm_write("scan_threads", threads)


class Watch:
    """Writes 1 to `run` and times merging with tests/vm/ksmwatch.c, which samples the KSM
    counters every 10 ms and MemFree every 100 ms while taking almost no CPU (a Python loop
    here took 10 to 16% of a vCPU under TCG, which the scanner threads need).

    `mode` "total": until pages_shared + pages_sharing reach `goal`; "stable": until
    pages_sharing has not grown above `goal` for three full scans since it last grew."""

    def __init__(self, mode, goal, timeout=900):
        exe = os.path.join(TOP, "build", "tests", "ksmwatch")
        r = subprocess.run([exe, mode, str(goal), "10", str(timeout)], stdout=subprocess.PIPE,
                           text=True, timeout=timeout + 60)
        if r.returncode == 2:
            raise RuntimeError("ksmwatch failed (its error is above)")
        self.samples = []
        self.done = None
        for line in r.stdout.splitlines():
            f = line.split()
            if f[0] == "done":
                self.done = float(f[1])
            elif f[0] != "timeout":
                self.samples.append((float(f[0]), int(f[1]), int(f[2]), int(f[3]), int(f[4])))
        # (t, MemFree MiB or -1 where not read, pages_shared, pages_sharing) of every sample:
        # the benchmark's plot draws the pages merged over time.
        self.trace = [(round(t, 4), free, shared, sharing)
                      for t, shared, sharing, _, free in self.samples]
        self.first = next((t for t, _, sharing, _, _ in self.samples if sharing > 0), None)

    def last(self):
        """(t, pages_shared, pages_sharing) of the last sample."""
        t, shared, sharing, _, _ = self.samples[-1]
        return t, shared, sharing

    def last_growth(self):
        """(t, pages_sharing) when pages_sharing last grew."""
        t_best, best = None, self.samples[0][2]
        for t, _, sharing, _, _ in self.samples:
            if sharing > best:
                t_best, best = t, sharing
        return t_best, best


def run_ksmpages(impl, mode, procs_n, mib, threads, rep):
    full_speed(threads)
    exe = os.path.join(TOP, "build", "tests", "ksmpages")
    procs = [Proc(exe, mode, mib) for _ in range(procs_n)]
    total = sum(p.pages for p in procs)
    slab0, cpu0 = slab_kib(), ksmd_cpu()
    w = Watch("total", total)
    done = w.done
    # Slab growth per tracked page while every rmap_item and stable node still exists.
    slab1 = slab_kib()
    ksm_write("run", 0)
    cpu1 = ksmd_cpu()
    shared, sharing = ksm_read("pages_shared"), ksm_read("pages_sharing")
    distinct, exclusive, merging = frames(procs)
    answers = [p.ask("verify") for p in procs]
    ok = (done is not None and shared + sharing == total and distinct == shared
          and exclusive == 0 and merging == total and all(a.startswith("ok") for a in answers))
    why = ("pages_shared+sharing %d of %d, %d distinct frames for %d shared, %d exclusive, "
           "verify %s" % (shared + sharing, total, distinct, shared, exclusive, answers))
    for p in procs:
        p.stop()
    ksm_write("run", 2)
    mib_merged = sharing * PAGE / 2**20
    seconds = done if done is not None else w.last()[0]
    merge_s = seconds - (w.first or 0)
    return {
        "workload": mode, "impl": impl, "threads": threads, "rep": rep,
        "procs": procs_n, "mib_per_proc": mib, "page_size": PAGE,
        "mib_merged": round(mib_merged, 2), "seconds": round(seconds, 3),
        "mib_per_s": round(mib_merged / seconds, 2) if seconds else 0,
        "merge_seconds": round(merge_s, 3),
        "merge_mib_per_s": round(mib_merged / merge_s, 2) if merge_s > 0 else 0,
        "slab_bytes_per_page": round((slab1 - slab0) * 1024 / total, 1),
        "ksmd_cpu_s": round(cpu1 - cpu0, 2), "verified": ok, "check": why,
        "trace": w.trace,
    }


SPEED = re.compile(r"Average speed:\s*([0-9.]+)\s*MiB/s")
SIZE = re.compile(r"Total size:\s*([0-9.]+)\s*MiB")
TIME = re.compile(r"Total time:\s*([0-9.]+)\s*s")


def run_selftest(impl, flag, mib, threads, rep):
    full_speed(threads)
    ksm_write("run", 0)
    cpu0 = ksmd_cpu()
    st = os.path.join(TOP, "build", "selftests")
    r = subprocess.run(["./ksm_tests", flag, "-s", str(mib)], cwd=st, capture_output=True,
                       text=True, timeout=900)
    cpu1 = ksmd_cpu()
    ksm_write("run", 2)
    out = r.stdout + r.stderr
    m, s, t = SPEED.search(out), SIZE.search(out), TIME.search(out)
    ok = r.returncode == 0 and m is not None
    seconds = float(t.group(1)) if t else 0
    merged = float(s.group(1)) if s else 0
    return {
        "workload": "ksm_tests%s" % flag, "impl": impl, "threads": threads, "rep": rep,
        "page_size": PAGE, "mib_merged": merged, "seconds": seconds,
        "mib_per_s": float(m.group(1)) if m else 0,
        "slab_bytes_per_page": None, "ksmd_cpu_s": round(cpu1 - cpu0, 2),
        "verified": ok, "check": "exit %d: %s" % (r.returncode, out.strip().splitlines()[-1:]),
    }


class Guest:
    """A small QEMU guest (TCG, 96 MiB) booting build/bzImage-c with tests/vm/nested_init.c as
    init, its RAM mergeable (QEMU's mem-merge) unless `merge` is False. With `bare`, it boots
    the bare-metal guest of tests/vm/bare/ instead (x86 or arm64, as the VM), which lays the same
    pattern out in guest-physical memory by the host's page size, with no kernel to boot
    (seconds, not minutes, under nested TCG)."""

    RAM_MIB = 96
    BARE = os.path.join(TOP, "build", "tests", "nested_bare.elf")

    def __init__(self, n, mib, merge=True, bare=False):
        if bare:
            boot = ["-kernel", self.BARE, "-append", "page=%d mib=%d" % (PAGE, mib)]
        else:
            boot = ["-kernel", os.path.join(TOP, "build", "bzImage-c"),
                    "-initrd", os.path.join(TOP, "build", "tests", "nested.cpio"),
                    "-append", "console=ttyS0 panic=-1 quiet kunit.enable=0 nested.mib=%d" % mib]
        # The machine of the VM's own architecture: a Linux guest only on x86 (the bare one,
        # tests/vm/bare/, is built for either by scripts/guest-progs.sh).
        if os.uname().machine == "aarch64":
            qemu, machine, cpu = "qemu-system-aarch64", "virt", "cortex-a53"
        else:
            qemu, machine, cpu = "qemu-system-x86_64", "q35", "qemu64"
        self.lines = []
        self.merge = merge
        self.p = subprocess.Popen(
            [qemu, "-nodefaults", "-display", "none", "-no-reboot",
             "-machine", "%s,mem-merge=%s" % (machine, "on" if merge else "off"), "-accel", "tcg",
             "-cpu", cpu, "-m", "%dM" % self.RAM_MIB] + boot +
            ["-chardev", "stdio,id=s0,signal=off", "-serial", "chardev:s0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.name = "guest%d" % n
        self.cgroup = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.p.stdout:
            self.lines.append(raw.decode(errors="replace").strip())

    def wait_for(self, pattern, since, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in self.lines[since:]:
                if re.search(pattern, line):
                    return line
            if self.p.poll() is not None:
                return None
            time.sleep(0.5)
        return None

    def check(self):
        """Asks the guest to check every byte of its memory: True if it answers ok."""
        since = len(self.lines)
        self.p.stdin.write(b"check\n")
        self.p.stdin.flush()
        line = self.wait_for(r"^(ok \d+|BAD)", since, 300)
        return line is not None and line.startswith("ok")

    def stop(self):
        self.p.kill()
        self.p.wait()


def merge_until_stable(base):
    """Runs ksmd until pages_sharing has not grown for three full scans after the last growth;
    returns (seconds to the last growth, pages_sharing gained, the watch)."""
    w = Watch("stable", base)
    ksm_write("run", 0)
    t, sharing = w.last_growth()
    return (t or 0), max(sharing - base, 0), w


def run_qemu(impl, mib, threads, reps, results):
    """The paper's real-VM case: two guests booted, then merged (REPS times: `run=2` unmerges
    between repetitions); then ksmd stops, a third guest boots and ksmd merges again."""
    full_speed(threads)
    ksm_write("run", 0)
    say("qemu: booting two guests (TCG inside the VM)")
    t0 = time.monotonic()
    guests = [Guest(i, mib) for i in (1, 2)]
    ok = all(g.wait_for(r"^ready", 0, 1200) for g in guests)
    say("qemu: two guests ready after %.0f s" % (time.monotonic() - t0))

    def record(workload, rep, seconds, pages, cpu, trace, verified,
               check="guests check their memory"):
        mib_merged = pages * PAGE / 2**20
        results.append({
            "workload": workload, "impl": impl, "threads": threads, "rep": rep,
            "page_size": PAGE, "mib_merged": round(mib_merged, 2), "seconds": round(seconds, 3),
            "mib_per_s": round(mib_merged / seconds, 2) if seconds else 0,
            "slab_bytes_per_page": None, "ksmd_cpu_s": round(cpu, 2),
            "verified": verified, "check": check, "trace": trace,
        })
        say("  %s rep %d: %.1f MiB merged in %.2f s, guests %s"
            % (workload, rep, mib_merged, seconds, "ok" if verified else "FAILED"))

    for rep in range(reps):
        ksm_write("run", 2)
        ksm_write("run", 0)
        cpu0 = ksmd_cpu()
        seconds, pages, w = merge_until_stable(0)
        verified = ok and all(g.check() for g in guests)
        record("qemu2", rep, seconds, pages, ksmd_cpu() - cpu0, w.trace, verified)
    say("qemu: ksmd stopped, booting a third guest")
    guests.append(Guest(3, mib))
    ok = ok and guests[2].wait_for(r"^ready", 0, 1200) is not None
    base = ksm_read("pages_sharing")
    cpu0 = ksmd_cpu()
    seconds, pages, w = merge_until_stable(base)
    verified = ok and all(g.check() for g in guests)
    shared = cross_shared_frames(guests)
    say("  qemu3: %d frames mapped by more than one guest" % shared)
    record("qemu3", 0, seconds, pages, ksmd_cpu() - cpu0, w.trace, verified and shared > 0,
           "guests check their memory; %d frames mapped by two guests or more" % shared)
    if os.path.exists(KSM + "merge_scope"):
        run_qemu_memcg(guests, ok, record)
    for g in guests:
        g.stop()
    ksm_write("run", 2)
    for g in guests:
        if g.cgroup:
            os.rmdir(g.cgroup)


CGROUP = "/sys/fs/cgroup"
KPF_ZERO_PAGE = 1 << 24


def guest_frames(guest):
    """The frames that a guest's QEMU maps in its anonymous mappings of 64 MiB or more (the
    guest's RAM), the zero page left out."""
    out = set()
    with open("/proc/%d/maps" % guest.p.pid) as f:
        areas = []
        for line in f:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if len(fields) < 6 and end - start >= 64 << 20:
                areas.append((start, end))
    with open("/proc/%d/pagemap" % guest.p.pid, "rb") as pm:
        for start, end in areas:
            pm.seek(start // PAGE * 8)
            raw = pm.read((end - start) // PAGE * 8)
            for i in range(0, len(raw), 8):
                e = int.from_bytes(raw[i:i + 8], "little")
                if e >> 63:
                    out.add(e & ((1 << 55) - 1))
    with open("/proc/kpageflags", "rb") as kf:
        for pfn in list(out):
            kf.seek(pfn * 8)
            if int.from_bytes(kf.read(8), "little") & KPF_ZERO_PAGE:
                out.discard(pfn)
    return out


def cross_shared_frames(guests):
    """How many frames are mapped by more than one guest."""
    seen, shared = set(), set()
    for g in guests:
        frames_of = guest_frames(g)
        shared |= frames_of & seen
        seen |= frames_of
    return len(shared)


def run_qemu_memcg(guests, ok, record):
    """merge_scope's case for VMs of different owners: every guest's QEMU in a memory cgroup
    of its own under merge_scope=memcg; each guest merges within itself only, so no frame may
    be mapped by two guests, and every guest must still read its memory right."""
    say("qemu: merge_scope=memcg, each guest in a memory cgroup of its own")
    ksm_write("run", 2)
    ksm_write("merge_scope", "memcg")
    if not os.path.exists(CGROUP + "/cgroup.procs"):
        subprocess.run(["mount", "-t", "cgroup2", "none", CGROUP], check=True)
    with open(CGROUP + "/cgroup.subtree_control", "w") as f:
        f.write("+memory")
    for g in guests:
        g.cgroup = os.path.join(CGROUP, "rksm-" + g.name)
        os.makedirs(g.cgroup, exist_ok=True)
        with open(os.path.join(g.cgroup, "cgroup.procs"), "w") as f:
            f.write(str(g.p.pid))
    cpu0 = ksmd_cpu()
    seconds, pages, w = merge_until_stable(0)
    shared = cross_shared_frames(guests)
    say("  qemu3-memcg: %d frames mapped by more than one guest" % shared)
    verified = ok and all(g.check() for g in guests) and shared == 0 and pages > 0
    record("qemu3-memcg", 0, seconds, pages, ksmd_cpu() - cpu0, w.trace, verified,
           "guests check their memory; %d frames mapped by two guests or more" % shared)
    ksm_write("run", 2)
    ksm_write("merge_scope", "global")


TRACING = "/sys/kernel/tracing"
LOCK_EVENTS = ("mmap_lock_acquire_returned", "mmap_lock_released")
TRACE_LINE = re.compile(r"-(\d+)\s+\[\d+\].*?\s([0-9.]+): (mmap_lock_\w+): mm=(\w+)(.*)$", re.M)


def scanner_pids():
    """The pids of ksmd and its helper threads."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/comm" % pid) as f:
                    if f.read().startswith("ksmd"):
                        out.append(pid)
            except OSError:
                pass
    return out


def trace_write(name, value):
    with open(os.path.join(TRACING, name), "w") as f:
        f.write(str(value))


def lock_holds(seconds):
    """The mmap lock holds of the scanner threads over `seconds` (mmap_lock trace events, the
    scanner threads' pids only): their durations in seconds, and whether the trace lost
    events; (None, False) where the kernel has no such events (the native kernels)."""
    if not os.path.exists(TRACING + "/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], check=False)
    if not os.path.isdir(TRACING + "/events/mmap_lock"):
        return None, False
    trace_write("buffer_size_kb", 65536)
    trace_write("trace", "")
    trace_write("set_event_pid", " ".join(scanner_pids()))
    for e in LOCK_EVENTS:
        trace_write("events/mmap_lock/%s/enable" % e, 1)
    time.sleep(seconds)
    for e in LOCK_EVENTS:
        trace_write("events/mmap_lock/%s/enable" % e, 0)
    trace_write("set_event_pid", "")
    with open(os.path.join(TRACING, "trace")) as f:
        text = f.read()
    trace_write("trace", "")
    lost = "LOST" in text
    start, holds = {}, []
    for m in TRACE_LINE.finditer(text):
        pid, t, event, mm = m.group(1), float(m.group(2)), m.group(3), m.group(4)
        if event == "mmap_lock_acquire_returned":
            if "success=true" in m.group(5):
                start[(pid, mm)] = t
        elif (pid, mm) in start:
            holds.append(t - start.pop((pid, mm)))
    return holds, lost


def percentile(values, q):
    if not values:
        return 0
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


# How many passes smart scan takes to look at every page once more, once its pages are old:
# C's `skip_age()` skips an old page eight passes and looks at it in the ninth, counted from each
# page's own last look (the pages of one process, written at once, stay in step); rksm looks at
# an old page in the passes whose number is a multiple of eight (`item::LONGEST_LOOK_PERIOD`).
SMART_CYCLE = {"c": 9, "rust": 8}


def run_cost(impl, shape, mib, threads, rep, passes):
    """The running cost once merging settled: ksmd at pages_to_scan=2000, sleep_millisecs=0
    (ksmtuned's busiest setting and more), smart_scan as booted."""
    ksm_write("run", 2)
    ksm_write("pages_to_scan", 2000)
    ksm_write("sleep_millisecs", 0)
    if threads_knob():
        ksm_write("scan_threads", threads)
    exe = os.path.join(TOP, "build", "tests", "ksmpages")
    if shape == "walk":
        # The page-table walk alone: every page zero, merged with the zero page
        # (use_zero_pages), which neither kernel's scan takes: a pass reads the page tables.
        ksm_write("use_zero_pages", 1)
        proc = Proc(exe, "zeros", mib)
        pages = mib * 1024 * 1024 // PAGE
        ksm_write("run", 1)
        t_start = time.monotonic()
        while ksm_read("ksm_zero_pages") < pages and time.monotonic() - t_start < 900:
            time.sleep(0.01)
        settle, sharing = time.monotonic() - t_start, ksm_read("ksm_zero_pages")
    else:
        proc = Proc(exe, shape, mib)
        w = Watch("stable", 0)
        settle, sharing = w.last_growth()
    # Whole passes from here: the first boundary, then `passes` more.
    f0 = ksm_read("full_scans")
    while ksm_read("full_scans") == f0:
        time.sleep(0.005)
    f0 = ksm_read("full_scans")
    cpu0, t0 = ksmd_cpu(), time.monotonic()
    sc0, sk0 = ksm_read("pages_scanned"), ksm_read("pages_skipped")
    # At least `passes` full scans and two seconds: the CPU times are counted in clock ticks,
    # and a pass of the walk alone takes a millisecond natively.
    while ksm_read("full_scans") < f0 + passes or time.monotonic() - t0 < 2.0:
        time.sleep(0.005)
    # Then to a pass boundary that makes the passes timed a whole number of smart scan's cycles
    # (see SMART_CYCLE): each cycle has one pass that looks at every old page, and a count of
    # passes that took one of them more or less would weigh it by chance.
    # (The walk alone looks at no page: its passes are all alike.)
    cycle = SMART_CYCLE[impl] if shape != "walk" and ksm_read("smart_scan") else 1
    f1 = ksm_read("full_scans")
    while True:
        f = ksm_read("full_scans")
        if f != f1 and (f - f0) % cycle == 0:
            break
        time.sleep(0.002)
    cpu1, t1 = ksmd_cpu(), time.monotonic()
    sc1, sk1 = ksm_read("pages_scanned"), ksm_read("pages_skipped")
    # The passes up to the boundary the CPU time was read at (read again, one more may have
    # ended meanwhile).
    passes = f - f0
    pass_s = (t1 - t0) / passes
    holds, lost = lock_holds(max(2 * pass_s, 1.0))
    sharing_after = ksm_read("ksm_zero_pages" if shape == "walk" else "pages_sharing")
    answer = proc.ask("verify")
    proc.stop()
    ksm_write("run", 2)
    ksm_write("use_zero_pages", 0)
    gib = mib / 1024
    ok = (answer.startswith("ok") and sharing > 0 and sharing_after >= sharing
          and holds != [] and not lost)
    if holds is None:
        holds = []
    return {
        "workload": "cost-" + shape, "impl": impl, "threads": threads, "rep": rep,
        "mib_per_proc": mib, "settle_s": round(settle or 0, 3), "pages_sharing": sharing_after,
        "page_size": PAGE,
        "passes": passes, "pass_s": round(pass_s, 4),
        "cpu_s_per_gib_pass": round((cpu1 - cpu0) / passes / gib, 4),
        "scanned_per_pass": (sc1 - sc0) // passes, "skipped_per_pass": (sk1 - sk0) // passes,
        "lock_holds": len(holds),
        "lock_max_us": round(max(holds) * 1e6, 1) if holds else None,
        "lock_p99_us": round(percentile(holds, 0.99) * 1e6, 1) if holds else None,
        "verified": ok,
        "check": "verify %s, pages_sharing %d then %d, %d lock holds%s" % (
            answer, sharing, sharing_after, len(holds), ", events lost" if lost else ""),
    }


SPARSE_TIME = re.compile(r"^# time (\w+) ([0-9.]+) s", re.M)


def run_sparse(impl, gib, rep):
    """tests/vm/sparse.c over `gib` GiB: its timings, and whether every case passed."""
    exe = os.path.join(TOP, "build", "tests", "sparse")
    r = subprocess.run([exe, str(gib)], capture_output=True, text=True, timeout=3600)
    out = r.stdout
    failed = [line for line in out.splitlines() if line.startswith("not ok")]
    times = {k: float(v) for k, v in SPARSE_TIME.findall(out)}
    ok = r.returncode == 0 and not failed and len(times) == 5
    rec = {"workload": "sparse", "impl": impl, "threads": 1, "rep": rep, "gib": gib,
           "page_size": PAGE, "verified": ok,
           "check": "exit %d, %s" % (r.returncode, failed or "all ok")}
    for k, v in times.items():
        rec[k + "_s"] = v
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, choices=("c", "rust"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--first-rep", type=int, default=0,
                    help="the number of the first repetition (runs are numbered from it)")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--modes", default="best,worst,prefix")
    ap.add_argument("--threads", default="1", help="comma-separated scanner thread counts")
    ap.add_argument("--selftest-mib", type=int, default=256)
    ap.add_argument("--qemu-mib", type=int, default=16)
    ap.add_argument("--parts", default="ksmpages,selftests,qemu")
    ap.add_argument("--cost-mib", type=int, default=256)
    ap.add_argument("--cost-passes", type=int, default=5)
    ap.add_argument("--sparse-gib", type=int, default=1024,
                    help="the sparse area's size (0: no sparse run)")
    ap.add_argument("--cost-shapes", default="chains,copies,walk")
    args = ap.parse_args()
    parts = args.parts.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    if not threads_knob():
        threads = [1]
    saved = {k: ksm_read(k) for k in ("pages_to_scan", "sleep_millisecs")}
    results = []
    if "ksmpages" in parts:
        for mode in args.modes.split(","):
            for t in threads:
                for rep in range(args.first_rep, args.first_rep + args.reps):
                    say("%s x%d %d MiB, %d thread(s), run %d"
                        % (mode, args.procs, args.mib, t, rep + 1))
                    r = run_ksmpages(args.impl, mode, args.procs, args.mib, t, rep)
                    say("  %.1f MiB in %.2f s (%.1f MiB/s; merging %.2f s), ksmd %.1f s CPU, "
                        "slab %.1f B/page, %s" % (r["mib_merged"], r["seconds"], r["mib_per_s"],
                                                 r["merge_seconds"], r["ksmd_cpu_s"],
                                                 r["slab_bytes_per_page"],
                                                 "verified" if r["verified"] else
                                                 "FAILED: " + r["check"]))
                    results.append(r)
    if "selftests" in parts:
        for flag in ("-P", "-H"):
            for rep in range(args.first_rep, args.first_rep + args.reps):
                say("ksm_tests %s -s %d, run %d" % (flag, args.selftest_mib, rep + 1))
                r = run_selftest(args.impl, flag, args.selftest_mib, 1, rep)
                say("  %.1f MiB/s, %s" % (r["mib_per_s"], "ok" if r["verified"] else
                                          "FAILED: " + r["check"]))
                results.append(r)
    if "qemu" in parts:
        run_qemu(args.impl, args.qemu_mib, 1, args.reps, results)
    if "cost" in parts:
        for rep in range(args.first_rep, args.first_rep + args.reps):
            for shape in args.cost_shapes.split(","):
                for t in threads:
                    say("cost %s %d MiB, %d thread(s), run %d" % (shape, args.cost_mib, t, rep + 1))
                    r = run_cost(args.impl, shape, args.cost_mib, t, rep, args.cost_passes)
                    say("  settled in %.2f s; %.4f CPU s per GiB per pass, %d scanned / %d "
                        "skipped per pass; mmap lock held %d times, longest %s us, p99 %s us; "
                        "%s" % (r["settle_s"], r["cpu_s_per_gib_pass"], r["scanned_per_pass"],
                                r["skipped_per_pass"], r["lock_holds"], r["lock_max_us"],
                                r["lock_p99_us"],
                                "verified" if r["verified"] else "FAILED: " + r["check"]))
                    results.append(r)
            if not args.sparse_gib:
                continue
            say("sparse %d GiB, run %d" % (args.sparse_gib, rep + 1))
            r = run_sparse(args.impl, args.sparse_gib, rep)
            say("  %s; %s" % (", ".join("%s %.3f s" % (k[:-2], v) for k, v in r.items()
                                        if k.endswith("_s")),
                              "verified" if r["verified"] else "FAILED: " + r["check"]))
            results.append(r)
    for k, v in saved.items():
        ksm_write(k, v)
    with open(args.out, "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    bad = [r for r in results if not r["verified"]]
    for r in bad:
        say("FAILED: %s %s rep %d: %s" % (r["impl"], r["workload"], r["rep"], r["check"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
