// SPDX-License-Identifier: GPL-2.0

//! Virtual memory areas: C's `struct vm_area_struct`.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h)
//!
//! A [`VmArea`] is only ever reached through a guard of its address space's mmap lock (or from C
//! code that holds it), and the references live no longer than the guard: a `&VmArea` is the
//! proof that the mmap lock is held, which walking and changing the area's page tables
//! ([`super::pgtable`]) needs.
//!
//! The reverse map reaches areas under another lock, that of an anon_vma whose tree links them,
//! while their address space's mmap lock may be held by anyone, for writing too. Such an area is
//! an [`RmapVmArea`], which offers only what that lock keeps still: it is not a [`VmArea`], so
//! the page-table functions cannot be given one. The mmap lock keeps all that the anon_vma lock
//! does, so a [`VmArea`] is also an [`RmapVmArea`] (it dereferences to one), whose accessors
//! (bounds, flags, address space) serve both.

use super::{Mm, MmWriteLocked};
use crate::{bindings, types::Opaque};

/// Flags of `vm_area_struct::vm_flags`.
pub mod flags {
    use crate::bindings;

    /// The type of the flags.
    pub type Flags = usize;

    /// `VM_SHARED`.
    pub const SHARED: Flags = bindings::VM_SHARED as Flags;
    /// `VM_MAYSHARE`.
    pub const MAYSHARE: Flags = bindings::VM_MAYSHARE as Flags;
    /// `VM_PFNMAP`.
    pub const PFNMAP: Flags = bindings::VM_PFNMAP as Flags;
    /// `VM_IO`.
    pub const IO: Flags = bindings::VM_IO as Flags;
    /// `VM_DONTEXPAND`.
    pub const DONTEXPAND: Flags = bindings::VM_DONTEXPAND as Flags;
    /// `VM_HUGETLB`.
    pub const HUGETLB: Flags = bindings::VM_HUGETLB as Flags;
    /// `VM_MIXEDMAP`.
    pub const MIXEDMAP: Flags = bindings::VM_MIXEDMAP as Flags;
    /// `VM_DROPPABLE`.
    pub const DROPPABLE: Flags = bindings::VM_DROPPABLE as Flags;
    /// `VM_MERGEABLE`: KSM may merge the area's pages.
    pub const MERGEABLE: Flags = bindings::VM_MERGEABLE as Flags;
}

/// A virtual memory area: a C `struct vm_area_struct`, whose address space's mmap lock is held.
///
/// # Invariants
///
/// The area is valid, and the mmap lock of its address space is held (for reading or writing)
/// by the current thread, for the lifetime of the reference: a guard of the lock (or the C
/// caller that passed the area, holding it) outlives the reference. (`VmArea` is not `Sync`, so a
/// reference cannot leave the thread.)
#[repr(transparent)]
pub struct VmArea {
    vma: Opaque<bindings::vm_area_struct>,
}

