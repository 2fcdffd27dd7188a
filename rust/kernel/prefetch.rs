// SPDX-License-Identifier: GPL-2.0

//! Hints that memory is about to be read.
//!
//! C header: [`include/linux/prefetch.h`](srctree/include/linux/prefetch.h)

/// Hints to the CPU that the memory at `addr` is about to be read, so that it may start to bring
/// it into its caches while the caller does other work.
///
/// Only a hint: nothing is read in the sense of the memory model, so `addr` may be any address,
/// including one that is not mapped or whose memory has been freed meanwhile. A prefetch never
/// faults (C's `prefetch()`, `__builtin_prefetch` where the architecture has no instruction of
/// its own), and does nothing where the CPU cannot prefetch. The sanitizers do not check it.
///
/// What is worth it: an address known some hundreds of nanoseconds before it is read, whose
/// cache line is likely out of the caches, such as a hash bucket chosen by a key that is known
/// before the lock that guards the table is taken.
#[inline]
pub fn prefetch<T>(addr: *const T) {
    // SAFETY: `prefetch()` accepts any address and never accesses memory through it.
    unsafe { bindings::prefetch(addr.cast()) }
}
