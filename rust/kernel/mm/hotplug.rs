// SPDX-License-Identifier: GPL-2.0

//! Memory blocks going offline and online: the notifications of memory hot-(un)plug.
//!
//! C header: [`include/linux/memory.h`](srctree/include/linux/memory.h)
//!
//! Code that records page frames without holding the pages (KSM's stable nodes record their KSM
//! page's frame) must learn when a range of frames goes offline: the `struct page`s of an
//! offlined range may be removed afterwards, and a frame number that still names one of them
//! must not be followed any more. A [`MemoryNotifier`] registered once, for good, is told of
//! each change of a range of memory blocks, in process context, under the hotplug lock.

use crate::{bindings, error::Result, types::Opaque};
use core::{
    marker::PhantomData,
    sync::atomic::{AtomicBool, Ordering},
};

/// A change of the state of a range of memory blocks (C's `enum memory_block_state`, the
/// notifications of going offline; the others are [`MemoryEvent::Other`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryEvent {
    /// The range is about to be offlined: its pages are about to be migrated elsewhere.
    GoingOffline,
    /// The range is offline: no page in it is in use any more.
    Offline,
    /// Offlining the range failed: it stays online.
    CancelOffline,
    /// Anything else (onlining).
    Other,
}

/// What is told of memory blocks changing state.
pub trait MemoryListener {
    /// The priority among the memory notifiers (higher ones are called first).
    const PRIORITY: i32;

    /// `event` happened to the frames `start_pfn..start_pfn + nr_pages`. Called in process
    /// context, with the hotplug lock held; may sleep.
    fn memory_event(event: MemoryEvent, start_pfn: usize, nr_pages: usize);
}

/// A memory notifier (C's `struct notifier_block` on the memory chain) that calls `T`.
///
/// # Invariants
///
/// `nb` is on the memory notifier chain once `registered` is true, and from then on for good
/// (it is only ever registered through [`MemoryNotifier::register`], by built-in code).
pub struct MemoryNotifier<T: MemoryListener> {
    #[cfg_attr(not(CONFIG_MEMORY_HOTPLUG), allow(dead_code))]
    nb: Opaque<bindings::notifier_block>,
    registered: AtomicBool,
    _listener: PhantomData<T>,
}

// SAFETY: The notifier block is written only before it is registered, by the one caller of
// `register` at a time; afterwards only the notifier chain uses it, under its own lock.
unsafe impl<T: MemoryListener> Sync for MemoryNotifier<T> {}

impl<T: MemoryListener> Default for MemoryNotifier<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: MemoryListener> MemoryNotifier<T> {
    /// A notifier not registered yet (for a `static`).
    pub const fn new() -> Self {
        Self {
            nb: Opaque::uninit(),
            registered: AtomicBool::new(false),
            _listener: PhantomData,
        }
    }

    /// The callback the memory notifier chain calls.
    #[cfg_attr(not(CONFIG_MEMORY_HOTPLUG), allow(dead_code))]
    ///
    /// # Safety
    ///
    /// `data` is the chain's `struct memory_notify` for this notification.
    unsafe extern "C" fn call(
        _nb: *mut bindings::notifier_block,
        action: usize,
        data: *mut core::ffi::c_void,
    ) -> core::ffi::c_int {
        // SAFETY: The memory chain passes a valid `struct memory_notify` (safety requirement).
        let mn = unsafe { &*data.cast::<bindings::memory_notify>() };
        let event = match action as u32 {
            bindings::memory_block_state_MEM_GOING_OFFLINE => MemoryEvent::GoingOffline,
            bindings::memory_block_state_MEM_OFFLINE => MemoryEvent::Offline,
            bindings::memory_block_state_MEM_CANCEL_OFFLINE => MemoryEvent::CancelOffline,
            _ => MemoryEvent::Other,
        };
        T::memory_event(event, mn.start_pfn, mn.nr_pages);
        bindings::NOTIFY_OK as core::ffi::c_int
    }

    /// Puts the notifier on the memory notifier chain, for good: there is no unregistering.
    /// Registering it again once it is registered does nothing; a failed registration may be
    /// tried again. Without `CONFIG_MEMORY_HOTPLUG` no memory goes offline, and nothing is
    /// registered.
    ///
    /// # Safety
    ///
    /// The caller is built into the kernel (not a loadable module): the notifier's `static` and
    /// `T`'s code must stay for as long as the kernel runs. Calls do not race with each other.
    pub unsafe fn register(&'static self) -> Result {
        if self.registered.load(Ordering::Acquire) {
            return Ok(());
        }
        #[cfg(CONFIG_MEMORY_HOTPLUG)]
        {
            let nb = self.nb.get();
            // SAFETY: `nb` is not on the chain (`registered` is false, and calls do not race), so
            // it is ours alone; the block is filled in completely before it goes on the chain.
            unsafe {
                nb.write(bindings::notifier_block {
                    notifier_call: Some(Self::call),
                    next: core::ptr::null_mut(),
                    priority: T::PRIORITY,
                });
            }
            // SAFETY: `nb` is a valid, filled in notifier block that lives for good (`'static`)
            // and is registered once (type invariant).
            crate::error::to_result(unsafe { bindings::register_memory_notifier(nb) })?;
        }
        self.registered.store(true, Ordering::Release);
        Ok(())
    }
}
