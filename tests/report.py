#!/usr/bin/env python3
"""Turns what the test VMs left in build/test/ into tables and one verdict line.

Inputs, per kernel K (c, rust; c-debug, rust-debug: the debug kernels' torture boots; um: the
KUnit suites run by kunit.py on User-Mode Linux, build/test/um/kunit.json, .rc and .log):
  build/test/K/<suite>/<name>.out and .rc   TAP output and exit status of each guest command
  build/test/K/vm.rc                        exit status of scripts/vm.sh for that boot
  build/vm/test-K/console.log               the guest kernel's log, KTAP of built-in KUnit suites

A case passes when its TAP line says ok. A skip is a failure unless EXPECTED_SKIPS names it
(Documentation/mm/rksm.rst says why). A command that exits non-zero without a failing TAP line,
or prints no TAP result at all, is a failure. A VM whose kernel log shows a splat, or that never
finished, is a failure of its own. Prints one table per suite, then `N passed, N failed`; exits 1 on any
failure.
"""

import os
import re
import sys

# Skips that are expected, with the reason (keep Documentation/mm/rksm.rst in step).
EXPECTED_SKIPS = {}

# Upstream tests that cannot pass on any kernel, recognised by a signature in their output. They
# count neither as passed nor as failed; Documentation/mm/rksm.rst says why, and what checks the
# same thing.
KNOWN_BROKEN = [
    ("ksm_functional_tests", " / PR_SET_MEMORY_MERGE value is inherited",
     "# Planned tests != run tests",
     "6.12.117's test_prctl_fork_exec passes execv() an argv without a NULL terminator: execve() "
     "fails with EFAULT and the child runs the remaining tests; tests/vm/prctl_fork_exec checks "
     "the same property"),
]

# Defects of C KSM that a test of ours shows: on the C kernels (c, c-debug) such a case must fail,
# and passes the report then; if it passes on C, the defect is gone and the report fails, so that
# this list and Documentation/mm/rksm.rst are brought up to date. On rksm the case must pass.
# Each is (suite, the commands' names, a part of the case's description, why).
C_DEFECTS = [
    ("ptebits", ("ptebits", "unmerge"), "still soft-dirty",
     "6.12's replace_page() maps the KSM page by a new entry without the soft-dirty bit"),
    ("ptebits", ("ptebits", "zero_page", "unmerge"), "still uffd-wp protected",
     "6.12's replace_page() maps the KSM page (or the zero page) by a new entry without the "
     "uffd-wp bit (the zero page's entry keeps soft-dirty: on x86 pte_mkdirty() sets it)"),
    ("ptebits", ("ptebits", "zero_page", "unmerge"), "faulted to userfaultfd first",
     "without the uffd-wp bit, a write to a merged page does not reach userfaultfd"),
    ("rmap", ("forkmerge",), "no page of an address space that is not scanned became",
     "6.12's try_to_merge_one_page() makes a page a KSM page in place while a process that is "
     "not scanned (the parent of a fork) maps it too; once the merging child's rmap_item is "
     "gone the reverse map never finds the parent's entry"),
    ("rmap", ("forkmerge",), "moved every page the parent maps (parent does not merge",
     "that KSM page cannot be migrated (and offline_pages() retries it until killed)"),
    ("smartscan", ("skipphase",), "equal pages merge whatever their skipping schedules",
     "6.12's should_skip_rmap_item() counts each page's skips from its own last look: two equal "
     "pages whose counts are out of phase are never looked at in one pass, and a pair (no third "
     "page of their contents) never merges"),
]

C_DEFECT_PASS = "C KSM's defect, as expected: "

TAP_LINE = re.compile(r"^(\s*)(ok|not ok)\b\s*(\d+)?\s*(?:-\s*)?(.*?)\s*$")
DMESG_PREFIX = re.compile(r"^\[\s*\d+\.\d+\]\s?")


class Case:
    def __init__(self, kernel, suite, name, status, detail="", log=None):
        self.kernel, self.suite, self.name = kernel, suite, name
        self.status, self.detail = status, detail  # status: pass, fail, skip
        self.log = log  # the output file the case was read from, shown when it fails


