// SPDX-License-Identifier: GPL-2.0

//! The scanner: the address spaces registered with KSM, walked a batch of pages at a time by
//! the `ksmd` thread, and fed to the trees.
//!
//! # Locks
//!
//! - `Ksm::scan` (C's `ksm_thread_mutex`) holds the scanner's state: the trees, the rmap_items
//!   and the cursor. `ksmd` holds it for a batch; the sysfs stores that change the trees take it.
//! - `Ksm::slots` (C's `ksm_mmlist_lock`, a mutex here) holds the list of registered address
//!   spaces and the scan cursor's place in it, which registration and exit change from process
//!   context without the scan lock. It nests inside the mmap lock, never around it.
//! - An address space's mmap lock is held for reading while its areas are walked; the trees are
//!   worked on with no mmap lock held (a page reference keeps the page).
//! - The two tokens in [`ScanState`] govern what the scan lock protects: [`KsmToken`] the lists
//!   of stable nodes, [`SlotsToken`] each address space's list of rmap_items.

use crate::backend::Backend;
use crate::item::RmapItem;
use crate::knobs::{self, STATS};
use crate::real::{KsmBackend, KsmToken, Mapping, Page};
use crate::trees::Trees;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use kernel::c_str;
use kernel::global::Global;
use kernel::hlist::TokenCell;
use kernel::kthread::{self, WaitQueue};
use kernel::mm::ksm::{self as mmksm, trace};
use kernel::mm::virt::flags;
use kernel::mm::{self, Mm, MmFlag, MmapReadGuard};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::slist::SList;
use kernel::sync::{new_mutex, Arc, Mutex};
use kernel::types::ARef;

kernel::define_token!(pub(crate) SlotsToken);

/// `run` stops the scanner.
pub(crate) const RUN_STOP: u32 = 0;
/// `run` lets the scanner merge.
pub(crate) const RUN_MERGE: u32 = 1;
/// `run` unmerges everything and stops.
pub(crate) const RUN_UNMERGE: u32 = 2;

/// The size of an rmap_item, which the profit counters charge per tracked page.
pub(crate) const ITEM_SIZE: usize = core::mem::size_of::<RmapItem<KsmBackend>>();

// Every tracked page costs no more than in C KSM, whose `struct ksm_rmap_item` is 64 bytes.
const _: () = assert!(ITEM_SIZE <= 64);

type Item = RmapItem<KsmBackend>;

/// An address space registered with KSM (C's `struct ksm_mm_slot`).
pub(crate) struct MmSlot {
    mm: ARef<Mm>,
    /// Its rmap_items, in address order, with the scanner's place among them.
    items: TokenCell<SList<Item>, SlotsToken>,
    /// How many rmap_items it has (read without the scan lock by exit).
    nr_items: AtomicUsize,
}

/// The registered address spaces, in scan order, and where the scanner is among them.
///
/// # Invariants
///
/// `cursor <= slots.len()`; `cursor == slots.len()` means the scanner is at the head, between
/// passes.
pub(crate) struct SlotList {
    slots: KVec<Arc<MmSlot>>,
    cursor: usize,
}

impl SlotList {
    fn find(&self, mm: &Mm) -> Option<usize> {
        self.slots.iter().position(|s| core::ptr::eq(&*s.mm, mm))
    }

    fn current(&self) -> Option<Arc<MmSlot>> {
        self.slots.get(self.cursor).cloned()
    }

    /// Moves the cursor to the first slot (a pass starts).
    fn rewind(&mut self) -> Option<Arc<MmSlot>> {
        self.cursor = 0;
        self.current()
    }

    /// Moves the cursor to the next slot; `None` at the head.
    fn advance(&mut self) -> Option<Arc<MmSlot>> {
        if self.cursor < self.slots.len() {
            self.cursor += 1;
        }
        self.current()
    }

    fn insert_at(&mut self, at: usize, slot: Arc<MmSlot>) -> Result {
        self.slots.push(slot, GFP_KERNEL)?;
        self.slots[at..].rotate_right(1);
        Ok(())
    }

    fn remove(&mut self, i: usize) -> Arc<MmSlot> {
        let s = self.slots.swap_remove(i);
        // Keep the order: `swap_remove` moved the last slot to `i`.
        let n = self.slots.len();
        if i < n {
            self.slots[i..].rotate_left(1);
        }
        if i < self.cursor {
            self.cursor -= 1;
        }
        s
    }
}

