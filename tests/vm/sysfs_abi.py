#!/usr/bin/env python3
"""The user-visible ABI of /sys/kernel/mm/ksm on the running kernel, recorded and checked (in the guest).

Writes a record (one line per fact) that tests/report.py compares between the C KSM kernel and the
rksm kernel of the same `make test` run, and against tests/vm/sysfs_abi.expected (C KSM's record,
taken from the C kernel) when only one kernel ran. The facts:

  ls     every file of /sys/kernel/mm/ksm with its mode;
  init   the boot-time value of every tunable (read before anything else touched KSM);
  write  for every writable knob and a list of inputs (non-numbers, signs, overflow of 32 and 64
         bits, out of range, odd spacing, accepted spellings), what write(2) returns (byte count or
         errno) and what the knob reads afterwards; the knob is put back after each write;
  ro     the errno of a write to every read-only file;
  busy   the counters, /proc/<pid>/ksm_stat and ksm_merging_pages of two processes with
         BUSY_PAGES equal pages each (4 MiB at 4 KiB pages), fully merged; the errors of knobs
         that C KSM refuses to change while KSM pages exist (EBUSY), of pages_to_scan while the
         scan-time advisor drives it (EINVAL), and that both change again once `run=2` has
         unmerged everything.

The record is the same whatever the page size: the busy processes map a number of pages, not an
amount of memory, and the profits (general_profit, ksm_process_profit), which are in bytes, are
recorded as the pages they count times the page size less the rest, the bytes of the rmap items
(`general_profit pages_sharing x PAGE_SIZE - 131072`).

Also prints TAP for what can be checked on one kernel alone: a write that fails leaves the knob as
it was, the busy cases really see merged pages, the knobs are restored at the end.
"""

import errno
import os
import subprocess
import sys
import time

KSM = "/sys/kernel/mm/ksm/"
PAGE = os.sysconf("SC_PAGE_SIZE")
# The pages of each of the two busy processes: with max_page_sharing 256, 8 KSM pages.
BUSY_PAGES = 1024

# Inputs every writable knob gets, as bytes written in one write(2).
COMMON = [
    "abc", "", "\n", "-1", "+3", "1.5", "0x10", "010", " 7", "7 ", "7\n", "7\n\n", "1 2",
    "4294967295", "4294967296", "2147483647", "2147483648", "-2147483649",
    "18446744073709551615", "18446744073709551616", "99999999999999999999999",
    "y", "n", "on", "off", "0", "1", "2", "3", "4",
]
# Extra inputs for knobs with their own spellings.
EXTRA = {
    "advisor_mode": ["none", "scan-time", "scan-time\n", "none\n", "Scan-time", "scan", " none",
                     "none ", "scan-time\n\n"],
}
# Knobs whose writes have side effects beyond their own value: written in the busy section only,
# with chosen values (run=2 unmerges, merge_across_nodes and max_page_sharing drop stable nodes).
SPECIAL = {"run", "merge_across_nodes", "max_page_sharing"}
SAFE_INPUTS = {
    # Inputs that cannot start or unmerge anything: parse errors and range errors only.
    "run": ["abc", "", "-1", "1.5", "0x10", " 1", "3", "4", "4294967296", "99999999999999999999"],
    "merge_across_nodes": ["abc", "", "-1", "1.5", "0x10", " 1", "2", "4294967296",
                           "18446744073709551616", "99999999999999999999"],
    "max_page_sharing": ["abc", "", "-1", "0", "1", "1.5", "0x10", " 256", "2147483648",
                         "-2147483649", "99999999999999999999"],
}


def path(name):
    return KSM + name


def read(name):
    with open(path(name)) as f:
        return f.read().strip()


def write(name, data):
    """write(2) result: the byte count, or the errno's name."""
    try:
        fd = os.open(path(name), os.O_WRONLY)
    except OSError as e:
        return "open:" + errno.errorcode.get(e.errno, str(e.errno))
    try:
        return str(os.write(fd, data.encode()))
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        os.close(fd)


def value_of(name):
    """What to write back to restore a knob (advisor_mode reads `[none] scan-time`)."""
    v = read(name)
    if name == "advisor_mode":
        return v[v.index("[") + 1:v.index("]")]
    return v


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, ok, what):
        self.n += 1
        self.failed += not ok
        print("%s %d %s" % ("ok" if ok else "not ok", self.n, what), flush=True)


# Files only rksm has.
OWN = {"scan_threads", "merge_scope", "sample_misses"}

SCOPES = "global memcg mm"


def scope_shown(scope):
    """What merge_scope reads with `scope` in use: every scope, that one in brackets."""
    return " ".join("[%s]" % s if s == scope else s for s in SCOPES.split())


