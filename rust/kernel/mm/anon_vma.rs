// SPDX-License-Identifier: GPL-2.0

//! Anonymous memory's reverse-map roots: C's `struct anon_vma`.
//!
//! C header: [`include/linux/rmap.h`](srctree/include/linux/rmap.h)
//!
//! An anonymous folio's `mapping` points at an anon_vma, whose interval tree holds the areas that
//! may map the folio. An [`AnonVma`] is counted by [`ARef<AnonVma>`], and its lock, held for
//! reading ([`AnonVmaReadGuard`]), keeps the tree still while its areas are visited.
//!
//! [`AnonVmaSlot`] keeps one such reference, filled and emptied through a shared reference, or,
//! while it keeps none, the frame of a page as a hint; it is here because what makes it sound is
//! the count it holds on an anon_vma.
//!
//! The areas of the tree are visited without their address spaces' mmap locks, so the walk hands
//! them out as [`RmapVmArea`]s, not [`VmArea`]s: the page-table functions of [`super::pgtable`],
//! which need the mmap lock, do not take them.
//!
//! The anon_vma has a module of its own because both the reverse-map abstractions
//! ([`super::rmap`]) and the records of a KSM implementation keep and lock anon_vmas, and it
//! depends on nothing of KSM.

use super::{
    folio::{Folio, Pfn},
    virt::{RmapVmArea, VmArea},
};
use crate::{
    bindings,
    types::{ARef, AlwaysRefCounted, Opaque},
};
use core::{
    marker::PhantomData,
    ptr::{self, NonNull},
    sync::atomic::{AtomicUsize, Ordering},
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

    /// A reference to the anon_vma an anonymous folio points at (C's `folio_get_anon_vma()`):
    /// its tree holds every area that maps the folio, those of the address spaces the folio's
    /// first mapper forked included, where [`AnonVma::of`] an area that maps the folio may hold
    /// only that area's own and its forks'. `None` for a folio that is not anonymous, a KSM
    /// folio, or one no longer mapped.
    #[inline]
    pub fn of_folio(folio: &Folio) -> Option<ARef<AnonVma>> {
        // SAFETY: The folio is valid; `folio_get_anon_vma()` checks, under RCU, that the folio
        // is anonymous and mapped and that the anon_vma's count is not 0, and returns it with a
        // count taken for the caller, or NULL.
        let av = unsafe { bindings::folio_get_anon_vma(folio.as_raw()) };
        // SAFETY: A non-NULL `av` is valid and its count taken above is handed to the `ARef`.
        NonNull::new(av.cast::<AnonVma>()).map(|p| unsafe { ARef::from_raw(p) })
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
    /// The areas whose pages this anon_vma maps (its interval tree, whole), as the reverse map
    /// sees them: their mmap locks are not held.
    pub fn vmas(&self) -> impl Iterator<Item = &RmapVmArea> + '_ {
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
            // SAFETY: A chain of the tree links a valid area, linked in the tree whose lock this
            // thread holds for reading while `self` is borrowed (type invariant).
            Some(unsafe { RmapVmArea::from_raw((*avc).vma) })
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
/// [`HeldPage::try_get_anon`](super::folio::HeldPage::try_get_anon)).
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
