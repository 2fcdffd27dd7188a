#!/usr/bin/env python3
"""Developer helper: regenerate kernel/patches/ from pristine kernel files and the edits below.

usage: scripts/dev/patches.py        (rewrites kernel/patches/*.patch)

Each patch is a subject, a body and a list of edits; an edit is a path in the kernel tree and a
list of (anchor, replacement) pairs applied to the file as the tarball has it. An anchor must
occur exactly once. The patches carry From/Subject/Signed-off-by so that checkpatch reviews them.
"""
import difflib
import os
import subprocess
import sys

TARBALL = "/usr/src/linux-source-6.12.tar.xz"
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(TOP, "kernel", "patches")

PATCHES = [
    (
        "mm-ksm-make-the-implementation-a-Kconfig-choice",
        "mm: ksm: make the implementation a Kconfig choice",
        """Let the configuration choose between the C KSM of mm/ksm.c and rksm,
the Rust KSM that lives in samples/rust/rksm, which then replaces it.
Both kernels come from one tree and one configuration but for this
choice.""",
        [
            ("mm/Kconfig", [(
                """	  until a program has madvised that an area is MADV_MERGEABLE, and
	  root has set /sys/kernel/mm/ksm/run to 1 (if CONFIG_SYSFS is set).
""",
                """	  until a program has madvised that an area is MADV_MERGEABLE, and
	  root has set /sys/kernel/mm/ksm/run to 1 (if CONFIG_SYSFS is set).

choice
	prompt "KSM implementation"
	depends on KSM
	default KSM_C
	help
	  Selects which implementation of Kernel Samepage Merging is built.
	  Both provide the interface of <linux/ksm.h>, madvise(MADV_MERGEABLE),
	  prctl(PR_SET_MEMORY_MERGE), /sys/kernel/mm/ksm and the KSM entries
	  of /proc/<pid>, so that programs cannot tell them apart.

config KSM_C
	bool "C implementation (mm/ksm.c)"
	help
	  The C implementation of KSM in mm/ksm.c: stable and unstable
	  red-black trees indexed by page contents, scanned by one ksmd
	  kernel thread.
	  If unsure, say Y.

config KSM_RUST
	bool "Rust implementation (rksm)"
	depends on RUST
	select SAMPLES
	select SAMPLES_RUST
	help
	  rksm: KSM written in Rust, in samples/rust/rksm, with the same
	  user interface as mm/ksm.c, which it replaces.
	  See Documentation/admin-guide/mm/rksm.rst.
	  If unsure, say N.

endchoice
""")]),
            ("mm/Makefile", [(
                "obj-$(CONFIG_KSM) += ksm.o\n",
                "obj-$(CONFIG_KSM_C) += ksm.o\n")]),
            ("samples/rust/Makefile", [(
                "obj-$(CONFIG_SAMPLE_RUST_PRINT)			+= rust_print.o\n",
                "obj-$(CONFIG_SAMPLE_RUST_PRINT)			+= rust_print.o\n"
                "obj-$(CONFIG_KSM_RUST)				+= rksm/\n")]),
        ],
    ),
    (
        "rust-kernel-add-the-modules-rksm-needs",
        "rust: kernel: add the modules rksm needs",
        """Declare the abstractions that rksm adds to the kernel crate, and the
C headers and helpers they use: KUnit suites written in Rust, intrusive
red-black trees searched by a comparison the caller runs, intrusive hash
lists, memory management (page contents), and KVec::pop and swap_remove.""",
        [
            ("rust/kernel/lib.rs", [
                ("#[cfg(CONFIG_KUNIT)]\npub mod kunit;\n",
                 "#[cfg(CONFIG_KUNIT)]\npub mod kunit;\n#[cfg(CONFIG_KUNIT)]\npub mod kunit_suite;\n"),
                ("pub mod list;\n", "pub mod hlist;\npub mod list;\npub mod mm;\n"),
                ("pub mod rbtree;\n", "pub mod rbtree;\npub mod search_tree;\npub mod slist;\n"),
                ("pub mod ioctl;\n", "pub mod ioctl;\nmod kvec_ext;\npub mod kthread;\n"),
                ("pub mod firmware;\n", "pub mod firmware;\npub mod global;\n"),
                ("pub mod str;\n", "pub mod str;\npub mod sysfs;\n"),
            ]),
            ("rust/kernel/alloc.rs", [
                ("    pub const __GFP_NOWARN: Flags = Flags(bindings::__GFP_NOWARN);\n",
                 "    pub const __GFP_NOWARN: Flags = Flags(bindings::__GFP_NOWARN);\n\n"
                 "    /// Fail rather than retry hard (no OOM killer): for allocations that can\n"
                 "    /// wait for a better time.\n"
                 "    pub const __GFP_NORETRY: Flags = Flags(bindings::__GFP_NORETRY);\n"),
            ]),
            ("rust/helpers/helpers.c", [
                ('#include "kunit.c"\n', '#include "kunit.c"\n#include "kunit_suite.c"\n'),
                ('#include "kunit_suite.c"\n#include "mutex.c"\n', '#include "kunit_suite.c"\n#include "mm_ksm.c"\n#include "mutex.c"\n'),
            ]),
            ("rust/bindings/bindings_helper.h", [
                ("#include <linux/workqueue.h>\n",
                 "#include <linux/workqueue.h>\n#include <linux/xxhash.h>\n"),
                ("#include <linux/jiffies.h>\n",
                 "#include <linux/freezer.h>\n#include <linux/highmem.h>\n"
                 "#include <linux/jiffies.h>\n#include <linux/kobject.h>\n"
                 "#include <linux/kstrtox.h>\n#include <linux/ksm.h>\n"
                 "#include <linux/kthread.h>\n"),
                ("#include <linux/mdio.h>\n",
                 "#include <linux/mdio.h>\n#include <linux/memory.h>\n#include <linux/mm.h>\n"
                 "#include <linux/mman.h>\n#include <linux/mmu_notifier.h>\n"
                 "#include <linux/pagewalk.h>\n"),
                ("#include <linux/refcount.h>\n",
                 "#include <linux/refcount.h>\n#include <linux/rmap.h>\n"),
                ("#include <linux/sched.h>\n",
                 "#include <linux/sched.h>\n#include <linux/sched/coredump.h>\n"
                 "#include <linux/sched/cputime.h>\n#include <linux/sched/mm.h>\n"
                 "#include <linux/sched/signal.h>\n"),
                ("#include <linux/slab.h>\n",
                 "#include <linux/slab.h>\n#include <linux/swap.h>\n#include <linux/sysfs.h>\n"),
                ("const gfp_t RUST_CONST_HELPER___GFP_ZERO = __GFP_ZERO;\n",
                 "const gfp_t RUST_CONST_HELPER___GFP_ZERO = __GFP_ZERO;\n"
                 "const gfp_t RUST_CONST_HELPER___GFP_HIGH = __GFP_HIGH;\n"
                 "const gfp_t RUST_CONST_HELPER___GFP_NORETRY = __GFP_NORETRY;\n"
                 "const vm_flags_t RUST_CONST_HELPER_VM_DROPPABLE = VM_DROPPABLE;\n"
                 "const folio_walk_flags_t RUST_CONST_HELPER_FW_MIGRATION = FW_MIGRATION;\n"
                 "const folio_walk_flags_t RUST_CONST_HELPER_FW_ZEROPAGE = FW_ZEROPAGE;\n"
                 "const long RUST_CONST_HELPER_MAX_SCHEDULE_TIMEOUT = MAX_SCHEDULE_TIMEOUT;\n"),
            ]),
        ],
    ),
    (
        "Documentation-admin-guide-mm-add-rksm",
        "Documentation: admin-guide: mm: add rksm",
        """List the admin guide page of rksm, the Rust KSM: its knobs, statistics
and every difference from mm/ksm.c.""",
        [
            ("Documentation/admin-guide/mm/index.rst", [(
                "   ksm\n   memory-hotplug\n",
                "   ksm\n   rksm\n   memory-hotplug\n")]),
        ],
    ),
]


