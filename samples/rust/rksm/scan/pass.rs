// SPDX-License-Identifier: GPL-2.0

//! A pass of the scanner (C's `ksm_do_scan()` and `scan_get_next_rmap_item()`): `ksmd` gathers a
//! batch of pages of one address space under one mmap lock hold (taking their items off its
//! list, so that it owns them meanwhile), then merges them, by itself in order with one thread
//! (C's order), or with the helpers of its [`Crew`], which take the pages from both ends of the
//! batch; it puts the items back and walks on once every page is done. Smart scanning skips
//! pages that have not merged for a while.

use super::*;

/// The most pages `ksmd` gathers for a batch (C walks to one page at a time). Each batch costs a
/// walk start under the mmap lock, putting its items back, publishing the counters of the shards
/// it changed and, with helpers, a hand-over during which a helper waits: fewer, larger batches
/// cost less (the measurement is in Documentation/mm/rksm-measurements.rst, "The batch size"),
/// and two threads taking pages from
/// both ends of a large batch work in different page tables until they meet, rather than
/// waiting for each other's page table lock. The pages of a batch keep a reference until they
/// are merged, so more is not free either (see [`PINNED_SHARE`]). A batch's cost is in the
/// bytes its pages hold, which each merge reads: it is [`BATCH_BYTES`] of pages, 4096 of 4 KiB
/// or 256 of 64 KiB. (The batch vectors, 24 bytes a page, are `kvmalloc`ed once at init.)
pub(super) const BATCH: usize = BATCH_BYTES / PAGE_SIZE;

/// The memory whose pages make a batch ([`BATCH`]).
const BATCH_BYTES: usize = 16 << 20;

/// A batch holds at most this share of its address space's pages (counted by their rmap_items):
/// `1 / PINNED_SHARE` (all of them if they are few: see [`SMALL_SPACE`]). A page keeps its
/// reference from the walk until it is merged, and a page with a reference more can be neither
/// migrated (compaction, `move_pages()`) nor split and swapped out (`MADV_PAGEOUT` of part of a
/// large folio). With whole batches of [`BATCH`] pages,
/// a small process had most of its pages held at any moment while `ksmd` ran, where C holds
/// one: the mm selftest `cow`, run with every process merged, could not swap out twice as many
/// of its huge pages as on C. Large address spaces, where batches pay, still get them.
const PINNED_SHARE: usize = 64;

/// The most page tables a batch's walk looks at in one hold of the address space's mmap lock,
/// between two offers to reschedule and looks at its exit (C's scan does both at every page
/// table).
const WALK_TABLES: usize = 16;

/// The most pages a batch's walk takes in one hold of the address space's mmap lock. C holds
/// it for one page at a time; holding it for a whole batch made the longest hold under TCG
/// 2.5 times C's (`make bench PARTS=cost`), a wait for the process's own `mmap()` and
/// `munmap()`. Taking a page's item and the smart-scan decision need no mmap lock: they are
/// made between holds.
const HOLD_PAGES: usize = 256;

/// The fewest pages of a batch that `ksmd` shares with its helpers. Waking a helper costs more
/// than a few pages take, and a small batch is most often the end of a small address space:
/// merged by `ksmd` alone, its pages are visited just before the pass ends, as with one thread
/// (the selftest `ksm_tests -U` writes two pages and expects the pass that ends next to have
/// seen the writes; waiting for a helper there made that pass end later).
pub(super) const SHARED_BATCH: usize = 32;

/// A scanner thread takes this many pages of a batch at a time, and offers to reschedule between
/// them: 32 KiB of pages (eight of 4 KiB), at least one, as the time between two offers is
/// mostly the reading of their bytes.
pub(super) const RESCHED_EVERY: usize = if PAGE_SIZE >= 32 << 10 {
    1
} else {
    (32 << 10) / PAGE_SIZE
};

/// A page of a batch, with its rmap_item, taken off its address space's list meanwhile.
pub(super) struct Entry {
    pub(super) item: Pin<KBox<Item>>,
    /// The page to merge; `None` if smart scanning skips it this pass (the item only leaves
    /// its tree).
    pub(super) page: Option<Page>,
}

