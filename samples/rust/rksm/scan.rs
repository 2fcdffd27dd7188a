// SPDX-License-Identifier: GPL-2.0

//! The scanner: the address spaces registered with KSM, walked a batch of pages at a time by
//! the `ksmd` thread, and fed to the trees, by `ksmd` alone or with helper threads
//! (`scan_threads`).
//!
//! # Shards
//!
//! The trees are split into [`NR_SHARDS`] shards by page checksum ([`ShardSet`]), and every
//! scanner thread runs the per-page [`Step`] over them: see [`crate::step`].
//!
//! `ksmd` gathers a batch of pages of one address space under one mmap lock hold (taking their
//! items off its list, so that it owns them meanwhile), then merges them: in order by itself
//! with one thread (C's order, C walking one page between merges), or with the helpers of its
//! [`Crew`], which take the pages from a shared counter. It puts the items back and walks on once
//! every page is done.
//!
//! # Locks
//!
//! - `Ksm::scan` (C's `ksm_thread_mutex`) holds the scanner's state: the rmap_items and the
//!   cursor. `ksmd` holds it for a batch, helpers work for it meanwhile; the sysfs stores that
//!   change the trees take it, and then each shard lock in turn (nothing else runs in the shards
//!   while they hold it).
//! - `Ksm::shards`: each shard's lock, taken inside the scan lock, around the page and mmap locks
//!   the tree work takes.
//! - `Ksm::slots` (C's `ksm_mmlist_lock`, a mutex here) holds the list of registered address
//!   spaces and the scan cursor's place in it, which registration and exit change from process
//!   context without the scan lock. It nests inside the mmap lock, never around it.
//! - An address space's mmap lock is held for reading while its areas are walked; the trees are
//!   worked on with no mmap lock held (a page reference keeps the page).
//! - [`SlotsToken`], in [`ScanState`], governs each address space's list of rmap_items.

use crate::backend::Backend;
use crate::item::{RmapItem, MAX_NIDS, MAX_SHARDS};
use crate::real::{KsmBackend, KsmToken, Mapping, Page};
use crate::shards::{Shard, ShardSet};
use crate::step::Step;
use crate::trees::Trees;
use crate::tunables::{self, NR_SHARDS, RUN_MERGE, RUN_STOP, RUN_UNMERGE, STATS};
use core::sync::atomic::{
    AtomicBool, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use kernel::alloc::KVVec;
use kernel::c_str;
use kernel::global::Global;
use kernel::hlist::{Token, TokenCell};
use kernel::kthread::{self, Crew, KThread, WaitQueue, WorkList};
use kernel::mm::folio::HeldPage;
use kernel::mm::hotplug::{MemoryEvent, MemoryListener, MemoryNotifier};
use kernel::mm::ksm::trace;
use kernel::mm::pgtable;
use kernel::mm::virt::flags;
use kernel::mm::{self, Mm, MmFlag, MmapReadGuard};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::slist::SList;
use kernel::str::CString;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};
use kernel::types::ARef;

// One token per shard, and no more shards than an item can record.
const _: () = assert!(NR_SHARDS == KsmToken::IDS && NR_SHARDS <= MAX_SHARDS);

/// The most scanner threads (`scan_threads`), `ksmd` included.
pub(crate) const MAX_SCAN_THREADS: u32 = 16;

/// How many pages `ksmd` gathers for a batch (C walks to one page at a time). Each batch costs a
/// walk start under the mmap lock, putting its items back, publishing the counters of the shards
/// it changed and, with helpers, a hand-over during which a helper waits. With two threads,
/// 4096 pages ran the prefix workload 6% faster than 1024 (`scripts/dev/ab.sh`, TCG, four runs
/// each; one thread: no difference), and two threads taking pages from both ends of a batch
/// still work in different page tables until they meet, rather than waiting for each other's
/// page table lock. The pages of a batch keep a reference until they are merged, so more is not
/// free either. (The batch vectors, 96 KiB each, are `kvmalloc`ed once at init.)
const BATCH: usize = 4096;