def pristine(path):
    out = subprocess.run(["tar", "-xJOf", TARBALL, "linux-source-6.12/" + path],
                         capture_output=True, check=True)
    return out.stdout.decode()


def main():
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        if old.endswith(".patch"):
            os.unlink(os.path.join(OUT, old))
    for n, (name, subject, body, edits) in enumerate(PATCHES, 1):
        diffs = []
        for path, subs in edits:
            s = pristine(path)
            new = s
            for anchor, repl in subs:
                if new.count(anchor) != 1:
                    sys.exit("%s: anchor occurs %d times: %r" % (path, new.count(anchor), anchor))
                new = new.replace(anchor, repl)
            diffs.append("diff --git a/%s b/%s\n" % (path, path))
            diffs += difflib.unified_diff(s.splitlines(True), new.splitlines(True),
                                          "a/" + path, "b/" + path)
        fn = os.path.join(OUT, "%04d-%s.patch" % (n, name))
        with open(fn, "w") as f:
            f.write("From: rksm developers <rksm@example.org>\n")
            f.write("Subject: [PATCH] %s\n\n" % subject)
            f.write(body.strip() + "\n\n")
            f.write("Signed-off-by: rksm developers <rksm@example.org>\n---\n")
            f.write("".join(diffs))
        print("wrote", os.path.relpath(fn, TOP))


main()
