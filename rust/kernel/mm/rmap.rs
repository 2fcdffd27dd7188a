// SPDX-License-Identifier: GPL-2.0

//! What the kernel hands Kernel Samepage Merging when it needs the mappings of a KSM folio, or
//! a swapped-in folio's place in the reverse map: the arguments of the reverse-map walk, of
//! memory failure's collection of processes and of the swap-in copy decision of `<linux/ksm.h>`.
//!
//! C headers: [`include/linux/rmap.h`](srctree/include/linux/rmap.h),
//! [`include/linux/ksm.h`](srctree/include/linux/ksm.h)
//!
//! A KSM folio's `mapping` points at KSM's node for it, not at an anon_vma, so the reverse map
//! cannot find the folio's mappings by itself: it asks KSM, which walks the anon_vmas its records
//! keep. [`RmapWalk`] is the walk `rmap_walk()` asks for (C's `rmap_walk_ksm()`), and
//! [`KillList`] the list of processes memory failure collects (C's `collect_procs_ksm()`).
//! [`SwapIn`] is the folio the swap-in fault is about to map (C's `ksm_might_need_to_copy()`):
//! it can be mapped as it is only if it already sits where the reverse map would look for it
//! from the area (its anon_vma and index), so that question is the reverse map's too.
//!
//! Each wraps what C passes to one method of [`super::ksm::KsmOps`], with the invariants its C
//! callers give. They are apart from [`super::ksm`] because they depend on the reverse map's
//! structures ([`super::anon_vma`]) and not on KSM's stable nodes.

use super::{
    anon_vma::AnonVma,
    folio::{Folio, FolioGuard, FolioPage},
    virt::RmapVmArea,
};
use crate::{bindings, error::Result, page::PAGE_SIZE, types::ARef};
use core::{marker::PhantomData, ptr::NonNull};

/// A folio that the swap-in fault (or swapoff) is about to map at `addr` of `vma`, for KSM to
/// keep or copy (C's `ksm_might_need_to_copy()`).
///
/// The area is kept as a pointer, not as a [`VmArea`](super::virt::VmArea): the fault may hold
/// its per-VMA lock only, not the mmap lock that a `VmArea` proves, and it is used for nothing
/// but what either lock allows.
///
/// # Invariants
///
/// `folio` is locked and is the swap cache folio of a swap entry that `vma` maps at `addr`;
/// `vma` is a valid area whose mmap lock (or its per-VMA lock) is held for `'a`. So the folio's
/// anon_vma, if it has one, is in the area's anon_vma chain (or is its root), and lives as long
/// as the area; and the area has an anon_vma (it mapped an anonymous page), which stays.
pub struct SwapIn<'a> {
    folio: &'a FolioGuard<'a>,
    vma: NonNull<bindings::vm_area_struct>,
    addr: usize,
}

impl<'a> SwapIn<'a> {
    /// Wraps the arguments of C's `ksm_might_need_to_copy()`.
    ///
    /// # Safety
    ///
    /// `folio` is the swap cache folio of a swap entry that `vma` maps at `addr`, and `vma` is
    /// a valid area whose mmap lock or per-VMA lock is held for `'a` (as do_swap_page() and
    /// unuse_pte() call it).
    #[inline]
    pub unsafe fn new(
        folio: &'a FolioGuard<'a>,
        vma: *mut bindings::vm_area_struct,
        addr: usize,
    ) -> Self {
        // INVARIANT: By the safety requirements; `FolioGuard` proves the lock.
        Self {
            folio,
            vma: NonNull::new(vma).expect("SwapIn of a null area"),
            addr,
        }
    }

