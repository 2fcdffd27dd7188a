// SPDX-License-Identifier: GPL-2.0

//! Folios and their pages: C's `struct folio` and `struct page`.
//!
//! C headers: [`include/linux/mm.h`](srctree/include/linux/mm.h),
//! [`include/linux/page-flags.h`](srctree/include/linux/page-flags.h),
//! [`include/linux/pagemap.h`](srctree/include/linux/pagemap.h)
//!
//! [`ARef<Folio>`] holds a reference on a folio (`folio_get()`/`folio_put()`); [`FolioGuard`] is
//! its lock, held; [`HeldPage`] is one page of a folio kept by such a reference. [`Pfn`] is a page
//! frame number that came from a folio, which is what makes turning it back into a folio safe.
//!
//! The folio, its pages, the references and the locks stay in one file (a little over 700
//! lines): each type's invariants are stated in terms of the others' (a held page's reference is
//! its folio's; a lock guard's folio is the held page's, until a split changes it).

use super::contents::ReadOnlyMappedPage;
use crate::{
    bindings,
    types::{ARef, AlwaysRefCounted, Opaque},
};
use core::{
    cell::Cell,
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicUsize, Ordering},
};

/// A folio: a C `struct folio`.
///
/// # Invariants
///
/// The folio is valid (its `struct folio` exists and is one) for the lifetime of the reference;
/// [`ARef<Folio>`] holds a reference count on it.
#[repr(transparent)]
pub struct Folio {
    folio: Opaque<bindings::folio>,
}

// SAFETY: Folios are used from any thread; their state changes under their own lock or atomics.
unsafe impl Send for Folio {}
// SAFETY: As above.
unsafe impl Sync for Folio {}

// SAFETY: `folio_get()` and `folio_put()` keep the folio allocated while the count is non-zero.
unsafe impl AlwaysRefCounted for Folio {
    #[inline]
    fn inc_ref(&self) {
        // SAFETY: `&self` shows the count is non-zero.
        unsafe { bindings::folio_get(self.as_raw()) };
    }

    #[inline]
    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller gives up a reference it owns.
        unsafe { bindings::folio_put(obj.cast().as_ptr()) };
    }
}

