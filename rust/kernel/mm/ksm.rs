// SPDX-License-Identifier: GPL-2.0

//! What Kernel Samepage Merging does to page tables, folios and the reverse map, and the
//! interface of `<linux/ksm.h>` that a KSM implementation gives the rest of the kernel.
//!
//! C headers: [`include/linux/ksm.h`](srctree/include/linux/ksm.h),
//! [`include/linux/rmap.h`](srctree/include/linux/rmap.h),
//! [`include/linux/mmu_notifier.h`](srctree/include/linux/mmu_notifier.h)
//!
//! # KSM folios and their stable nodes
//!
//! A KSM folio's `mapping` points at the implementation's *stable node* for it, tagged with
//! `PAGE_MAPPING_KSM`. The node does not hold a reference to the folio: it records the folio's
//! frame ([`AtomicPfn`]) and checks, through that "keyhole", that the folio there still points
//! back at it ([`get_ksm_folio`]). Code that holds the folio's lock may follow the folio's
//! pointer to the node ([`ksm_node`]); what keeps that sound is the implementation's promise,
//! made by implementing [`KsmNode`], about when it frees nodes.

use super::{
    folio::{
        pfn_folio_raw, AtomicPfn, Folio, FolioGuard, FolioPage, HeldPage, LockedFolio,
        OwnedFolioLock, Pfn,
    },
    virt::VmArea,
    Mm, MmWriteLocked,
};
use crate::{
    alloc::KVVec,
    bindings,
    error::{code::*, Result},
    page::PAGE_SIZE,
    types::{ARef, AlwaysRefCounted, Opaque},
};
use core::{
    marker::PhantomData,
    mem::MaybeUninit,
    pin::Pin,
    ptr::{self, NonNull},
    sync::atomic::{fence, AtomicUsize, Ordering},
};

/// An anon_vma: the root of the reverse map of anonymous pages (C's `struct anon_vma`).
///
/// # Invariants
///
/// The anon_vma is valid for the lifetime of the reference; [`ARef<AnonVma>`] holds a count on
/// it (`get_anon_vma()`).
#[repr(transparent)]
pub struct AnonVma {
    av: Opaque<bindings::anon_vma>,
}

// SAFETY: anon_vmas are used from any thread under their own lock and refcount.
unsafe impl Send for AnonVma {}
// SAFETY: As above.
unsafe impl Sync for AnonVma {}

// SAFETY: `get_anon_vma()`/`put_anon_vma()` keep the anon_vma allocated while the count is not 0.
unsafe impl AlwaysRefCounted for AnonVma {
    #[inline]
    fn inc_ref(&self) {
        // SAFETY: `&self` shows the count is non-zero.
        unsafe { bindings::get_anon_vma(self.as_raw()) };
    }

    #[inline]
    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller gives up a reference it owns.
        unsafe { bindings::put_anon_vma(obj.cast().as_ptr()) };
    }
}

impl AnonVma {
    /// The C structure.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::anon_vma {
        super::opaque_ptr(&self.av)
    }

    /// A reference to the anon_vma of `vma`, if it has one. The area's mmap lock keeps the
    /// anon_vma while the reference is taken.
    #[inline]
    pub fn of(vma: &VmArea) -> Option<ARef<AnonVma>> {
        let av = vma.anon_vma_raw();
        if av.is_null() {
            return None;
        }
        // SAFETY: An area's anon_vma is valid while the area is (and `&vma` is bounded by its
        // mmap lock); `ARef::from` takes a new reference.
        Some(ARef::from(unsafe { &*av.cast::<AnonVma>() }))
    }

    /// Takes the anon_vma's lock for reading.
    #[inline]
    pub fn lock_read(&self) -> AnonVmaReadGuard<'_> {
        // SAFETY: The anon_vma is valid.
        unsafe { bindings::anon_vma_lock_read(self.as_raw()) };
        // INVARIANT: The lock is held for reading.
        AnonVmaReadGuard {
            av: self,
            _nts: PhantomData,
        }
    }

    /// Takes the lock for reading if it is free.
    #[inline]
    pub fn try_lock_read(&self) -> Option<AnonVmaReadGuard<'_>> {
        // SAFETY: The anon_vma is valid.
        let locked = unsafe { bindings::anon_vma_trylock_read(self.as_raw()) };
        // INVARIANT: The trylock succeeded.
        locked.then(|| AnonVmaReadGuard {
            av: self,
            _nts: PhantomData,
        })
    }
}

/// The lock of an anon_vma, held for reading.
///
/// # Invariants
///
/// The lock of `av` is held for reading by this thread until the guard is dropped.
pub struct AnonVmaReadGuard<'a> {
    av: &'a AnonVma,
    _nts: PhantomData<*mut ()>,
}

impl AnonVmaReadGuard<'_> {
    /// The areas whose pages this anon_vma maps (its interval tree, whole).
    pub fn vmas(&self) -> impl Iterator<Item = &VmArea> + '_ {
        // SAFETY: The anon_vma is valid and read-locked; its tree does not change meanwhile.
        let root = unsafe { ptr::addr_of_mut!((*self.av.as_raw()).rb_root) };
        let mut next: Option<*mut bindings::anon_vma_chain> = None;
        let mut started = false;
        core::iter::from_fn(move || {
            let avc = if !started {
                started = true;
                // SAFETY: `root` is the read-locked tree.
                unsafe { bindings::anon_vma_interval_tree_iter_first(root, 0, usize::MAX as _) }
            } else {
                let prev = next?;
                // SAFETY: `prev` is a node of the read-locked tree.
                unsafe { bindings::anon_vma_interval_tree_iter_next(prev, 0, usize::MAX as _) }
            };
            if avc.is_null() {
                next = None;
                return None;
            }
            next = Some(avc);
            // SAFETY: A chain of the locked tree links a valid area, kept while the lock is held.
            Some(unsafe { VmArea::from_raw((*avc).vma) })
        })
    }
}

impl Drop for AnonVmaReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The lock is held for reading by this thread (type invariant).
        unsafe { bindings::anon_vma_unlock_read(self.av.as_raw()) };
    }
}

/// A place for an anon_vma reference that can be filled and emptied through a shared reference
/// (an rmap_item keeps one while its page is merged), or, while it holds none, for a hint: the
/// frame of a page, with no reference on it (an rmap_item in the unstable tree keeps the frame
/// its page was in, to read it again without walking page tables; see
/// [`HeldPage::try_get_anon`]).
///
/// # Invariants
///
/// `val` is 0 (empty), the address of an anon_vma on which the slot holds a reference count
/// (bit 0 clear: an anon_vma is aligned), or `pfn << 1 | 1` (a hint).
pub struct AnonVmaSlot {
    val: AtomicUsize,
}

impl Default for AnonVmaSlot {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

const HINT: usize = 1;

impl AnonVmaSlot {
    /// An empty slot.
    #[inline]
    pub const fn new() -> Self {
        Self {
            val: AtomicUsize::new(0),
        }
    }

    /// The reference that a value taken out of the slot held, if it was an anon_vma.
    ///
    /// # Safety
    ///
    /// `val` was in the slot and its reference, if any, is now the caller's.
    #[inline]
    unsafe fn owned(val: usize) -> Option<ARef<AnonVma>> {
        if val & HINT != 0 {
            return None;
        }
        // SAFETY: A non-zero value without the hint bit held a reference (type invariant), which
        // is the caller's now.
        NonNull::new(val as *mut AnonVma).map(|p| unsafe { ARef::from_raw(p) })
    }

