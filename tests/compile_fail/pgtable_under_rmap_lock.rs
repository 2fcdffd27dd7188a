// SPDX-License-Identifier: GPL-2.0
// expect: E0308 RmapVmArea
//! An area reached through the anon_vma (its lock only, not the mmap lock) is an `RmapVmArea`:
//! page-table work does not take it.

use kernel::mm::{anon_vma::AnonVmaReadGuard, pgtable};

/// Tries to walk the page tables of an area found through the reverse map.
pub fn f(guard: &AnonVmaReadGuard<'_>, addr: usize) -> bool {
    guard
        .vmas()
        .any(|vma| pgtable::anon_page_at(vma, addr).is_some())
}