macro_rules! folio_test {
    ($(#[$m:meta] $name:ident => $helper:ident),* $(,)?) => {
        $(
            #[$m]
            #[inline]
            pub fn $name(&self) -> bool {
                // SAFETY: The folio is valid (type invariant); its flags are read atomically.
                unsafe { bindings::$helper(self.as_raw()) }
            }
        )*
    };
}

impl Folio {
    /// The folio at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is a valid folio that stays valid for `'a` (referenced, or locked by the caller).
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::folio) -> &'a Folio {
        // SAFETY: `Folio` is a transparent wrapper; validity is the caller's promise.
        unsafe { &*ptr.cast() }
    }

    /// The C structure.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::folio {
        super::opaque_ptr(&self.folio)
    }

    /// The page frame number of the folio's first page.
    #[inline]
    pub fn pfn(&self) -> Pfn {
        // SAFETY: The folio is valid.
        Pfn(unsafe { bindings::folio_pfn(self.as_raw()) } as usize)
    }

    folio_test! {
        /// Whether the folio is anonymous (KSM folios are too).
        is_anon => folio_test_anon,
        /// Whether the folio is a KSM folio.
        is_ksm => folio_test_ksm,
        /// Whether the folio is on an LRU list (a page of a process or of the page cache).
        is_lru => folio_test_lru,
        /// Whether the folio has more than one page.
        is_large => folio_test_large,
        /// Whether the folio is in the swap cache.
        in_swapcache => folio_test_swapcache,
        /// Whether the folio's contents are valid.
        is_uptodate => folio_test_uptodate,
        /// Whether the folio is device memory.
        is_zone_device => folio_is_zone_device,
        /// Whether the folio is dirty.
        is_dirty => folio_test_dirty,
        /// Whether some page table maps the folio.
        is_mapped => folio_mapped,
        /// Whether the folio is locked.
        is_locked => folio_test_locked,
    }

    /// How many page tables map the folio.
    #[inline]
    pub fn mapcount(&self) -> i32 {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_mapcount(self.as_raw()) }
    }

    /// The folio's reference count.
    #[inline]
    pub fn ref_count(&self) -> i32 {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_ref_count(self.as_raw()) }
    }

    /// The page offset the folio had in its anon_vma when it was last anonymous.
    #[inline]
    pub fn index(&self) -> usize {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_index(self.as_raw()) as usize }
    }

    /// The raw value of `folio->mapping` (read once).
    #[inline]
    pub fn mapping_raw(&self) -> usize {
        // SAFETY: The folio is valid; the field is read with `READ_ONCE()`.
        unsafe { bindings::folio_mapping_raw(self.as_raw()) as usize }
    }

    /// The folio's first page (C's `folio_page(folio, 0)`, that is `&folio->page`).
    ///
    /// Every folio has a first page, so this needs no bound. Other pages are not offered: a page
    /// past the end of a folio is not one of its pages (its `struct page` may not even exist),
    /// and the bound, C's `folio_nr_pages()`, is an inline function without a binding here.
    #[inline]
    pub fn first_page(&self) -> &FolioPage {
        // The first page is the folio's own `struct page`, at its start (`kernel::mm::layout`
        // checks the offset against C's).
        const _: () = assert!(core::mem::offset_of!(bindings::folio, __bindgen_anon_1.page) == 0);
        let page = self.as_raw().cast::<bindings::page>();
        // SAFETY: `page` is the folio's first page, which is valid as long as the folio is
        // (type invariant), that is, for the borrow of `self`.
        unsafe { FolioPage::from_raw(page) }
    }

    /// Takes a new reference.
    #[inline]
    pub fn get(&self) -> ARef<Folio> {
        ARef::from(self)
    }

    /// Locks the folio, sleeping until it is free.
    #[inline]
    pub fn lock(&self) -> FolioGuard<'_> {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_lock(self.as_raw()) };
        // INVARIANT: The folio is locked by this thread.
        FolioGuard {
            folio: self,
            _nts: PhantomData,
        }
    }

    /// Locks the folio if nobody holds its lock.
    #[inline]
    pub fn try_lock(&self) -> Option<FolioGuard<'_>> {
        // SAFETY: The folio is valid.
        let locked = unsafe { bindings::folio_trylock(self.as_raw()) };
        // INVARIANT: `folio_trylock` returned true: the folio is locked by this thread.
        locked.then(|| FolioGuard {
            folio: self,
            _nts: PhantomData,
        })
    }
}

/// A folio locked by the current thread: [`FolioGuard`] borrows the folio, [`OwnedFolioLock`]
/// holds a reference to it.
pub trait LockedFolio: private::Sealed {
    /// The folio.
    fn locked_folio(&self) -> &Folio;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::FolioGuard<'_> {}
    impl Sealed for super::OwnedFolioLock {}
    impl Sealed for super::PageLockGuard<'_> {}
}

impl LockedFolio for PageLockGuard<'_> {
    #[inline]
    fn locked_folio(&self) -> &Folio {
        self.held.folio()
    }
}

impl LockedFolio for FolioGuard<'_> {
    #[inline]
    fn locked_folio(&self) -> &Folio {
        self.folio
    }
}

impl LockedFolio for OwnedFolioLock {
    #[inline]
    fn locked_folio(&self) -> &Folio {
        &self.folio
    }
}

/// A folio locked by the current thread, with a reference on it.
///
/// # Invariants
///
/// `folio` is locked by the thread that made this until it is dropped.
pub struct OwnedFolioLock {
    folio: ARef<Folio>,
    _nts: PhantomData<*mut ()>,
}