/// The scanner's state (C's `ksm_scan` and the trees), under the scan lock.
pub(crate) struct ScanState {
    token: KsmToken,
    slots_token: SlotsToken,
    backend: KsmBackend,
    trees: Trees<KsmBackend>,
    address: usize,
    seqnr: u64,
    rmap_items: usize,
    pages_scanned: u64,
    pages_skipped: u64,
    advisor: Advisor,
}

/// The scan-time advisor's state (C's `struct advisor_ctx`).
#[derive(Default)]
struct Advisor {
    start_ns: i64,
    scan_time: u64,
    change: u64,
    cpu_ns: u64,
}

/// What walking an address space found.
enum Walked {
    /// A page, with the slot's list cursor at its rmap_item.
    Page(Page),
    /// The end of its mergeable areas.
    End,
    /// No memory for an rmap_item.
    NoMemory,
}

/// KSM's global state.
#[pin_data]
pub(crate) struct Ksm {
    #[pin]
    scan: Mutex<ScanState>,
    #[pin]
    slots: Mutex<SlotList>,
    #[pin]
    thread_wait: WaitQueue,
    #[pin]
    iter_wait: WaitQueue,
    nr_slots: AtomicUsize,
}

pub(crate) static KSM: Global<Ksm> = Global::new();

fn ksm() -> Pin<&'static Ksm> {
    // Set by the module's init before anything can call in; built-in, never unset.
    KSM.get().expect("rksm used before its init")
}

/// Builds the global state and starts `ksmd`.
pub(crate) fn init() -> Result {
    let zero_checksum = mm::folio::FolioPage::zero(0).bytes().checksum();
    let state = ScanState {
        token: KsmToken::acquire().ok_or(EBUSY)?,
        slots_token: SlotsToken::acquire().ok_or(EBUSY)?,
        backend: KsmBackend { zero_checksum },
        trees: Trees::new(mm::nr_node_ids())?,
        address: 0,
        seqnr: 0,
        rmap_items: 0,
        pages_scanned: 0,
        pages_skipped: 0,
        advisor: Advisor::default(),
    };
    let ksm = KBox::pin_init(
        pin_init!(Ksm {
            scan <- new_mutex!(state, "ksm_thread_mutex"),
            slots <- new_mutex!(
                SlotList {
                    slots: KVec::new(),
                    cursor: 0,
                },
                "ksm_mmlist_lock"
            ),
            thread_wait <- WaitQueue::new(c_str!("ksm_thread_wait"), kernel::static_lock_class!()),
            iter_wait <- WaitQueue::new(c_str!("ksm_iter_wait"), kernel::static_lock_class!()),
            nr_slots: AtomicUsize::new(0),
        }),
        GFP_KERNEL,
    )?;
    KSM.set(ksm).map_err(|_| EBUSY)?;
    kthread::run(ksmd, c_str!("ksmd"))?;
    Ok(())
}

/// Wakes `ksmd` if it waits for work.
pub(crate) fn wake_thread() {
    ksm().thread_wait.wake_up_interruptible();
}

/// Wakes `ksmd` from its sleep between batches (the sleep time changed).
pub(crate) fn wake_iter() {
    ksm().iter_wait.wake_up_interruptible();
}

fn should_run() -> bool {
    knobs::RUN.load(Relaxed) & RUN_MERGE != 0 && ksm().nr_slots.load(Relaxed) != 0
}

/// `ksmd` (C's `ksm_scan_thread()`).
fn ksmd() {
    kthread::set_freezable();
    kthread::set_current_nice(5);
    let k = ksm();
    while !kthread::should_stop() {
        {
            let mut st = k.scan.lock();
            if should_run() {
                st.do_scan(&k, knobs::PAGES_TO_SCAN.load(Relaxed) as usize);
            }
        }
        if should_run() {
            let ms = knobs::SLEEP_MS.load(Relaxed);
            k.iter_wait.wait_freezable(
                || ms != knobs::SLEEP_MS.load(Relaxed),
                Some(kthread::msecs_to_jiffies(ms)),
            );
        } else {
            k.thread_wait
                .wait_freezable(|| should_run() || kthread::should_stop(), None);
        }
    }
}