    /// Puts `av` in the slot (replacing a hint); gives back the reference that was there.
    #[inline]
    pub fn set(&self, av: ARef<AnonVma>) -> Option<ARef<AnonVma>> {
        let new = ARef::into_raw(av).as_ptr() as usize;
        // INVARIANT: The reference of `av` moves into the slot.
        let old = self.val.swap(new, Ordering::AcqRel);
        // SAFETY: `old` was in the slot; its reference is ours now.
        unsafe { Self::owned(old) }
    }

    /// Empties the slot (of a reference or a hint), giving back the reference.
    #[inline]
    pub fn take(&self) -> Option<ARef<AnonVma>> {
        let old = self.val.swap(0, Ordering::AcqRel);
        // SAFETY: `old` was in the slot; its reference is ours now.
        unsafe { Self::owned(old) }
    }

    /// Records the hint `pfn`, unless the slot holds a reference.
    #[inline]
    pub fn set_hint(&self, pfn: Pfn) {
        // INVARIANT: A hint replaces only nothing or a hint: a reference is never lost.
        let _ = self
            .val
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (v == 0 || v & HINT != 0).then_some(pfn.value() << 1 | HINT)
            });
    }

    /// The hint, if the slot holds one.
    #[inline]
    pub fn hint(&self) -> Option<Pfn> {
        let v = self.val.load(Ordering::Relaxed);
        (v & HINT != 0).then(|| Pfn::from_value(v >> 1))
    }

    /// The anon_vma in the slot, without a reference of its own.
    ///
    /// # Safety
    ///
    /// Nobody empties or refills the slot while the returned reference lives.
    #[inline]
    pub unsafe fn get(&self) -> Option<&AnonVma> {
        let v = self.val.load(Ordering::Acquire);
        if v & HINT != 0 {
            return None;
        }
        // SAFETY: The slot's reference keeps the anon_vma, and by the safety requirements it is
        // not given up while the returned reference lives.
        (v != 0).then(|| unsafe { &*(v as *const AnonVma) })
    }
}

impl Drop for AnonVmaSlot {
    #[inline]
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// A stable node of a KSM implementation: what a KSM folio's `mapping` points at.
///
/// # Safety
///
/// Implementers promise that a node that some folio's `mapping` points at (through
/// [`set_ksm_node`]) stays allocated, and is not moved, for as long as that folio is locked by
/// anyone, and for as long as any reference returned by [`ksm_node`] lives: they free a node only
/// after clearing the folio's pointer with the folio locked ([`set_ksm_node`] with `None`), or
/// after [`get_ksm_folio`] found that no folio points at it any more.
pub unsafe trait KsmNode: Sized {}

/// The `mapping` word of a KSM folio that points at `node` (at no node yet, with null).
#[inline]
fn ksm_mapping<T: KsmNode>(node: *const T) -> usize {
    node as usize | bindings::PAGE_MAPPING_KSM as usize
}

#[inline]
fn ksm_mapping_of<T: KsmNode>(node: Option<Pin<&T>>) -> usize {
    ksm_mapping(node.map_or(core::ptr::null(), |n| n.get_ref() as *const T))
}

/// The `mapping` word of the folio at frame `pfn`, read once without a reference.
#[inline]
fn mapping_at(pfn: Pfn) -> (*mut bindings::folio, usize) {
    let raw = pfn_folio_raw(pfn);
    // SAFETY: `raw` is the `struct folio` at a frame that has one (`pfn_folio_raw`); its mapping
    // is read once, and nothing else of it is used.
    (raw, unsafe { bindings::folio_mapping_raw(raw) } as usize)
}

/// The stable node the locked KSM folio points at, if any.
pub fn ksm_node<'a, T: KsmNode>(folio: &'a impl LockedFolio) -> Option<Pin<&'a T>> {
    let m = folio.locked_folio().mapping_raw();
    if m & bindings::PAGE_MAPPING_FLAGS as usize != bindings::PAGE_MAPPING_KSM as usize {
        return None;
    }
    let node = (m & !(bindings::PAGE_MAPPING_FLAGS as usize)) as *const T;
    // SAFETY: A KSM folio's mapping is set only by `set_ksm_node`, to a pinned `T` (or null),
    // and by the `KsmNode` contract the node stays valid, and pinned, while the folio is locked,
    // which the guard's borrow ensures for `'a`.
    (!node.is_null()).then(|| unsafe { Pin::new_unchecked(&*node) })
}

/// Whether the locked folio points at `node`.
#[inline]
pub fn is_ksm_folio_of<T: KsmNode>(folio: &impl LockedFolio, node: &T) -> bool {
    folio.locked_folio().mapping_raw() == ksm_mapping(node)
}

/// Makes the locked folio a KSM folio that points at `node` (or at no node yet, with `None`).
#[inline]
pub fn set_ksm_node<T: KsmNode>(folio: &impl LockedFolio, node: Option<Pin<&T>>) {
    // SAFETY: The folio is valid and locked; KSM owns the mapping of an anonymous folio it turns
    // into a KSM folio (C's `folio_set_stable_node()`).
    unsafe {
        bindings::folio_set_mapping_raw(folio.locked_folio().as_raw(), ksm_mapping_of(node) as _)
    };
}

/// The folio that `node`'s page frame `pfn` holds, with a reference, if it is still `node`'s KSM
/// folio; `None` if it is not (the node is stale). C's `ksm_get_folio()`, without locking.
///
/// Migration may move the folio meanwhile ([`migrate_ksm_folio`] publishes the new frame before
/// the old folio stops pointing at the node): the frame is read again before concluding.
pub fn get_ksm_folio<T: KsmNode>(node: &T, pfn: &AtomicPfn) -> Option<ARef<Folio>> {
    let expected = ksm_mapping(node);
    loop {
        let kpfn = pfn.load();
        let (raw, mapping) = mapping_at(kpfn);
        let got = if mapping == expected {
            try_get_expected(raw, expected)
        } else {
            None
        };
        if got.is_some() {
            return got;
        }
        // Stale, or being migrated: the new frame is published before the old folio lets go.
        fence(Ordering::Acquire);
        if pfn.load() == kpfn {
            return None;
        }
    }
}

/// The folio that `node`'s page frame `pfn` holds, locked, if it is still `node`'s KSM folio
/// once its lock is had; `None` if the node is stale. C's `ksm_get_folio(KSM_GET_FOLIO_LOCK)`.
///
/// The lock may be waited for, and meanwhile migration, which checked the reference count before
/// this reference was taken, may copy the folio and move `node` to the copy: the folio locked is
/// then no longer `node`'s. Its frame is read again after the lock, and the node's new folio is
/// locked instead, so that a caller that is told the node is stale may free it (no folio points
/// at it), and one that gets a folio holds the lock that keeps the node's mappings still.
pub fn lock_ksm_folio<T: KsmNode>(node: &T, pfn: &AtomicPfn) -> Option<OwnedFolioLock> {
    loop {
        let folio = get_ksm_folio(node, pfn)?;
        let kpfn = folio.pfn();
        let locked = OwnedFolioLock::lock(folio);
        if is_ksm_folio_of(&locked, node) {
            return Some(locked);
        }
        drop(locked);
        // Moved by migration while the lock was waited for (the new frame is published before
        // the old folio lets go, see `migrate_ksm_folio`), or really stale.
        fence(Ordering::Acquire);
        if pfn.load() == kpfn {
            return None;
        }
    }
}

/// Whether `folio`, held by a reference but not locked, points at `node` now: a KSM folio is
/// identified by its pointer to its node, not by its frame, which a stale node may share with a
/// KSM folio of another node after the frame was freed and reused. `true` may be out of date as
/// soon as it is returned (only the folio's lock keeps it), `false` too.
#[inline]
pub fn points_at<T: KsmNode>(folio: &Folio, node: &T) -> bool {
    folio.mapping_raw() == ksm_mapping(node)
}

