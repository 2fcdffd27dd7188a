// SPDX-License-Identifier: GPL-2.0

//! The scanner: the address spaces registered with KSM ([`slots`]), walked a batch of pages at
//! a time ([`pass`]) by the `ksmd` thread and its helpers ([`ksmd`], `scan_threads`), each page
//! fed to the per-page [`Step`] over the trees split into [`NR_SHARDS`] shards ([`ShardSet`],
//! see [`crate::step`]); what changes them from outside a pass ([`control`]: `run`, the knobs
//! that need empty trees, memory going offline), and the scan-time [`advisor`].
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
use crate::domain::Scope;
use crate::item::{RmapItem, MAX_NIDS, MAX_SHARDS};
use crate::real::{KsmBackend, KsmToken, Mapping, Page};
use crate::shards::{Shard, ShardSet};
use crate::step::Step;
use crate::trees::{Outcome, Trees};
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
use kernel::mm::pgtable::{self, KsmSearch};
use kernel::mm::virt::{flags, VmArea};
use kernel::mm::{self, Mm, MmFlag, MmWriteLocked};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::slist::SList;
use kernel::str::CString;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};
use kernel::time::Ktime;
use kernel::types::ARef;

mod advisor;
mod control;
mod ksmd;
mod pass;
mod slots;

use advisor::*;
use control::*;
use ksmd::*;
use pass::*;
use slots::*;

pub(crate) use advisor::reset_advisor;
#[cfg(CONFIG_KUNIT)]
pub(crate) use control::tree_knobs;
pub(crate) use control::{
    merge_scope, set_max_page_sharing, set_merge_across_nodes, set_merge_scope, set_run,
    unmerge_range,
};
pub(crate) use ksmd::{set_scan_threads, wake_iter, wake_thread};
pub(crate) use slots::{enter, exit, unmerging};

// One token per shard, and no more shards than an item can record.
const _: () = assert!(NR_SHARDS == KsmToken::IDS && NR_SHARDS <= MAX_SHARDS);

/// The most scanner threads (`scan_threads`), `ksmd` included.
pub(crate) const MAX_SCAN_THREADS: u32 = 16;

/// The size of an rmap_item, which the profit counters charge per tracked page.
pub(crate) const ITEM_SIZE: usize = core::mem::size_of::<RmapItem<KsmBackend>>();

// Every tracked page costs no more than in C KSM, whose `struct ksm_rmap_item` is 64 bytes.
const _: () = assert!(ITEM_SIZE <= 64);

// A stable node is as large as C's `struct ksm_stable_node` (64 bytes) although it also holds
// the checksum and merge domain that order it: one cache line of the 64-byte kmalloc cache per
// KSM page (`pages_shared`), as C's nodes have a 64-byte cache of their own.
const _: () = assert!(core::mem::size_of::<crate::stable::StableNode<KsmBackend>>() <= 64);

type Item = RmapItem<KsmBackend>;

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
            // The shards' (set with them under the scan lock, which the scanner threads run in).
            merge_scope(),
        )
        // The pass number (`ScanState::seqnr`, published at each pass's end), which smart
        // scanning's schedule counts in too: the volatility gate's rechecks fall in passes that
        // look at the page (`item::recheck_due`).
        .in_pass(tunables::STATS.full_scans.load(Relaxed) as u32)
    }
}
