// SPDX-License-Identifier: GPL-2.0

//! What changes the scanner and its trees from outside a pass: `run` (with `run=2`'s unmerge of
//! everything), the knobs that need empty stable trees (`merge_across_nodes`,
//! `max_page_sharing`), and memory going offline.

use super::*;

/// What rksm does while memory goes offline (C's `ksm_memory_callback()`): offlining migrates
/// every KSM page out of the range, moving its stable node with it; once the range is offline,
/// the nodes still recording a frame in it are stale and are taken out, before the range's
/// `struct page`s may go (they are poisoned at once, and may be unmapped later). The unstable
/// trees are emptied too, as a new pass would: their items recorded the frames their pages had
/// when they went in (C's unstable tree records none), and those pages may have moved. Meanwhile
/// `ksmd` and whatever walks every tree wait.
pub(super) struct Offlining;

impl MemoryListener for Offlining {
    /// C's `KSM_CALLBACK_PRI`.
    const PRIORITY: i32 = 100;

    fn memory_event(event: MemoryEvent, start_pfn: usize, nr_pages: usize) {
        let Some(k) = KSM.get() else {
            return;
        };
        match event {
            MemoryEvent::GoingOffline => k.scan.lock().offlining = true,
            MemoryEvent::Offline | MemoryEvent::CancelOffline => {
                if event == MemoryEvent::Offline {
                    let frames = start_pfn..start_pfn + nr_pages;
                    for i in 0..NR_SHARDS {
                        k.in_shard(i, |t, token| {
                            t.remove_range(&k.backend, token, &frames);
                            t.reset_unstable();
                        });
                    }
                }
                k.scan.lock().offlining = false;
                k.offline_done.notify_all();
            }
            MemoryEvent::Other => {}
        }
    }
}

pub(super) static OFFLINING: MemoryNotifier<Offlining> = MemoryNotifier::new();

/// Sets `run` (C's `run_store()`): with `RUN_UNMERGE`, unmerges every page and forgets every
/// rmap_item first; if that fails, KSM stops and the error is returned.
pub(crate) fn set_run(flags: u32) -> Result {
    let k = ksm();
    let mut st = k.lock_scan();
    if tunables::RUN.load(Relaxed) == flags {
        return Ok(());
    }
    tunables::RUN.store(flags, Relaxed);
    if flags & RUN_UNMERGE != 0 {
        // Unmerging allocates a page for every merged mapping: if that exhausts memory, the
        // OOM killer picks the writer first, as in C.
        let _oom = mm::OomOrigin::set();
        if let Err(e) = st.unmerge_all(&k) {
            tunables::RUN.store(RUN_STOP, Relaxed);
            return Err(e);
        }
    }
    Ok(())
}

/// Changes a knob that needs the stable trees empty (C's `merge_across_nodes_store()` and
/// `max_page_sharing_store()`): fails with `EBUSY`, as C KSM does, while KSM pages are mapped by
/// rmap_items (`pages_shared` is not 0) or while a KSM page of an empty node is still mapped (by
/// forks); otherwise `prepare` makes what each shard needs, and once every shard has it (a
/// failure changes nothing), `commit` applies it to each, and `publish` shows the new value.
/// All under the scan lock, `unchanged` (the knob has the value asked for already) included, so
/// that of two writers the one whose value the trees keep is the one whose value is shown.
pub(super) fn change_trees<P>(
    unchanged: impl FnOnce() -> bool,
    prepare: impl Fn(&Trees<KsmBackend>) -> Result<P>,
    commit: impl Fn(&mut Trees<KsmBackend>, P),
    publish: impl FnOnce(),
) -> Result {
    let k = ksm();
    let _st = k.lock_scan();
    if unchanged() {
        return Ok(());
    }
    let shared: u64 = (0..k.shards.len())
        .map(|i| k.shards.lock(i).trees.counters.pages_shared)
        .sum();
    if shared != 0 {
        return Err(EBUSY);
    }
    let mut busy = false;
    for i in 0..k.shards.len() {
        let mut sh = k.shards.lock(i);
        let Shard { trees, token } = &mut *sh;
        busy |= trees.drain_for_knob(&k.backend, token).is_err();
        publish_shard(&sh);
    }
    if busy {
        return Err(EBUSY);
    }
    let mut ready = KVec::with_capacity(NR_SHARDS, GFP_KERNEL)?;
    for i in 0..k.shards.len() {
        ready.push(prepare(&k.shards.lock(i).trees)?, GFP_KERNEL)?;
    }
    // Applied from the last shard to the first, as `pop` hands them back.
    for i in (0..k.shards.len()).rev() {
        if let Some(p) = ready.pop() {
            let mut sh = k.shards.lock(i);
            commit(&mut sh.trees, p);
            publish_shard(&sh);
        }
    }
    publish();
    Ok(())
}