/// What gathering a batch of pages stopped at.
pub(super) enum Gathered {
    /// The batch is full.
    Full,
    /// The end of the address space's mergeable areas.
    SlotEnd,
    /// No memory for an rmap_item.
    NoMemory,
}

/// The scanner's state (C's `ksm_scan`), under the scan lock.
pub(crate) struct ScanState {
    pub(super) slots_token: SlotsToken,
    /// The batches being worked on (empty between scans; each has room for `BATCH`).
    pub(super) batch: KVVec<Entry>,
    pub(super) spare: KVVec<Entry>,
    /// The pages of one page table that gathering found (empty between gatherings, with room for
    /// `BATCH`).
    pub(super) found: KVVec<(usize, HeldPage)>,
    /// Items taken off their list while an mmap lock was held, to free once it is dropped (a
    /// shard lock, which freeing takes, is never taken inside an mmap lock: tree work takes
    /// mmap locks inside shard locks).
    pub(super) doomed: KVec<Pin<KBox<Item>>>,
    pub(super) address: usize,
    pub(super) seqnr: u64,
    pub(super) rmap_items: usize,
    pub(super) pages_scanned: u64,
    pub(super) pages_skipped: u64,
    pub(super) advisor: Advisor,
    /// Memory is going offline: the trees are left alone until it is done (C's
    /// `KSM_RUN_OFFLINE`, see [`Offlining`]).
    pub(super) offlining: bool,
}

/// An address space of at most this many pages (counted by their rmap_items) is gathered in one
/// batch with room for a page more, so that the walk that gathers it meets the end of its
/// mergeable areas ([`Gathered::SlotEnd`]) unless it grew: its pages are looked at one after the
/// other, and, for the last address space of the pass, the pass ends right after, with nothing
/// between that offers to reschedule. C's scan looks at the last page and counts the pass within
/// one call, too. With batches of one page, the pages of a small address space were looked at
/// in separate batches, with a walk, the counters' publishing and offers to reschedule between
/// them and after the last: a process writing its merged pages in that time, and waiting for
/// the next `full_scans` to see them unmerged (the selftest `ksm_tests -U`), saw a pass end that
/// had looked at its first page before the write. (An address space's first pass, with no
/// items yet, and larger ones keep the batches of [`PINNED_SHARE`].)
/// (A count of pages, not an amount of memory: what makes such a space small is its few steps.)
const SMALL_SPACE: usize = 8;

/// How many times at most [`Ksm::relook`] looks at a small address space's merged pages again
/// when their mapping counts moved during its look (a process that forks or writes them without
/// end must not keep the pass from ending).
const RELOOKS: usize = 4;

/// Whether `batch`, whose gathering stopped at `gathered`, holds a small address space whole
/// ([`SMALL_SPACE`]) and ends the pass: then the pages it finds merged already are looked at
/// again just before the pass ends ([`Ksm::relook`]).
///
/// A pass that ends on a small address space is what a process waits for when it has written
/// its merged pages and reads `full_scans` to see them unmerged (the selftest `ksm_tests -U`).
/// C's scan looks at the last page and counts the pass within a few microseconds. rksm's batch
/// puts its items back, publishes the counters and walks to the next address space after the
/// pages' steps: under TCG, tens of microseconds after the first page's step, sometimes
/// hundreds, in which the process's writes and its read of `full_scans` could both fall. Looked
/// at again as the last thing before `full_scans` moves, after all of that
/// ([`ScanState::end_pass`]), a merged page is looked at no earlier before the pass ends than
/// C's last page, and a write before that second look is seen by the pass. The second look at a
/// page still merged is cheap: its mappings are counted, and walked only if fewer than listed.
fn relooks(gathered: &Gathered, batch: &[Entry], k: &Ksm) -> bool {
    matches!(gathered, Gathered::SlotEnd) && batch.len() <= SMALL_SPACE && k.slots.lock().at_last()
}

/// How many pages the next batch of `slot` may hold (see [`PINNED_SHARE`] and [`SMALL_SPACE`]).
fn batch_for(slot: &MmSlot) -> usize {
    let n = slot.nr_items.load(Relaxed);
    if (1..=SMALL_SPACE).contains(&n) {
        n + 1
    } else {
        (n / PINNED_SHARE).clamp(1, BATCH)
    }
}