def tap_lines(text):
    """(plan or None, [(number or None, description, status)]) of a TAP document's top-level
    result lines, in order; status is pass, fail or skip (a "# SKIP" directive, which stays in
    the description)."""
    plan, lines = None, []
    for line in text.splitlines():
        m = re.match(r"^1\.\.(\d+)", line)
        if m:
            plan = int(m.group(1))
            continue
        m = TAP_LINE.match(line)
        if not m or m.group(1):
            continue
        status = "pass" if m.group(2) == "ok" else "fail"
        if re.search(r"#\s*SKIP\b", m.group(4), re.I):
            status = "skip"
        lines.append((int(m.group(3)) if m.group(3) else None, m.group(4), status))
    return plan, lines


def parse_tap(text):
    """(name, status) of each top-level test of a TAP document, one per test number.

    A selftest that forks with its output in a buffer can print the same result line twice (the
    child inherits the unflushed buffer): lines are keyed by their number, and two different
    verdicts for one number are a failure. Numbers the plan promises but no line reports are
    failures too.
    """
    plan, lines = tap_lines(text)
    by_num = {}
    for num, desc, status in lines:
        num = len(by_num) + 1 if num is None else num
        skip = re.search(r"#\s*SKIP\b(.*)$", desc, re.I)
        if skip:
            desc = desc[: skip.start()].strip() + " (skipped:%s)" % skip.group(1)
        name = desc or "case %d" % num
        if num in by_num and by_num[num] != (name, status):
            name, status = "%s / %s" % (by_num[num][0], name), "fail"
        by_num[num] = (name, status)
    results = [by_num[n] for n in sorted(by_num)]
    if plan is not None and len(by_num) < plan:
        results.append(("%d of %d planned tests never reported" % (plan - len(by_num), plan),
                        "fail"))
    return results


def parse_ktap(console, kernel):
    """Leaf cases of the KUnit suites that ran at boot, from the guest console log."""
    cases = []
    lines = [DMESG_PREFIX.sub("", line.rstrip("\r\n")) for line in console.splitlines()]
    suite = None
    planned = {}
    seen = {}
    notes = []
    for line in lines:
        m = re.match(r"^    # Subtest: (\S+)", line)
        if m:
            suite = m.group(1)
            seen[suite] = 0
            notes = []
            continue
        # What a case printed before its result: a failed case's assertion, for the report.
        m = re.match(r"^    # (\S+): (.*)$", line)
        if m and suite:
            notes.append(m.group(2).split("/kunit/")[-1])
            continue
        m = re.match(r"^    1\.\.(\d+)", line)
        if m and suite:
            planned[suite] = int(m.group(1))
            continue
        m = TAP_LINE.match(line)
        if m and suite and m.group(1) == "    ":
            desc = m.group(4)
            status = "pass" if m.group(2) == "ok" else "fail"
            if re.search(r"#\s*SKIP", desc, re.I):
                status = "skip"
            detail = " | ".join(notes[-3:]) if status == "fail" else ""
            cases.append(Case(kernel, "kunit:" + suite, desc.split(" #")[0], status, detail))
            seen[suite] += 1
            notes = []
    for s, n in planned.items():
        if seen.get(s, 0) < n:
            cases.append(Case(kernel, "kunit:" + s, "cases after #%d" % seen.get(s, 0), "fail",
                              "%d of %d planned cases never reported (crash?)" % (n - seen[s], n)))
    return cases