/// The fewest pages of a batch that `ksmd` shares with its helpers. Waking a helper costs more
/// than a few pages take, and a small batch is most often the end of a small address space:
/// merged by `ksmd` alone, its pages are visited just before the pass ends, as with one thread
/// (the selftest `ksm_tests -U` writes two pages and expects the pass that ends next to have
/// seen the writes; waiting for a helper there made that pass end later).
const SHARED_BATCH: usize = 32;

/// A scanner thread takes this many pages of a batch at a time, and offers to reschedule between
/// them.
const RESCHED_EVERY: usize = 8;

kernel::define_token!(pub(crate) SlotsToken);

/// The size of an rmap_item, which the profit counters charge per tracked page.
pub(crate) const ITEM_SIZE: usize = core::mem::size_of::<RmapItem<KsmBackend>>();

// Every tracked page costs no more than in C KSM, whose `struct ksm_rmap_item` is 64 bytes.
const _: () = assert!(ITEM_SIZE <= 64);

// A stable node (with the checksum that orders it) fits the 64-byte slab of C's
// `struct ksm_stable_node`.
const _: () = assert!(core::mem::size_of::<crate::stable::StableNode<KsmBackend>>() <= 64);

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

/// Publishes the counters of `shard` for sysfs ([`tunables::TREE_STATS`]).
fn publish_shard(shard: &Shard<KsmBackend>) {
    let c = &shard.trees.counters;
    let out = &tunables::TREE_STATS[shard.token.id()];
    out.pages_shared.store(c.pages_shared as i64, Relaxed);
    out.pages_sharing.store(c.pages_sharing as i64, Relaxed);
    out.pages_unshared
        .store(shard.trees.unshared() as i64, Relaxed);
    out.chains.store(c.chains as i64, Relaxed);
    out.dups.store(c.dups as i64, Relaxed);
}

/// A page of a batch, with its rmap_item, taken off its address space's list meanwhile.
struct Entry {
    item: Pin<KBox<Item>>,
    /// The page to merge; `None` if smart scanning skips it this pass (the item only leaves
    /// its tree).
    page: Option<Page>,
}

/// What gathering a batch of pages stopped at.
enum Gathered {
    /// The batch is full.
    Full,
    /// The end of the address space's mergeable areas.
    SlotEnd,
    /// No memory for an rmap_item.
    NoMemory,
}

/// The scanner's state (C's `ksm_scan`), under the scan lock.
pub(crate) struct ScanState {
    slots_token: SlotsToken,
    /// The batches being worked on (empty between scans; each has room for `BATCH`).
    batch: KVVec<Entry>,
    spare: KVVec<Entry>,
    /// The pages of one page table that gathering found (empty between gatherings, with room for
    /// `BATCH`).
    found: KVVec<(usize, HeldPage)>,
    /// Items taken off their list while an mmap lock was held, to free once it is dropped (a
    /// shard lock, which freeing takes, is never taken inside an mmap lock: tree work takes
    /// mmap locks inside shard locks).
    doomed: KVec<Pin<KBox<Item>>>,
    address: usize,
    seqnr: u64,
    rmap_items: usize,
    pages_scanned: u64,
    pages_skipped: u64,
    advisor: Advisor,
    /// Memory is going offline: the trees are left alone until it is done (C's
    /// `KSM_RUN_OFFLINE`, see [`Offlining`]).
    offlining: bool,
}

/// The scan-time advisor's state (C's `struct advisor_ctx`).
#[derive(Default)]
struct Advisor {
    start_ns: i64,
    scan_time: u64,
    change: u64,
    cpu_ns: u64,
}

/// KSM's global state.
#[pin_data]
pub(crate) struct Ksm {
    #[pin]
    scan: Mutex<ScanState>,
    /// Signalled when memory that was going offline is done ([`ScanState::offlining`]).
    #[pin]
    offline_done: CondVar,
    shards: ShardSet<KsmBackend>,
    #[pin]
    backend: KsmBackend,
    /// The helpers of `ksmd` (`scan_threads - 1` of them join a batch).
    #[pin]
    crew: Crew,
    /// How many helper threads were started (they are never stopped).
    helpers: AtomicUsize,
    /// `ksmd` and its helpers, in order (the lock orders their starts).
    #[pin]
    threads: Mutex<KVec<KThread>>,
    #[pin]
    slots: Mutex<SlotList>,
    #[pin]
    thread_wait: WaitQueue,
    #[pin]
    iter_wait: WaitQueue,
    nr_slots: AtomicUsize,
}