/// Sets `run` (C's `run_store()`): with `RUN_UNMERGE`, unmerges every page and forgets every
/// rmap_item first; if that fails, KSM stops and the error is returned.
pub(crate) fn set_run(flags: u32) -> Result {
    let k = ksm();
    let mut st = k.scan.lock();
    if knobs::RUN.load(Relaxed) == flags {
        return Ok(());
    }
    knobs::RUN.store(flags, Relaxed);
    if flags & RUN_UNMERGE != 0 {
        // Unmerging allocates a page for every merged mapping: if that exhausts memory, the
        // OOM killer picks the writer first, as in C.
        let _oom = mm::OomOrigin::set();
        if let Err(e) = st.unmerge_all(&k) {
            knobs::RUN.store(RUN_STOP, Relaxed);
            return Err(e);
        }
    }
    Ok(())
}

/// Runs a sysfs store that changes the trees under the scan lock, then publishes the counters.
fn change_trees(
    f: impl FnOnce(&mut Trees<KsmBackend>, &KsmBackend, &mut KsmToken) -> Result,
) -> Result {
    let k = ksm();
    let mut st = k.scan.lock();
    let ScanState {
        trees,
        backend,
        token,
        ..
    } = &mut *st;
    let r = f(trees, backend, token);
    st.publish();
    r
}

/// Sets `merge_across_nodes` (C's `merge_across_nodes_store()`).
pub(crate) fn set_merge_across_nodes(on: bool) -> Result {
    change_trees(|trees, backend, token| trees.set_merge_across_nodes(backend, token, on))
}

/// Sets `max_page_sharing` (C's `max_page_sharing_store()`).
pub(crate) fn set_max_page_sharing(max: usize) -> Result {
    change_trees(|trees, backend, token| trees.set_max_page_sharing(backend, token, max))
}

/// Forgets the scan-time advisor's history (it was just switched on).
pub(crate) fn reset_advisor() {
    ksm().scan.lock().advisor = Advisor::default();
}

/// How many passes an item is skipped after `age` passes without merging (C's `skip_age()`).
fn skip_age(age: u8) -> u8 {
    match age {
        0..=3 => 1,
        4..=5 => 2,
        6..=8 => 4,
        _ => 8,
    }
}

impl ScanState {
    /// Publishes the statistics for sysfs.
    fn publish(&self) {
        let c = &self.trees.counters;
        STATS
            .pages_scanned
            .store(self.pages_scanned as i64, Relaxed);
        STATS.pages_shared.store(c.pages_shared as i64, Relaxed);
        STATS.pages_sharing.store(c.pages_sharing as i64, Relaxed);
        STATS
            .pages_unshared
            .store(self.trees.unshared() as i64, Relaxed);
        STATS
            .pages_skipped
            .store(self.pages_skipped as i64, Relaxed);
        STATS.rmap_items.store(self.rmap_items as i64, Relaxed);
        STATS.full_scans.store(self.seqnr as i64, Relaxed);
        STATS.chains.store(c.chains as i64, Relaxed);
        STATS.dups.store(c.dups as i64, Relaxed);
        STATS
            .max_page_sharing
            .store(self.trees.max_page_sharing as i64, Relaxed);
        STATS
            .merge_across_nodes
            .store(self.trees.merge_across_nodes(), Relaxed);
    }

    /// Scans up to `n` pages (C's `ksm_do_scan()`).
    fn do_scan(&mut self, k: &Ksm, n: usize) {
        for _ in 0..n {
            if kthread::freezing() {
                break;
            }
            kthread::cond_resched();
            let Some((slot, page)) = self.next_page(k) else {
                break;
            };
            self.trees.chain_prune_ms = knobs::CHAINS_PRUNE_MS.load(Relaxed);
            let Self {
                token,
                slots_token,
                backend,
                trees,
                ..
            } = self;
            let list = slot.items.get(slots_token);
            if let Some(item) = list.current() {
                trees.cmp_and_merge(backend, token, item, &page);
            }
            slot.items.get_mut(slots_token).advance();
            drop(page);
            self.pages_scanned += 1;
            self.publish();
        }
        self.publish();
    }

    /// Frees an rmap_item taken off its slot's list: out of the trees first.
    fn free_item(&mut self, slot: &MmSlot, item: Pin<KBox<Item>>) {
        self.trees
            .remove_item(&self.backend, &mut self.token, &item);
        self.rmap_items -= 1;
        slot.nr_items.fetch_sub(1, Relaxed);
        item.mapping().mm().ksm_counters().add_rmap_items(-1);
        drop(item);
    }

