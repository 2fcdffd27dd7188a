#!/usr/bin/env python3
"""Merged pages through the rest of the kernel's life cycle of a page (in the guest).

Each part merges ksmpages processes, puts the merged pages through one thing the kernel does to
pages, and checks that every byte reads back, that merged stays merged where it should, and
that what C KSM does, the kernel under test does too. Prints TAP.

  trace      the ksm trace events exist and fire for a merge and an exit
  swap       reclaim in a memory cgroup swaps merged pages out to zram; they come back exact
             and merge again
  migrate    move_pages() moves merged pages to the other NUMA node and back: still merged
  numa       with merge_across_nodes=0: merged pages moved to the other node stay merged,
             pages of the old node do not merge with them, pages of the new node do
  thp        areas backed by transparent huge pages: the huge pages are split and their pages
             merge, even when a huge page's first or last page merges with nothing
  hwpoison   MADV_HWPOISON on a merged page: every process that maps it gets SIGBUS (early
             kill) or faults with SIGBUS on access (late kill); the other pages stay exact
  offline    MADV_SOFT_OFFLINE moves a merged page elsewhere: still merged, still exact
"""

import errno
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ksmrun import PAGE, Proc, frames, ksm_read, ksm_write  # noqa: E402

EXE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build/tests/ksmpages")
TRACING = "/sys/kernel/tracing"
CGROUP = "/sys/fs/cgroup"
HPAGE_PMD_SIZE = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, ok, what):
        self.n += 1
        self.failed += not ok
        print("%s %d %s" % ("ok" if ok else "not ok", self.n, what), flush=True)
        return ok

    def skip(self, what):
        self.n += 1
        print("ok %d # SKIP %s" % (self.n, what), flush=True)


tap = Tap()


