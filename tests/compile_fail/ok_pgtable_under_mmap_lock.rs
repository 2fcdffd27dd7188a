// SPDX-License-Identifier: GPL-2.0
// expect: compiles
//! The control: page-table work on an area found under the mmap lock compiles.

use kernel::mm::{pgtable, MmapReadGuard};

/// The page mapped at `addr`, looked up under the mmap lock.
pub fn f(guard: &MmapReadGuard<'_>, addr: usize) -> bool {
    guard
        .vma_lookup(addr)
        .and_then(|vma| pgtable::anon_page_at(vma, addr))
        .is_some()
}
