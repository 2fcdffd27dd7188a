// SPDX-License-Identifier: GPL-2.0

//! Memory management: address spaces, their areas, folios, and what works on them.
//!
//! C headers: [`include/linux/mm.h`](srctree/include/linux/mm.h),
//! [`include/linux/mm_types.h`](srctree/include/linux/mm_types.h),
//! [`include/linux/sched/mm.h`](srctree/include/linux/sched/mm.h)
//!
//! An [`Mm`] is a `struct mm_struct`. References to it count with `mmgrab()`/`mmdrop()`
//! ([`ARef<Mm>`](crate::types::ARef)): they keep the structure, not the address space, which goes
//! when its last user (`mm_users`) does; [`Mm::is_exiting`] tells. Its areas are reached through
//! the guards of its mmap lock ([`MmapReadGuard`], [`MmapWriteGuard`]), whose lifetimes bound
//! every [`VmArea`] reference handed out, so that no area is used after the lock is dropped.

use crate::{
    bindings,
    types::{AlwaysRefCounted, Opaque},
};
use core::{marker::PhantomData, ptr::NonNull};

/// Makes a guard `!Send` and `!Sync`: a lock is released by the thread that took it. (6.12's
/// `kernel::types` has no `NotThreadSafe` yet; upstream added one in 6.13, which this mirrors.)
type NotThreadSafe = PhantomData<*mut ()>;
#[allow(non_upper_case_globals)]
const NotThreadSafe: NotThreadSafe = PhantomData;

pub mod anon_vma;
pub mod contents;
pub mod folio;
pub mod hotplug;
pub mod ksm;
pub mod layout;
pub mod pgtable;
pub mod rmap;
pub mod virt;

use virt::VmArea;

/// The pointer to the value wrapped in `o`, as [`Opaque::get`] gives it, but inlined into the
/// callers of other crates (`Opaque::get` is not `#[inline]`, and the hot paths of KSM call it
/// through the accessors here for every page).
#[inline(always)]
pub(crate) fn opaque_ptr<T>(o: &Opaque<T>) -> *mut T {
    // `Opaque<T>` is `repr(transparent)` over an `UnsafeCell` of `T` (and a zero-sized marker),
    // so it starts with its `T`; the `UnsafeCell` is what allows writes through the pointer.
    core::ptr::from_ref(o).cast_mut().cast()
}

/// The number of NUMA node ids (C's `nr_node_ids`).
#[inline]
pub fn nr_node_ids() -> usize {
    // Without NUMA, C's `nr_node_ids` is the constant 1, which bindgen gives as a `const`.
    #[cfg(CONFIG_NUMA)]
    // SAFETY: `nr_node_ids` is set during early boot and read-only afterwards.
    let n = unsafe { bindings::nr_node_ids };
    #[cfg(not(CONFIG_NUMA))]
    let n = bindings::nr_node_ids;
    n as usize
}

/// Whether memory cgroups are in use: built in, and not turned off (`cgroup_disable=memory`).
#[inline]
pub fn memcg_enabled() -> bool {
    // SAFETY: Reads a static key, set during early boot.
    unsafe { bindings::mm_memcg_enabled() }
}

/// Drains the per-CPU LRU caches of all CPUs (C's `lru_add_drain_all()`): pages held there have
/// a raised reference count.
#[inline]
pub fn lru_add_drain_all() {
    // SAFETY: Callable from process context.
    unsafe { bindings::lru_add_drain_all() };
}

/// Marks the current task as the OOM killer's first choice while it lives (C's
/// `set_current_oom_origin()` / `clear_current_oom_origin()`): for work that allocates memory
/// on behalf of the whole system at a user's request, such as unmerging every KSM page.
pub struct OomOrigin(NotThreadSafe);

impl OomOrigin {
    /// Marks the current task.
    #[inline]
    pub fn set() -> Self {
        // SAFETY: Sets a flag of the current task's signal struct, which lives as long as it.
        unsafe { bindings::set_current_oom_origin() };
        Self(NotThreadSafe)
    }
}