/// Whether the frame `pfn` holds still seems to be the KSM folio of `node`, read without taking
/// a reference: a cheap first check for [`get_ksm_folio`]. `true` may be out of date as soon as it
/// is returned; `false` means the node was stale when looked at, or its folio was migrating.
#[inline]
pub fn ksm_folio_present<T: KsmNode>(node: &T, pfn: &AtomicPfn) -> bool {
    mapping_at(pfn.load()).1 == ksm_mapping(node)
}

/// Takes a reference on the folio at `raw` if its mapping is still `expected` afterwards.
fn try_get_expected(raw: *mut bindings::folio, expected: usize) -> Option<ARef<Folio>> {
    // A zero count usually means freed; but a folio in the swap cache may be frozen by
    // migration for a moment and still be ours: wait for that one.
    loop {
        // SAFETY: `raw` is a `struct folio` that exists; `folio_try_get` only succeeds on a
        // non-zero count.
        if unsafe { bindings::folio_try_get(raw) } {
            break;
        }
        // SAFETY: As above.
        if !unsafe { bindings::folio_test_swapcache(raw) } {
            return None;
        }
        core::hint::spin_loop();
    }
    // SAFETY: We hold a reference now: the folio is valid, and the reference is handed over.
    let folio = unsafe { ARef::from_raw(NonNull::new_unchecked(raw.cast::<Folio>())) };
    (folio.mapping_raw() == expected).then_some(folio)
}

/// After migration copied KSM `old` into `new` (both locked; `new`'s mapping already the same),
/// repoints `node` at `new` and makes `old` stop pointing at it (C's `folio_migrate_ksm()`).
pub fn migrate_ksm_folio<T: KsmNode>(
    node: &T,
    pfn: &AtomicPfn,
    new: &impl LockedFolio,
    old: &impl LockedFolio,
) {
    if !is_ksm_folio_of(old, node) {
        return;
    }
    pfn.store(new.locked_folio().pfn());
    // The new frame must be visible before `old` stops pointing at the node (see
    // `get_ksm_folio`).
    fence(Ordering::Release);
    set_ksm_node::<T>(old, None);
}

/// A page table entry (a C `pte_t`), by value.
#[derive(Clone, Copy)]
pub struct Pte(bindings::pte_t);

impl Pte {
    /// Whether two entries are the same.
    #[inline]
    pub fn same(self, other: Pte) -> bool {
        // SAFETY: Pure function of two values.
        unsafe { bindings::pte_same(self.0, other.0) }
    }

    /// Whether the entry is writable.
    #[inline]
    pub fn is_write(self) -> bool {
        // SAFETY: Pure function of a value.
        unsafe { bindings::pte_write(self.0) }
    }

    /// Whether the entry is dirty.
    #[inline]
    pub fn is_dirty(self) -> bool {
        // SAFETY: Pure function of a value.
        unsafe { bindings::pte_dirty(self.0) }
    }
}

/// An MMU-notifier invalidation of one page, from `start` to its end (drop).
struct Invalidation {
    range: bindings::mmu_notifier_range,
}

impl Invalidation {
    fn start(mm: &Mm, addr: usize) -> Self {
        let mut range = MaybeUninit::<bindings::mmu_notifier_range>::zeroed();
        // SAFETY: `range` is writable; the mm is valid.
        unsafe {
            bindings::mmu_notifier_range_init_clear(
                range.as_mut_ptr(),
                mm.as_raw(),
                addr as _,
                (addr + PAGE_SIZE) as _,
            );
            bindings::mmu_notifier_invalidate_range_start(range.as_mut_ptr());
        }
        // SAFETY: Initialised above.
        let range = unsafe { range.assume_init() };
        Self { range }
    }
}

impl Drop for Invalidation {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The range was started in `start`.
        unsafe { bindings::mmu_notifier_invalidate_range_end(&mut self.range) };
    }
}

/// The page table entry through which an area maps a small folio, found and locked by
/// `page_vma_mapped_walk()`.
///
/// # Invariants
///
/// The walk succeeded: `pvmw.pte` is the entry that maps the folio at `addr` of `vma`, and its
/// page table lock, `pvmw.ptl`, is held until drop.
struct LockedPte<'a> {
    pvmw: bindings::page_vma_mapped_walk,
    vma: &'a VmArea,
    addr: usize,
}

impl<'a> LockedPte<'a> {
    /// Finds and locks the entry that maps the small folio `f` at `addr` of `vma`; `None` if it
    /// is not mapped there by a page table entry. The caller holds the mmap lock and `f` locked.
    fn find(vma: &'a VmArea, f: &Folio, addr: usize) -> Option<Self> {
        let mut pvmw = MaybeUninit::<bindings::page_vma_mapped_walk>::zeroed();
        // SAFETY: `pvmw` is writable; folio and area are valid.
        unsafe {
            bindings::init_folio_vma_walk(pvmw.as_mut_ptr(), f.as_raw(), vma.as_raw(), addr as _)
        };
        // SAFETY: Initialised above.
        let mut pvmw = unsafe { pvmw.assume_init() };
        // SAFETY: The walk structure is initialised for this folio and area; on success it holds
        // the page table lock, released by `page_vma_mapped_walk_done`.
        if !unsafe { bindings::page_vma_mapped_walk(&mut pvmw) } {
            return None;
        }
        let found = Self { pvmw, vma, addr };
        // INVARIANT: The walk succeeded and holds the lock; a small folio cannot be mapped by a
        // PMD, so a walk without an entry is given up (its lock is released by the drop), and so
        // is an entry at another address (the walk looks on up to the address the folio's index
        // gives, which the callers have checked is `addr`).
        (!found.pvmw.pte.is_null() && found.pvmw.address == addr as _).then_some(found)
    }

    /// The entry's value.
    #[inline]
    fn get(&self) -> Pte {
        // SAFETY: `pte` is the locked entry (type invariant).
        Pte(unsafe { bindings::ptep_get(self.pvmw.pte) })
    }

    /// Clears the entry and flushes it from every TLB (C's `ptep_clear_flush()`), returning the
    /// value it had. Clearing first stops new GUP-fast pins of the page.
    #[inline]
    fn clear_flush(&mut self, pfn: Pfn) -> Pte {
        let (vma, addr) = (self.vma.as_raw(), self.addr as _);
        // SAFETY: The entry is locked (type invariant) and maps `addr` of this area.
        Pte(unsafe {
            bindings::flush_cache_page(vma, addr, pfn.value() as _);
            bindings::ptep_clear_flush(vma, addr, self.pvmw.pte)
        })
    }

    /// Sets the entry, which was cleared and flushed, to `e`.
    #[inline]
    fn set(&mut self, e: Pte) {
        // SAFETY: The entry is locked (type invariant); it is empty, so no TLB holds it.
        unsafe { bindings::set_pte_at(self.vma.mm().as_raw(), self.addr as _, self.pvmw.pte, e.0) }
    }
}

impl Drop for LockedPte<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The walk succeeded and holds the page table lock (type invariant).
        unsafe { bindings::page_vma_mapped_walk_done(&mut self.pvmw) };
    }
}

