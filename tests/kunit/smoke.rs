// SPDX-License-Identifier: GPL-2.0

//! The KUnit-from-Rust plumbing itself: a suite registered by `kunit_suite!` runs, and the check
//! macros evaluate their operands exactly once and let true conditions through.

use kernel::kunit_suite::TestResult;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_expect, kunit_suite};

fn checks_evaluate_once() -> TestResult {
    let mut calls = 0;
    let mut next = || {
        calls += 1;
        calls
    };
    kunit_ensure!(next() == 1);
    kunit_ensure_eq!(next(), 2);
    let held = kunit_expect!(next() == 3);
    kunit_ensure!(held, "kunit_expect! must evaluate to its condition");
    kunit_ensure_eq!(calls, 3);
    Ok(())
}

kunit_suite!("rksm_kunit_smoke", [checks_evaluate_once]);