impl Drop for OomOrigin {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: As in `set`; the guard cannot leave the thread that made it.
        unsafe { bindings::clear_current_oom_origin() };
    }
}

/// A flag of `mm_struct::flags` that KSM uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmFlag {
    /// `MMF_VM_MERGEABLE`: the address space is registered with KSM.
    VmMergeable,
    /// `MMF_VM_MERGE_ANY`: every compatible area of it is mergeable (`PR_SET_MEMORY_MERGE`).
    VmMergeAny,
}

impl MmFlag {
    #[inline]
    fn bit(self) -> i32 {
        (match self {
            MmFlag::VmMergeable => bindings::MMF_VM_MERGEABLE,
            MmFlag::VmMergeAny => bindings::MMF_VM_MERGE_ANY,
        }) as i32
    }
}

/// An address space: a C `struct mm_struct`.
///
/// # Invariants
///
/// The structure is valid while a reference to it exists: an `ARef<Mm>` holds a `mm_count`
/// reference, and a plain `&Mm` is borrowed from something that does (or from the C code that
/// called Rust with the structure pinned).
#[repr(transparent)]
pub struct Mm {
    mm: Opaque<bindings::mm_struct>,
}

// SAFETY: `mm_struct` is used from any thread; all access to its mutable parts goes through its
// own locks or atomics.
unsafe impl Send for Mm {}
// SAFETY: As above.
unsafe impl Sync for Mm {}

// SAFETY: `mmgrab()` and `mmdrop()` keep the structure alive while the count is non-zero.
unsafe impl AlwaysRefCounted for Mm {
    #[inline]
    fn inc_ref(&self) {
        // SAFETY: The existence of `&self` means the count is non-zero.
        unsafe { bindings::mmgrab(self.as_raw()) };
    }

    #[inline]
    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller gives up a reference it owns.
        unsafe { bindings::mmdrop(obj.cast().as_ptr()) };
    }
}

impl Mm {
    /// The `Mm` at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points to a `struct mm_struct` that stays valid for `'a`.
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::mm_struct) -> &'a Mm {
        // SAFETY: `Mm` is a transparent wrapper; validity is the caller's promise.
        unsafe { &*ptr.cast() }
    }

    /// The C structure.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::mm_struct {
        opaque_ptr(&self.mm)
    }

    /// Whether the address space has no users left: it is exiting, and its page tables must not
    /// be touched (C KSM's `ksm_test_exit()`).
    #[inline]
    pub fn is_exiting(&self) -> bool {
        // SAFETY: The structure is valid (type invariant); `mm_users` is an atomic.
        unsafe { bindings::mm_users(self.as_raw()) == 0 }
    }

    /// Whether `flag` is set.
    #[inline]
    pub fn test_flag(&self, flag: MmFlag) -> bool {
        // SAFETY: The structure is valid; the flags are changed with atomic bit operations.
        unsafe { bindings::mm_test_flag(self.as_raw(), flag.bit()) }
    }

    /// Sets `flag`.
    #[inline]
    pub fn set_flag(&self, flag: MmFlag) {
        // SAFETY: As in `test_flag`.
        unsafe { bindings::mm_set_flag(self.as_raw(), flag.bit()) };
    }

    /// Clears `flag`.
    #[inline]
    pub fn clear_flag(&self, flag: MmFlag) {
        // SAFETY: As in `test_flag`.
        unsafe { bindings::mm_clear_flag(self.as_raw(), flag.bit()) };
    }

    /// Takes the mmap lock for reading.
    #[inline]
    pub fn mmap_read_lock(&self) -> MmapReadGuard<'_> {
        // SAFETY: The structure is valid.
        unsafe { bindings::mmap_read_lock(self.as_raw()) };
        // INVARIANT: The lock is held for reading.
        MmapReadGuard {
            mm: self,
            _nts: NotThreadSafe,
        }
    }

    /// Takes the mmap lock for writing.
    #[inline]
    pub fn mmap_write_lock(&self) -> MmapWriteGuard<'_> {
        // SAFETY: The structure is valid.
        unsafe { bindings::mmap_write_lock(self.as_raw()) };
        // INVARIANT: The lock is held for writing.
        MmapWriteGuard {
            mm: self,
            _nts: NotThreadSafe,
        }
    }

    /// Whether a TLB flush of this address space may be pending (a batched one).
    #[inline]
    pub fn tlb_flush_pending(&self) -> bool {
        // SAFETY: The structure is valid.
        unsafe { bindings::mm_tlb_flush_pending(self.as_raw()) }
    }

    /// The KSM counters `/proc/<pid>/ksm_stat` shows.
    #[inline]
    pub fn ksm_counters(&self) -> KsmCounters<'_> {
        KsmCounters { mm: self }
    }

    /// The id (C's `cgroup_id()`) of the memory cgroup the address space is charged to now, that
    /// of its owner task (`mm->owner`); 0 without memory cgroups, or once no task owns it.
    ///
    /// Cgroup ids are not reused while the system runs (they are 64-bit kernfs ids), so an id
    /// read here names one cgroup even after that cgroup is gone. The owner may move to another
    /// cgroup as soon as this returns.
    #[inline]
    pub fn memcg_id(&self) -> u64 {
        // SAFETY: The structure is valid; the helper reads its owner under RCU.
        unsafe { bindings::mm_memcg_cgroup_id(self.as_raw()) }
    }
}