/// C's `write_protect_page()` on the locked entry `pte` that maps page 0 of the locked small
/// folio `f`: if the entry is writable, dirty or anon-exclusive (or a TLB flush is pending), it is
/// cleared and flushed, the folio is checked not to be pinned, its page stops being exclusive and
/// gets the entry's dirty bit; the entry to put back, clean and read-only, is returned with
/// `true` (the slot is empty). Otherwise the entry is returned as it is, with `false`.
fn protect(pte: &mut LockedPte<'_>, f: &Folio) -> Result<(Pte, bool)> {
    let page = f.first_page();
    let anon_exclusive = page.is_anon_exclusive();
    let entry = pte.get();
    if !(entry.is_write() || entry.is_dirty() || anon_exclusive || pte.vma.mm().tlb_flush_pending())
    {
        return Ok((entry, false));
    }
    let swapped = i32::from(f.in_swapcache());
    let entry = pte.clear_flush(f.pfn());
    // Someone may be doing I/O to a page whose count is more than its mappings, the swap cache
    // and the caller's reference.
    if f.mapcount() + 1 + swapped != f.ref_count() {
        pte.set(entry);
        return Err(EFAULT);
    }
    let share_failed = anon_exclusive && {
        // SAFETY: The folio is locked and the entry cleared and flushed, as sharing requires.
        unsafe { bindings::folio_try_share_anon_rmap_pte(f.as_raw(), page.as_raw()) }
    };
    if share_failed {
        pte.set(entry);
        return Err(EFAULT);
    }
    if entry.is_dirty() {
        // SAFETY: The folio is valid and locked.
        unsafe { bindings::folio_mark_dirty(f.as_raw()) };
    }
    // SAFETY: Pure functions of the value.
    let mut clean = Pte(unsafe { bindings::pte_mkclean(entry.0) });
    if clean.is_write() {
        // SAFETY: As above.
        clean = Pte(unsafe { bindings::pte_wrprotect(clean.0) });
    }
    Ok((clean, true))
}

/// Checks that the small anonymous folio `f` can be mapped at `addr` of `vma`: `addr` is in the
/// area and is the one address the folio's index gives there (an anonymous page is mapped at
/// one address of an area only). `EFAULT` otherwise, and for KSM folios, whose index says
/// nothing (C's `write_protect_page()` gets `EFAULT` for them from `page_address_in_vma()`).
///
/// This reads only the folio's own fields. C's `page_address_in_vma()` also compares the
/// folio's anon_vma with the area's, but the caller holds a reference, not a mapping: a folio
/// unmapped since it was found may point at an anon_vma that has been freed (KASAN saw this
/// from a scanner batch). [`LockedPte::find`] then proves, under the page table lock, that the
/// folio is mapped at `addr`, and so that its anon_vma is the area's.
#[inline]
fn small_folio_at(f: &Folio, vma: &VmArea, addr: usize) -> Result {
    if f.is_large()
        || f.is_ksm()
        || !f.is_anon()
        || addr < vma.start()
        || addr >= vma.end()
        || f.index() != vma.linear_page_index(addr)
    {
        return Err(EFAULT);
    }
    Ok(())
}

/// Write-protects the page table entry through which `vma` maps the locked small folio
/// `folio` at `addr` (C's `write_protect_page()`), and returns it. The caller holds the mmap
/// lock of the area's address space and one reference on the folio (besides its mappings).
///
/// Fails with `EFAULT` if the folio is not mapped there, or is pinned (someone may be doing I/O
/// to it: the reference count is more than the mappings, the swap cache and the caller's).
pub fn write_protect(vma: &VmArea, addr: usize, folio: &impl LockedFolio) -> Result<Pte> {
    let f = folio.locked_folio();
    small_folio_at(f, vma, addr)?;
    let _inv = Invalidation::start(vma.mm(), addr);
    let mut pte = LockedPte::find(vma, f, addr).ok_or(EFAULT)?;
    let (entry, cleared) = protect(&mut pte, f)?;
    if cleared {
        pte.set(entry);
    }
    Ok(entry)
}

/// What [`replace_if_same`] maps instead of a page.
pub enum Replacement<'a> {
    /// A page of a KSM folio, held (which gets a new mapping and reference).
    Ksm(&'a HeldPage),
    /// The zero page (KSM's `use_zero_pages`), marked dirty to tell it was KSM's.
    Zero,
}

/// Write-protects the page table entry through which `vma` maps the locked small folio `folio`
/// at `addr` (as [`write_protect`]), and if `same()` then says that the page's contents equal
/// those of `with`, maps `with` there instead (C's `write_protect_page()`, `pages_identical()` and
/// `replace_page()`); the folio loses that mapping and the reference it held. The caller holds
/// the area's mmap lock and one reference on the folio (besides its mappings).
///
/// C takes the page table lock twice, walks the page tables twice and flushes the entry from the
/// TLBs twice; here the entry stays locked, and empty, from write-protection to replacement, so
/// `same()` runs under a spinlock and must not sleep. While it runs, nothing can write the page
/// through this mapping, and the reference count check has shown that nothing else can either.
///
/// Fails with `EFAULT` if the folio is not mapped there or is pinned, or if the contents differ
/// (the entry is then left write-protected, as C leaves it).
pub fn replace_if_same(
    vma: &VmArea,
    addr: usize,
    folio: &impl LockedFolio,
    with: Replacement<'_>,
    same: impl FnOnce() -> bool,
) -> Result {
    let f = folio.locked_folio();
    small_folio_at(f, vma, addr)?;
    let page = f.first_page();
    let mm = vma.mm();
    let _inv = Invalidation::start(mm, addr);
    let mut pte = LockedPte::find(vma, f, addr).ok_or(EFAULT)?;
    let (entry, cleared) = protect(&mut pte, f)?;
    // The entry that goes back if the contents differ: the write-protected one, or, if it was
    // read-only already, what it is when cleared now (with the accessed bit of any access since).
    let entry = if cleared {
        entry
    } else {
        pte.clear_flush(f.pfn())
    };
    if !same() {
        pte.set(entry);
        return Err(EFAULT);
    }
    let prot = vma.page_prot();
    let new = match with {
        Replacement::Ksm(held) => {
            let (kfolio, kpage) = (held.folio(), held.page());
            // The new mapping holds a reference, and is in the reverse map.
            core::mem::forget(kfolio.get());
            // SAFETY: The KSM folio is valid and locked by the caller's KSM code; `addr` is in
            // `vma`, whose mmap lock is held; the entry is locked.
            unsafe {
                bindings::folio_add_anon_rmap_pte(
                    kfolio.as_raw(),
                    kpage.as_raw(),
                    vma.as_raw(),
                    addr as _,
                );
                Pte(bindings::mk_pte(kpage.as_raw(), prot))
            }
        }
        Replacement::Zero => {
            let zero = FolioPage::zero(addr);
            // SAFETY: The zero page is not anonymous: the mm's anonymous page count drops and
            // KSM's count of zero pages rises (C's `ksm_map_zero_page()`).
            unsafe {
                bindings::ksm_map_zero_page(mm.as_raw());
                bindings::dec_mm_counter(mm.as_raw(), bindings::MM_ANONPAGES as _);
                Pte(bindings::ksm_zero_pte(zero.pfn().value() as _, prot))
            }
        }
    };
    pte.set(new);
    let folio = f.as_raw();
    // SAFETY: The entry no longer maps `page`, whose folio is locked: its reverse map entry and
    // the reference the mapping held go (the caller's reference keeps it allocated).
    unsafe {
        bindings::folio_remove_rmap_pte(folio, page.as_raw(), vma.as_raw());
        if !bindings::folio_mapped(folio) {
            bindings::folio_free_swap(folio);
        }
        bindings::folio_put(folio);
    }
    Ok(())
}