def check_merge_scope(tap):
    """rksm's merge_scope: global at boot; each scope accepted and read back; anything else EINVAL
    and unchanged (the EBUSY rule is checked with the busy knobs)."""
    tap.check(os.stat(path("merge_scope")).st_mode & 0o777 == 0o644, "merge_scope: mode 644")
    tap.check(read("merge_scope") == scope_shown("global"),
              "merge_scope: global at boot (%r)" % read("merge_scope"))
    # An empty write returns 0 without reaching the knob (kernfs), as for every file.
    res = write("merge_scope", "")
    tap.check(res == "0" and read("merge_scope") == scope_shown("global"),
              "merge_scope: '' changes nothing (%s), reads %r" % (res, read("merge_scope")))
    for data in ["abc", "\n", "Global", "mm2", "memcg mm", " mm", "mm ", "1", "[mm]"]:
        res = write("merge_scope", data)
        tap.check(res == "EINVAL" and read("merge_scope") == scope_shown("global"),
                  "merge_scope: %r refused with EINVAL (%s), reads %r" % (data, res, read("merge_scope")))
    for data, want in [("mm", "mm"), ("memcg\n", "memcg"), ("mm\n", "mm"), ("global", "global")]:
        res = write("merge_scope", data)
        tap.check(res.isdigit() and read("merge_scope") == scope_shown(want),
                  "merge_scope: %r accepted (%s), reads %r" % (data, res, read("merge_scope")))


def check_scan_threads(tap):
    """rksm's scan_threads: 1 at boot, 1 to 16 accepted, anything else EINVAL and unchanged."""
    tap.check(os.stat(path("scan_threads")).st_mode & 0o777 == 0o644, "scan_threads: mode 644")
    tap.check(read("scan_threads") == "1", "scan_threads: 1 at boot (%r)" % read("scan_threads"))
    for data in ["0", "17", "-1", "abc", "4294967296", "2 3"]:
        res = write("scan_threads", data)
        tap.check(res == "EINVAL" and read("scan_threads") == "1",
                  "scan_threads: %r refused with EINVAL (%s), reads %r" % (data, res, read("scan_threads")))
    for data, want in [("2", "2"), ("16\n", "16"), ("1", "1")]:
        res = write("scan_threads", data)
        tap.check(res.isdigit() and read("scan_threads") == want,
                  "scan_threads: %r accepted (%s), reads %r" % (data, res, read("scan_threads")))


def profit(value, pages, what):
    """A profit in bytes, as the page size times `pages` (the pages it counts, named `what`)
    less the rest: the same record for every page size."""
    return "%s x PAGE_SIZE - %d" % (what, pages * PAGE - int(value))