    /// The folio, locked.
    #[inline]
    pub fn folio(&self) -> &FolioGuard<'a> {
        self.folio
    }

    /// Whether the folio is anonymous, not KSM, and placed linearly in the area's own anon_vma
    /// tree at `addr` (C compares `anon_vma->root`): such a folio can be mapped as it is.
    pub fn in_own_anon_vma(&self) -> bool {
        let (f, vma) = (self.folio.folio(), self.vma.as_ptr());
        // SAFETY: The folio is valid; `folio_anon_vma` reads its mapping.
        let av = unsafe { bindings::folio_anon_vma(f.as_raw()) };
        // SAFETY: The area is valid and locked (type invariant); its anon_vma is set and stays.
        let own = unsafe { (*vma).anon_vma };
        if av.is_null() || own.is_null() {
            return false;
        }
        // SAFETY: The area is valid and locked, which keeps its start and page offset.
        let index = unsafe { bindings::linear_page_index(vma, self.addr as _) } as usize;
        // SAFETY: `av` is in the area's chain and `own` is the area's (type invariants): both
        // live while the area does, which its lock keeps.
        f.index() == index && unsafe { (*av).root == (*own).root }
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
        let (folio, vma, addr) = (self.folio.folio(), self.vma.as_ptr(), self.addr);
        // SAFETY: The area is valid and locked (type invariants), `addr` is in it.
        let new = unsafe { bindings::vma_alloc_folio_movable(vma, addr as _) };
        if new.is_null() {
            return Ok(None);
        }
        // SAFETY: `new` is a freshly allocated folio whose one reference we own.
        let new = unsafe { ARef::from_raw(NonNull::new_unchecked(new.cast::<Folio>())) };
        // SAFETY: `new` is valid; charging it to the memory cgroup of the area's address space,
        // which is valid while the area is (type invariant).
        if unsafe { bindings::mem_cgroup_charge(new.as_raw(), (*vma).vm_mm, bindings::GFP_KERNEL) }
            != 0
        {
            return Ok(None);
        }
        // SAFETY: Both pages are valid; the copy handles machine checks.
        if unsafe {
            bindings::copy_mc_user_highpage(
                new.first_page().as_raw(),
                folio.first_page().as_raw(),
                addr as _,
                vma,
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

/// A reverse-map walk of a locked folio that the kernel asked of KSM (C's
/// `struct rmap_walk_control`).
///
/// The walk's callbacks are C's (reclaim's, migration's, ...), which expect what C's
/// `rmap_walk()` gives them: the folio walked, locked, and an area found under the lock of an
/// anon_vma whose tree links it, with an address in it. So the folio is the walk's own, the area
/// an [`RmapVmArea`], and an address outside it is not reported.
///
/// # Invariants
///
/// `rwc` is a valid walk control whose callbacks may be called for `folio`, which the current
/// thread holds locked, while the value lives.
pub struct RmapWalk<'a> {
    rwc: NonNull<bindings::rmap_walk_control>,
    folio: &'a Folio,
    _p: PhantomData<&'a mut bindings::rmap_walk_control>,
}

impl<'a> RmapWalk<'a> {
    /// Wraps the walk control C passed for `folio`.
    ///
    /// # Safety
    ///
    /// `rwc` is valid, for a walk of `folio`, which the current thread holds locked, for `'a`.
    #[inline]
    pub unsafe fn from_raw(rwc: *mut bindings::rmap_walk_control, folio: &'a Folio) -> Self {
        // INVARIANT: By the safety requirements.
        Self {
            rwc: NonNull::new(rwc).expect("null rmap_walk_control"),
            folio,
            _p: PhantomData,
        }
    }

    /// The folio walked.
    #[inline]
    pub fn folio(&self) -> &'a Folio {
        self.folio
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
    pub fn invalid_vma(&mut self, vma: &RmapVmArea) -> bool {
        // SAFETY: The control is valid; its callback takes an area that the anon_vma lock keeps
        // (type invariant of `RmapVmArea`), and its own argument.
        unsafe {
            let rwc = self.raw();
            match (*rwc).invalid_vma {
                Some(f) => f(vma.as_raw(), (*rwc).arg),
                None => false,
            }
        }
    }

    /// Reports the mapping of the walked folio at the page of `addr` in `vma`, if it may be
    /// there; `false` stops the walk. An address outside the area is not reported (`true`): the
    /// callbacks would walk page tables that the anon_vma lock does not keep (it keeps those of
    /// the area's range).
    pub fn rmap_one(&mut self, vma: &RmapVmArea, addr: usize) -> bool {
        let addr = addr & !(PAGE_SIZE - 1);
        if !vma.contains(addr) {
            return true;
        }
        // SAFETY: The control is valid; the callback takes the walked folio, locked (type
        // invariant), an area linked in the tree of an anon_vma whose lock is held (type
        // invariant of `RmapVmArea`), and the address of a page in it, as `rmap_walk()` gives.
        unsafe {
            let rwc = self.raw();
            match (*rwc).rmap_one {
                Some(f) => f(self.folio.as_raw(), vma.as_raw(), addr as _, (*rwc).arg),
                None => true,
            }
        }
    }

    /// Whether the walker is done with the walked folio.
    #[inline]
    pub fn done(&mut self) -> bool {
        // SAFETY: The control is valid; its callback takes the walked folio.
        unsafe {
            match (*self.raw()).done {
                Some(f) => f(self.folio.as_raw()) != 0,
                None => false,
            }
        }
    }
}

/// The list memory-failure collects the processes to kill in (C's `to_kill`).
pub struct KillList<'a> {
    #[cfg_attr(not(CONFIG_MEMORY_FAILURE), allow(dead_code))]
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
            let init = core::ptr::addr_of_mut!(bindings::init_task);
            let mut tsk = bindings::next_task(init);
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
                tsk = bindings::next_task(tsk);
            }
            bindings::rcu_read_unlock();
        }
    }

    /// Without `CONFIG_MEMORY_FAILURE` memory failure never calls in: there is nothing to add.
    #[cfg(not(CONFIG_MEMORY_FAILURE))]
    #[inline]
    pub fn add_mappers(&mut self, _: &AnonVma, _: &FolioPage, _: usize, _: bool) {}
}