impl Ksm {
    /// Runs the tree algorithm for every page of `batch`, on `threads` threads at most (this
    /// one and helpers). Each page's reference is dropped as soon as it is done with, as with
    /// one page at a time: a reference more makes a page fail the merge's reference count check
    /// when another page of the batch meets it in the unstable tree.
    ///
    /// Meanwhile the calling thread runs `own` first, and then joins the work; its result is
    /// returned. With `keep_merged`, a page found merged already keeps its reference in the
    /// batch, for [`Ksm::relook`] (a KSM page's reference stops no merge: only the page being
    /// merged into one has its count checked).
    pub(super) fn merge_batch<R>(
        &self,
        batch: &mut [Entry],
        threads: usize,
        keep_merged: bool,
        own: impl FnOnce() -> R,
    ) -> R {
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
                    let outcome = step.cmp_and_merge(e.item.as_ref(), &page);
                    if keep_merged && outcome == Outcome::AlreadyMerged {
                        e.page = Some(page);
                    }
                }
                // A page not looked at (smart scan skips it) only leaves the trees, and most
                // such items are in none: told so without the shard's lock. The unstable trees
                // were emptied at this pass's start, before the batch was gathered, and only an
                // item's own step, which this is, puts a loose item into a tree or on a list. A
                // thread may be taking it off a stable node's list meanwhile, under the lock of
                // the item's shard, which every later change of the item's links takes too (its
                // next step, or its removal before it is freed).
                None if e.item.is_loose() => {}
                None => step.remove_item(&e.item),
            };
            // A chance to reschedule every few pages, not after the last one: the pass may end
            // right after it, and should do so as soon after looking at its pages as C's does.
            // (A call per page costs more than it is worth; a few pages take microseconds.)
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

    /// Runs the step again for each page of `batch` that kept its reference (see
    /// [`relooks`]): a page whose mapping was given a copy by a write since its first look (and
    /// before this one) is no longer merged, and leaves its node before the pass ends. Then
    /// publishes the counters of the shards that changed.
    ///
    /// The step's look at a page still merged compares its folio's mapping count with the
    /// mappings listed, and a write that copies the page lowers the count (under the page table
    /// lock, before the writer returns). A write after that comparison is still this pass's if
    /// the writer can read `full_scans` before it moves. So the counts are read before each
    /// step and again after the publishing: if one moved, the pages are looked at again
    /// (at most [`RELOOKS`] times), and otherwise that last reading is the last look, a few
    /// instructions before the caller ends the pass. The step itself can take longer than a
    /// writer needs to return and read `full_scans`: a look that finds a page copied looks
    /// the page table up and takes the item off its node.
    pub(super) fn relook(&self, batch: &mut [Entry]) {
        // `relooks` holds a batch only if it has at most `SMALL_SPACE` pages.
        let mut maps = [0i32; SMALL_SPACE];
        for _ in 0..RELOOKS {
            let mut step = self.step();
            for (e, m) in batch.iter_mut().zip(maps.iter_mut()) {
                if let Some(page) = e.page.take() {
                    *m = page.0.folio().mapcount();
                    if step.cmp_and_merge(e.item.as_ref(), &page) == Outcome::AlreadyMerged {
                        e.page = Some(page);
                    }
                }
            }
            self.publish_shards();
            let moved = batch.iter().zip(maps.iter()).any(|(e, m)| {
                e.page
                    .as_ref()
                    .is_some_and(|p| p.0.folio().mapcount() != *m)
            });
            if !moved {
                break;
            }
        }
    }
}

impl ScanState {
    /// Publishes the statistics of the scan for sysfs (each shard publishes its own).
    pub(super) fn publish(&self) {
        STATS
            .pages_scanned
            .store(self.pages_scanned as i64, Relaxed);
        STATS
            .pages_skipped
            .store(self.pages_skipped as i64, Relaxed);
        STATS.rmap_items.store(self.rmap_items as i64, Relaxed);
        // Release, last: the counters of the pass (the shards' too, published before this by
        // this thread or by helpers it joined) are seen by whoever sees the pass end (selftests
        // wait for `full_scans` and then read `pages_sharing`). An unlock and lock in between
        // order them too, but only by the way.
        STATS.full_scans.store(self.seqnr as i64, Release);
    }