impl OwnedFolioLock {
    /// Locks `folio`, sleeping until it is free.
    #[inline]
    pub fn lock(folio: ARef<Folio>) -> Self {
        // SAFETY: The folio is valid (we hold a reference).
        unsafe { bindings::folio_lock(folio.as_raw()) };
        // INVARIANT: Locked above.
        Self {
            folio,
            _nts: PhantomData,
        }
    }

    /// Locks `folio` if its lock is free; gives the reference back if not.
    pub fn try_lock(folio: ARef<Folio>) -> core::result::Result<Self, ARef<Folio>> {
        // SAFETY: The folio is valid.
        if unsafe { bindings::folio_trylock(folio.as_raw()) } {
            // INVARIANT: Locked above.
            Ok(Self {
                folio,
                _nts: PhantomData,
            })
        } else {
            Err(folio)
        }
    }

    /// The folio.
    #[inline]
    pub fn folio(&self) -> &Folio {
        &self.folio
    }
}

impl Drop for OwnedFolioLock {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The folio is locked by this thread (type invariant).
        unsafe { bindings::folio_unlock(self.folio.as_raw()) };
    }
}

/// A folio locked by the current thread.
///
/// # Invariants
///
/// `folio` is locked by the thread that made the guard until it is dropped.
pub struct FolioGuard<'a> {
    folio: &'a Folio,
    _nts: PhantomData<*mut ()>,
}

impl<'a> FolioGuard<'a> {
    /// A guard for a folio the current thread has locked by other means.
    ///
    /// # Safety
    ///
    /// The folio is locked by the current thread, and the guard's drop (which unlocks) is the
    /// unlock that goes with it (or the guard is never dropped).
    #[inline]
    pub unsafe fn assume_locked(folio: &'a Folio) -> Self {
        // INVARIANT: By the safety requirements.
        Self {
            folio,
            _nts: PhantomData,
        }
    }

    /// The folio.
    #[inline]
    pub fn folio(&self) -> &'a Folio {
        self.folio
    }

    /// Marks the folio dirty.
    #[inline]
    pub fn set_dirty(&self) {
        // SAFETY: The folio is valid and locked.
        unsafe { bindings::folio_set_dirty(self.folio.as_raw()) };
    }

    /// Marks the folio recently used.
    #[inline]
    pub fn mark_accessed(&self) {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_mark_accessed(self.folio.as_raw()) };
    }
}

impl Drop for FolioGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The folio is locked by this thread (type invariant).
        unsafe { bindings::folio_unlock(self.folio.as_raw()) };
    }
}

/// One page of a folio: a C `struct page`, borrowed for as long as its folio is held.
#[repr(transparent)]
pub struct FolioPage {
    page: Opaque<bindings::page>,
}

