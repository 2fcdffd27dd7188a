// SPDX-License-Identifier: GPL-2.0

//! The page-table work of Kernel Samepage Merging: finding the anonymous pages an area maps,
//! write-protecting the entry that maps one, replacing it with a KSM page or the zero page, and
//! breaking KSM sharing by a fault.
//!
//! C headers: [`include/linux/pgtable.h`](srctree/include/linux/pgtable.h),
//! [`include/linux/pagewalk.h`](srctree/include/linux/pagewalk.h),
//! [`include/linux/rmap.h`](srctree/include/linux/rmap.h),
//! [`include/linux/mmu_notifier.h`](srctree/include/linux/mmu_notifier.h)
//!
//! Each function is given an area as a [`VmArea`], whose reference is the proof that the current
//! thread holds the area's mmap lock, which keeps the area's page tables from being freed while
//! they are walked, and takes the page table lock it needs itself, for no longer than the call: a
//! page table entry leaves this module only as a value ([`Pte`]). Each looks only at addresses in
//! the area, whose page tables are the ones the mmap lock keeps. [`write_protect`] and
//! [`replace_if_same`] change an entry only inside an MMU-notifier invalidation, and only after
//! clearing it and flushing it from the TLBs, as C's `write_protect_page()` and `replace_page()`
//! do.
//!
//! An area found by the reverse map, under an anon_vma's lock alone, is an
//! [`RmapVmArea`](super::virt::RmapVmArea), which these functions do not take:
//!
// TODO: `compile_fail` once the kernel's doctests support it: the test builder saves every
// doctest for the KUnit suite, which would then not build.
//! ```ignore
//! use kernel::mm::{anon_vma::AnonVma, pgtable};
//!
//! fn walk(av: &AnonVma, addr: usize) {
//!     let guard = av.lock_read();
//!     for vma in guard.vmas() {
//!         // Expected `&VmArea`, found `&RmapVmArea`: the mmap lock is not held.
//!         let _ = pgtable::anon_page_at(vma, addr);
//!     }
//! }
//! ```
//!
//! This is apart from [`super::ksm`] because it works on folios, areas and page tables only and
//! never follows a folio to its stable node; [`super::ksm`] keeps what `<linux/ksm.h>` defines.
//! It is KSM's all the same: the zero page is mapped with KSM's accounting, and [`break_ksm`]
//! looks for KSM folios and KSM's zero pages.

