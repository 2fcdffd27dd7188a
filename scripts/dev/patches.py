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
the Rust KSM that lives in samples/rust/rksm. Both kernels then come from
one tree and one configuration but for this choice.""",
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
	  rksm: KSM written in Rust, in samples/rust/rksm, meant to give
	  the same user interface as mm/ksm.c. Until it can stand in for
	  mm/ksm.c, the C implementation is still built beside it.
	  If unsure, say N.

endchoice
""")]),
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
                ("pub mod rbtree;\n", "pub mod rbtree;\npub mod search_tree;\n"),
                ("pub mod ioctl;\n", "pub mod ioctl;\nmod kvec_ext;\n"),
            ]),
            ("rust/helpers/helpers.c", [
                ('#include "kunit.c"\n', '#include "kunit.c"\n#include "kunit_suite.c"\n'),
            ]),
            ("rust/bindings/bindings_helper.h", [
                ("#include <linux/workqueue.h>\n",
                 "#include <linux/workqueue.h>\n#include <linux/xxhash.h>\n"),
            ]),
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
