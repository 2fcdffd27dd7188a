// SPDX-License-Identifier: GPL-2.0

//! rksm as the kernel's KSM: the functions of `<linux/ksm.h>` that the rest of mm calls.
//!
//! # The reverse map, and rksm's `unsafe`
//!
//! Reclaim, migration and memory failure reach a KSM folio's mappings through its stable node:
//! they lock the folio and follow its back pointer to the node ([`kernel::mm::ksm::ksm_node`]),
//! then walk the node's rmap_items. They hold the folio lock, not rksm's token, so rksm promises
//! two things:
//!
//! - a stable node pointed at by a folio is not freed while that folio is locked (the
//!   [`KsmNode`] contract): rksm frees a node only when its page is gone (`get_ksm_folio` found
//!   no folio pointing at it) or after clearing the folio's pointer with the folio locked
//!   (`Backend::release`); nodes live in pinned boxes and never move; and its stable node is the
//!   only type of node a folio points at (the contract's other half: rksm is the kernel's only
//!   KSM, and implements `KsmNode` once);
//! - a node's list of rmap_items, and an item's anon_vma while it is listed, change only with
//!   the node's KSM page locked: `Step::cmp_and_merge` appends under `Backend::lock`,
//!   `Trees::remove_item` unlinks under `Backend::lock_ksm_page`, and the lists of stale nodes
//!   (page gone: nobody can lock it) are cleared without it. An item's anon_vma is set before it
//!   is listed and dropped after it left the list.
//!
//! rksm's other `unsafe` code, each with its argument where it is:
//!
//! - `scan::init` registers the memory notifier that prunes stable nodes when memory goes
//!   offline for good, which only built-in code may do (rksm is);
//! - `item.rs` promises that rmap_items are linked only from their boxes (`HeapPinned`), and
//!   that an item's shard, the id of its list's token, changes only while it is on no list
//!   (`HListNode::list_id`);
//! - `real.rs` splits a large folio through its lock guard (`split_if_large`), using no borrow
//!   of the old folio afterwards.

use crate::real::KsmBackend;
use crate::scan::{self, ITEM_SIZE};
use crate::stable::StableNode;
use kernel::bindings;
use kernel::kthread;
use kernel::mm::folio::{Folio, FolioGuard, FolioPage};
use kernel::mm::ksm::{self as mmksm, KsmNode, KsmOps};
use kernel::mm::rmap::{KillList, RmapWalk, SwapIn};
use kernel::mm::virt::{flags, VmArea};
use kernel::mm::{Mm, MmFlag, MmWriteLocked};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::types::ARef;

// SAFETY: See the module documentation: rksm frees a stable node only when no folio points at
// it any more, or after clearing the pointer under the folio's lock, and never moves one; this is
// the only implementation of `KsmNode` (`ksm_abi!` makes rksm the kernel's only KSM).
unsafe impl KsmNode for StableNode<KsmBackend> {}

type Node = StableNode<KsmBackend>;

/// The implementation of `<linux/ksm.h>`.
pub(crate) struct Rksm;

kernel::ksm_abi!(Rksm);

/// Whether KSM may merge pages of `vma` at all (C's `vma_ksm_compatible()`).
fn compatible(vma: &VmArea) -> bool {
    let never = flags::SHARED
        | flags::MAYSHARE
        | flags::PFNMAP
        | flags::IO
        | flags::DONTEXPAND
        | flags::HUGETLB
        | flags::MIXEDMAP
        | flags::DROPPABLE;
    vma.flags() & never == 0 && !vma.is_dax()
}

/// Breaks every KSM page of `[start, end)` of `vma` (C's `unmerge_ksm_pages()`), all of it: the
/// caller holds the mmap lock for writing and cannot let it go meanwhile.
fn unmerge_range(locked: &MmWriteLocked<'_>, vma: &VmArea, start: usize, end: usize) -> Result {
    let mut unbounded = usize::MAX;
    scan::unmerge_range(Some(locked), vma, start, end, &mut unbounded).map(|_| ())
}

/// C's `__ksm_add_vma()`.
fn add_vma(locked: &MmWriteLocked<'_>, vma: &VmArea) {
    if vma.flags() & flags::MERGEABLE == 0 && compatible(vma) {
        vma.set_flags(locked, flags::MERGEABLE);
    }
}

/// C's `__ksm_del_vma()`.
fn del_vma(locked: &MmWriteLocked<'_>, vma: &VmArea) -> Result {
    if vma.flags() & flags::MERGEABLE == 0 {
        return Ok(());
    }
    if vma.has_anon_vma() {
        unmerge_range(locked, vma, vma.start(), vma.end())?;
    }
    vma.clear_flags(locked, flags::MERGEABLE);
    Ok(())
}

fn add_vmas(locked: &MmWriteLocked<'_>) {
    for vma in locked.vmas() {
        add_vma(locked, vma);
    }
}

fn del_vmas(locked: &MmWriteLocked<'_>) -> Result {
    for vma in locked.vmas() {
        del_vma(locked, vma)?;
    }
    Ok(())
}

impl KsmOps for Rksm {
    fn madvise(
        locked: &MmWriteLocked<'_>,
        vma: &VmArea,
        start: usize,
        end: usize,
        advice: i32,
        vm_flags: &mut usize,
    ) -> Result {
        let mm = locked.mm();
        match advice as u32 {
            bindings::MADV_MERGEABLE => {
                if vma.flags() & flags::MERGEABLE != 0 || !compatible(vma) {
                    return Ok(());
                }
                if !mm.test_flag(MmFlag::VmMergeable) {
                    scan::enter(mm)?;
                }
                *vm_flags |= flags::MERGEABLE;
            }
            bindings::MADV_UNMERGEABLE => {
                if *vm_flags & flags::MERGEABLE == 0 {
                    // Just ignore the advice.
                    return Ok(());
                }
                if vma.has_anon_vma() {
                    unmerge_range(locked, vma, start, end)?;
                }
                *vm_flags &= !flags::MERGEABLE;
            }
            _ => {}
        }
        Ok(())
    }