pub(crate) static KSM: Global<Ksm> = Global::new();

/// Set once rksm's init has succeeded: only then do address spaces register ([`enter`]).
static READY: AtomicBool = AtomicBool::new(false);

/// The global state, for code that runs only once an address space registered, or from the
/// threads and files that init starts after setting it: registration needs [`READY`], which
/// init sets last.
fn ksm() -> Pin<&'static Ksm> {
    KSM.get().expect("rksm used before its init")
}

/// rksm's init succeeded (its threads run, its files exist): address spaces may register.
pub(crate) fn set_ready() {
    READY.store(true, Release);
}

/// Builds the global state and starts `ksmd`.
pub(crate) fn init() -> Result {
    let zero_checksum = mm::folio::FolioPage::zero(0).bytes().checksum();
    if mm::nr_node_ids() > MAX_NIDS {
        return Err(EINVAL);
    }
    let shards = ShardSet::new(NR_SHARDS, mm::nr_node_ids(), |i| {
        KsmToken::acquire_nth(i).ok_or(EBUSY)
    })?;
    let state = ScanState {
        slots_token: SlotsToken::acquire().ok_or(EBUSY)?,
        batch: KVVec::with_capacity(BATCH, GFP_KERNEL)?,
        spare: KVVec::with_capacity(BATCH, GFP_KERNEL)?,
        found: KVVec::with_capacity(BATCH, GFP_KERNEL)?,
        doomed: KVec::new(),
        address: 0,
        seqnr: 0,
        rmap_items: 0,
        pages_scanned: 0,
        pages_skipped: 0,
        advisor: Advisor::default(),
        offlining: false,
    };
    let backend = KsmBackend::new(zero_checksum)?;
    let ksm = KBox::pin_init(
        pin_init!(Ksm {
            scan <- new_mutex!(state, "ksm_thread_mutex"),
            offline_done <- new_condvar!("ksm_offline_done"),
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
            shards,
            backend <- backend,
            crew <- Crew::new(),
            helpers: AtomicUsize::new(0),
            threads <- new_mutex!(KVec::new(), "ksm_threads"),
        }),
        GFP_KERNEL,
    )?;
    KSM.set(ksm).map_err(|_| EBUSY)?;
    // SAFETY: rksm is built in (`CONFIG_KSM_RUST` is a bool), and init runs once.
    unsafe { OFFLINING.register()? };
    let thread = kthread::run(ksmd, c_str!("ksmd"))?;
    self::ksm().threads.lock().push(thread, GFP_KERNEL)?;
    Ok(())
}

impl Ksm {
    /// Takes the scan lock once no memory is going offline (C's `mutex_lock(&ksm_thread_mutex)`
    /// and `wait_while_offlining()`): what walks or changes every tree waits meanwhile.
    fn lock_scan(&self) -> Guard<'_, ScanState, MutexBackend> {
        let mut st = self.scan.lock();
        while st.offlining {
            self.offline_done.wait(&mut st);
        }
        st
    }
}

/// What rksm does while memory goes offline (C's `ksm_memory_callback()`): offlining migrates
/// every KSM page out of the range, moving its stable node with it; once the range is offline,
/// the nodes still recording a frame in it are stale and are taken out, before the range's
/// `struct page`s may go (they are poisoned at once, and may be unmapped later). The unstable
/// trees are emptied too, as a new pass would: their items recorded the frames their pages had
/// when they went in (C's unstable tree records none), and those pages may have moved. Meanwhile
/// `ksmd` and whatever walks every tree wait.
struct Offlining;

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

static OFFLINING: MemoryNotifier<Offlining> = MemoryNotifier::new();

/// Wakes `ksmd` if it waits for work.
pub(crate) fn wake_thread() {
    ksm().thread_wait.wake_up_interruptible();
}

/// Wakes `ksmd` from its sleep between batches (the sleep time changed).
pub(crate) fn wake_iter() {
    ksm().iter_wait.wake_up_interruptible();
}

