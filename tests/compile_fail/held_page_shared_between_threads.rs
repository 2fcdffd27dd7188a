// SPDX-License-Identifier: GPL-2.0
// expect: E0277 cannot be shared between threads
//! A held page is not `Sync`: a split through one thread's lock guard would change its folio
//! under another thread's borrow.

fn shared<T: Sync>() {}

/// Asks for `HeldPage: Sync`.
pub fn f() {
    shared::<kernel::mm::folio::HeldPage>();
}