use super::{
    folio::{Folio, FolioPage, HeldPage, LockedFolio, Pfn},
    virt::VmArea,
    Mm, MmWriteLocked,
};
use crate::{
    alloc::KVVec,
    bindings,
    error::{code::*, Result},
    page::PAGE_SIZE,
};
use core::{
    mem::MaybeUninit,
    ptr::{self, NonNull},
};

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

    /// This entry with the write-tracking bits of `old` added: soft-dirty (written since the
    /// last `clear_refs`, for checkpointing) and uffd-wp (writes trap to userfaultfd). An entry
    /// that maps another page of the same contents in place of `old`'s keeps them, as the
    /// kernel's unsharing fault does; where an architecture has neither bit, this is the entry
    /// unchanged.
    #[inline]
    pub fn with_tracking_of(self, old: Pte) -> Pte {
        let mut e = self.0;
        // SAFETY: Pure functions of values.
        unsafe {
            if bindings::pte_soft_dirty(old.0) != 0 {
                e = bindings::pte_mksoft_dirty(e);
            }
            if bindings::pte_uffd_wp(old.0) != 0 {
                e = bindings::pte_mkuffd_wp(e);
            }
        }
        Pte(e)
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
/// `folio` at `addr` (C's `write_protect_page()`), and returns it. The caller holds one reference
/// on the folio (besides its mappings); `vma` shows that it holds the area's mmap lock.
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
    /// The page of a small KSM folio, held (which gets a new mapping and reference).
    ///
    /// [`replace_if_same`] refuses any other page. The reverse map finds a KSM folio's mappings
    /// through KSM, wherever they are, and nothing maps a KSM folio writable; another anonymous
    /// folio would be mapped where its anon_vma and index do not place it (the reverse map would
    /// miss the mapping, and the anon_vma could be freed while the folio still points at it), and
    /// may be mapped writable elsewhere; a file folio, the zero page, or any other page would
    /// be mapped as an anonymous page, which it is not (its reverse map would miss the mapping,
    /// and the zero page is never counted as mapped).
    Ksm(&'a HeldPage),
    /// The zero page (KSM's `use_zero_pages`), marked dirty to tell it was KSM's.
    Zero,
}

/// Write-protects the page table entry through which `vma` maps the locked small folio `folio`
/// at `addr` (as [`write_protect`]), and if `same()` then says that the page's contents equal
/// those of `with`, maps `with` there instead (C's `write_protect_page()`, `pages_identical()` and
/// `replace_page()`); the folio loses that mapping and the reference it held. The caller holds
/// one reference on the folio (besides its mappings); `vma` shows that it holds the area's mmap
/// lock.
///
/// C takes the page table lock twice, walks the page tables twice and flushes the entry from the
/// TLBs twice; here the entry stays locked, and empty, from write-protection to replacement, so
/// `same()` runs under a spinlock and must not sleep. While it runs, nothing can write the page
/// through this mapping, and the reference count check has shown that nothing else can either.
///
/// The new entry keeps the old one's soft-dirty and uffd-wp bits ([`Pte::with_tracking_of`]);
/// C's drops them.
///
/// Fails with `EINVAL`, before anything is done, if `with` is a page that is not of a small KSM
/// folio; with `EFAULT` if the folio is not mapped there or is pinned, or if the contents differ
/// (the entry is then left write-protected, as C leaves it).
pub fn replace_if_same(
    vma: &VmArea,
    addr: usize,
    folio: &impl LockedFolio,
    with: Replacement<'_>,
    same: impl FnOnce() -> bool,
) -> Result {
    if let Replacement::Ksm(held) = &with {
        // Read without the folio's lock: a KSM folio stays one until it is freed (C: "KSM folios
        // are never downgraded"), which the reference `held` keeps from happening.
        let k = held.folio();
        if !k.is_ksm() || k.is_large() {
            return Err(EINVAL);
        }
    }
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
            // SAFETY: `kfolio` is valid (held) and a small KSM folio (checked above), whose page
            // `kpage` is: C needs the folio locked only if it is not KSM, so that it is not made
            // KSM meanwhile. `addr` is in `vma` (`small_folio_at`), whose mmap lock is held (type
            // invariant); the entry is locked and empty.
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
    // Unlike C's `replace_page()`, the new entry keeps the old one's soft-dirty and uffd-wp
    // bits: without them a checkpoint would miss a write made before the merge, and a
    // userfaultfd write-protection (QEMU's background snapshot) one made after it.
    pte.set(new.with_tracking_of(entry));
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
/// (not device memory); `None` if `addr` is not in the area. `vma` shows that the caller holds
/// the area's mmap lock.
pub fn anon_page_at(vma: &VmArea, addr: usize) -> Option<HeldPage> {
    if !vma.contains(addr) {
        return None;
    }
    let mut fw = MaybeUninit::<bindings::folio_walk>::zeroed();
    // SAFETY: `fw` is writable, the area valid and its mmap lock held (type invariant), `addr` in
    // the area. On success the walk holds the page table lock until `folio_walk_end`.
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

/// The callback of a [`walk_tables`]: given a page middle directory entry that is not empty and
/// the range `[start, end)` of the area it covers, it returns `true` to stop the walk there.
type TableFn<'f> = dyn FnMut(*mut bindings::pmd_t, usize, usize) -> bool + 'f;

/// `walk_page_range_vma()`'s `pmd_entry` for [`walk_tables`].
///
/// # Safety
///
/// Called by the kernel's page walker only, with the `private` that [`walk_tables`] gave it.
unsafe extern "C" fn walk_tables_entry(
    pmd: *mut bindings::pmd_t,
    addr: usize,
    next: usize,
    walk: *mut bindings::mm_walk,
) -> core::ffi::c_int {
    // SAFETY: `walk` is the walker's own state; its `private` is the `&mut &mut TableFn` that
    // `walk_tables` passed, which outlives the walk and is used by nobody else meanwhile.
    let f = unsafe { &mut *((*walk).private as *mut &mut TableFn<'_>) };
    core::ffi::c_int::from(f(pmd, addr, next))
}

/// The page walker's operations for [`walk_tables`]: a PMD callback, under the mmap lock held
/// for reading at least.
static WALK_TABLES: bindings::mm_walk_ops = bindings::mm_walk_ops {
    pmd_entry: Some(walk_tables_entry),
    walk_lock: bindings::page_walk_lock_PGWALK_RDLOCK,
    // SAFETY: All zeroes is a valid `mm_walk_ops`: no other callback.
    ..unsafe { MaybeUninit::zeroed().assume_init() }
};

/// Walks the page tables that map `[start, end)` of `vma`, calling `f` for each page middle
/// directory entry that is not empty (a page table, a huge page, or a migration entry of one)
/// with the part of the range it covers, until `f` returns `true`; returns whether it did. The
/// kernel's page walker (`walk_page_range_vma()`) skips empty entries at every level, so a walk
/// costs what the range maps, not what it spans: a sparse terabyte is a few steps. The range is
/// in the area, and `vma` shows that the caller holds its mmap lock, which keeps its tables.
fn walk_tables(vma: &VmArea, start: usize, end: usize, f: &mut TableFn<'_>) -> bool {
    if start >= end {
        return false;
    }
    let mut f = f;
    let private = (&mut f as *mut &mut TableFn<'_>).cast();
    // SAFETY: The area is valid and its mmap lock held (type invariant of `VmArea`), as
    // `PGWALK_RDLOCK` asks; `[start, end)` is in the area (callers cut it to the area, and the
    // walker checks it again); `private` is what `walk_tables_entry` expects, valid for the walk.
    let ret = unsafe {
        bindings::walk_page_range_vma(vma.as_raw(), start as _, end as _, &WALK_TABLES, private)
    };
    ret > 0
}

/// Collects the anonymous pages mapped in `vma` from `addr` up to `end` that are candidates for
/// KSM (as [`anon_page_at`] takes them), each with a reference and its address, into `out` until
/// it holds `max` of them (or is full), looking at no more than `*tables` page tables (counting
/// them off), so that the caller may reschedule or stop between calls; returns the address after
/// the last one looked at (`end` if every one was). Only addresses in the area are looked at: the
/// range is cut to it. `vma` shows that the caller holds the area's mmap lock.
///
/// Only the page tables that are mapped are visited ([`walk_tables`]), and the entries of one
/// page table are read under one hold of its lock, where C's scan takes the lock again for every
/// page it returns; a range mapped by a huge page is taken one page at a time, as C does.
pub fn anon_pages(
    vma: &VmArea,
    addr: usize,
    end: usize,
    out: &mut KVVec<(usize, HeldPage)>,
    max: usize,
    tables: &mut usize,
) -> usize {
    let mm = vma.mm();
    // The mmap lock keeps the page tables of the area's range only.
    let start = addr.max(vma.start());
    let end = end.min(vma.end());
    let max = max.min(out.capacity());
    if out.len() >= max || *tables == 0 {
        return start;
    }
    let mut stopped = end;
    walk_tables(vma, start, end, &mut |pmd, mut addr, stop| {
        let mut ptl: *mut bindings::spinlock_t = ptr::null_mut();
        // SAFETY: The walker gives `pmd`, an entry of this mm's tables for `addr` in the area,
        // which the mmap lock keeps; the helper checks that it maps a page table, and on success
        // maps it and locks it.
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
        } else {
            let mut pte = table;
            while addr < stop && out.len() < max {
                let nr = ((stop - addr) / PAGE_SIZE) as u32;
                let (mut idx, mut folio) = (0u32, ptr::null_mut());
                // SAFETY: `pte` is the entry of `addr` in the table mapped and locked above, and
                // the `nr` entries from it are in that table (`stop` is the end of the range it
                // maps); the area is valid, its mmap lock held.
                let page = unsafe {
                    bindings::next_anon_page_get(
                        vma.as_raw(),
                        addr as _,
                        pte,
                        nr,
                        &mut idx,
                        &mut folio,
                    )
                };
                // The entries before `idx` map no candidate; entry `idx`, if found, does.
                let mut step = idx.min(nr) as usize;
                if let (Some(page), Some(folio)) = (NonNull::new(page), NonNull::new(folio)) {
                    // SAFETY: The helper took a reference on `folio`, the folio of `page`, which
                    // entry `idx` maps, handed over here.
                    let held = unsafe { HeldPage::from_raw(page, folio) };
                    // Cannot fail: there is room (checked above).
                    let _ = out.push_within_capacity((addr + step * PAGE_SIZE, held));
                    step += 1;
                }
                addr += step * PAGE_SIZE;
                // SAFETY: Still within the table, or one past its last entry (not dereferenced).
                pte = unsafe { pte.add(step) };
            }
            // SAFETY: Mapped and locked above.
            unsafe { bindings::pte_unmap_unlock(table, ptl) };
        }
        *tables -= 1;
        let stop_here = out.len() >= max || *tables == 0;
        if stop_here {
            stopped = addr;
        }
        stop_here
    });
    stopped
}

/// What [`next_ksm_page`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KsmSearch {
    /// A KSM page, or a zero page KSM mapped, is mapped at this address.
    At(usize),
    /// None is mapped below this address (the end of the range if the search got there).
    NoneBelow(usize),
}

/// Finds the lowest address of `[addr, end)` of `vma` that maps a small KSM folio (or a
/// migration entry of one) or a zero page KSM mapped: what [`break_ksm`] must break there. It
/// visits only the page tables that are mapped, and at most `*tables` of them, counting them off,
/// so that the caller may reschedule, look for signals, or drop the mmap lock between calls;
/// huge pages are passed over (a KSM folio is small). Only addresses in the area are looked at:
/// the range is cut to it. `vma` shows that the caller holds the area's mmap lock.
pub fn next_ksm_page(vma: &VmArea, addr: usize, end: usize, tables: &mut usize) -> KsmSearch {
    let mm = vma.mm();
    let start = addr.max(vma.start());
    let end = end.min(vma.end());
    if *tables == 0 {
        return KsmSearch::NoneBelow(start);
    }
    let mut found = KsmSearch::NoneBelow(end);
    walk_tables(vma, start, end, &mut |pmd, addr, stop| {
        let mut ptl: *mut bindings::spinlock_t = ptr::null_mut();
        // SAFETY: The walker gives `pmd`, an entry of this mm's tables for `addr` in the area,
        // which the mmap lock keeps; `pte_offset_map_lock()` fails (`NULL`) unless it maps a
        // page table, which it then maps and locks.
        let table = unsafe { bindings::pte_offset_map_lock(mm.as_raw(), pmd, addr as _, &mut ptl) };
        if !table.is_null() {
            let nr = ((stop - addr) / PAGE_SIZE) as u32;
            // SAFETY: `table` is the entry of `addr` in the table mapped and locked above, and
            // the `nr` entries from it are in that table (`stop` is the end of the range it
            // maps); the area is valid, its mmap lock held.
            let idx = unsafe { bindings::next_ksm_pte(vma.as_raw(), addr as _, table, nr) };
            if idx < nr {
                found = KsmSearch::At(addr + idx as usize * PAGE_SIZE);
            }
            // SAFETY: Mapped and locked above.
            unsafe { bindings::pte_unmap_unlock(table, ptl) };
        }
        *tables -= 1;
        if matches!(found, KsmSearch::At(_)) {
            return true;
        }
        if *tables == 0 {
            found = KsmSearch::NoneBelow(stop);
            return true;
        }
        false
    });
    found
}

/// Whether `addr` of `vma` maps a small KSM folio or a zero page that KSM mapped. `addr` is in
/// the area.
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
/// first write-locked against per-VMA-lock faults. `vma` shows that the caller holds the mmap
/// lock.
///
/// Fails with `EFAULT` if `addr` is not in the area (a fault there would build page tables
/// outside it), and with `ENOMEM` if the fault ran out of memory.
pub fn break_ksm(vma: &VmArea, addr: usize, lock_vma: Option<&MmWriteLocked<'_>>) -> Result {
    if !vma.contains(addr) {
        return Err(EFAULT);
    }
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
        // SAFETY: The area is valid, its mmap lock held (type invariant), `addr` in it; without
        // `FAULT_FLAG_ALLOW_RETRY` the fault does not drop the lock.
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