def collect(top, kernel):
    cases = []
    base = os.path.join(top, "build", "test", kernel)
    vm_rc_file = os.path.join(base, "vm.rc")
    if not os.path.exists(vm_rc_file):
        return cases
    for suite in sorted(os.listdir(base)):
        d = os.path.join(base, suite)
        # Judged against C KSM by compare_mm(), not case by case.
        if not os.path.isdir(d) or suite in (MM_SUITE, MM_UNMERGED):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith(".out"):
                continue
            name = f[:-4]
            log = os.path.join(d, f)
            text = open(log, errors="replace").read()
            rcf = os.path.join(d, name + ".rc")
            rc = int(open(rcf).read().strip() or 1) if os.path.exists(rcf) else None
            results = parse_tap(text)
            defect = False
            for desc, status in results:
                for ksuite, kname, signature, why in KNOWN_BROKEN:
                    if re.sub(r"_\d+threads$", "", suite) == ksuite and kname in desc \
                            and signature in text:
                        status, desc = "broken", "%s (known broken upstream: %s)" % (desc, why)
                detail = ""
                for dsuite, dnames, dcase, why in C_DEFECTS if kernel.split("-")[0] == "c" \
                        else []:
                    if suite == dsuite and name in dnames and dcase in desc:
                        defect = True
                        status, detail = (("pass", C_DEFECT_PASS + why)
                                          if status == "fail" else
                                          ("fail", "passes on C KSM: is the defect gone? (%s)"
                                           % why))
                cases.append(Case(kernel, suite, "%s: %s" % (name, desc), status, detail,
                                  log=log))
            if rc is None:
                cases.append(Case(kernel, suite, name, "fail", "never finished", log))
            elif not results:
                cases.append(Case(kernel, suite, name, "fail",
                                  "no TAP result, exit %d: %s" % (rc, tail(text)), log))
            elif rc not in (0, 4) and not defect and \
                    all(s not in ("fail", "broken") for _, s in results):
                cases.append(Case(kernel, suite, name, "fail", "exit status %d" % rc, log))
    console = os.path.join(top, "build", "vm", "test-" + kernel, "console.log")
    if os.path.exists(console):
        cases += parse_ktap(open(console, errors="replace").read(), kernel)
    vm_rc = int(open(vm_rc_file).read().strip() or 1)
    why = {0: "", 2: "the guest never finished its command", 3: "the guest kernel log shows a splat",
           124: "the VM timed out"}.get(vm_rc, "vm exit status %d" % vm_rc)
    excerpt = None
    if vm_rc == 3 and os.path.exists(console):
        lines = open(console, errors="replace").read().splitlines()
        first = next((i for i, x in enumerate(lines) if SPLAT.search(x)), None)
        if first is not None:
            excerpt = ("the first splat in " + os.path.relpath(console, top),
                       lines[first:first + 15])
    cases.append(Case(kernel, "vm", "boot, run every suite, clean kernel log",
                      "pass" if vm_rc == 0 else "fail", why, excerpt))
    return cases


# What kunit.py's own UML configuration (tools/testing/kunit/configs/arch_uml.config: PCI over
# virtio, with no device) prints at every boot: not a problem of the code under test.
UM_EXPECTED_SPLATS = ["No virtio device ID configured for PCI"]
SPLAT = re.compile(r"BUG:|WARNING:|Oops|KASAN|UBSAN|Kernel panic|general protection fault|"
                   r"possible (circular|recursive) locking|inconsistent lock state|"
                   r"DEBUG_LOCKS_WARN_ON|list_(add|del) corruption|unreferenced object|KFENCE:")


def collect_um(top, name="um"):
    """The cases kunit.py ran on User-Mode Linux (scripts/kunit.sh), from its JSON; `name`
    um-arm64-16k and the like: its run on arm64 (ARCH=arm64 PAGE=16K make kunit)."""
    import json
    base = os.path.join(top, "build", "test", name)
    rcf = os.path.join(base, "kunit.rc")
    if not os.path.exists(rcf):
        # Asked for (make test asks whenever it runs rksm's suites) but never finished.
        return [Case(name, "kunit.py", "kunit.py run", "fail",
                     "never finished: no build/test/%s/kunit.rc (build/logs/kunit-%s.log)" % (name, name))]
    cases = []

    def walk(group, suite):
        for c in group.get("test_cases", []):
            status = {"PASS": "pass", "SKIP": "skip"}.get(c["status"], "fail")
            cases.append(Case(name, "kunit:" + suite, c["name"], status,
                              "" if status == "pass" else "kunit.py: " + c["status"]))
        for g in group.get("sub_groups", []):
            walk(g, g["name"] if suite is None else suite)

    try:
        walk(json.load(open(os.path.join(base, "kunit.json"))), None)
    except (OSError, ValueError) as e:
        cases.append(Case(name, "kunit.py", "results", "fail", "no JSON results: %s" % e))
    rc = int(open(rcf).read().strip() or 1)
    if rc != 0 and all(c.status == "pass" for c in cases):
        cases.append(Case(name, "kunit.py", "kunit.py run", "fail",
                          "exit status %d (build/logs/kunit-%s.log)" % (rc, name)))
    log = os.path.join(base, "kunit.log")
    lines = open(log, errors="replace").read().splitlines() if os.path.exists(log) else []
    bad = [i for i, line in enumerate(lines) if SPLAT.search(line)
           and not any(e in " ".join(lines[i:i + 2]) for e in UM_EXPECTED_SPLATS)]
    cases.append(Case(name, "kunit.py", "boot UML, run every suite, clean kernel log",
                      "pass" if lines and not bad else "fail",
                      "no kernel log" if not lines else
                      ("build/test/um/kunit.log:%d: %s" % (bad[0] + 1, lines[bad[0]][:150])
                       if bad else "")))
    return cases