impl FolioPage {
    /// The page at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is a valid page whose folio stays referenced (or locked) for `'a`.
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::page) -> &'a FolioPage {
        // SAFETY: `FolioPage` is a transparent wrapper; validity is the caller's promise.
        unsafe { &*ptr.cast() }
    }

    /// The C structure.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::page {
        super::opaque_ptr(&self.page)
    }

    /// The page's folio.
    #[inline]
    pub fn folio(&self) -> &Folio {
        // SAFETY: A valid page belongs to a valid folio, kept as long as the page is.
        unsafe { Folio::from_raw(bindings::page_folio(self.as_raw())) }
    }

    /// The page's frame number.
    #[inline]
    pub fn pfn(&self) -> Pfn {
        // SAFETY: The page is valid.
        Pfn(unsafe { bindings::page_to_pfn(self.as_raw()) } as usize)
    }

    /// The NUMA node of the page.
    #[inline]
    pub fn nid(&self) -> usize {
        // SAFETY: The page is valid.
        unsafe { bindings::page_to_nid(self.as_raw()) as usize }
    }

    /// Whether the page is exclusive to one mapping (`PageAnonExclusive`).
    #[inline]
    pub fn is_anon_exclusive(&self) -> bool {
        // SAFETY: The page is valid.
        unsafe { bindings::page_anon_exclusive(self.as_raw()) }
    }

    /// Whether the page has a hardware memory error.
    #[inline]
    pub fn is_hwpoison(&self) -> bool {
        // SAFETY: The page is valid.
        unsafe { bindings::page_hwpoison(self.as_raw()) }
    }

    /// The page's bytes through the kernel's direct map, for as long as the page is borrowed.
    #[cfg(not(CONFIG_HIGHMEM))]
    #[inline]
    pub fn bytes(&self) -> super::contents::PageBytes<'_> {
        // SAFETY: Without highmem every page is in the direct map; `page_address` is its
        // page-aligned kernel address, valid while the page is (for the borrow of `self`).
        unsafe {
            super::contents::PageBytes::from_raw(
                NonNull::new(bindings::page_address(self.as_raw()).cast())
                    .expect("page without address"),
            )
        }
    }

    /// Maps the page's contents for reading.
    ///
    /// The mapping is read-only: a `FolioPage` may be the zero page ([`FolioPage::zero`]), a KSM
    /// page or a page of the page cache, which others map and expect unchanged, and borrowing it
    /// shows no ownership of its contents. A page to write is mapped as a
    /// [`super::contents::MappedPage`].
    #[inline]
    pub fn map(&self) -> ReadOnlyMappedPage<'_> {
        // SAFETY: The page is valid for the lifetime of `&self`.
        unsafe { ReadOnlyMappedPage::from_raw(self.as_raw()) }
    }

    /// Whether the page holds what `other` holds, as the kernel decides it for sharing one copy
    /// of a page (`pages_identical()`): byte for byte, and, where the architecture says more
    /// (arm64's memory tagging), not for a page whose tags a shared copy would lose.
    ///
    /// [`super::contents::PageBytes`] compares the bytes alone: a merge must be decided here.
    #[inline]
    pub fn identical_to(&self, other: &FolioPage) -> bool {
        // SAFETY: Both pages are valid for the borrows; `memcmp_pages()` maps each for reading
        // and only reads them.
        unsafe { bindings::memcmp_pages(self.as_raw(), other.as_raw()) == 0 }
    }

    /// The page that the zero page of `addr` is (`ZERO_PAGE(addr)`).
    #[inline]
    pub fn zero(addr: usize) -> &'static FolioPage {
        // SAFETY: The zero page exists for the life of the kernel.
        unsafe { FolioPage::from_raw(bindings::zero_page(addr as _)) }
    }
}

/// A page kept by a reference on its folio (C's `get_page()`/`put_page()`).
///
/// The reference follows the page: if its large folio is split ([`PageLockGuard::split_if_large`]),
/// the reference is the page's new folio's, which is the one released on drop.
///
/// A `HeldPage` may be sent to another thread, or kept in a lock that threads share (which needs
/// only `Send`), but not shared between threads (it is not `Sync`): a split through one thread's
/// [`PageLockGuard`] changes which folio it holds, under another thread's [`HeldPage::another`],
/// [`HeldPage::folio`] or [`HeldPage::lock`], which would then take or lock a folio that is no
/// longer the page's, or use one it no longer holds.
///
/// # Invariants
///
/// `page` is a valid page and we own one reference on its folio, `folio`. A folio is split only
/// by a holder of a reference that the split counts as its own (a split needs the reference count
/// to be its mappings' and its caller's: any other reference makes it fail), and this reference is
/// counted so only by [`PageLockGuard::split_if_large`], which updates `folio`.
pub struct HeldPage {
    page: NonNull<bindings::page>,
    /// A `Cell`, written by a split through a shared borrow ([`PageLockGuard`] has one); it keeps
    /// `HeldPage` from being `Sync` too.
    folio: Cell<*mut bindings::folio>,
}