def main():
    record_file = sys.argv[1]
    ksmpages = sys.argv[2]
    tap = Tap()
    rec = []

    names = sorted(os.listdir(KSM))
    # rksm's own files are not C KSM's ABI: checked here, kept out of the compared record.
    own = [n for n in names if n in OWN]
    names = [n for n in names if n not in OWN]
    if "scan_threads" in own:
        check_scan_threads(tap)
    if "merge_scope" in own:
        check_merge_scope(tap)
    if "sample_misses" in own:
        # How often the volatility gate's recheck found a change its sample missed: a count,
        # read-only.
        tap.check(os.stat(path("sample_misses")).st_mode & 0o777 == 0o444,
                  "sample_misses: mode 444")
        tap.check(read("sample_misses").isdigit(),
                  "sample_misses: a count (%r)" % read("sample_misses"))
    modes = {n: os.stat(path(n)).st_mode & 0o777 for n in names}
    writable = [n for n in names if modes[n] & 0o200]
    for n in names:
        rec.append("ls %s %o" % (n, modes[n]))
    for n in writable:
        rec.append("init %s %s" % (n, read(n)))
    orig = {n: value_of(n) for n in writable}
    # Merging must not start behind the test's back while inputs are tried.
    write("run", "0")

    for n in writable:
        inputs = SAFE_INPUTS[n] if n in SPECIAL else COMMON + EXTRA.get(n, [])
        for data in inputs:
            before = read(n)
            res = write(n, data)
            after = read(n)
            rec.append("write %s %r -> %s reads %r" % (n, data, res, after))
            if not res.isdigit():
                tap.check(after == before, "%s: failed write %r (%s) leaves %r" % (n, data, res, before))
            if n != "run" and after != before:
                write(n, orig[n])
        if n != "run":
            tap.check(value_of(n) == orig[n], "%s: restored to %r" % (n, orig[n]))

    for n in names:
        if n not in writable:
            rec.append("ro %s -> %s" % (n, write(n, "0")))

    # pages_to_scan belongs to the advisor while it runs.
    res = [write("advisor_mode", "scan-time"), write("pages_to_scan", "100"),
           write("advisor_mode", "none"), write("pages_to_scan", orig["pages_to_scan"])]
    rec.append("busy advisor: mode %s, pages_to_scan %s, mode %s, pages_to_scan %s" % tuple(res))
    tap.check(res[1] == "EINVAL", "pages_to_scan refused while the scan-time advisor runs (%s)" % res[1])

    # Knobs that wait for an empty stable tree: merge two processes' equal pages first.
    write("pages_to_scan", "5000")
    write("sleep_millisecs", "0")
    mib = str(BUSY_PAGES * PAGE // 2**20)
    procs = [subprocess.Popen([ksmpages, "-m", "best", "-s", mib], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        p.stdout.readline()
    write("run", "1")
    deadline = time.time() + 120
    while time.time() < deadline and int(read("pages_shared")) == 0:
        time.sleep(0.2)
    shared = int(read("pages_shared"))
    tap.check(shared > 0, "pages were merged for the busy checks (pages_shared %d)" % shared)
    # Once all is merged and two more passes went by, the per-process view is settled: record it.
    while (time.time() < deadline
           and int(read("pages_shared")) + int(read("pages_sharing")) < 2 * BUSY_PAGES):
        time.sleep(0.2)
    scans = int(read("full_scans"))
    while time.time() < deadline and int(read("full_scans")) < scans + 2:
        time.sleep(0.1)
    merged = {field: read(field) for field in ("pages_shared", "pages_sharing", "general_profit")}
    merged["general_profit"] = profit(merged["general_profit"], int(merged["pages_sharing"]),
                                      "pages_sharing")
    for field, value in merged.items():
        rec.append("busy merged: %s %s" % (field, value))
    with open("/proc/%d/ksm_stat" % procs[0].pid) as f:
        lines = [line.strip() for line in f]
    stat = dict(line.split(None, 1) for line in lines if " " in line)
    for line in lines:
        if line.startswith("ksm_process_profit "):
            line = "ksm_process_profit " + profit(stat["ksm_process_profit"],
                                                  int(stat["ksm_merging_pages"]),
                                                  "ksm_merging_pages")
        rec.append("busy ksm_stat: %s" % line)
    with open("/proc/%d/ksm_merging_pages" % procs[0].pid) as f:
        rec.append("busy ksm_merging_pages: %s" % f.read().strip())
    res = {
        "merge_across_nodes=0": write("merge_across_nodes", "0"),
        "max_page_sharing=3": write("max_page_sharing", "3"),
        "max_page_sharing=same": write("max_page_sharing", orig["max_page_sharing"]),
        "merge_across_nodes=same": write("merge_across_nodes", orig["merge_across_nodes"]),
    }
    for k, v in res.items():
        rec.append("busy merged: %s -> %s" % (k, v))
    tap.check(res["merge_across_nodes=0"] == "EBUSY" and res["max_page_sharing=3"] == "EBUSY",
              "merge_across_nodes and max_page_sharing refuse to change while pages are merged (%s, %s)"
              % (res["merge_across_nodes=0"], res["max_page_sharing=3"]))
    if "merge_scope" in own:
        # rksm's own knob follows merge_across_nodes' rules (kept out of the compared record).
        busy = [write("merge_scope", "mm"), read("merge_scope"), write("merge_scope", "global")]
        tap.check(busy[0] == "EBUSY" and busy[1] == scope_shown("global") and busy[2].isdigit(),
                  "merge_scope refuses to change while pages are merged (%s), an unchanged value "
                  "is accepted (%s)" % (busy[0], busy[2]))
    for p in procs:
        p.stdin.close()
        p.wait()
    rec.append("busy run=2 -> %s" % write("run", "2"))
    res = [write("merge_across_nodes", "0"), read("merge_across_nodes"),
           write("merge_across_nodes", orig["merge_across_nodes"]),
           write("max_page_sharing", "3"), read("max_page_sharing"),
           write("max_page_sharing", orig["max_page_sharing"])]
    rec.append("busy unmerged: merge_across_nodes=0 -> %s reads %s, back -> %s; "
               "max_page_sharing=3 -> %s reads %s, back -> %s" % tuple(res))
    tap.check(res[1] == "0" and res[4] == "3",
              "both change once run=2 unmerged everything (%s, %s)" % (res[0], res[3]))
    if "merge_scope" in own:
        res = [write("merge_scope", "mm"), read("merge_scope"), write("merge_scope", "global")]
        tap.check(res[1] == scope_shown("mm") and res[2].isdigit(),
                  "merge_scope changes once run=2 unmerged everything (%s, reads %r)" % (res[0], res[1]))

    for n in writable:
        if n != "run":
            write(n, orig[n])
    write("run", orig["run"])
    tap.check(all(value_of(n) == orig[n] for n in writable), "every knob back to its boot value")

    with open(record_file, "w") as f:
        f.write("\n".join(rec) + "\n")
    print("1..%d" % tap.n)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