/// The anonymous page mapped at `addr` of `vma`, with a reference, if it is a candidate for KSM
/// (not device memory). The caller holds the area's mmap lock.
pub fn anon_page_at(vma: &VmArea, addr: usize) -> Option<HeldPage> {
    let mut fw = MaybeUninit::<bindings::folio_walk>::zeroed();
    // SAFETY: `fw` is writable, the area valid and its mmap lock held. On success the walk holds
    // the page table lock until `folio_walk_end`.
    let folio = unsafe { bindings::folio_walk_start(fw.as_mut_ptr(), vma.as_raw(), addr as _, 0) };
    if folio.is_null() {
        return None;
    }
    // SAFETY: The walk found a folio and holds the lock: folio and page are valid meanwhile;
    // `fw.page` is the page of the folio mapped at `addr`.
    unsafe {
        let f = Folio::from_raw(folio);
        let page = (*fw.as_ptr()).page;
        let keep = (!f.is_zone_device() && f.is_anon()).then(|| HeldPage::new(f.get(), page));
        bindings::folio_walk_end(fw.as_mut_ptr(), vma.as_raw());
        keep
    }
}

/// Collects the anonymous pages mapped in `vma` from `addr` up to `end` that are candidates for
/// KSM (as [`anon_page_at`] takes them), each with a reference and its address, into `out` until
/// it holds `max` of them (or is full); returns the address after the last one looked at (`end`
/// if every one was). The caller holds the area's mmap lock.
///
/// The entries of one page table are read under one hold of its lock, where C's scan walks the
/// page tables from the top, and takes the lock, for every address; a range mapped by a huge
/// page is taken one page at a time, as C does.
pub fn anon_pages(
    vma: &VmArea,
    mut addr: usize,
    end: usize,
    out: &mut KVVec<(usize, HeldPage)>,
    max: usize,
) -> usize {
    let mm = vma.mm();
    let pmd_size = 1usize << bindings::PMD_SHIFT;
    let max = max.min(out.capacity());
    while addr < end && out.len() < max {
        let stop = ((addr | (pmd_size - 1)) + 1).min(end);
        // SAFETY: The mm is valid and its mmap lock held.
        let pmd = unsafe { bindings::mm_find_pmd(mm.as_raw(), addr as _) };
        // SAFETY: `pmd` is an entry of this mm's tables, which the mmap lock keeps.
        if pmd.is_null() || unsafe { bindings::pmd_none_lockless(pmd) } {
            addr = stop;
            continue;
        }
        let mut ptl: *mut bindings::spinlock_t = ptr::null_mut();
        // SAFETY: As above, `pmd` is an entry of this mm's tables; the function checks that it
        // maps a page table, and on success maps it and locks it.
        let table = if unsafe { bindings::pmd_maps_pte_table(pmd) } {
            // SAFETY: As above.
            unsafe { bindings::pte_offset_map_lock(mm.as_raw(), pmd, addr as _, &mut ptl) }
        } else {
            ptr::null_mut()
        };
        if table.is_null() {
            // A huge page, or the table changed meanwhile.
            while addr < stop && out.len() < max {
                if let Some(page) = anon_page_at(vma, addr) {
                    let _ = out.push_within_capacity((addr, page));
                }
                addr += PAGE_SIZE;
            }
            continue;
        }
        let mut pte = table;
        while addr < stop && out.len() < max {
            let mut folio = ptr::null_mut();
            // SAFETY: `pte` is the entry of `addr` in the table mapped and locked above (`addr`
            // stays within the range the table maps); the area is valid, its mmap lock held.
            let page = unsafe {
                bindings::vm_normal_anon_page_get(
                    vma.as_raw(),
                    addr as _,
                    bindings::ptep_get(pte),
                    &mut folio,
                )
            };
            if let (Some(page), Some(folio)) = (NonNull::new(page), NonNull::new(folio)) {
                // SAFETY: The helper took a reference on `folio`, the page's folio, handed over
                // here.
                let held = unsafe { HeldPage::from_raw(page, folio) };
                // Cannot fail: there is room (checked above).
                let _ = out.push_within_capacity((addr, held));
            }
            addr += PAGE_SIZE;
            // SAFETY: Still within the table, or one past its last entry (not dereferenced).
            pte = unsafe { pte.add(1) };
        }
        // SAFETY: Mapped and locked above.
        unsafe { bindings::pte_unmap_unlock(table, ptl) };
    }
    addr
}

/// Whether `addr` of `vma` maps a small KSM folio or a zero page that KSM mapped. The caller
/// holds the area's mmap lock.
fn maps_ksm_page(vma: &VmArea, addr: usize) -> bool {
    let mut fw = MaybeUninit::<bindings::folio_walk>::zeroed();
    let flags = bindings::FW_MIGRATION | bindings::FW_ZEROPAGE;
    let (fw_ptr, vma_ptr) = (fw.as_mut_ptr(), vma.as_raw());
    // SAFETY: As in `anon_page_at`.
    let folio = unsafe { bindings::folio_walk_start(fw_ptr, vma_ptr, addr as _, flags) };
    if folio.is_null() {
        return false;
    }
    // SAFETY: As in `anon_page_at`; a small folio is mapped by a PTE, whose value `fw.pte` is.
    unsafe {
        let f = Folio::from_raw(folio);
        let ksm = !f.is_large()
            && (f.is_ksm() || bindings::is_ksm_zero_pte((*fw.as_ptr()).__bindgen_anon_2.pte));
        bindings::folio_walk_end(fw.as_mut_ptr(), vma.as_raw());
        ksm
    }
}

/// Breaks the sharing of a KSM page (or KSM zero page) at `addr` of `vma` by faulting in a
/// private copy, until none is mapped there (C's `break_ksm()`). With `lock_vma`, the area is
/// first write-locked against per-VMA-lock faults. The caller holds the mmap lock.
///
/// Fails with `ENOMEM` if the fault ran out of memory.
pub fn break_ksm(vma: &VmArea, addr: usize, lock_vma: Option<&MmWriteLocked<'_>>) -> Result {
    if let Some(locked) = lock_vma {
        vma.start_write(locked);
    }
    let stop = bindings::vm_fault_reason_VM_FAULT_SIGBUS
        | bindings::vm_fault_reason_VM_FAULT_SIGSEGV
        | bindings::vm_fault_reason_VM_FAULT_OOM;
    let ret = loop {
        // SAFETY: May sleep; we hold only the mmap lock, which allows it.
        unsafe { bindings::cond_resched() };
        if !maps_ksm_page(vma, addr) {
            return Ok(());
        }
        let flags =
            bindings::fault_flag_FAULT_FLAG_UNSHARE | bindings::fault_flag_FAULT_FLAG_REMOTE;
        let vma_ptr = vma.as_raw();
        // SAFETY: The area is valid, its mmap lock held; without `FAULT_FLAG_ALLOW_RETRY` the
        // fault does not drop the lock.
        let ret = unsafe { bindings::handle_mm_fault(vma_ptr, addr as _, flags, ptr::null_mut()) };
        if ret & stop != 0 {
            break ret;
        }
    };
    if ret & bindings::vm_fault_reason_VM_FAULT_OOM != 0 {
        Err(ENOMEM)
    } else {
        Ok(())
    }
}

/// The number of zero pages KSM has mapped (C's `ksm_zero_pages`).
#[inline]
pub fn zero_pages() -> isize {
    // SAFETY: Reads the atomic counter that the KSM implementation defines.
    unsafe { bindings::ksm_zero_pages_read() as isize }
}

/// A folio that the swap-in fault (or swapoff) is about to map at `addr` of `vma`, for KSM to
/// keep or copy (C's `ksm_might_need_to_copy()`).
///
/// # Invariants
///
/// `folio` is locked and is the swap cache folio of a swap entry that `vma` maps at `addr`;
/// `vma`'s mmap lock (or its per-VMA lock) is held for `'a`. So the folio's anon_vma, if it
/// has one, is in the area's anon_vma chain (or is its root), and lives as long as the area.
pub struct SwapIn<'a> {
    folio: &'a FolioGuard<'a>,
    vma: &'a VmArea,
    addr: usize,
}