def abi_groups(lines):
    """Facts of a sysfs ABI record (tests/vm/sysfs_abi.py), grouped by the file they are about."""
    groups = {}
    for line in lines:
        words = line.split()
        if len(words) < 2:
            continue
        key = "busy" if words[0] == "busy" else words[1]
        groups.setdefault(key, []).append(line)
    return groups


def compare_abi(top, kernels):
    """One case per sysfs file: rksm's record must equal C KSM's, line for line.

    Against the C kernel of the same run when both ran, else against tests/vm/sysfs_abi.expected
    (C KSM's record, taken from the C kernel of this tree).
    """
    def record(k):
        f = os.path.join(top, "build", "test", k, "sysfs", "abi.record")
        return open(f).read().splitlines() if os.path.exists(f) else None

    def reference(k):
        """C KSM's record for kernel `k`: the C kernel of the same run and the same target
        (c-arm64-16k for rust-arm64-16k) when it ran, else tests/vm/sysfs_abi.expected."""
        ck = "c" + k[len(k.split("-")[0]):]
        got = record(ck) if ck in kernels else None
        if got is not None:
            return "C KSM, same run", got
        return ("tests/vm/sysfs_abi.expected",
                open(os.path.join(top, "tests", "vm", "sysfs_abi.expected")).read().splitlines())

    cases = []
    for k in kernels:
        impl = k.split("-")[0]
        # Only the boots that ran tests/vm/guest-tests.sh record the ABI (not rust-debug's
        # torture, nor rust-noinit's).
        if not os.path.isdir(os.path.join(top, "build", "test", k, "sysfs")):
            continue
        if not os.path.exists(os.path.join(top, "build", "test", k, "vm.rc")):
            continue
        ref_name, ref = reference(k)
        if impl == "c" and ref_name.startswith("C KSM"):
            continue
        got = record(k)
        if got is None:
            cases.append(Case(k, "sysfs_abi", "record", "fail", "sysfs_abi.py left no record"))
            continue
        want_g, got_g = abi_groups(ref), abi_groups(got)
        for key in sorted(set(want_g) | set(got_g)):
            want, have = want_g.get(key, []), got_g.get(key, [])
            name = "%s: %d facts equal %s" % (key, len(want), ref_name)
            if want == have:
                cases.append(Case(k, "sysfs_abi", name, "pass"))
                continue
            diff = [(a, b) for a, b in zip(want + [""] * len(have), have + [""] * len(want))
                    if a != b][0]
            cases.append(Case(k, "sysfs_abi", name, "fail",
                              "C KSM: %r, here: %r" % (diff[0] or "(nothing)", diff[1] or "(nothing)")))
    return cases


# The kernel's mm selftests run under PR_SET_MEMORY_MERGE (tests/vm/mm-merge-any.sh).
MM_SUITE = "mm_merge_any"
# The selftests run again without merging after a run of MM_SUITE kept bailing out on MM_RACE
# (tests/vm/mm-merge-any.sh): C KSM's verdicts there judge rksm's cases beyond C's bail-out.
MM_UNMERGED = "mm_merge_any_unmerged"
# A selftest that reads a page's pagemap entry twice (read(), then the PAGEMAP_SCAN ioctl) bails
# out when the two differ; ksmd splitting a large folio between the reads (its PTEs are migration
# entries meanwhile, which pagemap reports as swap) does that on either kernel, at any case.
MM_RACE = "read and ioctl return unmatched results"
# Cases whose verdict depends on whether ksmd merged a page first, on either kernel: (selftest,
# case description). madv_populate checks a populated range's soft-dirty bits while ksmd may
# merge its zero-filled pages, and a merge maps the KSM page by a new PTE without that bit (C's
# replace_page() too).
MM_TIMING = [("madv_populate", "range is softdirty")]
# Why a case may be skipped on one kernel only: the selftest could not swap a page out, or
# collapse a huge page, that ksmd held or had merged at that moment, or got no huge page at its
# fault (with 64 KiB pages cow asks for huge pages of 128 MiB and more in a 2 GiB guest: whether
# free memory has one whole then decides, on either kernel: C's run skipped 244 of them too).
MM_SKIPS = ["MADV_PAGEOUT did not work", "MADV_COLLAPSE", "Did not get a THP populated"]


