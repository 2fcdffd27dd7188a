// SPDX-License-Identifier: GPL-2.0

//! A value set once at initialisation and shared for the life of the kernel.
//!
//! Built-in code that C calls into (through exported functions) needs its state in a `static`;
//! [`Global`] holds such state once the module's init has built it, pinned and never freed.

use crate::alloc::KBox;
use core::{
    pin::Pin,
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};

/// A value set once and then shared, pinned, for the rest of the kernel's life.
///
/// # Invariants
///
/// `ptr` is null, or a leaked `Pin<KBox<T>>` that is never freed.
pub struct Global<T: Sync> {
    ptr: AtomicPtr<T>,
}

impl<T: Sync> Default for Global<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Sync> Global<T> {
    /// An unset global.
    pub const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Sets the value; gives it back if it was set already.
    pub fn set(&self, value: Pin<KBox<T>>) -> Result<Pin<&'static T>, Pin<KBox<T>>> {
        // SAFETY: The box stays pinned: it is leaked and never moved or freed.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(value) });
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), raw, Ordering::Release, Ordering::Relaxed)
        {
            // SAFETY: `raw` is leaked for good (type invariant), pinned.
            Ok(_) => Ok(unsafe { Pin::new_unchecked(&*raw) }),
            // SAFETY: `raw` came from `KBox::into_raw` above and was not stored.
            Err(_) => Err(unsafe { Pin::new_unchecked(KBox::from_raw(raw)) }),
        }
    }

    /// The value, if it was set.
    pub fn get(&self) -> Option<Pin<&'static T>> {
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: A non-null pointer is a leaked, pinned box that lives forever.
        (!p.is_null()).then(|| unsafe { Pin::new_unchecked(&*p) })
    }
}