// SAFETY: The reference may be dropped, and the page used, from any thread. `HeldPage` is not
// `Sync` (its `folio` is a `Cell`): a split changes `folio` through a shared borrow, so only one
// thread at a time may have one.
unsafe impl Send for HeldPage {}

impl HeldPage {
    /// Takes over the reference `folio` holds, for `page` of it.
    ///
    /// # Safety
    ///
    /// `page` is a page of `folio`.
    #[inline]
    pub unsafe fn new(folio: ARef<Folio>, page: *mut bindings::page) -> Self {
        let folio = ARef::into_raw(folio).cast::<bindings::folio>().as_ptr();
        // INVARIANT: The reference of `folio` is now this one; `page` is its page.
        Self {
            page: NonNull::new(page).expect("HeldPage of a null page"),
            folio: Cell::new(folio),
        }
    }

    /// Takes over a reference on `folio`, the folio of `page`.
    ///
    /// # Safety
    ///
    /// `page` is a valid page of `folio`, and the caller owns a reference on `folio`, which it
    /// gives up.
    #[inline]
    pub unsafe fn from_raw(page: NonNull<bindings::page>, folio: NonNull<bindings::folio>) -> Self {
        // INVARIANT: By the safety requirements.
        Self {
            page,
            folio: Cell::new(folio.as_ptr()),
        }
    }

    /// Takes a reference on whatever the frame `pfn` holds now, if that is an ordinary
    /// anonymous page that may be read: on an LRU list and anonymous (not free, not a slab,
    /// page table or other kernel page whose fields overlay `mapping`, which could look
    /// anonymous), not device memory, not hardware-poisoned. A page of a process that is not on
    /// an LRU list for the moment (in a per-CPU batch, isolated) is refused too.
    ///
    /// The reference is speculative, as GUP-fast and page cache lookups take theirs: the frame
    /// may have been freed and reused since `pfn` was learnt, so the page says nothing about who
    /// maps it now. Its bytes may be read while it is held; anything more needs the page found
    /// again through a page table.
    pub fn try_get_anon(pfn: Pfn) -> Option<Self> {
        // SAFETY: `pfn` names memory that has a `struct page` (see `pfn_folio_raw`).
        let page = unsafe { bindings::pfn_to_page(pfn.0 as _) };
        let folio = loop {
            // SAFETY: `page` is a `struct page`; `page_folio` reads its compound head, which
            // names a `struct folio` even if the page is free or being split.
            let folio = unsafe { bindings::page_folio(page) };
            // SAFETY: `folio` is a `struct folio` that exists; `folio_try_get` takes a reference
            // only if the count is not zero, that is, if the folio is not free.
            if !unsafe { bindings::folio_try_get(folio) } {
                return None;
            }
            // SAFETY: We hold a reference on `folio`: it cannot be freed, so `page` cannot join
            // another folio; it may have been split before we got the reference, though.
            if unsafe { bindings::page_folio(page) } == folio {
                // SAFETY: We own the reference just taken on this valid folio.
                break unsafe { ARef::from_raw(NonNull::new_unchecked(folio.cast::<Folio>())) };
            }
            // SAFETY: We own the reference just taken.
            unsafe { bindings::folio_put(folio) };
        };
        // Only LRU folios give `mapping` its anon/file meaning; PG_lru is tested first.
        if !folio.is_lru() || !folio.is_anon() || folio.is_zone_device() {
            return None;
        }
        // SAFETY: `page` is a page of `folio` (checked under our reference).
        let held = unsafe { Self::new(folio, page) };
        (!held.page().is_hwpoison()).then_some(held)
    }

    /// Another reference to the same page.
    #[inline]
    pub fn another(&self) -> Self {
        let folio: ARef<Folio> = self.folio().into();
        // SAFETY: `page` is a page of `folio` (type invariant), on which `into` took a reference.
        unsafe { Self::new(folio, self.page.as_ptr()) }
    }