    /// Takes out and frees every rmap_item of `slot` from its cursor on (C's
    /// `remove_trailing_rmap_items()`).
    fn remove_trailing(&mut self, slot: &MmSlot) {
        while let Some(item) = slot.items.get_mut(&mut self.slots_token).remove_current() {
            self.free_item(slot, item);
        }
    }

    /// Leaves the slot's list cursor at the rmap_item for `addr`, creating one if needed, and
    /// frees the items before it that were not met (C's `get_next_rmap_item()`). `false` if no
    /// memory could be had for a new one.
    fn item_at(&mut self, slot: &MmSlot, addr: usize) -> bool {
        loop {
            let list = slot.items.get(&self.slots_token);
            let Some(item) = list.current() else {
                break;
            };
            let a = item.mapping().addr();
            if a == addr {
                return true;
            }
            if a > addr {
                break;
            }
            // Its address was not mapped, or not mergeable, this time: drop it.
            if let Some(stale) = slot.items.get_mut(&mut self.slots_token).remove_current() {
                self.free_item(slot, stale);
            }
        }
        let Ok(item) = KBox::pin(
            RmapItem::new(Mapping::new(slot.mm.clone(), addr)),
            GFP_KERNEL | __GFP_NORETRY | __GFP_NOWARN,
        ) else {
            return false;
        };
        if slot
            .items
            .get_mut(&mut self.slots_token)
            .insert(item)
            .is_err()
        {
            return false;
        }
        self.rmap_items += 1;
        slot.nr_items.fetch_add(1, Relaxed);
        slot.mm.ksm_counters().add_rmap_items(1);
        true
    }

    /// Whether smart scanning skips the page at the slot's cursor this pass (C's
    /// `should_skip_rmap_item()`): pages that failed to merge for a while are looked at less
    /// and less often.
    fn should_skip(&mut self, slot: &MmSlot, page: &Page) -> bool {
        if !knobs::SMART_SCAN.load(Relaxed) || self.backend.is_ksm(page) {
            return false;
        }
        let Self {
            slots_token,
            trees,
            backend,
            token,
            pages_skipped,
            ..
        } = self;
        let Some(item) = slot.items.get(slots_token).current() else {
            return false;
        };
        let (age, skips) = item.age();
        let next = age.saturating_add(1);
        if age < 3 {
            item.set_age(next, skips);
            return false;
        }
        if skips == 0 {
            item.set_age(next, skip_age(age));
            return false;
        }
        item.set_age(next, skips - 1);
        *pages_skipped += 1;
        trees.remove_item(backend, token, &item);
        true
    }