    fn add_vma(locked: &MmWriteLocked<'_>, vma: &VmArea) {
        let mm = locked.mm();
        if mm.test_flag(MmFlag::VmMergeAny) {
            add_vma(locked, vma);
            // ksmd may have dropped the address space after a pass found nothing mergeable.
            if !mm.test_flag(MmFlag::VmMergeable) {
                let _ = scan::enter(mm);
            }
        }
    }

    fn enable_merge_any(locked: &MmWriteLocked<'_>) -> Result {
        let mm = locked.mm();
        if mm.test_flag(MmFlag::VmMergeAny) {
            return Ok(());
        }
        if !mm.test_flag(MmFlag::VmMergeable) {
            scan::enter(mm)?;
        }
        mm.set_flag(MmFlag::VmMergeAny);
        add_vmas(locked);
        Ok(())
    }

    fn disable_merge_any(locked: &MmWriteLocked<'_>) -> Result {
        let mm = locked.mm();
        if !mm.test_flag(MmFlag::VmMergeAny) {
            return Ok(());
        }
        if let Err(e) = del_vmas(locked) {
            // All or nothing: merging stays on everywhere.
            add_vmas(locked);
            return Err(e);
        }
        mm.clear_flag(MmFlag::VmMergeAny);
        Ok(())
    }

    fn disable(locked: &MmWriteLocked<'_>) -> Result {
        let mm = locked.mm();
        if !mm.test_flag(MmFlag::VmMergeable) {
            return Ok(());
        }
        if mm.test_flag(MmFlag::VmMergeAny) {
            return Self::disable_merge_any(locked);
        }
        del_vmas(locked)
    }

    fn enter(mm: &Mm) -> Result {
        scan::enter(mm)
    }

    fn exit(mm: &Mm) {
        scan::exit(mm)
    }

    fn might_need_to_copy(swapin: &SwapIn<'_>) -> Result<Option<ARef<Folio>>> {
        let folio = swapin.folio();
        let f = folio.folio();
        if f.is_large() {
            return Ok(None);
        }
        if f.is_ksm() {
            // Still a KSM page of ours (and we are not unmerging everything): no copy.
            if mmksm::ksm_node::<Node>(folio).is_some() && !scan::unmerging() {
                return Ok(None);
            }
        } else if !swapin.has_anon_vma() || swapin.in_own_anon_vma() {
            return Ok(None);
        }
        if f.first_page().is_hwpoison() {
            return Err(Error::from_errno(-(bindings::EHWPOISON as i32)));
        }
        if !f.is_uptodate() {
            // Let the fault report the error.
            return Ok(None);
        }
        match swapin.copy()? {
            Some(new) => Ok(Some(new)),
            None => Err(ENOMEM),
        }
    }

    fn rmap_walk(folio: &FolioGuard<'_>, walk: &mut RmapWalk<'_>) {
        let Some(node) = mmksm::ksm_node::<Node>(folio) else {
            return;
        };
        // First the areas that each rmap_item covers; then, if the walker wants more, the areas
        // of other address spaces forked from them since ksmd passed.
        for search_new_forks in [false, true] {
            // SAFETY: The node's list changes only with its KSM page locked, and the caller holds
            // that lock (module documentation).
            for item in unsafe { node.items_unlocked() } {
                // SAFETY: A listed item's anon_vma is set before it was listed and dropped after
                // it leaves the list, which cannot happen while we hold the lock.
                let Some(av) = (unsafe { item.extra().get() }) else {
                    continue;
                };
                let guard = match av.try_lock_read() {
                    Some(g) => g,
                    None if walk.try_lock() => {
                        walk.set_contended();
                        return;
                    }
                    None => av.lock_read(),
                };
                let addr = item.mapping().addr();
                for vma in guard.vmas() {
                    kthread::cond_resched();
                    if !vma.contains(addr) {
                        continue;
                    }
                    if core::ptr::eq(item.mapping().mm(), vma.mm()) == search_new_forks {
                        continue;
                    }
                    if walk.invalid_vma(vma) {
                        continue;
                    }
                    if !walk.rmap_one(vma, addr) || walk.done() {
                        return;
                    }
                }
            }
        }
    }

    fn migrate(new: &FolioGuard<'_>, old: &FolioGuard<'_>) {
        let Some(node) = mmksm::ksm_node::<Node>(old) else {
            return;
        };
        if let Some(pfn) = node.ksm_page() {
            mmksm::migrate_ksm_folio(&*node, pfn, new, old);
        }
    }

    fn collect_procs(
        folio: &FolioGuard<'_>,
        page: &FolioPage,
        to_kill: &mut KillList<'_>,
        force_early: bool,
    ) {
        let Some(node) = mmksm::ksm_node::<Node>(folio) else {
            return;
        };
        // SAFETY: As in `rmap_walk`: the caller holds the KSM page's lock.
        for item in unsafe { node.items_unlocked() } {
            // SAFETY: As in `rmap_walk`.
            if let Some(av) = unsafe { item.extra().get() } {
                to_kill.add_mappers(av, page, item.mapping().addr(), force_early);
            }
        }
    }

    fn process_profit(mm: &Mm) -> isize {
        let c = mm.ksm_counters();
        (c.merging_pages() as isize + c.zero_pages()) * PAGE_SIZE as isize
            - (c.rmap_items() * ITEM_SIZE) as isize
    }
}