impl VmArea {
    /// The area at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is a valid area, and the current thread holds the mmap lock of its address space
    /// (for reading or writing) for `'a`. Another lock that keeps the area, such as its per-VMA
    /// lock or an anon_vma's (see [`RmapVmArea`]), is not enough: the page-table functions rely
    /// on this one.
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::vm_area_struct) -> &'a VmArea {
        // SAFETY: `VmArea` is a transparent wrapper; validity is the caller's promise.
        unsafe { &*ptr.cast() }
    }

    /// The C structure.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::vm_area_struct {
        super::opaque_ptr(&self.vma)
    }

    /// Whether the area has an anon_vma (has ever had anonymous pages).
    #[inline]
    pub fn has_anon_vma(&self) -> bool {
        // SAFETY: The area is valid.
        unsafe { !(*self.as_raw()).anon_vma.is_null() }
    }

    /// The area's anon_vma, as a raw pointer (null if none).
    #[inline]
    pub fn anon_vma_raw(&self) -> *mut bindings::anon_vma {
        // SAFETY: The area is valid.
        unsafe { (*self.as_raw()).anon_vma }
    }

    /// The address space of the area.
    #[inline]
    pub fn mm(&self) -> &Mm {
        // SAFETY: An area's `vm_mm` is set when it is made and valid while the area is, which
        // the type invariant ensures for the borrow of `self`.
        unsafe { Mm::from_raw((*self.as_raw()).vm_mm) }
    }

    /// Whether the area maps DAX memory.
    #[inline]
    pub fn is_dax(&self) -> bool {
        // SAFETY: The area is valid.
        unsafe { bindings::vma_is_dax(self.as_raw()) }
    }

    /// The page protection of the area.
    #[inline]
    pub fn page_prot(&self) -> bindings::pgprot_t {
        // SAFETY: The area is valid.
        unsafe { (*self.as_raw()).vm_page_prot }
    }

    /// The page offset `addr` has in the area's backing (C's `linear_page_index()`).
    #[inline]
    pub fn linear_page_index(&self, addr: usize) -> usize {
        // SAFETY: The area is valid.
        unsafe { bindings::linear_page_index(self.as_raw(), addr as _) as usize }
    }

    /// Sets `flags` on the area. Needs the mmap lock of its address space held for writing.
    ///
    /// # Panics
    ///
    /// If `locked` is not the area's address space.
    #[inline]
    pub fn set_flags(&self, locked: &MmWriteLocked<'_>, flags: flags::Flags) {
        assert!(core::ptr::eq(locked.mm(), self.mm()));
        // SAFETY: The area is valid and its mmap lock held for writing (`locked`).
        unsafe { bindings::vm_flags_set(self.as_raw(), flags as _) };
    }

    /// Clears `flags` on the area. Needs the mmap lock of its address space held for writing.
    ///
    /// # Panics
    ///
    /// If `locked` is not the area's address space.
    #[inline]
    pub fn clear_flags(&self, locked: &MmWriteLocked<'_>, flags: flags::Flags) {
        assert!(core::ptr::eq(locked.mm(), self.mm()));
        // SAFETY: As in `set_flags`.
        unsafe { bindings::vm_flags_clear(self.as_raw(), flags as _) };
    }

    /// Write-locks the area against page faults that hold only its per-VMA lock (C's
    /// `vma_start_write()`). Needs the mmap lock held for writing.
    #[inline]
    pub fn start_write(&self, locked: &MmWriteLocked<'_>) {
        assert!(core::ptr::eq(locked.mm(), self.mm()));
        // SAFETY: As in `set_flags`.
        unsafe { bindings::vma_start_write(self.as_raw()) };
    }
}

impl core::ops::Deref for VmArea {
    type Target = RmapVmArea;

    /// The area as the reverse map sees it: what the anon_vma lock keeps, the mmap lock keeps too
    /// (see [`RmapVmArea`]).
    #[inline]
    fn deref(&self) -> &RmapVmArea {
        // SAFETY: Both are transparent wrappers of the same structure. The mmap lock, held for
        // the borrow of `self` (type invariant), is one of the locks `RmapVmArea`'s invariant
        // accepts.
        unsafe { RmapVmArea::from_raw(self.as_raw()) }
    }
}