def tap_by_number(text):
    """{number: (description, status)} of a TAP document's numbered top-level results (the last
    line of a number counts)."""
    return {num: (desc, status) for num, desc, status in tap_lines(text)[1]
            if num is not None}


def mm_crashed(rc):
    """Whether a selftest's exit status says it did not end by itself (killed, timed out, not
    run): KSelfTest programs exit 0, 1 or 4 (skip)."""
    return rc is None or rc in (124, 126, 127) or rc > 128


def mm_target(k):
    """The target part of kernel name k ("-arm64-16k" of rust-debug-arm64-16k; "" on x86_64)."""
    i = k.find("-arm64-")
    return k[i:] if i >= 0 else ""


def judge_mm(name, ref, got, exp, ref_name, exp_name="tests/vm/mm_merge_any.expected"):
    """(why it fails or None, the case's title) for mm selftest `name`: `got` rksm's results,
    `ref` the reference's, `exp` the results that judge the cases beyond the reference's
    bail-out, named `exp_name` (C KSM's run without merging, or tests/vm/mm_merge_any.expected;
    all (cases, rc, bailed)).

    Both must have ended by themselves. A bail-out of the known race (MM_RACE) ends a run early:
    below the first case a bailing side never reported, both must report the same cases; if only
    the reference bailed, rksm's later cases and exit status are judged against `exp`. A case both ran must have one verdict, except a case of MM_TIMING. A case skipped on
    one side only is excused for a reason of MM_SKIPS, and only while rksm skips not many more
    than the reference.
    """
    (want, want_rc, want_race), (have, have_rc, have_race) = ref, got
    if mm_crashed(have_rc):
        return "exit status %s: it did not end by itself" % have_rc, name
    if mm_crashed(want_rc):
        return "%s's exit status %s: it did not end by itself" % (ref_name, want_rc), name
    cuts = [max(c, default=0) + 1 for c, race in ((want, want_race), (have, have_race)) if race]
    cut = min(cuts) if cuts else None
    below = (lambda n: True) if cut is None else (lambda n: n < cut)
    both = sorted(set(want) & set(have))
    timing = [n for n in both if (name, have[n][0]) in MM_TIMING and want[n][1] != have[n][1]]
    ran = [n for n in both if "skip" not in (want[n][1], have[n][1]) and n not in timing]
    bad = [n for n in ran if want[n][1] != have[n][1]]
    ours = [n for n in both if have[n][1] == "skip" and want[n][1] != "skip"]
    theirs = [n for n in both if want[n][1] == "skip" and have[n][1] != "skip"]
    odd = [n for n in ours + theirs
           if not any(r in (have[n] if n in ours else want[n])[0] for r in MM_SKIPS)]
    title = "%s: %d cases ran on both, as %s%s%s" % (
        name, len(ran), ref_name,
        ", up to case %d (a race bail-out)" % cut if cut is not None else "",
        " (%d timing-dependent)" % len(timing) if timing else "")
    if not ran:
        return "no case ran on both kernels", title
    if bad:
        return "case %d: %s %r, here %r" % (bad[0], ref_name, want[bad[0]], have[bad[0]]), title
    if odd:
        n = odd[0]
        return "case %d skipped on one kernel only: %s %r, here %r" % (n, ref_name, want[n], have[n]), title
    if len(ours) > 2 * len(theirs) + 20:
        return "%d cases skipped here only, %d on %s only" % (len(ours), len(theirs), ref_name), title
    if {n for n in have if below(n)} != {n for n in want if below(n)}:
        return "%d cases reported, %s reported %d" % (
            len([n for n in have if below(n)]), ref_name, len([n for n in want if below(n)])), title
    if want_race and not have_race and (exp is None or exp[2]):
        # Nothing to judge rksm's later cases by: failing is the honest verdict.
        return ("%s bailed out at case %d, and %s" % (
            ref_name, cut, "so did %s" % exp_name if exp else
            "there is no %s to judge the later cases by" % exp_name)), title
    if want_race and not have_race and exp is not ref:
        # The reference stopped early: rksm's later cases against `exp`.
        title += ", later cases as %s" % exp_name
        later = [n for n in have if n >= cut and n in exp[0]
                 and "skip" not in (have[n][1], exp[0][n][1])
                 and have[n][1] != exp[0][n][1] and (name, have[n][0]) not in MM_TIMING]
        if later:
            n = later[0]
            return "case %d (after %s bailed out): %s %r, here %r" % (
                n, ref_name, exp_name, exp[0][n], have[n]), title
        if set(have) != set(exp[0]):
            return "%d cases reported, %s %d" % (len(have), exp_name, len(exp[0])), title
        if not timing and have_rc != exp[1]:
            return "exit status %s, %s %s" % (have_rc, exp_name, exp[1]), title
    elif cut is None and not timing and want_rc != have_rc:
        return "exit status %s, %s %s" % (have_rc, ref_name, want_rc), title
    return None, title


