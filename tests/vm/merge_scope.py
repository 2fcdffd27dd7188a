#!/usr/bin/env python3
"""rksm's merge domains (/sys/kernel/mm/ksm/merge_scope), checked by page frames (in the guest).

Four ksmpages processes of equal pages ("best": every page of every process alike), two in memory
cgroup rksm-a and two in rksm-b, with max_page_sharing raised so that one KSM page could take
them all. For each scope, once merging settles, /proc/<pid>/pagemap says which frames each
process maps:

  global  every page of every process shares one frame (C KSM's behaviour);
  memcg   each cgroup's two processes share one frame, and no frame is mapped from both cgroups;
  mm      each process merges with itself only: four frames, no frame mapped from two processes.

Then, under memcg, one process of rksm-a moves to rksm-b: its pages must leave rksm-a's KSM page
and merge into rksm-b's. After each scope the pages must read back as written, and run=2 unmerges
everything so that the scope can change. Prints TAP.
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from ksmrun import Proc, ksm_read, ksm_write  # noqa: E402

EXE = os.path.join(TOP, "build", "tests", "ksmpages")
CGROUP = "/sys/fs/cgroup"
MIB = 1
KSM = "/sys/kernel/mm/ksm/"

n = 0
failed = False


def check(ok, what):
    global n, failed
    n += 1
    failed |= not ok
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what), flush=True)


def write_file(path, value):
    with open(path, "w") as f:
        f.write(value)


def setup_cgroups():
    if not os.path.exists(CGROUP + "/cgroup.procs"):
        subprocess.run(["mount", "-t", "cgroup2", "none", CGROUP], check=True)
    write_file(CGROUP + "/cgroup.subtree_control", "+memory")
    groups = []
    for name in ("rksm-a", "rksm-b"):
        path = os.path.join(CGROUP, name)
        os.makedirs(path, exist_ok=True)
        groups.append(path)
    return groups


def frame_sets(procs):
    """The set of frames each process maps (0 where a page is not present)."""
    return [set(pfn for pfn, _ in p.pfns()) for p in procs]


def wait_for(cond, seconds=180):
    """Polls `cond` while ksmd runs; returns whether it came true."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


def settle(want_shared, want_sharing):
    """Waits until the counters are what full merging gives, then two more passes."""
    ok = wait_for(lambda: (ksm_read("pages_shared"), ksm_read("pages_sharing"))
                  == (want_shared, want_sharing))
    scans = ksm_read("full_scans")
    wait_for(lambda: ksm_read("full_scans") >= scans + 2, 60)
    return ok


def contents_ok(procs):
    return all(p.ask("verify").startswith("ok") for p in procs)


def run_scope(scope, groups):
    check(write_ok("merge_scope", scope), "merge_scope=%s accepted" % scope)
    procs = [Proc(EXE, "best", MIB, g) for g in (groups[0], groups[0], groups[1], groups[1])]
    pages = procs[0].pages
    ksm_write("run", 1)
    # KSM pages and extra mappings once all is merged: one KSM page per domain.
    domains = {"global": 1, "memcg": 2, "mm": 4}[scope]
    total = pages * len(procs)
    settled = settle(domains, total - domains)
    check(settled, "%s: merged into %d KSM pages (pages_shared %d, pages_sharing %d)"
          % (scope, domains, ksm_read("pages_shared"), ksm_read("pages_sharing")))
    sets = frame_sets(procs)
    if scope == "global":
        check(len(set.union(*sets)) == 1, "global: every process maps one frame (%d frames)"
              % len(set.union(*sets)))
    elif scope == "memcg":
        a, b = sets[0] | sets[1], sets[2] | sets[3]
        check(len(a) == 1 and len(b) == 1 and not a & b,
              "memcg: each cgroup maps one frame of its own (%d, %d frames, %d shared)"
              % (len(a), len(b), len(a & b)))
    else:
        disjoint = all(not sets[i] & sets[j] for i in range(4) for j in range(i + 1, 4))
        check(all(len(s) == 1 for s in sets) and disjoint,
              "mm: each process maps one frame of its own (%s frames, disjoint %s)"
              % ([len(s) for s in sets], disjoint))
    if scope == "memcg":
        # The second process of rksm-a moves to rksm-b: its pages leave a's KSM page at ksmd's
        # next visit, and merge into b's.
        write_file(os.path.join(groups[1], "cgroup.procs"), str(procs[1].p.pid))
        moved = wait_for(lambda: frame_sets(procs)[1] == (frame_sets(procs)[2])
                         and not frame_sets(procs)[1] & frame_sets(procs)[0])
        sets = frame_sets(procs)
        check(moved, "memcg: a process moved to the other cgroup shares that cgroup's frame, not "
              "its old one's (%d frames, %d with rksm-a, %d with rksm-b)"
              % (len(sets[1]), len(sets[1] & sets[0]), len(sets[1] & sets[2])))
    check(contents_ok(procs), "%s: every byte reads back" % scope)
    for p in procs:
        p.stop()
    ksm_write("run", 2)
    wait_for(lambda: ksm_read("pages_shared") == 0, 60)
    check(ksm_read("pages_shared") == 0, "%s: run=2 unmerged everything" % scope)


def write_ok(name, value):
    try:
        write_file(KSM + name, value)
        return True
    except OSError:
        return False


def main():
    if not os.path.exists(KSM + "merge_scope"):
        print("1..0 # SKIP no merge_scope (not rksm)")
        return 0
    groups = setup_cgroups()
    saved = {k: open(KSM + k).read().strip() for k in
             ("max_page_sharing", "pages_to_scan", "sleep_millisecs", "run")}
    ksm_write("run", 2)
    check(write_ok("max_page_sharing", "65536"), "max_page_sharing raised to 65536")
    ksm_write("pages_to_scan", 5000)
    ksm_write("sleep_millisecs", 0)
    try:
        for scope in ("global", "memcg", "mm"):
            run_scope(scope, groups)
    finally:
        ksm_write("run", 2)
        write_ok("merge_scope", "global")
        for k in ("max_page_sharing", "pages_to_scan", "sleep_millisecs", "run"):
            write_ok(k, saved[k])
        for g in groups:
            try:
                os.rmdir(g)
            except OSError:
                pass
    check(open(KSM + "merge_scope").read().split() == ["[global]", "memcg", "mm"],
          "merge_scope back to global")
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