/// The KSM counters of an address space (`mm_struct::ksm_merging_pages`, `ksm_rmap_items` and
/// `ksm_zero_pages`). The first two are written by KSM alone, with atomic read-modify-writes
/// (several scanner threads may count for one address space at once), and read without locks by
/// `/proc`; the third is an atomic that page-table code changes too.
pub struct KsmCounters<'a> {
    mm: &'a Mm,
}

impl KsmCounters<'_> {
    /// Pages of this address space merged by KSM.
    #[inline]
    pub fn merging_pages(&self) -> usize {
        // SAFETY: The structure is valid and the helper returns the address of its field; a
        // volatile read of one aligned word does not tear.
        unsafe { bindings::mm_ksm_merging_pages(self.mm.as_raw()).read_volatile() as usize }
    }

    /// Adds `delta` to the merged pages.
    #[inline]
    pub fn add_merging_pages(&self, delta: isize) {
        // SAFETY: The helper returns the address of the field of a valid structure.
        let word = unsafe { bindings::mm_ksm_merging_pages(self.mm.as_raw()) };
        add_word(word, delta);
    }

    /// rmap_items KSM keeps for this address space.
    #[inline]
    pub fn rmap_items(&self) -> usize {
        // SAFETY: As in `merging_pages`.
        unsafe { bindings::mm_ksm_rmap_items(self.mm.as_raw()).read_volatile() as usize }
    }

    /// Adds `delta` to the rmap_items.
    #[inline]
    pub fn add_rmap_items(&self, delta: isize) {
        // SAFETY: The helper returns the address of the field of a valid structure.
        let word = unsafe { bindings::mm_ksm_rmap_items(self.mm.as_raw()) };
        add_word(word, delta);
    }

    /// Zero pages KSM mapped into this address space.
    #[inline]
    pub fn zero_pages(&self) -> isize {
        // SAFETY: The structure is valid; the field is an `atomic_long_t`.
        unsafe { bindings::mm_ksm_zero_pages(self.mm.as_raw()) as isize }
    }
}

/// Adds `delta` to the `unsigned long` counter at `word`, a field of a live `mm_struct` that
/// only KSM writes.
#[inline]
fn add_word(word: *mut usize, delta: isize) {
    // SAFETY: `word` is a valid, aligned `unsigned long` (a `usize`) for as long as the address
    // space lives, which the caller's `&Mm` ensures; every writer goes through this atomic
    // read-modify-write, and the C readers do single aligned loads, which do not tear.
    let a = unsafe { core::sync::atomic::AtomicUsize::from_ptr(word) };
    a.fetch_add(delta as usize, core::sync::atomic::Ordering::Relaxed);
}