fn should_run() -> bool {
    tunables::RUN.load(Relaxed) & RUN_MERGE != 0 && ksm().nr_slots.load(Relaxed) != 0
}

/// `ksmd` (C's `ksm_scan_thread()`).
fn ksmd() {
    kthread::set_freezable();
    kthread::set_current_nice(5);
    let k = ksm();
    while !kthread::should_stop() {
        {
            let mut st = k.lock_scan();
            if should_run() {
                st.do_scan(&k, tunables::PAGES_TO_SCAN.load(Relaxed) as usize);
            }
        }
        if should_run() {
            let ms = tunables::SLEEP_MS.load(Relaxed);
            k.iter_wait.wait_freezable(
                || ms != tunables::SLEEP_MS.load(Relaxed),
                Some(kthread::msecs_to_jiffies(ms)),
            );
        } else {
            k.thread_wait
                .wait_freezable(|| should_run() || kthread::should_stop(), None);
        }
    }
}

/// A helper of `ksmd` (`ksmd/1`, ...): works on the batches `ksmd` shares.
fn ksmd_helper() {
    kthread::set_freezable();
    kthread::set_current_nice(5);
    ksm().crew.serve();
}

/// Sets `scan_threads`, starting helper threads as needed. It does not wait for the scan in
/// progress: each wakeup of `ksmd` reads the knob once, when it starts, and a batch hands work
/// only to helpers that were running when it read their number.
pub(crate) fn set_scan_threads(n: u32) -> Result {
    if !(1..=MAX_SCAN_THREADS).contains(&n) {
        return Err(EINVAL);
    }
    let k = ksm();
    // The thread list's lock orders the starts.
    let mut threads = k.threads.lock();
    threads.reserve(n as usize, GFP_KERNEL)?;
    while k.helpers.load(Relaxed) < n as usize - 1 {
        let i = k.helpers.load(Relaxed) + 1;
        let name = CString::try_from_fmt(kernel::fmt!("ksmd/{i}"))?;
        let thread = kthread::run(ksmd_helper, &name)?;
        // Cannot fail: room was made above.
        let _ = threads.push_within_capacity(thread);
        k.helpers.store(i, Relaxed);
    }
    // Each scanner thread gets its share of the CPUs, so that they work side by side; one
    // thread, `ksmd` alone, may run anywhere, as C's does.
    for (i, t) in threads.iter().enumerate().take(n as usize) {
        t.set_cpu_share(i, n as usize)?;
    }
    tunables::SCAN_THREADS.store(n, Relaxed);
    Ok(())
}

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
fn change_trees<P>(
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

impl Ksm {
    /// Runs `f` on shard `i` under its lock, then publishes its counters.
    fn in_shard<R>(
        &self,
        i: usize,
        f: impl FnOnce(&mut Trees<KsmBackend>, &mut KsmToken) -> R,
    ) -> R {
        let mut sh = self.shards.lock(i);
        let Shard { trees, token } = &mut *sh;
        let r = f(trees, token);
        publish_shard(&sh);
        r
    }

    /// Publishes the counters of the shards the batch worked in (it is done). Only those: a pass
    /// ends right after its last batch, and a test that changes pages just after one pass ends
    /// expects the pass that ends next to have seen the changes, as in C, where it ends on the
    /// last page.
    fn publish_shards(&self) {
        let mut dirty = self.shards.take_changed();
        while dirty != 0 {
            let i = dirty.trailing_zeros() as usize;
            dirty &= dirty - 1;
            publish_shard(&self.shards.lock(i));
        }
    }

    /// Takes `item` out of the tree or stable node it is in.
    fn remove_item(&self, item: &Item) {
        self.in_shard(item.shard(), |t, token| {
            t.remove_item(&self.backend, token, item)
        });
    }

    /// The per-page step over the shards, for one of the scanner threads: its shards' counters
    /// are published at the end of the batch ([`Ksm::publish_shards`]).
    fn step(&self) -> Step<'_, KsmBackend, &ShardSet<KsmBackend>> {
        Step::new(
            &self.backend,
            &self.shards,
            tunables::CHAINS_PRUNE_MS.load(Relaxed),
        )
    }

    /// Runs the tree algorithm for every page of `batch`, on `threads` threads at most (this
    /// one and helpers). Each page's reference is dropped as soon as it is done with, as with
    /// one page at a time: a reference more makes a page fail the merge's reference count check
    /// when another page of the batch meets it in the unstable tree.
    ///
    /// Meanwhile the calling thread runs `own` first, and then joins the work; its result is
    /// returned.
    fn merge_batch<R>(&self, batch: &mut [Entry], threads: usize, own: impl FnOnce() -> R) -> R {
        let n = batch.len();
        let work = WorkList::new(batch);
        // Threads take pages from both ends of the batch: until they meet, they work in
        // different page tables and do not wait for each other's page table locks.
        let job = |i: usize| {
            // A few pages at a time: one atomic operation on the list's shared ends for each
            // few, not for each page (the threads would hand its cache line to and fro).
            let take = || {
                if i % 2 == 0 {
                    work.take_some(RESCHED_EVERY)
                } else {
                    work.take_some_back(RESCHED_EVERY)
                }
            };
            let mut step = self.step();
            let mut one = |e: &mut Entry| match e.page.take() {
                Some(page) => {
                    step.cmp_and_merge(e.item.as_ref(), &page);
                }
                None => step.remove_item(&e.item),
            };
            // A chance to reschedule every few pages, not after the last one: the pass may end
            // right after it, and should do so as soon after looking at its pages as C's does.
            // (A call per page was 4% of a thread's time; a few pages take microseconds.)
            let mut first = true;
            loop {
                let some = take();
                if some.is_empty() {
                    break;
                }
                if !first {
                    kthread::cond_resched();
                }
                first = false;
                if i % 2 == 0 {
                    some.iter_mut().for_each(&mut one);
                } else {
                    some.iter_mut().rev().for_each(&mut one);
                }
            }
        };
        let helpers = if n < SHARED_BATCH {
            0
        } else {
            (threads - 1).min(self.helpers.load(Relaxed)).min(n - 1)
        };
        self.crew.run_beside(helpers, &job, own)
    }
}

