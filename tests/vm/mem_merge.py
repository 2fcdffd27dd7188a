#!/usr/bin/env python3
"""QEMU's mem-merge property against the running kernel's KSM (in the guest). Prints TAP.

Boots three small QEMU guests (TCG, 96 MiB, the bare-metal tests/vm/bare/guest.c: each fills
16 MiB with nested_init's pattern, laid out by the host's page size; a Linux guest's boot under
QEMU's TCG inside the TCG test VM took ten minutes for three), two with -machine mem-merge=on
and one with mem-merge=off, runs ksmd at full speed until pages_sharing
has not grown for three full scans, then checks: both mem-merge=on QEMUs have merged pages
(/proc/PID/ksm_merging_pages) and their RAM mapping (the anonymous mapping of exactly 96 MiB)
carries VmFlag `mg`; the mem-merge=off QEMU has none merged and no `mg` mapping at all; every
guest still reads its memory right; run=2 leaves nothing merged, and the guests right.
"""

import os
import re
import signal
import sys
import time

import ksmbench  # tests/vm/, this file's directory
from ksmrun import ksm_read, ksm_write

RAM_MIB = ksmbench.Guest.RAM_MIB
BOOT_S, MERGE_S = 300, 300                    # the three boots, merging to stable
n_checks = failed = 0


def check(ok, what):
    global n_checks, failed
    n_checks += 1
    failed += not ok
    print("%s %d - %s" % ("ok" if ok else "not ok", n_checks, what), flush=True)
    return ok


class Guest(ksmbench.Guest):
    """make bench's QEMU guest, bare (16 MiB of the pattern), named, with mem-merge on or off."""

    def __init__(self, name, merge):
        super().__init__(0, 16, merge, bare=True)
        self.name = name

    def merging(self):
        with open("/proc/%d/ksm_merging_pages" % self.p.pid) as f:
            return int(f.read())

    def mappings(self):
        """(size in bytes, anonymous, has VmFlag mg) of every mapping of the QEMU."""
        out, cur = [], None
        with open("/proc/%d/smaps" % self.p.pid) as f:
            for line in f:
                m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$", line)
                if m:
                    cur = [int(m.group(2), 16) - int(m.group(1), 16), not m.group(3)]
                elif line.startswith("VmFlags:"):
                    out.append((cur[0], cur[1], "mg" in line.split()[1:]))
        return out


def until_stable(timeout=MERGE_S):
    """Runs until pages_sharing has not grown for three full scans since it last grew."""
    best, scans_at, t0 = -1, 0, time.monotonic()
    while time.monotonic() - t0 < timeout:
        sharing, scans = ksm_read("pages_sharing"), ksm_read("full_scans")
        if sharing > best:
            best, scans_at = sharing, scans
        elif best > 0 and scans >= scans_at + 3:
            return True, time.monotonic() - t0
        time.sleep(0.5)
    return False, time.monotonic() - t0


def main():
    if not check(os.path.exists(Guest.BARE), "%s exists" % Guest.BARE):
        print("1..%d" % n_checks)
        return 1
    saved = {k: ksm_read(k) for k in ("run", "pages_to_scan", "sleep_millisecs")}
    ksm_write("run", 2)
    ksm_write("run", 0)
    t0 = time.monotonic()
    guests = [Guest("on1", True), Guest("on2", True), Guest("off", False)]
    try:
        booted = True
        for g in guests:                      # one deadline for the three boots
            wait_s = max(1, t0 + BOOT_S - time.monotonic())
            if not check(g.wait_for(r"^ready", 0, wait_s) is not None, "%s (mem-merge=%s) "
                         "booted, %.0f s" % (g.name, "on" if g.merge else "off",
                                             time.monotonic() - t0)):
                print("".join("# %s: %s\n" % (g.name, line) for line in g.lines[-5:]), end="")
                booted = False
        if not booted:
            return 1
        ksm_write("pages_to_scan", 100000)
        ksm_write("sleep_millisecs", 0)
        ksm_write("run", 1)
        stable, secs = until_stable()
        print("# pages_shared %d, pages_sharing %d after %.0f s; ksm_merging_pages %s" % (
            ksm_read("pages_shared"), ksm_read("pages_sharing"), secs,
            ", ".join("%s %d" % (g.name, g.merging()) for g in guests)), flush=True)
        check(stable, "pages_sharing stopped growing")
        for g in guests:
            maps = g.mappings()
            ram = [mg for size, anon, mg in maps if anon and size == RAM_MIB << 20]
            if g.merge:
                check(g.merging() > 0, "%s: %d pages merged" % (g.name, g.merging()))
                check(ram == [True], "%s: its RAM mapping is mergeable (mg: %s)" % (g.name, ram))
            else:
                check(g.merging() == 0, "%s: %d pages merged" % (g.name, g.merging()))
                check(ram == [False], "%s: its RAM mapping is not mergeable (mg: %s)"
                      % (g.name, ram))
                check(not any(mg for _, _, mg in maps), "%s: no mapping is mergeable" % g.name)
        ksm_write("run", 0)
        for g in guests:
            check(g.check(), "%s: every byte of its memory reads back" % g.name)
        ksm_write("run", 2)
        left = {g.name: g.merging() for g in guests}
        shared, sharing = ksm_read("pages_shared"), ksm_read("pages_sharing")
        check(shared == sharing == 0 and not any(left.values()),
              "run=2: pages_shared %d, pages_sharing %d, ksm_merging_pages %s"
              % (shared, sharing, left))
        for g in guests:
            check(g.check(), "%s: every byte reads back after run=2" % g.name)
    finally:
        for g in guests:
            g.p.kill()
            g.p.wait()
        ksm_write("run", 2)
        for k in ("pages_to_scan", "sleep_millisecs", "run"):
            ksm_write(k, saved[k])
        print("1..%d" % n_checks)
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # killed by `timeout`: clean up
    sys.exit(main())
