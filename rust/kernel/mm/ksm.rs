// SPDX-License-Identifier: GPL-2.0

//! The interface of `<linux/ksm.h>`: what a Kernel Samepage Merging implementation gives the
//! rest of the kernel, and the link between a KSM folio and the implementation's node for it.
//!
//! C header: [`include/linux/ksm.h`](srctree/include/linux/ksm.h)
//!
//! # KSM folios and their stable nodes
//!
//! A KSM folio's `mapping` points at the implementation's *stable node* for it, tagged with
//! `PAGE_MAPPING_KSM`. The node does not hold a reference to the folio: it records the folio's
//! frame ([`AtomicPfn`]) and checks, through that "keyhole", that the folio there still points
//! back at it ([`get_ksm_folio`]). Code that holds the folio's lock may follow the folio's
//! pointer to the node ([`ksm_node`]); what keeps that sound is the implementation's promise,
//! made by implementing [`KsmNode`], about when it frees nodes, and that only [`set_ksm_node`]
//! tags a `mapping` so, and only on an anonymous folio, whose `mapping` KSM may take over.
//!
//! # The interface
//!
//! An implementation of [`KsmOps`] answers the calls `<linux/ksm.h>` declares, and
//! [`crate::ksm_abi!`] exports it as their C symbols. The arguments of the calls that come from
//! the reverse map and the swap-in fault are in [`super::rmap`], the page-table work of merging
//! and unmerging in [`super::pgtable`], and the anon_vmas an implementation's records keep in
//! [`super::anon_vma`]. What stays here is what KSM alone defines: the folio-to-node link, whose
//! `mapping` encoding is KSM's, the count of zero pages KSM mapped, and KSM's [`trace`] events.

use super::{
    folio::{
        pfn_folio_raw, AtomicPfn, Folio, FolioGuard, FolioPage, LockedFolio, OwnedFolioLock, Pfn,
    },
    rmap::{KillList, RmapWalk, SwapIn},
    virt::VmArea,
    Mm, MmWriteLocked,
};
use crate::{
    bindings,
    error::{code::EINVAL, Result},
    types::ARef,
};
use core::{
    pin::Pin,
    ptr::NonNull,
    sync::atomic::{fence, Ordering},
};

/// A stable node of a KSM implementation: what a KSM folio's `mapping` points at.
///
/// # Safety
///
/// Implementers promise that a node that some folio's `mapping` points at (through
/// [`set_ksm_node`]) stays allocated, and is not moved, for as long as that folio is locked by
/// anyone, and for as long as any reference returned by [`ksm_node`] lives: they free a node only
/// after clearing the folio's pointer with the folio locked ([`set_ksm_node`] with `None`), or
/// after [`get_ksm_folio`] found that no folio points at it any more.
///
/// They also promise that the implementing type is the only one in the kernel: a KSM folio's
/// `mapping` tells that it points at a stable node, not at which type of node, and
/// [`ksm_node`] takes the node for one of its `T`. (There is one KSM in a kernel:
/// [`crate::ksm_abi!`] exports its functions under the names of C's `mm/ksm.c`, which is then not
/// built.)
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

/// The stable node the locked KSM folio points at, if any; `None` for any other folio.
///
/// Any locked folio may be asked: only a `mapping` tagged `PAGE_MAPPING_KSM` is followed, and
/// only [`set_ksm_node`] writes that tag. Other folios' are not tagged so: an anonymous folio's
/// points at its anon_vma (`PAGE_MAPPING_ANON` alone), a file folio's at its file's address space
/// (no tag, it is aligned), a movable kernel page's at its operations (`PAGE_MAPPING_MOVABLE`
/// alone). C's KSM, which would write its own nodes there, is not built beside a Rust one (see
/// [`KsmNode`]).
pub fn ksm_node<'a, T: KsmNode>(folio: &'a impl LockedFolio) -> Option<Pin<&'a T>> {
    let m = folio.locked_folio().mapping_raw();
    if m & bindings::PAGE_MAPPING_FLAGS as usize != bindings::PAGE_MAPPING_KSM as usize {
        return None;
    }
    let node = (m & !(bindings::PAGE_MAPPING_FLAGS as usize)) as *const T;
    // SAFETY: A KSM-tagged mapping is written only by `set_ksm_node`, to a pinned node (or
    // null), and by the `KsmNode` contract that node is a `T` (the only implementer) and stays
    // valid, and pinned, while the folio is locked, which the guard's borrow ensures for `'a`.
    (!node.is_null()).then(|| unsafe { Pin::new_unchecked(&*node) })
}

/// Whether the locked folio points at `node`.
#[inline]
pub fn is_ksm_folio_of<T: KsmNode>(folio: &impl LockedFolio, node: &T) -> bool {
    folio.locked_folio().mapping_raw() == ksm_mapping(node)
}