    /// The next page to look at, with the cursor of its slot's list at its rmap_item (C's
    /// `scan_get_next_rmap_item()`). `None` at the end of a pass, when nothing is registered, or
    /// when no memory could be had.
    fn next_page(&mut self, k: &Ksm) -> Option<(Arc<MmSlot>, Page)> {
        let mut slot = {
            let sl = k.slots.lock();
            if sl.slots.is_empty() {
                return None;
            }
            match sl.current() {
                Some(s) => s,
                None => {
                    drop(sl);
                    self.start_pass();
                    let s = k.slots.lock().rewind()?;
                    self.address = 0;
                    s.items.get_mut(&mut self.slots_token).rewind();
                    s
                }
            }
        };
        loop {
            let guard = slot.mm.mmap_read_lock();
            match self.walk_slot(&slot, &guard) {
                Walked::Page(page) => {
                    drop(guard);
                    return Some((slot, page));
                }
                Walked::NoMemory => return None,
                Walked::End => {}
            }
            if slot.mm.is_exiting() {
                self.address = 0;
                slot.items.get_mut(&mut self.slots_token).rewind();
            }
            // The items from the cursor on had no mergeable page this time.
            self.remove_trailing(&slot);
            let mut sl = k.slots.lock();
            let here = sl.cursor;
            let next = sl.advance();
            if self.address == 0 {
                // No mergeable area was met while walking the whole address space (it is
                // exiting, or they were all unmapped): it leaves KSM, as C does.
                if sl.slots.get(here).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                    sl.remove(here);
                    k.nr_slots.fetch_sub(1, Relaxed);
                }
                drop(sl);
                slot.mm.clear_flag(MmFlag::VmMergeable);
            } else {
                drop(sl);
            }
            drop(guard);
            match next {
                Some(n) => {
                    slot = n;
                    self.address = 0;
                    slot.items.get_mut(&mut self.slots_token).rewind();
                }
                None => {
                    self.end_pass();
                    return None;
                }
            }
        }
    }

    /// Walks the mergeable areas of `slot` from the scan address on, to the next anonymous page
    /// (C's inner loop of `scan_get_next_rmap_item()`).
    fn walk_slot(&mut self, slot: &MmSlot, guard: &MmapReadGuard<'_>) -> Walked {
        if slot.mm.is_exiting() {
            return Walked::End;
        }
        for vma in guard.vmas_from(self.address) {
            if vma.flags() & flags::MERGEABLE == 0 {
                continue;
            }
            if self.address < vma.start() {
                self.address = vma.start();
            }
            if !vma.has_anon_vma() {
                self.address = vma.end();
            }
            while self.address < vma.end() {
                if slot.mm.is_exiting() {
                    break;
                }
                if let Some(held) = mmksm::anon_page_at(vma, self.address) {
                    let page = Page(held);
                    if !self.item_at(slot, self.address) {
                        return Walked::NoMemory;
                    }
                    self.address += PAGE_SIZE;
                    if self.should_skip(slot, &page) {
                        slot.items.get_mut(&mut self.slots_token).advance();
                        kthread::cond_resched();
                        continue;
                    }
                    return Walked::Page(page);
                }
                self.address += PAGE_SIZE;
                kthread::cond_resched();
            }
        }
        Walked::End
    }

    /// Breaks every KSM page in the mergeable areas of `slot`.
    fn unmerge_slot(slot: &MmSlot, guard: &MmapReadGuard<'_>) -> Result {
        if slot.mm.is_exiting() {
            return Ok(());
        }
        for vma in guard.vmas_from(0) {
            if vma.flags() & flags::MERGEABLE == 0 || !vma.has_anon_vma() {
                continue;
            }
            let mut addr = vma.start();
            while addr < vma.end() {
                if slot.mm.is_exiting() {
                    break;
                }
                if kthread::signal_pending() {
                    return Err(ERESTARTSYS);
                }
                mmksm::break_ksm(vma, addr, None)?;
                addr += PAGE_SIZE;
            }
        }
        Ok(())
    }

    fn start_pass(&mut self) {
        if knobs::ADVISOR_SCAN_TIME.load(Relaxed) {
            self.advisor.start_ns = kthread::ktime_ns();
        }
        trace::start_scan(self.seqnr, self.rmap_items as u64);
        // Pages in per-CPU LRU caches have a raised count that stops write-protection.
        mm::lru_add_drain_all();
        self.trees.reset_unstable();
        self.trees.retry_misplaced(&self.backend, &mut self.token);
    }

    fn end_pass(&mut self) {
        if knobs::ADVISOR_SCAN_TIME.load(Relaxed) {
            self.scan_time_advisor();
        }
        trace::stop_scan(self.seqnr, self.rmap_items as u64);
        self.seqnr += 1;
        self.publish();
    }

    /// C's `scan_time_advisor()`: scales `pages_to_scan` so that a pass takes about
    /// `advisor_target_scan_time` seconds, within the CPU bounds.
    fn scan_time_advisor(&mut self) {
        let a = &mut self.advisor;
        let scan_time = (((kthread::ktime_ns() - a.start_ns) / 1_000_000_000) as u64).max(1);
        let cpu = kthread::current_runtime_ns();
        let cpu_ms = cpu.saturating_sub(a.cpu_ns) / 1_000_000;
        let cpu_percent = ((cpu_ms * 100) / (scan_time * 1000)).max(1);
        let last = if a.scan_time != 0 {
            a.scan_time
        } else {
            scan_time
        };
        let target = knobs::ADVISOR_TARGET_SCAN_TIME.load(Relaxed) as u64;
        let factor = (target * 100 / scan_time).max(1);
        let change = (scan_time * 100 / last).max(1);
        let change = ((100 - 30) * a.change + 30 * change) / 100;
        let cur = knobs::PAGES_TO_SCAN.load(Relaxed) as u64;
        let mut pages = cur * 100 / factor;
        pages = pages * change / 100;
        let per_page_cost = (cur / cpu_percent).max(1);
        pages = pages.min(per_page_cost * knobs::ADVISOR_MAX_CPU.load(Relaxed) as u64);
        pages = pages.max(per_page_cost * 10);
        pages = pages.min(knobs::ADVISOR_MAX_PAGES.load(Relaxed) as u64);
        a.change = change;
        a.scan_time = scan_time;
        a.cpu_ns = cpu;
        knobs::PAGES_TO_SCAN.store(pages as u32, Relaxed);
        trace::advisor(scan_time as i64, pages as usize, cpu_percent as u32);
    }

    /// Unmerges every KSM page of every registered address space and frees every rmap_item
    /// (C's `unmerge_and_remove_all_rmap_items()`), for `run = 2`.
    fn unmerge_all(&mut self, k: &Ksm) -> Result {
        let mut next = k.slots.lock().rewind();
        while let Some(slot) = next {
            let guard = slot.mm.mmap_read_lock();
            if let Err(e) = Self::unmerge_slot(&slot, &guard) {
                drop(guard);
                let mut sl = k.slots.lock();
                sl.cursor = sl.slots.len();
                return Err(e);
            }
            slot.items.get_mut(&mut self.slots_token).rewind();
            self.remove_trailing(&slot);
            drop(guard);
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
        let _ = self
            .trees
            .remove_all_stable_nodes(&self.backend, &mut self.token);
        self.seqnr = 0;
        self.publish();
        Ok(())
    }
}