impl<'a> SwapIn<'a> {
    /// Wraps the arguments of C's `ksm_might_need_to_copy()`.
    ///
    /// # Safety
    ///
    /// `folio` is the swap cache folio of a swap entry that `vma` maps at `addr`, and `vma`'s
    /// mmap lock or per-VMA lock is held for `'a` (as do_swap_page() and unuse_pte() call it).
    #[inline]
    pub unsafe fn new(folio: &'a FolioGuard<'a>, vma: &'a VmArea, addr: usize) -> Self {
        // INVARIANT: By the safety requirements; `FolioGuard` proves the lock.
        Self { folio, vma, addr }
    }

    /// The folio, locked.
    #[inline]
    pub fn folio(&self) -> &FolioGuard<'a> {
        self.folio
    }

    /// Whether the folio is anonymous, not KSM, and placed linearly in the area's own anon_vma
    /// tree at `addr` (C compares `anon_vma->root`): such a folio can be mapped as it is.
    pub fn in_own_anon_vma(&self) -> bool {
        let (f, vma) = (self.folio.folio(), self.vma);
        // SAFETY: The folio is valid; `folio_anon_vma` reads its mapping.
        let av = unsafe { bindings::folio_anon_vma(f.as_raw()) };
        let own = vma.anon_vma_raw();
        if av.is_null() || own.is_null() {
            return false;
        }
        // SAFETY: `av` is in the area's chain and `own` is the area's (type invariants): both
        // live while the area does, which its lock keeps.
        f.index() == vma.linear_page_index(self.addr) && unsafe { (*av).root == (*own).root }
    }

    /// Whether the folio has an anon_vma (is anonymous and not KSM).
    #[inline]
    pub fn has_anon_vma(&self) -> bool {
        // SAFETY: The folio is valid; `folio_anon_vma` only reads its mapping.
        !unsafe { bindings::folio_anon_vma(self.folio.folio().as_raw()) }.is_null()
    }

    /// A private copy of the folio's first page for `addr`, locked, dirty and up to date (C's
    /// swap-in copy of a KSM page). `Ok(None)` when no memory could be had, `EHWPOISON` when the
    /// source could not be read.
    pub fn copy(&self) -> Result<Option<ARef<Folio>>> {
        let (folio, vma, addr) = (self.folio.folio(), self.vma, self.addr);
        // SAFETY: The area is valid and locked (type invariants), `addr` is in it.
        let new = unsafe { bindings::vma_alloc_folio_movable(vma.as_raw(), addr as _) };
        if new.is_null() {
            return Ok(None);
        }
        // SAFETY: `new` is a freshly allocated folio whose one reference we own.
        let new = unsafe { ARef::from_raw(NonNull::new_unchecked(new.cast::<Folio>())) };
        // SAFETY: `new` is valid; charging it to the area's memory cgroup.
        if unsafe {
            bindings::mem_cgroup_charge(new.as_raw(), vma.mm().as_raw(), bindings::GFP_KERNEL)
        } != 0
        {
            return Ok(None);
        }
        // SAFETY: Both pages are valid; the copy handles machine checks.
        if unsafe {
            bindings::copy_mc_user_highpage(
                new.first_page().as_raw(),
                folio.first_page().as_raw(),
                addr as _,
                vma.as_raw(),
            )
        } != 0
        {
            return Err(crate::error::Error::from_errno(
                -(bindings::EHWPOISON as i32),
            ));
        }
        // SAFETY: `new` is ours alone: it may be marked without its lock, and locked by setting
        // the bit (C's `__folio_set_locked()`), which the fault path unlocks.
        unsafe {
            bindings::folio_set_dirty(new.as_raw());
            bindings::__folio_mark_uptodate(new.as_raw());
            bindings::__folio_set_locked(new.as_raw());
            bindings::count_ksm_swpin_copy();
        }
        Ok(Some(new))
    }
}

/// A reverse-map walk the kernel asked of KSM (C's `struct rmap_walk_control`).
///
/// # Invariants
///
/// `rwc` is a valid walk control whose callbacks may be called for the walked folio while the
/// value lives.
pub struct RmapWalk<'a> {
    rwc: NonNull<bindings::rmap_walk_control>,
    _p: PhantomData<&'a mut bindings::rmap_walk_control>,
}

impl RmapWalk<'_> {
    /// Wraps the walk control C passed.
    ///
    /// # Safety
    ///
    /// `rwc` is valid, for a walk of a locked folio, for `'a`.
    #[inline]
    pub unsafe fn from_raw(rwc: *mut bindings::rmap_walk_control) -> Self {
        // INVARIANT: By the safety requirements.
        Self {
            rwc: NonNull::new(rwc).expect("null rmap_walk_control"),
            _p: PhantomData,
        }
    }

    #[inline]
    fn raw(&self) -> *mut bindings::rmap_walk_control {
        self.rwc.as_ptr()
    }

    /// Whether the walker wants locks to be tried, not waited for.
    #[inline]
    pub fn try_lock(&self) -> bool {
        // SAFETY: The control is valid (type invariant).
        unsafe { (*self.raw()).try_lock }
    }

    /// Tells the walker a lock was contended (with `try_lock`).
    #[inline]
    pub fn set_contended(&mut self) {
        // SAFETY: The control is valid and ours to update.
        unsafe { (*self.raw()).contended = true };
    }

    /// Whether the walker skips `vma`.
    pub fn invalid_vma(&mut self, vma: &VmArea) -> bool {
        // SAFETY: The control is valid; its callback takes the area and its own argument.
        unsafe {
            let rwc = self.raw();
            match (*rwc).invalid_vma {
                Some(f) => f(vma.as_raw(), (*rwc).arg),
                None => false,
            }
        }
    }

    /// Reports the mapping of `folio` at `addr` of `vma`; `false` stops the walk.
    pub fn rmap_one(&mut self, folio: &Folio, vma: &VmArea, addr: usize) -> bool {
        // SAFETY: The control is valid; the callback takes the locked folio, an area whose
        // anon_vma lock is held, and an address in it.
        unsafe {
            let rwc = self.raw();
            match (*rwc).rmap_one {
                Some(f) => f(folio.as_raw(), vma.as_raw(), addr as _, (*rwc).arg),
                None => true,
            }
        }
    }

    /// Whether the walker is done with `folio`.
    #[inline]
    pub fn done(&mut self, folio: &Folio) -> bool {
        // SAFETY: The control is valid.
        unsafe {
            match (*self.raw()).done {
                Some(f) => f(folio.as_raw()) != 0,
                None => false,
            }
        }
    }
}

/// The list memory-failure collects the processes to kill in (C's `to_kill`).
pub struct KillList<'a> {
    list: *mut bindings::list_head,
    _p: PhantomData<&'a mut bindings::list_head>,
}