def compare_mm(top, kernels):
    """One case per mm selftest run under PR_SET_MEMORY_MERGE: every case it ran on both kernels
    has C KSM's verdict on rksm, it reported the same cases, and it exited alike.

    Against the C kernel of the same run when both ran, else against tests/vm/mm_merge_any.expected
    (C KSM's results, taken from the C kernel of this tree: "selftest number status description"
    per case, "selftest rc N" per selftest; mm_merge_any-arm64-16k.expected and the like for
    the other targets, where they exist). A bail-out of the known race (MM_RACE) on either side
    ends the comparison at the case where it happened.
    """
    def results(k, suite=MM_SUITE):
        d = os.path.join(top, "build", "test", k, suite)
        if not os.path.isdir(d):
            return None
        got = {}
        for f in sorted(os.listdir(d)):
            if f.endswith(".out"):
                name = f[:-4]
                text = open(os.path.join(d, f), errors="replace").read()
                rcf = os.path.join(d, name + ".rc")
                rc = int(open(rcf).read().strip() or 1) if os.path.exists(rcf) else None
                got[name] = (tap_by_number(text), rc, MM_RACE in text)
        return got

    def expected(k):
        """C KSM's results for kernel k's target: tests/vm/mm_merge_any.expected on x86_64,
        mm_merge_any-arm64-16k.expected and the like elsewhere (the cases differ with the page
        size: cow runs one per THP size); None where the target has none."""
        path = os.path.join(top, "tests", "vm", "mm_merge_any%s.expected" % mm_target(k))
        if not os.path.exists(path):
            return None
        exp = {}
        for line in open(path):
            w = line.rstrip("\n").split(" ", 3)
            if len(w) < 3:
                continue
            t = exp.setdefault(w[0], ({}, None, False))
            if w[1] == "rc":
                exp[w[0]] = (t[0], int(w[2]), False)
            else:
                t[0][int(w[1])] = (w[3] if len(w) > 3 else "", w[2])
        return exp

    cases = []
    for k in kernels:
        if not k.startswith("rust") or not os.path.exists(os.path.join(top, "build", "test", k, "vm.rc")):
            continue
        got = results(k)
        # make test's rksm kernel always runs the suite; the others (the debug kernel under make
        # torture, not under make test; the one without init) only when asked.
        if got is None and k != "rust":
            continue
        got = got or {}
        # C KSM of the same flavour and run (c for rust, c-debug for rust-debug), if it ran.
        ck = "c" + k[len("rust"):]
        ref = results(ck) if ck in kernels else None
        ref_name = "C KSM, same run"
        exp = expected(k)
        exp_name = "tests/vm/mm_merge_any%s.expected" % mm_target(k)
        # Where C KSM's run kept bailing out, its run without merging judges the later cases.
        unmerged = (results(ck, MM_UNMERGED) or {}) if ref is not None else {}
        if ref is None:
            if exp is None:
                cases.append(Case(k, MM_SUITE, "C KSM's results", "fail",
                                  "C KSM did not run here, and there is no %s" % exp_name))
                continue
            ref_name, ref = exp_name, exp
        for name in sorted(set(ref) | set(got)):
            if name not in got or name not in ref:
                cases.append(Case(k, MM_SUITE, name, "fail", "ran on only one of %s and here" % ref_name))
                continue
            log = os.path.join(top, "build", "test", k, MM_SUITE, name + ".out")
            if name in unmerged:
                later, later_name = unmerged[name], "C KSM without merging, same run"
            else:
                later, later_name = exp.get(name) if exp is not None else None, exp_name
            why, title = judge_mm(name, ref[name], got[name], later, ref_name, later_name)
            cases.append(Case(k, MM_SUITE, title, "fail" if why else "pass", why or "",
                              log=log if why else None))
    return cases


FAULT_CALL = re.compile(r"^# (.+?) (\d+) (ok|ENOMEM|EAGAIN|EBUSY|E2BIG|ENOEXEC|killed past the point "
                        r"of no return|errno \d+)( injected)?")