    /// Holds the first page of `folio`.
    #[inline]
    pub fn first_of(folio: ARef<Folio>) -> Self {
        let page = folio.first_page().as_raw();
        // SAFETY: `page` is the folio's first page.
        unsafe { Self::new(folio, page) }
    }

    /// The page's folio.
    ///
    /// The borrow must not be used once the folio is split ([`PageLockGuard::split_if_large`],
    /// whose safety requirements say so): the page's folio is another one then.
    #[inline]
    pub fn folio(&self) -> &Folio {
        // SAFETY: `folio` is the page's folio, on which we hold a reference (type invariant).
        unsafe { Folio::from_raw(self.folio.get()) }
    }

    /// The page.
    #[inline]
    pub fn page(&self) -> &FolioPage {
        // SAFETY: The page is valid while we hold its reference (type invariant).
        unsafe { FolioPage::from_raw(self.page.as_ptr()) }
    }

    /// Locks the page's folio if it is free (C's `trylock_page()`).
    #[inline]
    pub fn try_lock(&self) -> Option<PageLockGuard<'_>> {
        // SAFETY: The folio is valid (we hold a reference).
        let locked = unsafe { bindings::folio_trylock(self.folio().as_raw()) };
        // INVARIANT: Locked by this thread.
        locked.then(|| PageLockGuard {
            held: self,
            _nts: PhantomData,
        })
    }

    /// Locks the page's folio, sleeping until it is free (C's `lock_page()`).
    #[inline]
    pub fn lock(&self) -> PageLockGuard<'_> {
        // SAFETY: As in `try_lock`.
        unsafe { bindings::folio_lock(self.folio().as_raw()) };
        // INVARIANT: Locked by this thread.
        PageLockGuard {
            held: self,
            _nts: PhantomData,
        }
    }
}

impl Drop for HeldPage {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: We own one reference on the page's folio (type invariant).
        unsafe { bindings::folio_put(self.folio().as_raw()) };
    }
}

/// The lock of a held page's folio (C's `lock_page()`/`unlock_page()`): if the folio is split
/// meanwhile ([`PageLockGuard::split_if_large`]), the lock is the page's new folio's, which is the
/// one unlocked on drop.
///
/// # Invariants
///
/// The page's folio is locked by the thread that made the guard.
pub struct PageLockGuard<'a> {
    held: &'a HeldPage,
    _nts: PhantomData<*mut ()>,
}