impl ScanState {
    /// Publishes the statistics of the scan for sysfs (each shard publishes its own).
    fn publish(&self) {
        STATS
            .pages_scanned
            .store(self.pages_scanned as i64, Relaxed);
        STATS
            .pages_skipped
            .store(self.pages_skipped as i64, Relaxed);
        STATS.rmap_items.store(self.rmap_items as i64, Relaxed);
        STATS.full_scans.store(self.seqnr as i64, Relaxed);
    }

    /// Scans up to `n` pages (C's `ksm_do_scan()`), in batches of one address space: with one
    /// scanner thread merged in order by `ksmd`, with more shared with the helpers.
    fn do_scan(&mut self, k: &Ksm, n: usize) {
        let threads = (tunables::SCAN_THREADS.load(Relaxed) as usize).max(1);
        let mut left = n;
        // `cur`: the batch to run next, of `slot`, and what gathering it stopped at.
        let mut cur = core::mem::replace(&mut self.batch, KVVec::new());
        let mut next = core::mem::replace(&mut self.spare, KVVec::new());
        let mut at: Option<(Arc<MmSlot>, Gathered)> = None;
        loop {
            let (slot, gathered) = match at.take() {
                Some(a) => a,
                None => {
                    if left == 0 || kthread::freezing() {
                        break;
                    }
                    kthread::cond_resched();
                    let Some(slot) = self.slot_to_scan(k) else {
                        break;
                    };
                    let g = self.gather(k, &slot, &mut cur, left.min(BATCH));
                    self.free_doomed(k, &slot);
                    (slot, g)
                }
            };
            let pages = cur.iter().filter(|e| e.page.is_some()).count();
            left -= pages;
            // While the helpers run this batch, `ksmd` gathers the next one of the same address
            // space (their items are off its list, so the walk does not meet them).
            let ahead = matches!(gathered, Gathered::Full)
                && threads > 1
                && left > 0
                && !kthread::freezing();
            let ahead = k.merge_batch(&mut cur, threads, || {
                ahead.then(|| self.gather(k, &slot, &mut next, left.min(BATCH)))
            });
            self.free_doomed(k, &slot);
            self.put_back(&slot, &mut cur);
            // The batch's pages are let go of: the large folios its merges could not split may
            // be split now.
            k.backend.split_deferred();
            self.pages_scanned += pages as u64;
            k.publish_shards();
            self.publish();
            if let Some(g) = ahead {
                core::mem::swap(&mut cur, &mut next);
                at = Some((slot, g));
                continue;
            }
            match gathered {
                Gathered::Full => {}
                Gathered::NoMemory => break,
                Gathered::SlotEnd => {
                    if !self.next_slot(k, slot) {
                        break;
                    }
                }
            }
        }
        self.batch = cur;
        self.spare = next;
        self.publish();
    }