def fault_results(top, k):
    """{(run, sweep): [(N, result, injected)]} of the fault sweeps (tests/vm/ksmfail.c) that
    kernel k ran, from build/test/k/faults/*.out."""
    d = os.path.join(top, "build", "test", k, "faults")
    got = {}
    if not os.path.isdir(d):
        return got
    for f in sorted(x for x in os.listdir(d) if x.endswith(".out")):
        for line in open(os.path.join(d, f), errors="replace"):
            m = FAULT_CALL.match(line)
            if m:
                got.setdefault((f[:-4], m.group(1)), []).append(
                    (int(m.group(2)), m.group(3), bool(m.group(4))))
    return got


def print_fault_table(top, kernels):
    """The fault sweeps of rksm beside C's of the same run: per sweep, how many calls had an
    allocation failed, and what they returned. Each kernel's own TAP lines give the verdicts;
    the two allocate differently in most calls (rksm's types are not C's structures), so the
    last column says whether the results agree N by N, and where they first differ."""
    for k in kernels:
        if not k.startswith("rust"):
            continue
        ck = "c" + k[len("rust"):]
        mine, ref = fault_results(top, k), fault_results(top, ck) if ck in kernels else {}
        if not mine:
            continue

        def summary(calls):
            if not calls:
                return "-"
            inj = [r for _, r, i in calls if i]
            kinds = {}
            for r in inj:
                kinds[r] = kinds.get(r, 0) + 1
            return "%3d: %s" % (len(inj), ", ".join("%s %d" % (r if len(r) < 12 else "killed", n)
                                                     for r, n in sorted(kinds.items())) or "-")

        print()
        print("fault sweeps  [kernel %s against %s]  calls with an allocation failed: results"
              % (k, ck if ref else "no C run"))
        print("-" * 100)
        print("  %-32s %-30s %-30s %s" % ("run / sweep", "rksm", "C", "N by N"))
        for key in sorted(set(mine) | set(ref), key=lambda x: (x[0], list(mine).index(x)
                                                                  if x in mine else 999)):
            a, b = mine.get(key, []), ref.get(key, [])
            if not a or not b:
                same = "rksm only" if a else "C only"
            else:
                diff = [n for (n, r, i), (n2, r2, i2) in zip(a, b) if (n, r, i) != (n2, r2, i2)]
                longer = a if len(a) > len(b) else b
                same = ("alike" if not diff and len(a) == len(b) else
                        "differ from N=%d" % (diff[0] if diff else longer[min(len(a), len(b))][0]))
            name = key[1] if key[0] == "sweep" else "%s / %s" % (key[0], key[1])
            print("  %-32s %-30s %-30s %s" % (name[:32], summary(a)[:30], summary(b)[:30], same))

def tail(text, n=3):
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return " | ".join(lines[-n:])[:300]


def print_failed_logs(cases, top, files=4, lines=15):
    """The last lines of the output of each failed command, at the end of the report: CI shows
    the report's end, and a failure that happens only there must be diagnosable from it."""
    logs = []
    for c in cases:
        if c.status == "fail" and c.log and c.log not in logs:
            logs.append(c.log)
    for log in logs[:files]:
        print()
        if isinstance(log, tuple):  # (title, lines): an excerpt, as of a kernel log
            title, text = log
        else:
            title = "last lines of " + os.path.relpath(log, top)
            text = [x for x in open(log, errors="replace").read().splitlines() if x.strip()]
            text = text[-lines:]
        print(title + ":")
        for line in text:
            print("  | " + line[:160])
    if len(logs) > files:
        print("(%d more failed outputs under build/test)" % (len(logs) - files))


def compare_ksmtuned(top, kernels):
    """rksm's ksmtuned decisions must equal C KSM's of the same run (and target), line for line:
    tests/vm/ksmtuned.py's record holds each adjust's phase, decision and which side of each
    threshold ksmtuned's two inputs fell, no memory figure (those differ a little between the
    two kernels)."""
    def record(k):
        f = os.path.join(top, "build", "test", k, "ksmtuned", "decisions.record")
        return open(f).read().splitlines() if os.path.exists(f) else None

    cases = []
    for k in kernels:
        impl = k.split("-")[0]
        ck = "c" + k[len(impl):]
        # Without C in the run, the test's own check of the designed decisions stands alone.
        if impl == "c" or ck not in kernels or not os.path.isdir(
                os.path.join(top, "build", "test", k, "ksmtuned")):
            continue
        want, have = record(ck), record(k)
        name = "ksmtuned: the same decisions as C KSM's, same run (%d adjusts)" % len(want or [])
        if want is None or have is None:
            cases.append(Case(k, "ksmtuned", name, "fail", "no record from %s"
                              % (ck if want is None else k)))
        elif want == have:
            cases.append(Case(k, "ksmtuned", name, "pass"))
        else:
            i = next((i for i, (a, b) in enumerate(zip(want + [""], have + [""])) if a != b))
            cases.append(Case(k, "ksmtuned", name, "fail", "C KSM: %r, here: %r"
                              % ((want + ["(nothing)"])[i], (have + ["(nothing)"])[i])))
    return cases