impl PageLockGuard<'_> {
    /// Splits the folio if it is a large one (C's `split_huge_page()` of the page), after which
    /// the page is a folio of its own, locked and held as before; `EBUSY` if it cannot be split
    /// (someone else holds a reference to it, say). Only a transparent huge page is split: a large
    /// folio that is not on an LRU list (hugetlb, a kernel allocation, or a huge page isolated by
    /// someone, who then holds a reference that would make the split fail anyway) gives `EBUSY`.
    ///
    /// The split changes which folio the page and the guard are of, and may free the old one.
    /// Other threads cannot see the change ([`HeldPage`] is not `Sync`), and `&mut self` keeps the
    /// guard's own [`LockedFolio::locked_folio`] from being used across it; borrows made through
    /// the held page are the caller's to end, as below.
    ///
    /// # Safety
    ///
    /// No reference to the page's folio that was obtained before the call (from
    /// [`HeldPage::folio`], from [`FolioPage::folio`] of [`HeldPage::page`], or otherwise without
    /// a reference count of its own) is used after it: if the page was not the folio's first, the
    /// old folio is not held by anyone here any more, and the split may free it.
    pub unsafe fn split_if_large(&mut self) -> Result<(), crate::error::Error> {
        let page = self.held.page.as_ptr();
        // SAFETY: The page is valid (we hold a reference on its folio).
        if unsafe { bindings::page_trans_compound(page) } {
            // `split_huge_page()` is for folios on the LRU lists, which hugetlb and kernel folios
            // never are.
            if !self.held.folio().is_lru() {
                return Err(crate::error::code::EBUSY);
            }
            // SAFETY: The page is valid and its folio locked (type invariant), a large folio
            // of a process or the page cache (it is on an LRU list). The split counts one
            // reference as its caller's, and that is ours; any other makes it fail.
            if unsafe { bindings::split_huge_page(page) } != 0 {
                return Err(crate::error::code::EBUSY);
            }
            // The page's reference and lock are its new folio's now.
            // SAFETY: The page is valid (we hold a reference on its folio).
            let folio = unsafe { bindings::page_folio(page) };
            // INVARIANT: `folio` is the page's folio after the split, locked by this thread and
            // referenced by `held`; no other thread has `held` (it is not `Sync`), and no borrow
            // of the old folio through it is used any more (by the safety requirements).
            self.held.folio.set(folio);
        }
        Ok(())
    }

    /// Marks the folio dirty.
    #[inline]
    pub fn set_dirty(&self) {
        // SAFETY: The folio is valid and locked.
        unsafe { bindings::folio_set_dirty(self.held.folio().as_raw()) };
    }

    /// Marks the folio recently used.
    #[inline]
    pub fn mark_accessed(&self) {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_mark_accessed(self.held.folio().as_raw()) };
    }
}

impl Drop for PageLockGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The page's folio is locked by this thread (type invariant).
        unsafe { bindings::folio_unlock(self.held.folio().as_raw()) };
    }
}

/// A page frame number that came from a folio (so that it names memory that has a
/// `struct page`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pfn(usize);

impl Pfn {
    /// A frame number known to have come from a folio once.
    #[inline]
    pub(super) fn from_value(value: usize) -> Self {
        Self(value)
    }

    /// The number.
    #[inline]
    pub fn value(self) -> usize {
        self.0
    }

    /// The NUMA node of the frame.
    #[inline]
    pub fn nid(self) -> usize {
        // SAFETY: A `Pfn` names memory that has a `struct page` (see `pfn_folio_raw`).
        unsafe { bindings::pfn_to_nid(self.0 as _) as usize }
    }
}

/// A [`Pfn`] that can be read and changed concurrently (KSM's stable nodes keep the frame of their
/// page so, and migration changes it).
#[derive(Debug)]
pub struct AtomicPfn(AtomicUsize);

impl AtomicPfn {
    /// Holds `pfn`.
    #[inline]
    pub fn new(pfn: Pfn) -> Self {
        Self(AtomicUsize::new(pfn.0))
    }

    /// The frame number (`READ_ONCE()`).
    #[inline]
    pub fn load(&self) -> Pfn {
        Pfn(self.0.load(Ordering::Relaxed))
    }

    /// Sets the frame number (`WRITE_ONCE()`).
    #[inline]
    pub fn store(&self, pfn: Pfn) {
        self.0.store(pfn.0, Ordering::Relaxed)
    }
}

/// The folio of frame `pfn`, whatever it holds now (C's `pfn_folio()`): only an address; nothing
/// keeps it a folio or allocated.
///
/// A [`Pfn`] came from a folio, so the `struct folio` existed. With memory hot-remove, the
/// `struct page`s of a range go when it is removed, which comes after it went offline: whoever
/// keeps a [`Pfn`] without holding its folio forgets it when its range goes offline (KSM's stable
/// nodes are pruned then, [`super::hotplug::MemoryEvent::Offline`]), before it may be removed.
#[inline]
pub fn pfn_folio_raw(pfn: Pfn) -> *mut bindings::folio {
    // SAFETY: `pfn` names memory that has a `struct page` (see above).
    unsafe { bindings::pfn_folio(pfn.0 as _) }
}