    /// Frees the items that gathering took off `slot`'s list.
    fn free_doomed(&mut self, k: &Ksm, slot: &MmSlot) {
        while let Some(item) = self.doomed.pop() {
            self.free_item(k, slot, item);
        }
    }

    /// Puts the items of `batch` back on `slot`'s list, just before its cursor, in order, and
    /// drops what is left of the batch.
    fn put_back(&mut self, slot: &MmSlot, batch: &mut KVVec<Entry>) {
        let list = slot.items.get_mut(&mut self.slots_token);
        let n = batch.len();
        while let Some(e) = batch.pop() {
            // Cannot fail: an item's links are at their declared offset.
            let _ = list.insert(e.item);
        }
        for _ in 0..n {
            list.advance();
        }
    }

    /// Frees an rmap_item taken off its slot's list: out of the trees first.
    fn free_item(&mut self, k: &Ksm, slot: &MmSlot, item: Pin<KBox<Item>>) {
        k.remove_item(&item);
        self.rmap_items -= 1;
        slot.nr_items.fetch_sub(1, Relaxed);
        item.mapping().mm().ksm_counters().add_rmap_items(-1);
        drop(item);
    }

    /// Takes out and frees every rmap_item of `slot` from its cursor on (C's
    /// `remove_trailing_rmap_items()`).
    fn remove_trailing(&mut self, k: &Ksm, slot: &MmSlot) {
        while let Some(item) = slot.items.get_mut(&mut self.slots_token).remove_current() {
            self.free_item(k, slot, item);
        }
    }

