#!/usr/bin/env python3
"""Developer helper: regenerate kernel/patches/ from pristine kernel files and the edits below.

usage: scripts/dev/patches.py        (rewrites kernel/patches/0001-0005)

The patches numbered past those below (0006 on: User-Mode Linux, arm64's link) are written by hand
and left alone.

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
        "mm-ksm-count-the-KSM-zero-pages-a-fork-copies",
        "mm: ksm: count the KSM zero pages a fork copies",
        """A child's ksm_zero_pages is the parent's count as dup_mm() copied it,
before dup_mmap() takes the parent's mmap lock, and ksm_fork() adds that
count to the global ksm_zero_pages after the page tables were copied.
Zero pages that KSM maps in the parent meanwhile are copied but never
counted for the child, and pages that KSM unmerges meanwhile (run=2
holds the parent's mmap read lock while it does) are counted but not
copied. When the child exits, its zap uncounts the zero PTEs it really
has: the global count drifts, below zero or above it, and stays there
after every process exited. A torture with forks and run=2 flips left
185 on rksm; ksmrace zeroes left -78 in two minutes.

Count each KSM zero PTE as copy_present_ptes() copies it instead, from a
count of zero that mm_init() sets, as ksm_map_zero_page() counts a
merge. The counts then match the PTEs on every path, also for areas
not copied (MADV_DONTFORK, MADV_WIPEONFORK) and for a fork that fails
halfway, whose partial page tables are zapped and uncounted.""",
        [
            ("include/linux/ksm.h", [
                ("""static inline void ksm_might_unmap_zero_page(struct mm_struct *mm, pte_t pte)
{
	if (is_ksm_zero_pte(pte)) {
		atomic_long_dec(&ksm_zero_pages);
		atomic_long_dec(&mm->ksm_zero_pages);
	}
}
""", """static inline void ksm_might_unmap_zero_page(struct mm_struct *mm, pte_t pte)
{
	if (is_ksm_zero_pte(pte)) {
		atomic_long_dec(&ksm_zero_pages);
		atomic_long_dec(&mm->ksm_zero_pages);
	}
}

/* A fork copies @pte into @mm: a zero page KSM mapped is counted there too. */
static inline void ksm_might_copy_zero_page(struct mm_struct *mm, pte_t pte)
{
	if (is_ksm_zero_pte(pte))
		ksm_map_zero_page(mm);
}
"""),
                ("""	if (test_bit(MMF_VM_MERGEABLE, &oldmm->flags)) {
		long nr_ksm_zero_pages = atomic_long_read(&mm->ksm_zero_pages);

		mm->ksm_merging_pages = 0;
		mm->ksm_rmap_items = 0;
		atomic_long_add(nr_ksm_zero_pages, &ksm_zero_pages);
		__ksm_enter(mm);
	}
""", """	if (test_bit(MMF_VM_MERGEABLE, &oldmm->flags)) {
		mm->ksm_merging_pages = 0;
		mm->ksm_rmap_items = 0;
		__ksm_enter(mm);
	}
"""),
                ("""static inline void ksm_might_unmap_zero_page(struct mm_struct *mm, pte_t pte)
{
}
""", """static inline void ksm_might_unmap_zero_page(struct mm_struct *mm, pte_t pte)
{
}

static inline void ksm_might_copy_zero_page(struct mm_struct *mm, pte_t pte)
{
}
"""),
            ]),
            ("kernel/fork.c", [(
                """	mm_pasid_init(mm);
	RCU_INIT_POINTER(mm->exe_file, NULL);
""", """	mm_pasid_init(mm);
#ifdef CONFIG_KSM
	/* A fork counts the KSM zero pages it copies (ksm_might_copy_zero_page()). */
	atomic_long_set(&mm->ksm_zero_pages, 0);
#endif
	RCU_INIT_POINTER(mm->exe_file, NULL);
""")]),
            ("mm/memory.c", [(
                """	page = vm_normal_page(src_vma, addr, pte);
	if (unlikely(!page))
		goto copy_pte;

	folio = page_folio(page);

	/*
	 * If we likely have to copy, just don't bother with batching.""",
                """	page = vm_normal_page(src_vma, addr, pte);
	if (unlikely(!page)) {
		ksm_might_copy_zero_page(dst_vma->vm_mm, pte);
		goto copy_pte;
	}

	folio = page_folio(page);

	/*
	 * If we likely have to copy, just don't bother with batching.""")]),
        ],
    ),
    (
        "mm-ksm-do-not-read-the-anon_vma-of-a-page-that-may-be-unmapped",
        "mm: ksm: do not read the anon_vma of a page that may be unmapped",
        """ksmd finds a page under the mmap lock, drops the lock, and takes it
again to merge the page at the rmap_item's address. If the area was
unmapped and mapped again meanwhile, the folio it holds a reference to is
no longer mapped, and its anon_vma may have been freed: yet
write_protect_page() asks page_address_in_vma() for the folio's address,
and that reads folio_anon_vma(folio)->root. On a KASAN kernel with
SLUB_RCU_DEBUG, ksmrace zeroes (areas of zero pages unmapped and mapped
again at the same address while use_zero_pages merges them) reports a
slab-use-after-free there within two minutes.

Compute the address from the folio's index alone, as vma_address() does,
and let page_vma_mapped_walk() prove under the page table lock that the
folio is mapped there, which also proves that its anon_vma is the
area's. A KSM folio, whose index says nothing about the area, is turned
down as page_address_in_vma() turned it down.""",
        [
            ("mm/ksm.c", [(
                """	if (WARN_ON_ONCE(folio_test_large(folio)))
		return err;

	pvmw.address = page_address_in_vma(&folio->page, vma);
	if (pvmw.address == -EFAULT)
		goto out;
""", """	if (WARN_ON_ONCE(folio_test_large(folio)))
		return err;

	/*
	 * The folio may have been unmapped since ksmd found it, and its
	 * anon_vma freed: find the address by the folio's index alone, and
	 * let the walk prove that the folio is mapped there.
	 */
	if (folio_test_ksm(folio))
		goto out;
	pvmw.address = vma_address(vma, folio->index, 1);
	if (pvmw.address == -EFAULT)
		goto out;
""")]),
        ],
    ),
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
                ('#include "err.c"\n', '#include "err.c"\n#include "kthread_ext.c"\n'),
                ('#include "kunit.c"\n',
                 '#include "kunit.c"\n#include "kunit_suite.c"\n#include "mm_folio.c"\n'
                 '#include "mm_ksm.c"\n#include "mm_layout.c"\n#include "mm_pgtable.c"\n'
                 '#include "mm_rmap.c"\n#include "mm_space.c"\n'),
                ('#include "rbtree.c"\n', '#include "rbtree.c"\n#include "rcu_ext.c"\n'),
                ('#include "task.c"\n', '#include "task.c"\n#include "task_ext.c"\n'),
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
                 "#include <linux/sched/cputime.h>\n#include <linux/sched/isolation.h>\n"
                 "#include <linux/sched/mm.h>\n"
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
    # Only the patches made here: those numbered past PATCHES are written by hand.
    ours = tuple("%04d-" % n for n in range(1, len(PATCHES) + 1))
    for old in os.listdir(OUT):
        if old.endswith(".patch") and old.startswith(ours):
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