/// Registers `mm` with KSM (C's `__ksm_enter()`).
pub(crate) fn enter(mm: &Mm) -> Result {
    let k = ksm();
    let slot = Arc::new(
        MmSlot {
            mm: mm.into(),
            items: TokenCell::new(SList::new()),
            nr_items: AtomicUsize::new(0),
        },
        GFP_KERNEL,
    )?;
    let needs_wakeup = k.nr_slots.load(Relaxed) == 0;
    {
        let mut sl = k.slots.lock();
        // Normally just behind the cursor, to let the area settle a little (a fork followed by
        // an exec should not make ksmd set up and tear down its items); when unmerging, at the
        // end, ahead of the cursor, so that its KSM pages are not missed.
        if knobs::RUN.load(Relaxed) & RUN_UNMERGE != 0 {
            let end = sl.slots.len();
            let at_head = sl.cursor == end;
            sl.insert_at(end, slot)?;
            if at_head {
                sl.cursor += 1;
            }
        } else {
            let at = sl.cursor;
            sl.insert_at(at, slot)?;
            sl.cursor += 1;
        }
        k.nr_slots.fetch_add(1, Relaxed);
    }
    mm.set_flag(MmFlag::VmMergeable);
    if needs_wakeup {
        wake_thread();
    }
    trace::enter(mm.as_raw().cast());
    Ok(())
}

/// `mm` is going away (C's `__ksm_exit()`): a slot that has no rmap_items and is not being
/// scanned goes at once; otherwise it moves just after the cursor for `ksmd` to free, and the
/// mmap lock is taken and dropped to wait for any unmerging in progress on it.
pub(crate) fn exit(mm: &Mm) {
    let k = ksm();
    let mut gone = None;
    let mut found = false;
    {
        let mut sl = k.slots.lock();
        if let Some(i) = sl.find(mm) {
            found = true;
            if i != sl.cursor {
                if sl.slots[i].nr_items.load(Relaxed) == 0 {
                    gone = Some(sl.remove(i));
                    k.nr_slots.fetch_sub(1, Relaxed);
                } else {
                    // Just after the cursor (at the front if the cursor is at the head). The
                    // vector has room: one slot was just taken out.
                    let s = sl.remove(i);
                    if sl.cursor == sl.slots.len() {
                        let _ = sl.insert_at(0, s);
                        sl.cursor += 1;
                    } else {
                        let at = sl.cursor + 1;
                        let _ = sl.insert_at(at, s);
                    }
                }
            }
        }
    }
    if let Some(slot) = gone {
        mm.clear_flag(MmFlag::VmMergeAny);
        mm.clear_flag(MmFlag::VmMergeable);
        drop(slot);
    } else if found {
        drop(mm.mmap_write_lock());
    }
    trace::exit(mm.as_raw().cast());
}

/// Whether `run` says unmerging.
pub(crate) fn unmerging() -> bool {
    knobs::RUN.load(Relaxed) & RUN_UNMERGE != 0
}
