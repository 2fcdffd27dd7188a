// SPDX-License-Identifier: GPL-2.0

//! The address spaces registered with KSM (C's `ksm_mm_head` list of `ksm_mm_slot`s), in scan
//! order, with the scanner's place among them: registration ([`enter`]) and exit ([`exit`]),
//! which run in process context under the slots' lock, not the scan lock.

use super::*;

kernel::define_token!(pub(crate) SlotsToken);

/// An address space registered with KSM (C's `struct ksm_mm_slot`).
pub(crate) struct MmSlot {
    pub(super) mm: ARef<Mm>,
    /// Its rmap_items, in address order, with the scanner's place among them.
    pub(super) items: TokenCell<SList<Item>, SlotsToken>,
    /// How many rmap_items it has (read without the scan lock by exit).
    pub(super) nr_items: AtomicUsize,
}

/// The registered address spaces, in scan order, and where the scanner is among them.
///
/// # Invariants
///
/// `cursor <= slots.len()`; `cursor == slots.len()` means the scanner is at the head, between
/// passes.
pub(crate) struct SlotList {
    pub(super) slots: KVec<Arc<MmSlot>>,
    pub(super) cursor: usize,
}

impl SlotList {
    pub(super) fn find(&self, mm: &Mm) -> Option<usize> {
        self.slots.iter().position(|s| core::ptr::eq(&*s.mm, mm))
    }

    pub(super) fn current(&self) -> Option<Arc<MmSlot>> {
        self.slots.get(self.cursor).cloned()
    }

    /// Moves the cursor to the first slot (a pass starts).
    pub(super) fn rewind(&mut self) -> Option<Arc<MmSlot>> {
        self.cursor = 0;
        self.current()
    }

    /// Moves the cursor to the next slot; `None` at the head.
    pub(super) fn advance(&mut self) -> Option<Arc<MmSlot>> {
        if self.cursor < self.slots.len() {
            self.cursor += 1;
        }
        self.current()
    }

    /// Whether the cursor is at the last slot: once it is done, the pass ends.
    pub(super) fn at_last(&self) -> bool {
        self.cursor + 1 == self.slots.len()
    }

    pub(super) fn insert_at(&mut self, at: usize, slot: Arc<MmSlot>) -> Result {
        self.slots.push(slot, GFP_KERNEL)?;
        self.slots[at..].rotate_right(1);
        Ok(())
    }

    pub(super) fn remove(&mut self, i: usize) -> Arc<MmSlot> {
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
    // Whether `ksmd` may be asleep for want of slots: counted under the slots lock, which every
    // change of `nr_slots` holds. (Read before the lock, as C reads its list, a count of one
    // could go to zero in between and `ksmd` sleep with no timeout after this slot was added:
    // woken by nothing but a write of `run`.)
    let needs_wakeup;
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
        needs_wakeup = k.nr_slots.fetch_add(1, Relaxed) == 0;
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