    /// Scans up to `n` pages (C's `ksm_do_scan()`), in batches of one address space: with one
    /// scanner thread merged in order by `ksmd`, with more shared with the helpers.
    pub(super) fn do_scan(&mut self, k: &Ksm, n: usize) {
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
                    let g = self.gather(k, &slot, &mut cur, left.min(batch_for(&slot)));
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
            let relook = relooks(&gathered, &cur, k);
            let ahead = k.merge_batch(&mut cur, threads, relook, || {
                ahead.then(|| self.gather(k, &slot, &mut next, left.min(batch_for(&slot))))
            });
            self.free_doomed(k, &slot);
            // A batch to look at again stays off the list until just before the pass ends
            // (`next_slot`, `end_pass`).
            if !relook {
                self.put_back(&slot, &mut cur);
            }
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
                    if !self.next_slot(k, slot, &mut cur) {
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
    pub(super) fn free_doomed(&mut self, k: &Ksm, slot: &MmSlot) {
        while let Some(item) = self.doomed.pop() {
            self.free_item(k, slot, item);
        }
    }

    /// Puts the items of `batch` back on `slot`'s list, just before its cursor, in order, and
    /// drops what is left of the batch.
    pub(super) fn put_back(&mut self, slot: &MmSlot, batch: &mut KVVec<Entry>) {
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
    pub(super) fn free_item(&mut self, k: &Ksm, slot: &MmSlot, item: Pin<KBox<Item>>) {
        k.remove_item(&item);
        self.rmap_items -= 1;
        slot.nr_items.fetch_sub(1, Relaxed);
        item.mapping().mm().ksm_counters().add_rmap_items(-1);
        drop(item);
    }

    /// Takes out and frees every rmap_item of `slot` from its cursor on (C's
    /// `remove_trailing_rmap_items()`).
    pub(super) fn remove_trailing(&mut self, k: &Ksm, slot: &MmSlot) {
        while let Some(item) = slot.items.get_mut(&mut self.slots_token).remove_current() {
            self.free_item(k, slot, item);
        }
    }

    /// Leaves the slot's list cursor at the rmap_item for `addr`, creating one if needed, and
    /// takes the items before it that were not met off the list, to be freed once the mmap lock
    /// is dropped (C's `get_next_rmap_item()`). `false` if no memory could be had.
    pub(super) fn item_at(&mut self, slot: &MmSlot, addr: usize) -> bool {
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
        let Ok(item) = RmapItem::new_boxed(
            Mapping::new(slot.mm.clone(), addr),
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
    /// and less often ([`RmapItem::smart_look`]). A skipped page's item only leaves its tree
    /// (see [`ScanState::gather`]).
    pub(super) fn should_skip(&mut self, k: &Ksm, slot: &MmSlot, page: &Page) -> bool {
        if !tunables::SMART_SCAN.load(Relaxed) || k.backend.is_ksm(page) {
            return false;
        }
        let Some(item) = slot.items.get(&self.slots_token).current() else {
            return false;
        };
        // The pass number modulo 2^32, as the step has it (`Ksm::step`).
        if item.smart_look(self.seqnr as u32) {
            return false;
        }
        self.pages_skipped += 1;
        true
    }

    /// The address space being scanned, with the scan address and its list cursor where the
    /// scan is in it; at the head, a pass starts. `None` when nothing is registered.
    pub(super) fn slot_to_scan(&mut self, k: &Ksm) -> Option<Arc<MmSlot>> {
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
    pub(super) fn gather(
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
    /// walk at a time: each walk holds the mmap lock for at most [`WALK_TABLES`] page tables
    /// and [`HOLD_PAGES`] pages, and the pages it found are taken into the batch once the lock
    /// is dropped.
    pub(super) fn gather_into(
        &mut self,
        k: &Ksm,
        slot: &MmSlot,
        batch: &mut KVVec<Entry>,
        want: usize,
        found: &mut KVVec<(usize, HeldPage)>,
    ) -> Gathered {
        loop {
            kthread::cond_resched();
            let room = (want - batch.len()).min(HOLD_PAGES);
            let Some(next) = self.walk_some(slot, found, room) else {
                return Gathered::SlotEnd;
            };
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

    /// One walk of `slot`'s mergeable areas from the scan address on, under one hold of its mmap
    /// lock: puts into `found` at most `max` anonymous pages, looking at no more than
    /// [`WALK_TABLES`] page tables, and gives the address up to which it looked (the caller
    /// takes the pages, then moves the scan address there). `None` at the end of the areas, or
    /// if the address space is exiting.
    fn walk_some(
        &mut self,
        slot: &MmSlot,
        found: &mut KVVec<(usize, HeldPage)>,
        max: usize,
    ) -> Option<usize> {
        let guard = slot.mm.mmap_read_lock();
        for vma in guard.vmas_from(self.address) {
            if vma.flags() & flags::MERGEABLE == 0 {
                continue;
            }
            if self.address < vma.start() {
                self.address = vma.start();
            }
            if !vma.has_anon_vma() || self.address >= vma.end() {
                self.address = vma.end();
                continue;
            }
            if slot.mm.is_exiting() {
                return None;
            }
            let mut tables = WALK_TABLES;
            return Some(pgtable::anon_pages(
                vma,
                self.address,
                vma.end(),
                found,
                max,
                &mut tables,
            ));
        }
        None
    }

    /// Finishes the scan of `slot`, whose mergeable areas were all walked, and moves to the next
    /// address space; at the head the pass ends, and `false` is returned.
    ///
    /// `held` is the slot's last batch when its merged pages are to be looked at again
    /// ([`relooks`]), with their items still off the slot's list (empty otherwise): they are
    /// looked at last, right before the pass ends, and then put back at the end of the list.
    pub(super) fn next_slot(
        &mut self,
        k: &Ksm,
        slot: Arc<MmSlot>,
        held: &mut KVVec<Entry>,
    ) -> bool {
        if slot.mm.is_exiting() {
            self.address = 0;
            slot.items.get_mut(&mut self.slots_token).rewind();
        }
        if self.address == 0 {
            // Exiting (or nothing was walked): the held items go with the others, before the
            // mmap lock below is taken (freeing takes shard locks).
            while let Some(e) = held.pop() {
                drop(e.page);
                self.free_item(k, &slot, e.item);
            }
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
        // The held items go back after the trailing ones left: at the end of the list, in order.
        match next {
            Some(n) => {
                // An address space came after this one since the batch was gathered (one whose
                // process exits is moved there): the pass goes on, and the held pages get their
                // second look here, as late as can be known.
                k.relook(held);
                self.put_back(&slot, held);
                self.address = 0;
                n.items.get_mut(&mut self.slots_token).rewind();
                true
            }
            None => {
                self.end_pass(k, held);
                self.put_back(&slot, held);
                false
            }
        }
    }

    pub(super) fn start_pass(&mut self, k: &Ksm) {
        if tunables::ADVISOR_SCAN_TIME.load(Relaxed) {
            self.advisor.start_ns = Ktime::ktime_get().to_ns();
        }
        trace::start_scan(self.seqnr, self.rmap_items as u64);
        // Pages in per-CPU LRU caches have a raised count that stops write-protection.
        mm::lru_add_drain_all();
        k.shards.renew_for_pass(|sh| {
            sh.trees.renew_unstable();
            sh.trees.retry_misplaced(&k.backend, &mut sh.token);
            publish_shard(sh);
        });
    }

    /// Ends the pass. The merged pages of `held` (see [`ScanState::next_slot`]) are looked at
    /// again as the last thing before `full_scans` moves ([`Ksm::relook`]), so that a write
    /// to one of them before that look is seen by this pass.
    pub(super) fn end_pass(&mut self, k: &Ksm, held: &mut KVVec<Entry>) {
        if tunables::ADVISOR_SCAN_TIME.load(Relaxed) {
            self.scan_time_advisor(k);
        }
        trace::stop_scan(self.seqnr, self.rmap_items as u64);
        // After the event, too: with the ksm events on, writing it takes microseconds.
        if !held.is_empty() {
            k.relook(held);
        }
        self.seqnr += 1;
        self.publish();
    }
}