/// The mmap lock of an address space, held for reading.
///
/// # Invariants
///
/// The lock of `mm` is held for reading until the guard is dropped, on the thread that took it.
pub struct MmapReadGuard<'a> {
    mm: &'a Mm,
    _nts: NotThreadSafe,
}

impl<'a> MmapReadGuard<'a> {
    /// The address space.
    #[inline]
    pub fn mm(&self) -> &'a Mm {
        self.mm
    }

    /// The area that contains `addr`, if any.
    #[inline]
    pub fn vma_lookup(&self, addr: usize) -> Option<&VmArea> {
        // SAFETY: The lock is held (type invariant), which `vma_lookup` requires; the area stays
        // valid while it is.
        let vma = unsafe { bindings::vma_lookup(self.mm.as_raw(), addr as _) };
        // SAFETY: A non-null result is a valid area of this address space, kept by the lock that
        // the returned reference's lifetime is bound to.
        (!vma.is_null()).then(|| unsafe { VmArea::from_raw(vma) })
    }

    /// The first area that ends after `addr`, if any (the areas, in order, from `addr` on).
    #[inline]
    pub fn vma_from(&self, addr: usize) -> Option<&VmArea> {
        // SAFETY: As in `vma_lookup`.
        let vma = unsafe { bindings::find_vma_from(self.mm.as_raw(), addr as _) };
        // SAFETY: As in `vma_lookup`.
        (!vma.is_null()).then(|| unsafe { VmArea::from_raw(vma) })
    }

    /// The areas in address order from `addr` on.
    #[inline]
    pub fn vmas_from(&self, addr: usize) -> impl Iterator<Item = &VmArea> + '_ {
        let mut next = addr;
        core::iter::from_fn(move || {
            let vma = self.vma_from(next)?;
            next = vma.end();
            Some(vma)
        })
    }
}

impl Drop for MmapReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The lock is held for reading by this thread (type invariant).
        unsafe { bindings::mmap_read_unlock(self.mm.as_raw()) };
    }
}

/// The mmap lock of an address space, held for writing.
///
/// # Invariants
///
/// The lock of `mm` is held for writing until the guard is dropped, on the thread that took it.
pub struct MmapWriteGuard<'a> {
    mm: &'a Mm,
    _nts: NotThreadSafe,
}

impl Drop for MmapWriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The lock is held for writing by this thread (type invariant).
        unsafe { bindings::mmap_write_unlock(self.mm.as_raw()) };
    }
}

/// An address space whose mmap lock the current thread holds for writing, taken by C code that
/// calls into Rust (madvise, prctl, mmap): the proof that its areas' flags may change.
///
/// # Invariants
///
/// The mmap lock of `mm` is held for writing by the current thread for `'a`.
pub struct MmWriteLocked<'a> {
    mm: &'a Mm,
    _nts: NotThreadSafe,
}

impl<'a> MmWriteLocked<'a> {
    /// Records that the current thread holds the mmap lock of `mm` for writing.
    ///
    /// # Safety
    ///
    /// The current thread holds the mmap lock of `mm` for writing for `'a`.
    #[inline]
    pub unsafe fn new(mm: &'a Mm) -> Self {
        // SAFETY: Checked by lockdep when it is on; the caller promises it either way.
        unsafe { bindings::mmap_assert_write_locked(mm.as_raw()) };
        // INVARIANT: By the safety requirements.
        Self {
            mm,
            _nts: NotThreadSafe,
        }
    }

    /// The address space.
    #[inline]
    pub fn mm(&self) -> &'a Mm {
        self.mm
    }

    /// The areas in address order.
    pub fn vmas(&self) -> impl Iterator<Item = &VmArea> + '_ {
        let mut next = 0;
        core::iter::from_fn(move || {
            // SAFETY: The lock is held (type invariant), which the lookup requires.
            let vma = unsafe { bindings::find_vma_from(self.mm.as_raw(), next as _) };
            if vma.is_null() {
                return None;
            }
            // SAFETY: A valid area of this address space, kept while the lock is held, which
            // outlives the borrow of `self`.
            let vma = unsafe { VmArea::from_raw(vma) };
            next = vma.end();
            Some(vma)
        })
    }
}