/// The `merge_across_nodes` and `max_page_sharing` that the trees use, under the scan lock;
/// `None` if the shards disagree (a knob change only ever applies to all of them at once).
#[cfg(CONFIG_KUNIT)]
pub(crate) fn tree_knobs() -> Option<(bool, usize)> {
    let k = ksm();
    let _st = k.lock_scan();
    let knobs = |i: usize| {
        let t = &k.shards.lock(i).trees;
        (t.merge_across_nodes(), t.max_page_sharing)
    };
    let first = knobs(0);
    (1..k.shards.len())
        .all(|i| knobs(i) == first)
        .then_some(first)
}

/// Sets `merge_across_nodes` (C's `merge_across_nodes_store()`).
pub(crate) fn set_merge_across_nodes(on: bool) -> Result {
    if STATS.merge_across_nodes.load(Relaxed) == on {
        return Ok(());
    }
    change_trees(
        || STATS.merge_across_nodes.load(Relaxed) == on,
        |t| t.prepare_merge_across_nodes(on),
        |t, p| t.commit_merge_across_nodes(on, p),
        || STATS.merge_across_nodes.store(on, Relaxed),
    )
}

/// The merge scope the trees use (`merge_scope`).
pub(crate) fn merge_scope() -> Scope {
    Scope::ALL[usize::from(tunables::MERGE_SCOPE.load(Relaxed)) % Scope::ALL.len()]
}

/// Sets `merge_scope` (rksm's own, see [`crate::domain`]), by `merge_across_nodes`' rules: an
/// unchanged value always succeeds; otherwise `EBUSY` while KSM pages are mapped by rmap_items,
/// or while a KSM page of an empty node is still mapped. The unstable trees are emptied (they
/// were ordered by the old domains). `EINVAL` for [`Scope::Memcg`] without memory cgroups.
pub(crate) fn set_merge_scope(scope: Scope) -> Result {
    if scope == Scope::Memcg && !kernel::mm::memcg_enabled() {
        return Err(EINVAL);
    }
    if merge_scope() == scope {
        return Ok(());
    }
    let index = Scope::ALL.iter().position(|s| *s == scope).unwrap_or(0) as u8;
    change_trees(
        || merge_scope() == scope,
        |t| {
            if t.stable_is_empty() {
                Ok(())
            } else {
                Err(EBUSY)
            }
        },
        // Cannot fail: every shard's stable trees are empty (checked just before, under the
        // scan lock, which every change of the trees needs).
        |t, ()| {
            let _ = t.set_scope(scope);
        },
        || tunables::MERGE_SCOPE.store(index, Relaxed),
    )
}

/// Sets `max_page_sharing` (C's `max_page_sharing_store()`).
pub(crate) fn set_max_page_sharing(max: usize) -> Result {
    if max < 2 {
        return Err(EINVAL);
    }
    if STATS.max_page_sharing.load(Relaxed) == max as i64 {
        return Ok(());
    }
    change_trees(
        || STATS.max_page_sharing.load(Relaxed) == max as i64,
        |_| Ok(()),
        |t, ()| t.max_page_sharing = max,
        || STATS.max_page_sharing.store(max as i64, Relaxed),
    )
}

/// Page tables looked at, or KSM pages broken, by one search of [`unmerge_range`]: between two,
/// it reschedules and looks for a signal and for the address space's exit.
const UNMERGE_STEP: usize = 64;

/// Page tables looked at, or KSM pages broken, by `run=2`'s unmerge of an address space under
/// one hold of its mmap lock ([`ScanState::unmerge_slot`]): the process's own `mmap`, `munmap`
/// and faults wait for no more than that.
const UNMERGE_HOLD: usize = 512;