impl KillList<'_> {
    /// Wraps the list C passed.
    ///
    /// # Safety
    ///
    /// `list` is memory-failure's `to_kill` list, valid for `'a`.
    #[inline]
    pub unsafe fn from_raw(list: *mut bindings::list_head) -> Self {
        Self {
            list,
            _p: PhantomData,
        }
    }

    /// Adds to the list every process that maps `page` at `addr` through the areas of `av`
    /// (C's loop in `collect_procs_ksm()`).
    #[cfg(CONFIG_MEMORY_FAILURE)]
    pub fn add_mappers(&mut self, av: &AnonVma, page: &FolioPage, addr: usize, force_early: bool) {
        let guard = av.lock_read();
        // SAFETY: Walking the task list under RCU, as `for_each_process` requires; each task is
        // valid while the RCU read lock is held.
        unsafe {
            bindings::rcu_read_lock();
            let init = ptr::addr_of_mut!(bindings::init_task);
            let mut tsk = bindings::next_process(init);
            while tsk != init {
                let t = bindings::task_early_kill(tsk, i32::from(force_early));
                if !t.is_null() {
                    // `task_struct` is read through a helper: bindgen's layout of it is not C's
                    // (see `mm::layout`).
                    let mm = bindings::task_mm(t);
                    for vma in guard.vmas() {
                        if (*vma.as_raw()).vm_mm == mm {
                            bindings::add_to_kill_ksm(
                                t,
                                page.as_raw(),
                                vma.as_raw(),
                                self.list,
                                addr as _,
                            );
                        }
                    }
                }
                tsk = bindings::next_process(tsk);
            }
            bindings::rcu_read_unlock();
        }
    }

    /// Without `CONFIG_MEMORY_FAILURE` memory failure never calls in: there is nothing to add.
    #[cfg(not(CONFIG_MEMORY_FAILURE))]
    #[inline]
    pub fn add_mappers(&mut self, _: &AnonVma, _: &FolioPage, _: usize, _: bool) {}
}

/// What a KSM implementation gives the rest of the kernel: the functions of `<linux/ksm.h>`,
/// with the locks their callers hold as arguments. [`crate::ksm_abi!`] turns an implementation
/// into the C symbols.
pub trait KsmOps {
    /// `madvise(MADV_MERGEABLE / MADV_UNMERGEABLE)` on `[start, end)` of `vma`; updates `flags`,
    /// the area's flags to be.
    fn madvise(
        locked: &MmWriteLocked<'_>,
        vma: &VmArea,
        start: usize,
        end: usize,
        advice: i32,
        flags: &mut usize,
    ) -> Result;
    /// A new area of an address space that merges everything (`PR_SET_MEMORY_MERGE`).
    fn add_vma(locked: &MmWriteLocked<'_>, vma: &VmArea);
    /// `prctl(PR_SET_MEMORY_MERGE, 1)`.
    fn enable_merge_any(locked: &MmWriteLocked<'_>) -> Result;
    /// `prctl(PR_SET_MEMORY_MERGE, 0)`.
    fn disable_merge_any(locked: &MmWriteLocked<'_>) -> Result;
    /// Turns KSM off for the address space (unmerging all).
    fn disable(locked: &MmWriteLocked<'_>) -> Result;
    /// Registers the address space with KSM (fork, exec of a merge-any process, madvise).
    fn enter(mm: &Mm) -> Result;
    /// The address space is going away.
    fn exit(mm: &Mm);
    /// Whether a swapped-in folio must be copied for `addr` of `vma` (C's
    /// `ksm_might_need_to_copy()`): `Ok(None)` keeps it, `Ok(Some(new))` uses a copy, and the
    /// error `ENOMEM` (no copy could be made) or `EHWPOISON` fails the fault.
    fn might_need_to_copy(swapin: &SwapIn<'_>) -> Result<Option<ARef<Folio>>>;
    /// The reverse-map walk of a locked KSM folio.
    fn rmap_walk(folio: &FolioGuard<'_>, walk: &mut RmapWalk<'_>);
    /// Migration moved KSM folio `old` to `new` (both locked).
    fn migrate(new: &FolioGuard<'_>, old: &FolioGuard<'_>);
    /// Memory failure hit `page` of the KSM folio: collect the processes that map it.
    fn collect_procs(
        folio: &FolioGuard<'_>,
        page: &FolioPage,
        to_kill: &mut KillList<'_>,
        force_early: bool,
    );
    /// What KSM saves the address space, in bytes (`/proc/<pid>/ksm_stat`).
    fn process_profit(mm: &Mm) -> isize;
}

/// Exports a [`KsmOps`] implementation as the functions of `<linux/ksm.h>`.
///
/// Each function turns the C arguments into references whose lifetimes and lock proofs follow
/// what its C callers guarantee (documented at each conversion).
#[macro_export]
macro_rules! ksm_abi {
    ($t:ty) => {
        const _: () = {
            use $crate::bindings;
            use $crate::mm::{
                folio::{Folio, FolioGuard, FolioPage},
                ksm::{self, KsmOps},
                virt::VmArea,
                Mm, MmWriteLocked,
            };

            #[inline]
            fn errno(r: $crate::error::Result) -> ::core::ffi::c_int {
                match r {
                    Ok(()) => 0,
                    Err(e) => e.to_errno(),
                }
            }

            /// # Safety
            ///
            /// Called by `madvise()`/`mremap()` with `vma`'s mmap lock held for writing.
            #[no_mangle]
            unsafe extern "C" fn ksm_madvise(
                vma: *mut bindings::vm_area_struct,
                start: ::core::ffi::c_ulong,
                end: ::core::ffi::c_ulong,
                advice: ::core::ffi::c_int,
                vm_flags: *mut ::core::ffi::c_ulong,
            ) -> ::core::ffi::c_int {
                // SAFETY: The callers hold the area's mmap lock for writing for the call, so the
                // area and its mm are valid; `vm_flags` points to the flags being built.
                unsafe {
                    let vma = VmArea::from_raw(vma);
                    let locked = MmWriteLocked::new(vma.mm());
                    let mut flags = *vm_flags as usize;
                    let r = <$t as KsmOps>::madvise(
                        &locked,
                        vma,
                        start as usize,
                        end as usize,
                        advice,
                        &mut flags,
                    );
                    *vm_flags = flags as _;
                    errno(r)
                }
            }

            /// # Safety
            ///
            /// Called when a new area is set up, with the mmap lock held for writing.
            #[no_mangle]
            unsafe extern "C" fn ksm_add_vma(vma: *mut bindings::vm_area_struct) {
                // SAFETY: As in `ksm_madvise`.
                unsafe {
                    let vma = VmArea::from_raw(vma);
                    let locked = MmWriteLocked::new(vma.mm());
                    <$t as KsmOps>::add_vma(&locked, vma)
                }
            }

            /// # Safety
            ///
            /// Called by `prctl()` with the mmap lock of `mm` held for writing.
            #[no_mangle]
            unsafe extern "C" fn ksm_enable_merge_any(
                mm: *mut bindings::mm_struct,
            ) -> ::core::ffi::c_int {
                // SAFETY: The caller holds `mm`'s mmap lock for writing for the call.
                unsafe {
                    errno(<$t as KsmOps>::enable_merge_any(&MmWriteLocked::new(
                        Mm::from_raw(mm),
                    )))
                }
            }

            /// # Safety
            ///
            /// As `ksm_enable_merge_any`.
            #[no_mangle]
            unsafe extern "C" fn ksm_disable_merge_any(
                mm: *mut bindings::mm_struct,
            ) -> ::core::ffi::c_int {
                // SAFETY: As in `ksm_enable_merge_any`.
                unsafe {
                    errno(<$t as KsmOps>::disable_merge_any(&MmWriteLocked::new(
                        Mm::from_raw(mm),
                    )))
                }
            }

            /// # Safety
            ///
            /// Called with the mmap lock of `mm` held for writing.
            #[no_mangle]
            unsafe extern "C" fn ksm_disable(mm: *mut bindings::mm_struct) -> ::core::ffi::c_int {
                // SAFETY: As in `ksm_enable_merge_any`.
                unsafe {
                    errno(<$t as KsmOps>::disable(&MmWriteLocked::new(Mm::from_raw(
                        mm,
                    ))))
                }
            }

            /// # Safety
            ///
            /// `mm` is a valid address space (fork, exec, madvise, prctl hold it).
            #[no_mangle]
            unsafe extern "C" fn __ksm_enter(mm: *mut bindings::mm_struct) -> ::core::ffi::c_int {
                // SAFETY: The callers keep `mm` valid for the call.
                unsafe { errno(<$t as KsmOps>::enter(Mm::from_raw(mm))) }
            }

            /// # Safety
            ///
            /// `mm` is an address space going away (`__mmput()`), valid for the call.
            #[no_mangle]
            unsafe extern "C" fn __ksm_exit(mm: *mut bindings::mm_struct) {
                // SAFETY: `__mmput()` keeps `mm` valid for the call.
                unsafe { <$t as KsmOps>::exit(Mm::from_raw(mm)) }
            }

            /// # Safety
            ///
            /// Called by the swap-in fault path with `folio` locked and `vma`'s locks held.
            #[no_mangle]
            unsafe extern "C" fn ksm_might_need_to_copy(
                folio: *mut bindings::folio,
                vma: *mut bindings::vm_area_struct,
                addr: ::core::ffi::c_ulong,
            ) -> *mut bindings::folio {
                // SAFETY: The folio is locked and referenced by the fault path for the call, the
                // area valid under its locks. The guard does not unlock: the fault path does.
                // The swap cache folio is that of a swap entry `vma` maps at `addr`.
                unsafe {
                    let guard = ::core::mem::ManuallyDrop::new(ksm::locked_by_caller(
                        Folio::from_raw(folio),
                    ));
                    let swapin = ksm::SwapIn::new(&guard, VmArea::from_raw(vma), addr as usize);
                    match <$t as KsmOps>::might_need_to_copy(&swapin) {
                        Ok(None) => folio,
                        Ok(Some(new)) => $crate::types::ARef::into_raw(new).as_ptr().cast(),
                        Err(e) if e == $crate::error::code::ENOMEM => ::core::ptr::null_mut(),
                        Err(e) => bindings::ERR_PTR(e.to_errno() as _).cast(),
                    }
                }
            }

            /// # Safety
            ///
            /// Called by `rmap_walk()` with the KSM folio locked.
            #[no_mangle]
            unsafe extern "C" fn rmap_walk_ksm(
                folio: *mut bindings::folio,
                rwc: *mut bindings::rmap_walk_control,
            ) {
                // SAFETY: The folio is locked (and referenced) by the caller for the call; `rwc`
                // is the caller's walk control. The guard does not unlock.
                unsafe {
                    let guard = ::core::mem::ManuallyDrop::new(ksm::locked_by_caller(
                        Folio::from_raw(folio),
                    ));
                    let mut walk = ksm::RmapWalk::from_raw(rwc);
                    <$t as KsmOps>::rmap_walk(&guard, &mut walk)
                }
            }

            /// # Safety
            ///
            /// Called by migration with both folios locked.
            #[no_mangle]
            unsafe extern "C" fn folio_migrate_ksm(
                newfolio: *mut bindings::folio,
                folio: *mut bindings::folio,
            ) {
                // SAFETY: Both folios are locked and referenced by migration for the call.
                unsafe {
                    let new = ::core::mem::ManuallyDrop::new(ksm::locked_by_caller(
                        Folio::from_raw(newfolio),
                    ));
                    let old = ::core::mem::ManuallyDrop::new(ksm::locked_by_caller(
                        Folio::from_raw(folio),
                    ));
                    <$t as KsmOps>::migrate(&new, &old)
                }
            }

            /// # Safety
            ///
            /// Called by memory failure with the folio locked.
            #[no_mangle]
            unsafe extern "C" fn collect_procs_ksm(
                folio: *mut bindings::folio,
                page: *mut bindings::page,
                to_kill: *mut bindings::list_head,
                force_early: ::core::ffi::c_int,
            ) {
                // SAFETY: The folio is locked and referenced by memory failure for the call;
                // `page` is its failed page and `to_kill` its list.
                unsafe {
                    let guard = ::core::mem::ManuallyDrop::new(ksm::locked_by_caller(
                        Folio::from_raw(folio),
                    ));
                    let mut list = ksm::KillList::from_raw(to_kill);
                    <$t as KsmOps>::collect_procs(
                        &guard,
                        FolioPage::from_raw(page),
                        &mut list,
                        force_early != 0,
                    )
                }
            }

            /// # Safety
            ///
            /// `mm` is valid (`/proc` holds it).
            #[no_mangle]
            unsafe extern "C" fn ksm_process_profit(
                mm: *mut bindings::mm_struct,
            ) -> ::core::ffi::c_long {
                // SAFETY: `/proc` keeps `mm` valid for the call.
                unsafe { <$t as KsmOps>::process_profit(Mm::from_raw(mm)) as _ }
            }
        };
    };
}

/// A guard for a folio that C code locked and will unlock itself (used by [`ksm_abi!`], which
/// never drops it).
///
/// # Safety
///
/// The folio is locked by the current thread and stays locked while the guard is used.
#[doc(hidden)]
#[inline]
pub unsafe fn locked_by_caller(folio: &Folio) -> FolioGuard<'_> {
    // SAFETY: By the safety requirements.
    unsafe { FolioGuard::assume_locked(folio) }
}

/// KSM's trace events (`include/trace/events/ksm.h`). Pointers are only printed, as identities.
pub mod trace {
    use crate::bindings;
    use core::ffi::c_void;

    /// A pass over all address spaces starts.
    #[inline]
    pub fn start_scan(seq: u64, rmap_items: u64) {
        // SAFETY: Trace points take plain values.
        unsafe { bindings::trace_ksm_start_scan_rust(seq as _, rmap_items as _) };
    }

    /// A pass ends.
    #[inline]
    pub fn stop_scan(seq: u64, rmap_items: u64) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_stop_scan_rust(seq as _, rmap_items as _) };
    }

    /// An address space is registered with KSM.
    #[inline]
    pub fn enter(mm: *const c_void) {
        // SAFETY: As above; the pointer is only printed.
        unsafe { bindings::trace_ksm_enter_rust(mm as _) };
    }

    /// An address space leaves KSM.
    #[inline]
    pub fn exit(mm: *const c_void) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_exit_rust(mm as _) };
    }