/// A virtual memory area reached through the reverse map: a C `struct vm_area_struct` linked in
/// the interval tree of an anon_vma whose lock the current thread holds, and whose address
/// space's mmap lock it need not hold ([`AnonVmaReadGuard::vmas`] hands these out). A [`VmArea`],
/// whose mmap lock is held, is one too (through `Deref`).
///
/// The anon_vma lock keeps the area from being freed (it is unlinked from the tree, under that
/// lock, before it is), keeps its bounds and page offset (which are changed under the same lock,
/// that of the root of the anon_vma's family), and keeps the page tables of its range (C's
/// `free_pgtables()` unlinks an area from its anon_vmas before it frees them). It is not the mmap
/// lock, though: the area's flags may change meanwhile (under the mmap lock held for writing),
/// and what walks or faults page tables for KSM ([`super::pgtable`], C's `folio_walk_start()`
/// and `handle_mm_fault()`) needs the mmap lock. So this type offers no page-table walk, nor
/// anything else of [`VmArea`]'s that relies on the mmap lock; the reverse map's callbacks do
/// with such an area what C's `rmap_walk()` lets them do, through
/// [`RmapWalk`](super::rmap::RmapWalk).
///
/// [`AnonVmaReadGuard::vmas`]: super::anon_vma::AnonVmaReadGuard::vmas
///
/// # Invariants
///
/// The area is valid, and for the lifetime of the reference the current thread holds (for
/// reading or writing) the lock of an anon_vma whose interval tree links the area, or the mmap
/// lock of its address space. (`RmapVmArea` is not `Sync`, so a reference cannot leave the
/// thread.)
#[repr(transparent)]
pub struct RmapVmArea {
    vma: Opaque<bindings::vm_area_struct>,
}

impl RmapVmArea {
    /// The area at `ptr`, reached through the reverse map.
    ///
    /// # Safety
    ///
    /// `ptr` is a valid area, and for `'a` the current thread holds (for reading or writing) the
    /// lock of an anon_vma whose interval tree links it, or its address space's mmap lock.
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::vm_area_struct) -> &'a RmapVmArea {
        // SAFETY: `RmapVmArea` is a transparent wrapper; validity is the caller's promise.
        unsafe { &*ptr.cast() }
    }

    /// The C structure.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::vm_area_struct {
        super::opaque_ptr(&self.vma)
    }

    /// The first address of the area.
    #[inline]
    pub fn start(&self) -> usize {
        // SAFETY: The area is valid (type invariant); its bounds change only under both its mmap
        // lock held for writing and the lock of its anon_vma's root (C's `vma_prepare()` takes
        // it), and the current thread holds one of them.
        unsafe { (*self.as_raw()).__bindgen_anon_1.__bindgen_anon_1.vm_start }
    }

    /// The address after the last of the area.
    #[inline]
    pub fn end(&self) -> usize {
        // SAFETY: As in `start`.
        unsafe { (*self.as_raw()).__bindgen_anon_1.__bindgen_anon_1.vm_end }
    }

    /// The address at which the area would map the page of offset `index` in its backing (an
    /// anonymous folio's [`index`]), if the area covers that offset: C's `vma_address()` for one
    /// page, which the reverse map uses to find an anonymous page in each area of its tree, moved
    /// by `mremap()` or not.
    ///
    /// [`index`]: super::folio::Folio::index
    #[inline]
    pub fn address_of(&self, index: usize) -> Option<usize> {
        // SAFETY: As in `start`: the offset changes with the bounds, under the same locks.
        let pgoff: usize = unsafe { (*self.as_raw()).vm_pgoff };
        let addr = index
            .checked_sub(pgoff)?
            .checked_mul(crate::page::PAGE_SIZE)?
            .checked_add(self.start())?;
        (addr < self.end()).then_some(addr)
    }

    /// Whether `addr` is in the area.
    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        self.start() <= addr && addr < self.end()
    }

    /// The area's flags (`vm_flags`). Under the anon_vma lock alone they may change as soon as
    /// they are read (it does not exclude their writers); under the mmap lock they do not.
    #[inline]
    pub fn flags(&self) -> flags::Flags {
        // SAFETY: The area is valid (type invariant). The flags are written under the mmap lock
        // held for writing, which the current thread may not hold: they are read once, as C's
        // `READ_ONCE()` does, an aligned word, which does not tear.
        unsafe {
            core::ptr::addr_of!((*self.as_raw()).__bindgen_anon_2.vm_flags).read_volatile()
                as flags::Flags
        }
    }

    /// The address space of the area.
    #[inline]
    pub fn mm(&self) -> &Mm {
        // SAFETY: An area's `vm_mm` is set when it is made and valid while the area is, which
        // the type invariant ensures for the borrow of `self`.
        unsafe { Mm::from_raw((*self.as_raw()).vm_mm) }
    }
}
