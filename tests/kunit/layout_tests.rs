// SPDX-License-Identifier: GPL-2.0

//! `rksm_layout`: bindgen's layout of the C structures that the mm abstractions touch directly
//! agrees with the compiler's, field by field (see `kernel::mm::layout`).

use kernel::kunit_suite::{Check, TestResult};
use kernel::mm::layout::{c_layout, RUST_LAYOUT};
use kernel::prelude::*;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};

/// Both tables list the same fields in the same order.
fn tables_list_the_same_fields() -> TestResult {
    for (i, (name, _)) in RUST_LAYOUT.iter().enumerate() {
        let (c_name, _) = c_layout(i).check()?;
        kunit_ensure_eq!(c_name.to_str().check()?, *name);
    }
    kunit_ensure!(c_layout(RUST_LAYOUT.len()).is_none());
    Ok(())
}

/// Every offset and size bindgen gives is the compiler's.
fn offsets_and_sizes_agree() -> TestResult {
    let mut wrong = 0;
    for (i, (name, rust)) in RUST_LAYOUT.iter().enumerate() {
        let (_, c) = c_layout(i).check()?;
        if c != *rust {
            pr_err!("layout: {name}: C {c}, bindgen {rust}\n");
            wrong += 1;
        }
    }
    kunit_ensure_eq!(wrong, 0);
    Ok(())
}

kunit_suite!(
    "rksm_layout",
    [tables_list_the_same_fields, offsets_and_sizes_agree]
);