    /// A page was merged into `pfn` (or the merge failed with `err`).
    #[inline]
    pub fn merge_one_page(pfn: usize, item: *const c_void, mm: *const c_void, err: i32) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_merge_one_page_rust(pfn as _, item as _, mm as _, err) };
    }

    /// A page was merged with a KSM page (or became one).
    pub fn merge_with_ksm_page(
        kpage: *const c_void,
        pfn: usize,
        item: *const c_void,
        mm: *const c_void,
        err: i32,
    ) {
        // SAFETY: As above.
        unsafe {
            bindings::trace_ksm_merge_with_ksm_page_rust(
                kpage as _, pfn as _, item as _, mm as _, err,
            )
        };
    }

    /// A KSM page left the stable tree.
    #[inline]
    pub fn remove_ksm_page(pfn: usize) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_remove_ksm_page_rust(pfn as _) };
    }

    /// An rmap_item left a KSM page.
    #[inline]
    pub fn remove_rmap_item(pfn: usize, item: *const c_void, mm: *const c_void) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_remove_rmap_item_rust(pfn as _, item as _, mm as _) };
    }

    /// The scan-time advisor set `pages_to_scan`.
    #[inline]
    pub fn advisor(scan_time: i64, pages_to_scan: usize, cpu_percent: u32) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_advisor_rust(scan_time, pages_to_scan as _, cpu_percent) };
    }
}
