#!/usr/bin/env python3
"""The KSM write-timing side channel, measured per merge_scope (in the guest; rksm only).

The attacker, in memory cgroup rksm-attacker, holds PAGES pages of distinct contents (ksmspy). A
victim in rksm-victim holds the contents of a half of them, picked at random each round; its
other pages are all alike, and merge with each other in every scope, which shows that ksmd did
run. Under mm both are in one cgroup, so that only the address space keeps them apart. Once
ksmd has merged what the scope lets it, the attacker times a one-byte write to each of its
pages: a page merged with the victim's takes a copy-on-write fault. It then guesses, by the
best threshold on the write time (the strongest attacker of this kind, chosen knowing the
answers), which pages the victim holds. Accuracy near 100% means the channel is open; near 50%
(chance; the best threshold over noise does a little better) means it is shut. The attacker
also counts the page faults each write took: the channel's cause, without the noise of a clock.

Prints a table, and TAP lines with --tap: under global the attacker must tell the pages apart
(accuracy at least 90%, and at least 90% of its writes to held pages faulted); under memcg and
mm it must not (accuracy at most 65%, no page of the attacker merged, no write to a page the
victim holds faulted). In every scope the victim's own equal pages must merge. --times FILE
writes every round's data (which pages the victim held, each write's time in ns and faults, the
counts) as JSON, after each round. Environment: ROUNDS (default 3) rounds per scope, PAGES
(default 256) pages, SCOPES (default "global memcg mm").
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from ksmrun import ksm_read, ksm_write  # noqa: E402

SPY = os.path.join(TOP, "build", "tests", "ksmspy")
CGROUP = "/sys/fs/cgroup"
KSM = "/sys/kernel/mm/ksm/"
PAGES = int(os.environ.get("PAGES", "256"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SCOPES = os.environ.get("SCOPES", "global memcg mm").split()
PROACTIVE = "/proc/sys/vm/compaction_proactiveness"


def write_file(path, value):
    with open(path, "w") as f:
        f.write(value)


def cgroup(name):
    if not os.path.exists(CGROUP + "/cgroup.procs"):
        subprocess.run(["mount", "-t", "cgroup2", "none", CGROUP], check=True)
    write_file(CGROUP + "/cgroup.subtree_control", "+memory")
    path = os.path.join(CGROUP, name)
    os.makedirs(path, exist_ok=True)
    return path


def spawn(group, *args):
    def enter():
        write_file(os.path.join(group, "cgroup.procs"), str(os.getpid()))

    p = subprocess.Popen([SPY, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, bufsize=1, preexec_fn=enter)
    if not p.stdout.readline().startswith("ready"):
        raise RuntimeError("ksmspy %s did not start" % args[0])
    return p


def best_accuracy(times, labels):
    """The accuracy of the best rule 'slower than t means held by the victim', or 'faster than
    t' (a leak could go either way).

    A threshold can only fall between two distinct times: pages with equal times get the same
    guess. (Sorting ties by label instead would let the threshold split them, and reward the
    attacker for a coarse clock: with every time equal, it would score 100%.) For times that do
    not depend on the labels (a random half), more than 65% of 256 right has a probability of
    about 1.2e-5.
    """
    n = len(times)
    # Threshold below everything: every page guessed held by 'slower'.
    best = worst = correct = sum(labels)
    by_time = {}
    for t, label in zip(times, labels):
        held, other = by_time.get(t, (0, 0))
        by_time[t] = (held + 1, other) if label else (held, other + 1)
    for t in sorted(by_time):
        # Moving the threshold past every page of time t turns their guesses to 'not held'.
        held, other = by_time[t]
        correct += other - held
        best, worst = max(best, correct), min(worst, correct)
    # 'Faster than t means held' gets right what 'slower' gets wrong.
    return max(best, n - worst) / n


def migrations():
    """Pages migrated so far (/proc/vmstat): a migration makes the next write fault."""
    with open("/proc/vmstat") as f:
        for line in f:
            key, value = line.split()
            if key == "pgmigrate_success":
                return int(value)
    return 0


def one_round(scope, groups):
    ksm_write("run", 2)
    write_file(KSM + "merge_scope", scope)
    held = set(random.sample(range(PAGES), PAGES // 2))
    labels = [i in held for i in range(PAGES)]
    victim = spawn(groups[0], "victim", str(PAGES), "".join("1" if x else "0" for x in labels))
    attacker = spawn(groups[0] if scope == "mm" else groups[1], "attacker", str(PAGES))
    ksm_write("run", 1)
    # Let ksmd merge what it may: until the counters stop changing for three passes.
    deadline = time.time() + 120
    last, steady = None, 0
    while time.time() < deadline and steady < 3:
        scans = ksm_read("full_scans")
        while time.time() < deadline and ksm_read("full_scans") == scans:
            time.sleep(0.05)
        now = (ksm_read("pages_shared"), ksm_read("pages_sharing"))
        steady = steady + 1 if now == last else 0
        last = now
    with open("/proc/%d/ksm_merging_pages" % attacker.pid) as f:
        merged = int(f.read())
    with open("/proc/%d/ksm_merging_pages" % victim.pid) as f:
        victim_merged = int(f.read())
    ksm_write("run", 0)
    migrated = migrations()
    attacker.stdin.write("probe\n")
    attacker.stdin.flush()
    times = attacker.stdout.readline().split()
    faults = attacker.stdout.readline().split()
    migrated = migrations() - migrated
    if times[:1] != ["times"] or faults[:1] != ["faults"] or \
            len(times) != PAGES + 1 or len(faults) != PAGES + 1:
        raise RuntimeError("ksmspy's probe printed %r, %r" % (times[:3], faults[:3]))
    times = [int(t) for t in times[1:]]
    faults = [int(f) for f in faults[1:]]
    for p in (attacker, victim):
        p.stdin.write("quit\n")
        p.stdin.flush()
        p.wait(timeout=30)
    held_t = [t for t, lab in zip(times, labels) if lab]
    other_t = [t for t, lab in zip(times, labels) if not lab]
    return {
        "accuracy": best_accuracy(times, labels),
        "merged": merged,
        "victim_merged": victim_merged,
        "held_us": statistics.median(held_t) / 1000,
        "other_us": statistics.median(other_t) / 1000,
        "held": labels,
        "times": times,
        "faults": faults,
        "held_faulted": sum(1 for f, lab in zip(faults, labels) if f and lab),
        "other_faulted": sum(1 for f, lab in zip(faults, labels) if f and not lab),
        "migrated": migrated,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tap", action="store_true", help="print TAP results")
    ap.add_argument("--times", metavar="FILE", help="write every round's data as JSON")
    args = ap.parse_args()
    tap, dump = args.tap, args.times
    if not os.path.exists(KSM + "merge_scope"):
        print("1..0 # SKIP no merge_scope (not rksm)")
        return 0
    groups = [cgroup("rksm-victim"), cgroup("rksm-attacker")]
    saved = {k: open(KSM + k).read().split()[0]
             for k in ("pages_to_scan", "sleep_millisecs", "run")}
    with open(PROACTIVE) as f:
        proactive = f.read().strip()
    ksm_write("pages_to_scan", 5000)
    ksm_write("sleep_millisecs", 0)
    # No proactive compaction moving the attacker's pages under its writes.
    write_file(PROACTIVE, "0")
    results = {}
    n, failed = 0, False
    try:
        for scope in SCOPES:
            results[scope] = []
            for _ in range(ROUNDS):
                results[scope].append(one_round(scope, groups))
                if dump:
                    # After every round: what a timeout or a crash would leave to look at.
                    with open(dump, "w") as f:
                        json.dump(results, f)
    finally:
        ksm_write("run", 2)
        write_file(KSM + "merge_scope", "global")
        for k, v in saved.items():
            ksm_write(k, v)
        write_file(PROACTIVE, proactive)
        for g in groups:
            try:
                os.rmdir(g)
            except OSError:
                pass
    print("%-7s %-22s %-16s %-16s %-26s %s" % ("scope", "attacker accuracy", "attacker merged",
                                               "victim merged", "median write, held / not (us)",
                                               "writes that faulted, held / not"))
    for scope, rs in results.items():
        acc = [r["accuracy"] for r in rs]
        print("%-7s %-22s %-16s %-16s %-26s %s" % (
            scope, " ".join("%.1f%%" % (100 * a) for a in acc),
            " ".join(str(r["merged"]) for r in rs),
            " ".join(str(r["victim_merged"]) for r in rs),
            " ".join("%.1f/%.1f" % (r["held_us"], r["other_us"]) for r in rs),
            " ".join("%d/%d" % (r["held_faulted"], r["other_faulted"]) for r in rs)))
        if tap:
            faulted = [r["held_faulted"] for r in rs]
            others = [(r["other_faulted"], r["migrated"]) for r in rs]
            if scope == "global":
                ok = min(acc) >= 0.9 and min(faulted) >= 0.9 * (PAGES // 2)
                what = ("global: the attacker tells the victim's pages apart, by time and by "
                        "faults (accuracy %s, writes to held pages that faulted %s)"
                        % (acc, faulted))
            else:
                ok = (max(acc) <= 0.65 and all(r["merged"] == 0 for r in rs)
                      and not any(faulted))
                what = ("%s: the attacker cannot tell them apart, none of its pages merged, no "
                        "write to a page the victim holds faulted (accuracy %s, merged %s, "
                        "faulted %s; other pages faulted, pages migrated: %s)"
                        % (scope, acc, [r["merged"] for r in rs], faulted, others))
            n += 1
            failed |= not ok
            print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
            vm = [r["victim_merged"] for r in rs]
            ok = min(vm) >= PAGES - PAGES // 2
            n += 1
            failed |= not ok
            print("%s %d - %s: the victim's own equal pages merged (%s of %d)"
                  % ("ok" if ok else "not ok", n, scope, vm, PAGES - PAGES // 2))
    if tap:
        print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