/// Makes the locked folio a KSM folio that points at `node` (or at no node yet, with `None`), or
/// points the KSM folio it is at `node` instead (C's `folio_set_stable_node()`).
///
/// `EINVAL`, and the folio is left as it was, unless the folio is one whose `mapping` KSM may
/// take over, as C's KSM only ever does: an anonymous folio (a KSM folio is one too), whose
/// `mapping` points at its anon_vma without holding a reference on it; small, as every KSM folio
/// is; not device memory, whose folios are their driver's; and whose page is not exclusive to one
/// mapping (`PageAnonExclusive`), as a KSM page never is: an exclusive page may be mapped
/// writable, or pinned. Another folio's `mapping` belongs to someone else: a file folio's is its
/// file's, a movable kernel page's its driver's.
///
/// Under the folio lock a page does not become exclusive again, but for one case: a write fault
/// that found it mapped only once and referenced by that mapping alone (C's
/// `wp_can_reuse_anon_folio()`) makes it exclusive after unlocking it. A KSM implementation
/// therefore makes a folio a KSM folio after write-protecting the mapping through which it found
/// it ([`super::pgtable::write_protect`]), holding a reference, as C's does: the write fault
/// holds that mapping's page table lock, and the reference then keeps it from reusing the page.
pub fn set_ksm_node<T: KsmNode>(folio: &impl LockedFolio, node: Option<Pin<&T>>) -> Result {
    let f = folio.locked_folio();
    // The anonymous bit first: what the other tests read means something only for an anonymous
    // folio (`PageAnonExclusive` is another flag's bit on other pages).
    if !f.is_anon() || f.is_zone_device() || f.is_large() || f.first_page().is_anon_exclusive() {
        return Err(EINVAL);
    }
    // SAFETY: The folio is valid and locked (`LockedFolio`), and is an anonymous folio that KSM
    // may take over (checked above): its `mapping` is KSM's to write, as C's
    // `folio_set_stable_node()` writes it.
    unsafe { bindings::folio_set_mapping_raw(f.as_raw(), ksm_mapping_of(node) as _) };
    Ok(())
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
    // Cannot fail: `old` is a KSM folio (checked above), which `set_ksm_node` always accepts.
    let _ = set_ksm_node::<T>(old, None);
}

/// The number of zero pages KSM has mapped (C's `ksm_zero_pages`).
#[inline]
pub fn zero_pages() -> isize {
    // SAFETY: Reads the atomic counter that the KSM implementation defines.
    unsafe { bindings::ksm_zero_pages_read() as isize }
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
                rmap,
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
                // area valid under its mmap lock or its per-VMA lock (so it is not made a
                // `VmArea`). The guard does not unlock: the fault path does. The swap cache folio
                // is that of a swap entry `vma` maps at `addr`.
                unsafe {
                    let guard = ::core::mem::ManuallyDrop::new(ksm::locked_by_caller(
                        Folio::from_raw(folio),
                    ));
                    let swapin = rmap::SwapIn::new(&guard, vma, addr as usize);
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
                // is the caller's walk control, for this folio. The guard does not unlock.
                unsafe {
                    let guard = ::core::mem::ManuallyDrop::new(ksm::locked_by_caller(
                        Folio::from_raw(folio),
                    ));
                    let mut walk = rmap::RmapWalk::from_raw(rwc, guard.folio());
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
                    let mut list = rmap::KillList::from_raw(to_kill);
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
        unsafe { bindings::trace_ksm_start_scan(seq as _, rmap_items as _) };
    }

    /// A pass ends.
    #[inline]
    pub fn stop_scan(seq: u64, rmap_items: u64) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_stop_scan(seq as _, rmap_items as _) };
    }

    /// An address space is registered with KSM.
    #[inline]
    pub fn enter(mm: *const c_void) {
        // SAFETY: As above; the pointer is only printed.
        unsafe { bindings::trace_ksm_enter(mm as _) };
    }

    /// An address space leaves KSM.
    #[inline]
    pub fn exit(mm: *const c_void) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_exit(mm as _) };
    }

    /// A page was merged into `pfn` (or the merge failed with `err`).
    #[inline]
    pub fn merge_one_page(pfn: usize, item: *const c_void, mm: *const c_void, err: i32) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_merge_one_page(pfn as _, item as _, mm as _, err) };
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
            bindings::trace_ksm_merge_with_ksm_page(kpage as _, pfn as _, item as _, mm as _, err)
        };
    }

    /// A KSM page left the stable tree.
    #[inline]
    pub fn remove_ksm_page(pfn: usize) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_remove_ksm_page(pfn as _) };
    }

    /// An rmap_item left a KSM page.
    #[inline]
    pub fn remove_rmap_item(pfn: usize, item: *const c_void, mm: *const c_void) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_remove_rmap_item(pfn as _, item as _, mm as _) };
    }

    /// The scan-time advisor set `pages_to_scan`.
    #[inline]
    pub fn advisor(scan_time: i64, pages_to_scan: usize, cpu_percent: u32) {
        // SAFETY: As above.
        unsafe { bindings::trace_ksm_advisor(scan_time, pages_to_scan as _, cpu_percent) };
    }
}