    /// Leaves the slot's list cursor at the rmap_item for `addr`, creating one if needed, and
    /// takes the items before it that were not met off the list, to be freed once the mmap lock
    /// is dropped (C's `get_next_rmap_item()`). `false` if no memory could be had.
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
            // Its address was not mapped, or not mergeable, this time: drop it (once the mmap
            // lock is dropped).
            if self.doomed.reserve(1, GFP_KERNEL).is_err() {
                return false;
            }
            if let Some(stale) = slot.items.get_mut(&mut self.slots_token).remove_current() {
                if let Err(stale) = self.doomed.push_within_capacity(stale) {
                    // Cannot be (room was made); an item in a tree must not be dropped.
                    let _ = slot.items.get_mut(&mut self.slots_token).insert(stale);
                    return false;
                }
            }
        }
        let Ok(item) = KBox::pin(
            RmapItem::new(Mapping::new(slot.mm.clone(), addr)),
            GFP_KERNEL | __GFP_NORETRY | __GFP_NOWARN,
        ) else {
            return false;
        };
        // A new item is in no tree: any shard's lock will do to see that; spread them.
        item.set_shard((addr / PAGE_SIZE) % NR_SHARDS);
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
    /// and less often. A skipped page's item only leaves its tree (see [`ScanState::gather`]).
    fn should_skip(&mut self, k: &Ksm, slot: &MmSlot, page: &Page) -> bool {
        if !tunables::SMART_SCAN.load(Relaxed) || k.backend.is_ksm(page) {
            return false;
        }
        let Some(item) = slot.items.get(&self.slots_token).current() else {
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
        self.pages_skipped += 1;
        true
    }

    /// The address space being scanned, with the scan address and its list cursor where the
    /// scan is in it; at the head, a pass starts. `None` when nothing is registered.
    fn slot_to_scan(&mut self, k: &Ksm) -> Option<Arc<MmSlot>> {
        let sl = k.slots.lock();
        if sl.slots.is_empty() {
            return None;
        }
        if let Some(s) = sl.current() {
            return Some(s);
        }
        drop(sl);
        self.start_pass(k);
        let s = k.slots.lock().rewind()?;
        self.address = 0;
        s.items.get_mut(&mut self.slots_token).rewind();
        Some(s)
    }

    /// Gathers up to `want` pages of `slot`, from the scan address on, into `batch`, taking
    /// their items off the slot's list (C's inner loop of `scan_get_next_rmap_item()`, for
    /// several pages under one mmap lock). Pages that smart scanning skips are in the batch too,
    /// without their page.
    fn gather(
        &mut self,
        k: &Ksm,
        slot: &MmSlot,
        batch: &mut KVVec<Entry>,
        want: usize,
    ) -> Gathered {
        if batch.len() >= want {
            return Gathered::Full;
        }
        let mut found = core::mem::replace(&mut self.found, KVVec::new());
        let gathered = self.gather_into(k, slot, batch, want, &mut found);
        // Pages found but not taken (the walk stopped early) are let go.
        while found.pop().is_some() {}
        self.found = found;
        gathered
    }

    /// [`ScanState::gather`], with `found` (empty, with room for `BATCH`) for the pages of one
    /// page table at a time.
    fn gather_into(
        &mut self,
        k: &Ksm,
        slot: &MmSlot,
        batch: &mut KVVec<Entry>,
        want: usize,
        found: &mut KVVec<(usize, HeldPage)>,
    ) -> Gathered {
        let guard = slot.mm.mmap_read_lock();
        // One walk of the areas from the scan address on, a page table at a time within each.
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
                    return Gathered::SlotEnd;
                }
                kthread::cond_resched();
                let next =
                    pgtable::anon_pages(vma, self.address, vma.end(), found, want - batch.len());
                // In address order, as the slot's list of items is.
                found.as_mut_slice().reverse();
                while let Some((addr, held)) = found.pop() {
                    let page = Page(held);
                    if !self.item_at(slot, addr) {
                        return Gathered::NoMemory;
                    }
                    self.address = addr + PAGE_SIZE;
                    let page = (!self.should_skip(k, slot, &page)).then_some(page);
                    let list = slot.items.get_mut(&mut self.slots_token);
                    if let Some(item) = list.remove_current() {
                        // Room for `BATCH` was made at init, and `want` is at most that.
                        if let Err(e) = batch.push_within_capacity(Entry { item, page }) {
                            let _ = list.insert(e.item);
                            list.advance();
                            return Gathered::Full;
                        }
                    }
                    if batch.len() >= want {
                        return Gathered::Full;
                    }
                }
                // Every address before `next` was looked at.
                self.address = next;
            }
        }
        Gathered::SlotEnd
    }

    /// Finishes the scan of `slot`, whose mergeable areas were all walked, and moves to the next
    /// address space; at the head the pass ends, and `false` is returned.
    fn next_slot(&mut self, k: &Ksm, slot: Arc<MmSlot>) -> bool {
        if slot.mm.is_exiting() {
            self.address = 0;
            slot.items.get_mut(&mut self.slots_token).rewind();
        }
        // The items from the cursor on had no mergeable page this time.
        self.remove_trailing(k, &slot);
        // No mergeable area was met while walking the whole address space (it is exiting, or
        // they were all unmapped): it leaves KSM, as C does, and as in C under the mmap lock,
        // looking at its areas again. A `MADV_MERGEABLE` since the walk saw the address space
        // registered and did not register it again: its area is seen here and the slot stays;
        // one after this sees the flag clear and registers it anew.
        let guard = (self.address == 0).then(|| slot.mm.mmap_read_lock());
        let leaves = guard.as_ref().is_some_and(|g| {
            slot.mm.is_exiting() || !g.vmas_from(0).any(|v| v.flags() & flags::MERGEABLE != 0)
        });
        let mut sl = k.slots.lock();
        let here = sl.cursor;
        let next = sl.advance();
        let removed = leaves && sl.slots.get(here).is_some_and(|s| Arc::ptr_eq(s, &slot));
        if removed {
            sl.remove(here);
            k.nr_slots.fetch_sub(1, Relaxed);
        }
        drop(sl);
        if removed {
            slot.mm.clear_flag(MmFlag::VmMergeable);
        }
        drop(guard);
        match next {
            Some(n) => {
                self.address = 0;
                n.items.get_mut(&mut self.slots_token).rewind();
                true
            }
            None => {
                self.end_pass(k);
                false
            }
        }
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
                pgtable::break_ksm(vma, addr, None)?;
                addr += PAGE_SIZE;
            }
        }
        Ok(())
    }

    fn start_pass(&mut self, k: &Ksm) {
        if tunables::ADVISOR_SCAN_TIME.load(Relaxed) {
            self.advisor.start_ns = kthread::ktime_ns();
        }
        trace::start_scan(self.seqnr, self.rmap_items as u64);
        // Pages in per-CPU LRU caches have a raised count that stops write-protection.
        mm::lru_add_drain_all();
        for i in 0..NR_SHARDS {
            k.in_shard(i, |t, token| {
                t.reset_unstable();
                t.retry_misplaced(&k.backend, token);
            });
        }
    }

    fn end_pass(&mut self, k: &Ksm) {
        if tunables::ADVISOR_SCAN_TIME.load(Relaxed) {
            self.scan_time_advisor(k);
        }
        trace::stop_scan(self.seqnr, self.rmap_items as u64);
        self.seqnr += 1;
        self.publish();
    }

    /// C's `scan_time_advisor()`: scales `pages_to_scan` so that a pass takes about
    /// `advisor_target_scan_time` seconds, within the CPU bounds. The CPU time is that of every
    /// scanner thread, `ksmd`'s helpers included (they do part of the pass's work).
    fn scan_time_advisor(&mut self, k: &Ksm) {
        let a = &mut self.advisor;
        let scan_time = (((kthread::ktime_ns() - a.start_ns) / 1_000_000_000) as u64).max(1);
        let cpu: u64 = k.threads.lock().iter().map(|t| t.runtime_ns()).sum();
        let cpu_ms = cpu.saturating_sub(a.cpu_ns) / 1_000_000;
        let cpu_percent = ((cpu_ms * 100) / (scan_time * 1000)).max(1);
        let last = if a.scan_time != 0 {
            a.scan_time
        } else {
            scan_time
        };
        let target = tunables::ADVISOR_TARGET_SCAN_TIME.load(Relaxed) as u64;
        let factor = (target * 100 / scan_time).max(1);
        let change = (scan_time * 100 / last).max(1);
        let change = ((100 - 30) * a.change + 30 * change) / 100;
        let cur = tunables::PAGES_TO_SCAN.load(Relaxed) as u64;
        let mut pages = cur * 100 / factor;
        pages = pages * change / 100;
        let per_page_cost = (cur / cpu_percent).max(1);
        pages = pages.min(per_page_cost * tunables::ADVISOR_MAX_CPU.load(Relaxed) as u64);
        pages = pages.max(per_page_cost * 10);
        pages = pages.min(tunables::ADVISOR_MAX_PAGES.load(Relaxed) as u64);
        a.change = change;
        a.scan_time = scan_time;
        a.cpu_ns = cpu;
        tunables::PAGES_TO_SCAN.store(pages as u32, Relaxed);
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
            drop(guard);
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

/// Registers `mm` with KSM (C's `__ksm_enter()`).
///
/// Fails with `ENOMEM` if rksm's init failed (it could not allocate what it needs): KSM then
/// stays off, and `madvise(MADV_MERGEABLE)` and `prctl(PR_SET_MEMORY_MERGE)` fail.
pub(crate) fn enter(mm: &Mm) -> Result {
    let k = match KSM.get() {
        Some(k) if READY.load(Acquire) => k,
        _ => return Err(ENOMEM),
    };
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
        if tunables::RUN.load(Relaxed) & RUN_UNMERGE != 0 {
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
    // Nothing registers before init is done.
    let Some(k) = KSM.get() else {
        return;
    };
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
    tunables::RUN.load(Relaxed) & RUN_UNMERGE != 0
}