def main():
    top = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    cases = []
    if sys.argv[1:2] == ["--mm-expected"]:
        # tests/vm/mm_merge_any.expected, from the C kernel's results in build/test/c (or in
        # the run directory given, as a trial boot of the suite alone leaves it; for arm64,
        # build/test/c-arm64-16k into tests/vm/mm_merge_any-arm64-16k.expected).
        d = os.path.join(sys.argv[2] if len(sys.argv) > 2 else os.path.join(top, "build", "test", "c"),
                         MM_SUITE)
        for f in sorted(x for x in os.listdir(d) if x.endswith(".out")):
            name = f[:-4]
            text = open(os.path.join(d, f)).read()
            if MM_RACE in text:
                sys.exit("%s bailed out (%s): run it again" % (f, MM_RACE))
            for n, (desc, status) in sorted(tap_by_number(text).items()):
                print("%s %d %s %s" % (name, n, status, desc))
            print("%s rc %s" % (name, open(os.path.join(d, name + ".rc")).read().strip()))
        return 0
    if sys.argv[1:2] == ["--kunit"]:
        cases = parse_ktap(open(sys.argv[2], errors="replace").read(), "rust")
    else:
        kernels = sys.argv[1:] or ["c", "rust"]
        for k in kernels:
            cases += collect_um(top, k) if k.startswith("um") else collect(top, k)
        cases += compare_abi(top, [k for k in kernels if not k.startswith("um")])
        cases += compare_mm(top, [k for k in kernels if not k.startswith("um")])
        cases += compare_ksmtuned(top, [k for k in kernels if not k.startswith("um")])
    for c in cases:
        if c.status == "skip":
            key = (c.suite, c.name)
            if key in EXPECTED_SKIPS:
                c.status, c.detail = "pass", "expected skip: " + EXPECTED_SKIPS[key]
            else:
                c.status, c.detail = "fail", "skipped (a skip counts as a failure)"

    groups = {}
    for c in cases:
        groups.setdefault((c.kernel, c.suite.split(":")[0] if c.suite.startswith("kunit:")
                           else c.suite), []).append(c)
    width = 100
    for (kernel, suite), cs in groups.items():
        npass = sum(c.status == "pass" for c in cs)
        print()
        print("%s  [kernel %s]  %d/%d passed" % (suite, kernel, npass, len(cs)))
        print("-" * width)
        if suite == "kunit":
            per = {}
            for c in cs:
                per.setdefault(c.suite[6:], []).append(c)
            for s, scs in per.items():
                p = sum(c.status == "pass" for c in scs)
                print("  %-60s %4d passed %4d failed" % (s, p, len(scs) - p))
        for c in cs:
            if suite == "kunit" and c.status == "pass":
                continue
            mark = {"pass": "PASS", "broken": "XFAIL"}.get(c.status, "FAIL")
            print("  %-4s %-78s" % (mark, c.name[:78]))
            if c.detail and (c.status not in ("pass", "broken") or
                             c.detail.startswith(C_DEFECT_PASS)):
                print("       %s" % c.detail[:200])
    if sys.argv[1:2] != ["--kunit"]:
        print_fault_table(top, sys.argv[1:] or ["c", "rust"])
    print_failed_logs(cases, top)
    npass = sum(c.status == "pass" for c in cases)
    broken = [c for c in cases if c.status == "broken"]
    nfail = len(cases) - npass - len(broken)
    if broken:
        print()
        print("%d known-broken upstream case(s) not counted (Documentation/mm/rksm.rst, "
              "'Upstream tests and their settings'):" % len(broken))
        for c in broken:
            print("  [%s] %s" % (c.kernel, c.name[:200]))
    if not cases:
        print("no test results found")
        nfail = 1
    print()
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