def write_file(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def read_file(path):
    with open(path) as f:
        return f.read()


def merged():
    return ksm_read("pages_shared") + ksm_read("pages_sharing")


def wait_until(cond, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def wait_scans(n, timeout=300):
    """Waits for `n` more full scans of ksmd (it must be running)."""
    start = ksm_read("full_scans")
    return wait_until(lambda: ksm_read("full_scans") >= start + n, timeout)


def fast_ksmd():
    ksm_write("pages_to_scan", 10000)
    ksm_write("sleep_millisecs", 0)


def start(n, mode, mib, cgroup=None):
    return [Proc(EXE, mode, mib, cgroup) for _ in range(n)]


def stop(procs):
    for p in procs:
        p.stop()


def migrate(proc, node):
    """Moves every page of `proc` to `node` with ksmd stopped (its references on the pages it is
    looking at make migration fail now and then); True if all of them went."""
    run = ksm_read("run")
    ksm_write("run", 0)
    words = proc.ask("migrate %d" % node).split()
    ksm_write("run", run)
    return words[:3] == ["ok", str(proc.pages), "0"], " ".join(words)


def merge(procs, what):
    """Runs ksmd until every page of `procs` is merged, by the counters and by the page frames
    (the counters lag behind KSM pages that went away, until ksmd meets their nodes)."""
    total = sum(p.pages for p in procs)
    ksm_write("run", 1)

    def done():
        if merged() < total:
            return False
        distinct, exclusive, _ = frames(procs)
        return exclusive == 0 and distinct == ksm_read("pages_shared")

    ok = wait_until(done)
    return tap.check(ok, "%s: %d of %d pages merged" % (what, merged(), total))


def verify(procs, what):
    answers = [p.ask("verify") for p in procs]
    return tap.check(all(a.startswith("ok") for a in answers),
                     "%s: every byte reads back (%s)" % (what, ", ".join(answers)))


def shared_frames(procs, what):
    """The processes' pages are as merged as the counters say: as many distinct frames as
    pages_shared, none mapped exclusively."""
    distinct, exclusive, _ = frames(procs)
    shared = ksm_read("pages_shared")
    return tap.check(distinct == shared and exclusive == 0,
                     "%s: %d distinct frames for %d pages_shared, %d exclusive"
                     % (what, distinct, shared, exclusive))


def reset():
    """Unmerges everything and stops ksmd."""
    ksm_write("run", 2)


# --- the parts -------------------------------------------------------------------------------

EVENTS = ["ksm_advisor", "ksm_enter", "ksm_exit", "ksm_merge_one_page",
          "ksm_merge_with_ksm_page", "ksm_remove_ksm_page", "ksm_remove_rmap_item",
          "ksm_start_scan", "ksm_stop_scan"]
# Those that C KSM fires for two processes' TRACE_PAGES equal pages each, merged into two KSM
# pages (max_page_sharing 256), their exit and `run=2`; the others fire only for the zero page
# and the advisor. A number of pages, whatever their size (1 MiB each at 4 KiB pages).
# ksm_remove_rmap_item fires for every mapper but the last of a KSM page that is found freed
# while it still lists mappers: whether each of the two is depends on whether its folio went
# away (the processes exited) before ksmd or `run=2` reaped the exited mm. C gives 0, 255 or
# 510 from one run to the next; a count in between is legal on both (ksmd takes the items off
# one by one, and exit_mmap() may free the folio midway: rksm reaps an exited mm without its
# mmap lock, which widens that window), so any count up to 510 passes.
TRACE_PAGES = 256
FIRED = {"ksm_enter": {2}, "ksm_exit": {2}, "ksm_merge_with_ksm_page": {2 * TRACE_PAGES},
         "ksm_remove_ksm_page": {2}, "ksm_remove_rmap_item": set(range(2 * TRACE_PAGES - 1)),
         "ksm_start_scan": None, "ksm_stop_scan": None}


def part_trace():
    if not os.path.exists(TRACING + "/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], check=False)
    have = sorted(os.listdir(TRACING + "/events/ksm")) if os.path.isdir(TRACING + "/events/ksm") else []
    have = [e for e in have if e.startswith("ksm_")]
    tap.check(have == EVENTS, "trace: the ksm events are %s" % " ".join(have))
    if not have:
        return
    write_file(TRACING + "/trace", "")
    write_file(TRACING + "/events/ksm/enable", 1)
    procs = start(2, "best", TRACE_PAGES * PAGE // 2**20)
    merge(procs, "trace")
    stop(procs)
    reset()
    write_file(TRACING + "/events/ksm/enable", 0)
    text = read_file(TRACING + "/trace")
    counts = {e: text.count(" %s:" % e) for e in EVENTS}
    ok = all((counts[e] > 0) if n is None else (counts[e] in n) for e, n in FIRED.items())
    ok = ok and all(counts[e] == 0 for e in EVENTS if e not in FIRED)
    tap.check(ok, "trace: fired %s" % ", ".join("%s %d" % kv for kv in counts.items()))


def part_swap():
    if not os.path.exists("/sys/block/zram0"):
        tap.check(False, "swap: no zram device")
        return
    if not any(line.startswith("/dev/zram0") for line in read_file("/proc/swaps").splitlines()):
        write_file("/sys/block/zram0/disksize", "256M")
        subprocess.run(["mkswap", "/dev/zram0"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["swapon", "/dev/zram0"], check=True)
    if not os.path.exists(CGROUP + "/cgroup.procs"):
        subprocess.run(["mount", "-t", "cgroup2", "none", CGROUP], check=True)
    write_file(CGROUP + "/cgroup.subtree_control", "+memory")
    cg = CGROUP + "/ksmlife"
    os.makedirs(cg, exist_ok=True)
    procs = start(2, "worst", 16, cg)
    if not merge(procs, "swap"):
        stop(procs)
        return
    ksm_write("run", 0)
    shared0 = ksm_read("pages_shared")
    def swapped():
        return [int(line.split()[1]) for p in procs
                for line in read_file("/proc/%d/status" % p.p.pid).splitlines()
                if line.startswith("VmSwap:")]

    # Each round of reclaim ages the lists a little more (merged pages were just mapped, young).
    for _ in range(20):
        try:
            write_file(cg + "/memory.reclaim", "64M")
        except OSError:
            pass  # EAGAIN: less could be reclaimed than asked
        if min(swapped()) >= 8 * 1024:
            break
        # Reading memory.stat flushes the memcg statistics that reclaim balances the active
        # and inactive lists by: the next round then deactivates what the last one activated.
        read_file(cg + "/memory.stat")
        time.sleep(0.2)
    swapped = swapped()
    tap.check(all(kb >= 8 * 1024 for kb in swapped),
              "swap: merged pages swapped out (VmSwap %s kB, pages_shared %d)"
              % (", ".join(map(str, swapped)), shared0))
    verify(procs, "swap: after swap-in")
    merge(procs, "swap: merged again after swap-in")
    shared_frames(procs, "swap: merged again")
    stop(procs)
    reset()
    os.rmdir(cg)


def part_migrate():
    procs = start(2, "worst", 8)
    if not merge(procs, "migrate"):
        stop(procs)
        return
    wait_scans(1)
    before = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
    for node in (1, 0):
        ok, moved = migrate(procs[0], node)
        where = procs[1].ask("nodes")
        want = "nodes %d %d 0" % ((procs[1].pages, 0) if node == 0 else (0, procs[1].pages))
        tap.check(ok and where == want,
                  "migrate: to node %d moves the shared pages of both processes (%s; %s)"
                  % (node, moved, where))
        wait_scans(2)
        after = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
        tap.check(after == before, "migrate: to node %d, still merged: %s, before %s"
                  % (node, after, before))
        shared_frames(procs, "migrate: node %d" % node)
        verify(procs, "migrate: node %d" % node)
    stop(procs)
    reset()


def part_numa():
    reset()
    ksm_write("merge_across_nodes", 0)
    try:
        procs = start(2, "worst", 8)
        moved = [migrate(p, 0) for p in procs]
        tap.check(all(ok for ok, _ in moved),
                  "numa: both processes' pages on node 0 (%s)" % ", ".join(m for _, m in moved))
        if not merge(procs, "numa: node 0"):
            stop(procs)
            return
        wait_scans(1)
        before = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
        ok, moved = migrate(procs[0], 1)
        tap.check(ok, "numa: merged pages to node 1 (%s)" % moved)
        wait_scans(3)
        after = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
        tap.check(after == before, "numa: moved pages still merged: %s, before %s" % (after, before))
        shared_frames(procs, "numa: on node 1")
        verify(procs, "numa: on node 1")
        # A third process, on node 0: nothing there to merge with.
        ksm_write("run", 0)
        third = start(1, "worst", 8)
        ok, moved = migrate(third[0], 0)
        ksm_write("run", 1)
        wait_scans(3)
        now = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
        tap.check(ok and now == before,
                  "numa: pages of node 0 do not merge with node 1's (%s, %s)" % (moved, now))
        # Moved to node 1, they do.
        ok, moved = migrate(third[0], 1)
        total = sum(p.pages for p in procs + third)
        merged_all = wait_until(lambda: merged() >= total)
        tap.check(ok and merged_all,
                  "numa: moved to node 1, they merge there (%s, %d of %d pages merged)"
                  % (moved, merged(), total))
        shared_frames(procs + third, "numa: three processes on node 1")
        verify(procs + third, "numa: three processes on node 1")
        stop(procs + third)
    finally:
        reset()
        ksm_write("merge_across_nodes", 1)


def part_hwpoison():
    early = read_file("/proc/sys/vm/memory_failure_early_kill").strip()
    procs = start(2, "worst", 4)
    if not merge(procs, "hwpoison"):
        stop(procs)
        return
    ksm_write("run", 0)
    a, b = procs
    for kill, page in (("1", 5), ("0", 9)):
        write_file("/proc/sys/vm/memory_failure_early_kill", kill)
        poisoned = a.ask("poison %d" % page)
        time.sleep(0.2)
        sig_a, sig_b = a.ask("sigbus"), b.ask("sigbus")
        touch = b.ask("touch %d" % page)
        b.ask("lost %d" % page)
        # BUS_MCEERR_AR (4) to the poisoner, BUS_MCEERR_AO (5) to the others if early kill.
        want_b = "sigbus 1 5" if kill == "1" else "sigbus 0 0"
        tap.check(poisoned == "ok" and sig_a == "sigbus 1 4" and sig_b == want_b
                  and touch == "sigbus",
                  "hwpoison: early_kill=%s, page %d: madvise %s; the poisoner got %s, the other "
                  "process %s, then faults with %s" % (kill, page, poisoned, sig_a, sig_b, touch))
    write_file("/proc/sys/vm/memory_failure_early_kill", early)
    verify(procs, "hwpoison: the other pages")
    ksm_write("run", 1)
    wait_scans(2)
    verify(procs, "hwpoison: after ksmd met the poisoned pages")
    stop(procs)
    reset()


def part_offline():
    procs = start(2, "worst", 4)
    if not merge(procs, "offline"):
        stop(procs)
        return
    wait_scans(1)
    before = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
    pfn0 = procs[0].pfns()[12][0]
    # Soft offlining fails with EBUSY while someone holds a reference to the page, as ksmd does
    # for a moment whenever it looks at it: scanning this small area at full speed, that was
    # 3 of 25 first attempts on either kernel (C KSM and rksm). Try again a few times.
    for attempt in range(1, 11):
        answer = procs[0].ask("offline 12")
        if answer != "bad %d" % errno.EBUSY:
            break
        time.sleep(0.05)
    pfns = [p.pfns()[12][0] for p in procs]
    tap.check(answer == "ok" and pfns[0] == pfns[1] and pfns[0] != pfn0,
              "offline: page 12 moved from frame %#x to %s, still shared (%s, attempt %d)"
              % (pfn0, ", ".join("%#x" % f for f in pfns), answer, attempt))
    wait_scans(2)
    after = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
    tap.check(after == before, "offline: still merged: %s, before %s" % (after, before))
    shared_frames(procs, "offline")
    verify(procs, "offline")
    stop(procs)
    reset()


def anon_huge_kib():
    for line in read_file("/proc/meminfo").splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


# The thp part's huge pages per process, fewer where they are large: what the two processes
# take together stays within THP_MIB.
THP_HUGE_PAGES = 4
THP_MIB = 256
THP_SIZES = "/sys/kernel/mm/transparent_hugepage"


def hpage_pmd_size():
    """The size of a PMD-mapped transparent huge page, or 0 where the kernel has none."""
    try:
        return int(read_file(HPAGE_PMD_SIZE))
    except (OSError, ValueError):
        return 0


def mthp_size(most):
    """The largest multi-size THP (a PTE-mapped large folio) of at most `most` bytes that the
    kernel offers (THP_SIZES/hugepages-<size>kB), or 0."""
    sizes = []
    for d in (os.listdir(THP_SIZES) if os.path.isdir(THP_SIZES) else []):
        m = re.match(r"hugepages-(\d+)kB$", d)
        if m and PAGE < int(m.group(1)) << 10 <= most:
            sizes.append(int(m.group(1)) << 10)
    return max(sizes, default=0)


def mthp_anon(size):
    """How many anonymous folios of `size` bytes are allocated now."""
    return int(read_file("%s/hugepages-%dkB/stats/nr_anon" % (THP_SIZES, size >> 10)))


def part_thp():
    """Areas backed by transparent huge pages (ksmpages -t): KSM splits a huge page to merge its
    pages. Every huge page has one page that merges with nothing (the last of each in the first
    process, the first of each in the second), so that neither decides the split; the others
    pair across the two processes (worst pattern) and all of them merge. Each process maps
    THP_HUGE_PAGES huge pages of the kernel's PMD size (8 MiB with 2 MiB huge pages), fewer if
    that would not fit in THP_MIB. Where not even one fits (512 MiB with 64 KiB pages), the huge
    pages are the largest multi-size THPs that fit, PTE-mapped large folios, which KSM splits
    the same way."""
    hpage = hpage_pmd_size()
    if not hpage:
        tap.check(False, "thp: the kernel has transparent huge pages (%s)" % HPAGE_PMD_SIZE)
        return
    count = min(THP_HUGE_PAGES, (THP_MIB << 20) // (2 * hpage))
    knob, saved = None, None
    if count:
        kind = "PMD-mapped"

        def huge_kib():
            return anon_huge_kib()
    else:
        size = mthp_size((THP_MIB << 20) // (2 * THP_HUGE_PAGES))
        if not tap.check(size, "thp: a multi-size THP of at most %d MiB, as %d MiB PMD-mapped "
                         "ones do not fit twice in %d MiB" % (THP_MIB // (2 * THP_HUGE_PAGES),
                                                              hpage >> 20, THP_MIB)):
            return
        kind, hpage, count = "%d MiB multi-size" % (size >> 20), size, THP_HUGE_PAGES
        knob = "%s/hugepages-%dkB/enabled" % (THP_SIZES, size >> 10)
        saved = re.search(r"\[(\w+)\]", read_file(knob)).group(1)
        write_file(knob, "madvise")

        def huge_kib():
            return mthp_anon(size) * (size >> 10)
    try:
        part_thp_run(hpage, count, kind, huge_kib)
    finally:
        if knob:
            write_file(knob, saved)


def part_thp_run(hpage, count, kind, huge_kib):
    """part_thp with `count` huge pages of `hpage` bytes (`kind`) per process; huge_kib() is
    how much memory such huge pages hold now."""
    mib = count * hpage >> 20
    before = huge_kib()
    procs = [Proc(EXE, "worst", mib, extra=["-t"]) for _ in range(2)]
    huge = huge_kib() - before
    tap.check(huge >= mib * 1024, "thp: %d KiB of the %d MiB in %s huge pages"
              % (huge, 2 * mib, kind))
    per = hpage // PAGE
    unique = 0
    for k, p in enumerate(procs):
        for n in range(per - 1 if k == 0 else 0, p.pages, per):
            p.ask("scribble %d" % n)
            unique += 1
    # Each scribbled page leaves its partner in the other process unmerged too.
    total = sum(p.pages for p in procs) - 2 * unique
    scans = ksm_read("full_scans")
    ksm_write("run", 1)
    ok = wait_until(lambda: merged() >= total, 60)
    tap.check(ok and merged() == total, "thp: %d of %d pages merged, %d full scans"
              % (merged(), total, ksm_read("full_scans") - scans))
    tap.check(huge_kib() == before, "thp: huge pages split (%d KiB left, %d before)"
              % (huge_kib(), before))
    verify(procs, "thp")
    stop(procs)
    reset()


PARTS = {"trace": part_trace, "swap": part_swap, "migrate": part_migrate, "numa": part_numa,
         "thp": part_thp, "hwpoison": part_hwpoison, "offline": part_offline}


def main():
    names = sys.argv[1:] or list(PARTS)
    saved = {k: ksm_read(k) for k in ("run", "pages_to_scan", "sleep_millisecs")}
    reset()
    fast_ksmd()
    try:
        for name in names:
            t0 = time.monotonic()
            PARTS[name]()
            print("# %s: %.1fs" % (name, time.monotonic() - t0), flush=True)
    finally:
        reset()
        for k, v in saved.items():
            ksm_write(k, v)
    print("1..%d" % tap.n)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