/// Breaks every KSM page (and KSM zero page) of `[start, end)` of `vma` (C's
/// `unmerge_ksm_pages()`), looking only at the page tables that are mapped, until `budget` page
/// tables looked at and pages broken are spent (it counts them off): then `Ok(Some(addr))`, the
/// address to go on from. `Ok(None)` once the range is done, or if the address space is exiting
/// (its pages go with it). With `locked` (the caller holds the mmap lock for writing), the area
/// is write-locked against per-VMA-lock faults at the first KSM page found (C's `break_ksm()`
/// does so at the range's first address; where none is found, the caller's change of the
/// area's flags write-locks it). The range is cut to the area.
///
/// Fails with `ERESTARTSYS` if a signal is pending, and with `ENOMEM` if breaking a page ran out
/// of memory.
pub(crate) fn unmerge_range(
    locked: Option<&MmWriteLocked<'_>>,
    vma: &VmArea,
    start: usize,
    end: usize,
    budget: &mut usize,
) -> Result<Option<usize>> {
    let end = end.min(vma.end());
    let mut addr = start;
    loop {
        if vma.mm().is_exiting() {
            return Ok(None);
        }
        if kernel::current!().signal_pending() {
            return Err(ERESTARTSYS);
        }
        if *budget == 0 {
            return Ok(Some(addr));
        }
        let step = UNMERGE_STEP.min(*budget);
        let mut tables = step;
        let found = pgtable::next_ksm_page(vma, addr, end, &mut tables);
        *budget -= step - tables;
        match found {
            KsmSearch::At(at) => {
                pgtable::break_ksm(vma, at, locked)?;
                *budget = budget.saturating_sub(1);
                addr = at + PAGE_SIZE;
            }
            KsmSearch::NoneBelow(below) if below >= end => return Ok(None),
            KsmSearch::NoneBelow(below) => addr = below,
        }
        kthread::cond_resched();
    }
}

impl ScanState {
    /// Breaks every KSM page in the mergeable areas of `slot`, under its mmap lock held for
    /// reading and dropped after every [`UNMERGE_HOLD`] page tables looked at or pages broken.
    pub(super) fn unmerge_slot(slot: &MmSlot) -> Result {
        let mut addr = 0;
        loop {
            let guard = slot.mm.mmap_read_lock();
            let mut budget = UNMERGE_HOLD;
            let mut resume = None;
            for vma in guard.vmas_from(addr) {
                if slot.mm.is_exiting() {
                    return Ok(());
                }
                if vma.flags() & flags::MERGEABLE == 0 || !vma.has_anon_vma() {
                    continue;
                }
                let start = addr.max(vma.start());
                resume = unmerge_range(None, vma, start, vma.end(), &mut budget)?;
                if resume.is_some() {
                    break;
                }
            }
            drop(guard);
            match resume {
                Some(at) => addr = at,
                None => return Ok(()),
            }
        }
    }

    /// Unmerges every KSM page of every registered address space and frees every rmap_item
    /// (C's `unmerge_and_remove_all_rmap_items()`), for `run = 2`.
    pub(super) fn unmerge_all(&mut self, k: &Ksm) -> Result {
        let mut next = k.slots.lock().rewind();
        while let Some(slot) = next {
            if let Err(e) = Self::unmerge_slot(&slot) {
                let mut sl = k.slots.lock();
                sl.cursor = sl.slots.len();
                return Err(e);
            }
            slot.items.get_mut(&mut self.slots_token).rewind();
            self.remove_trailing(k, &slot);
            let mut sl = k.slots.lock();
            let here = sl.cursor;
            next = sl.advance();
            if slot.mm.is_exiting() {
                if sl.slots.get(here).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                    sl.remove(here);
                    k.nr_slots.fetch_sub(1, Relaxed);
                }
                drop(sl);
                slot.mm.clear_flag(MmFlag::VmMergeable);
                slot.mm.clear_flag(MmFlag::VmMergeAny);
            }
        }
        // Stable nodes whose pages are still mapped stay; nothing to worry about.
        for i in 0..NR_SHARDS {
            let _ = k.in_shard(i, |t, token| t.remove_all_stable_nodes(&k.backend, token));
        }
        self.seqnr = 0;
        self.publish();
        Ok(())
    }
}
