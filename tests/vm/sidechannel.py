#!/usr/bin/env python3
"""The KSM write-timing side channel, measured per merge_scope (in the guest; rksm only).

A victim in memory cgroup rksm-victim holds the even pages of the attacker's contents; the
attacker, in rksm-attacker, holds all of them (ksmspy). Under mm both are in one cgroup, so
that only the address space keeps them apart. The victim's odd pages are all alike: they merge
with each other in every scope, which shows that ksmd did run. Once ksmd has merged what the scope
lets it, the attacker times a one-byte write to each of its pages: a page merged with the
victim's takes a copy-on-write fault. It then guesses, by the best threshold on the write time
(the strongest attacker of this kind, chosen knowing the answers), which pages the victim
holds. Accuracy near 100% means the channel is open; near 50% (chance; the best threshold over
noise does a little better) means it is shut.

Prints a table, and TAP lines with --tap: under global the attacker must tell the pages apart
(accuracy at least 90%), under memcg and mm it must not (at most 65%) and no page of the
attacker may be merged; in every scope the victim's odd pages must merge. ROUNDS (default 3) runs per scope, PAGES (default 256) pages.
"""

import os
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


def spawn(role, group):
    def enter():
        write_file(os.path.join(group, "cgroup.procs"), str(os.getpid()))

    p = subprocess.Popen([SPY, role, str(PAGES)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, bufsize=1, preexec_fn=enter)
    if not p.stdout.readline().startswith("ready"):
        raise RuntimeError("ksmspy %s did not start" % role)
    return p


def best_accuracy(times, labels):
    """The accuracy of the best rule 'slower than t means held by the victim'."""
    pairs = sorted(zip(times, labels))
    n = len(pairs)
    held = sum(labels)
    # Threshold below everything: every page guessed held.
    best = correct = held
    for _, label in pairs:
        # Moving the threshold past this page turns its guess to 'not held'.
        correct += -1 if label else 1
        best = max(best, correct)
    return best / n


def one_round(scope, groups):
    ksm_write("run", 2)
    write_file(KSM + "merge_scope", scope)
    victim = spawn("victim", groups[0])
    attacker = spawn("attacker", groups[0] if scope == "mm" else groups[1])
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
    attacker.stdin.write("probe\n")
    attacker.stdin.flush()
    words = attacker.stdout.readline().split()
    times = [int(t) for t in words[1:]]
    labels = [i % 2 == 0 for i in range(len(times))]
    for p in (attacker, victim):
        p.stdin.write("quit\n")
        p.stdin.flush()
        p.wait(timeout=30)
    held = [t for t, lab in zip(times, labels) if lab]
    not_held = [t for t, lab in zip(times, labels) if not lab]
    return {
        "accuracy": best_accuracy(times, labels),
        "merged": merged,
        "victim_merged": victim_merged,
        "held_us": statistics.median(held) / 1000,
        "other_us": statistics.median(not_held) / 1000,
    }


def main():
    tap = "--tap" in sys.argv
    if not os.path.exists(KSM + "merge_scope"):
        print("1..0 # SKIP no merge_scope (not rksm)")
        return 0
    groups = [cgroup("rksm-victim"), cgroup("rksm-attacker")]
    saved = {k: open(KSM + k).read().split()[0] for k in ("pages_to_scan", "sleep_millisecs", "run")}
    ksm_write("pages_to_scan", 5000)
    ksm_write("sleep_millisecs", 0)
    results = {}
    n, failed = 0, False
    try:
        for scope in ("global", "memcg", "mm"):
            results[scope] = [one_round(scope, groups) for _ in range(ROUNDS)]
    finally:
        ksm_write("run", 2)
        write_file(KSM + "merge_scope", "global")
        for k, v in saved.items():
            ksm_write(k, v)
        for g in groups:
            try:
                os.rmdir(g)
            except OSError:
                pass
    print("%-7s %-22s %-16s %-16s %-26s" % ("scope", "attacker accuracy", "attacker merged",
                                            "victim merged", "median write, held / not (us)"))
    for scope, rs in results.items():
        acc = [r["accuracy"] for r in rs]
        print("%-7s %-22s %-16s %-16s %-26s" % (
            scope, " ".join("%.1f%%" % (100 * a) for a in acc),
            " ".join(str(r["merged"]) for r in rs),
            " ".join(str(r["victim_merged"]) for r in rs),
            " ".join("%.1f/%.1f" % (r["held_us"], r["other_us"]) for r in rs)))
        if tap:
            if scope == "global":
                ok = min(acc) >= 0.9
                what = "global: the attacker tells the victim's pages apart (accuracy %s)" % acc
            else:
                ok = max(acc) <= 0.65 and all(r["merged"] == 0 for r in rs)
                what = ("%s: the attacker cannot tell them apart, none of its pages merged "
                        "(accuracy %s, merged %s)" % (scope, acc, [r["merged"] for r in rs]))
            n += 1
            failed |= not ok
            print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
            vm = [r["victim_merged"] for r in rs]
            ok = min(vm) >= PAGES // 2
            n += 1
            failed |= not ok
            print("%s %d - %s: the victim's own equal pages merged (%s of %d)"
                  % ("ok" if ok else "not ok", n, scope, vm, PAGES // 2))
    if tap:
        print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
