// SPDX-License-Identifier: GPL-2.0
// expect: E0599 no method named `write`
//! A page of a folio (the zero page, a KSM page, a page-cache page) maps only for reading.

use kernel::mm::folio::FolioPage;

/// Tries to write through the mapping of a folio's page.
pub fn f(page: &FolioPage) {
    page.map().write(0, &[1]);
}
