// SPDX-License-Identifier: GPL-2.0

//! `rksm_smart_scan`: smart scanning's schedule (`item::looks_at`) lets any two pages meet, and
//! the volatility gate's rechecks (`item::recheck_due`) fall in passes that look at the page.
//!
//! Two equal pages merge only in a pass that looks at both (the unstable tree is emptied at
//! every pass). C's `skip_age()` counts each page's skips from its own last look, so two pages
//! whose counts are out of phase are never looked at in the same pass again: a pair of equal
//! pages with no third page of their contents never merges (tests/vm/skipphase.c). The cases
//! follow pages over [`PASSES`] passes, made in any pass of the first [`BORN`], with rksm's
//! schedule and, to show that the checks tell right from wrong, with a model of C's schedule
//! and with the gate's rechecks before they counted in the schedule.

use crate::item::{looks_at, recheck_due, LONGEST_LOOK_PERIOD, RECHECK_PASSES};
use kernel::kunit_suite::TestResult;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};

/// Passes followed: the bits of a `u128`.
const PASSES: u32 = 128;

/// Pages are made in one of the first this many passes.
const BORN: u32 = 16;

/// The passes (a bit each) in which rksm looks at a page first met in pass `born`.
fn rksm_looks(born: u32) -> u128 {
    let (mut age, mut looks) = (0u8, 0u128);
    for pass in born..PASSES {
        if looks_at(age, pass) {
            looks |= 1 << pass;
        }
        age = age.saturating_add(1);
    }
    looks
}

/// The passes in which 6.12's C KSM looks at a page first met in pass `born`
/// (`should_skip_rmap_item()` and `skip_age()` of mm/ksm.c).
fn c_looks(born: u32) -> u128 {
    let (mut age, mut remaining, mut looks) = (0u8, 0u8, 0u128);
    for pass in born..PASSES {
        let was = age;
        age = age.saturating_add(1);
        let look = if was < 3 {
            true
        } else if remaining == 0 {
            remaining = match was {
                0..=3 => 1,
                4..=5 => 2,
                6..=8 => 4,
                _ => 8,
            };
            true
        } else {
            remaining -= 1;
            false
        };
        if look {
            looks |= 1 << pass;
        }
    }
    looks
}

/// The longest run of passes from `from` on in which `looks` has no bit (a run that reaches
/// the last pass followed counts to it).
fn longest_gap(looks: u128, from: u32) -> u32 {
    let (mut longest, mut run) = (0, 0);
    for pass in from..PASSES {
        if looks & 1 << pass != 0 {
            run = 0;
        } else {
            run += 1;
            longest = longest.max(run);
        }
    }
    longest
}

/// The longest time, over every two birth passes, that two pages go without a pass looking at
/// both, counted from the later birth.
fn longest_apart(looks: fn(u32) -> u128) -> u32 {
    let mut longest = 0;
    for a in 0..BORN {
        for b in 0..BORN {
            longest = longest.max(longest_gap(looks(a) & looks(b), a.max(b)));
        }
    }
    longest
}

/// Any two pages, whatever pass each was first met in, are looked at together at least once in
/// every [`LONGEST_LOOK_PERIOD`] passes.
fn any_two_pages_meet() -> TestResult {
    let apart = longest_apart(rksm_looks);
    kunit_ensure!(
        apart < LONGEST_LOOK_PERIOD,
        "two pages went {apart} passes without a pass that looks at both"
    );
    Ok(())
}

/// The same check finds C's schedule keeping some pair apart for good: from some pair of birth
/// passes on, no pass of the rest looks at both.
fn c_schedule_keeps_pairs_apart() -> TestResult {
    let apart = longest_apart(c_looks);
    kunit_ensure!(
        apart >= PASSES - BORN - 16,
        "C's schedule kept two pages apart only {apart} passes"
    );
    Ok(())
}

/// Smart scanning still saves what C's does: a page is looked at in each of its first three
/// passes, and an old one in one pass of every [`LONGEST_LOOK_PERIOD`] (C's: one of nine).
fn old_pages_are_skipped() -> TestResult {
    for born in 0..BORN {
        let looks = rksm_looks(born);
        kunit_ensure_eq!(looks >> born & 0b111, 0b111);
        let late = looks >> (PASSES / 2);
        kunit_ensure_eq!(late.count_ones(), PASSES / 2 / LONGEST_LOOK_PERIOD);
        // C's schedule over the same passes, for scale.
        let c_late = c_looks(born) >> (PASSES / 2);
        kunit_ensure!(c_late.count_ones() <= late.count_ones());
    }
    Ok(())
}

/// The passes in which the volatility gate takes the whole checksum again of a page first met
/// in pass `born`, with `checksum` recorded and its sample unchanged: passes that smart scanning
/// looks at it in and where `due(age, checksum, pass)` says so, `age` being the age after the
/// pass's decision (as the step sees it).
fn rechecks(born: u32, checksum: u32, due: fn(u8, u32, u32) -> bool) -> u128 {
    let (mut age, mut passes) = (0u8, 0u128);
    for pass in born..PASSES {
        let look = looks_at(age, pass);
        age = age.saturating_add(1);
        if look && due(age, checksum, pass) {
            passes |= 1 << pass;
        }
    }
    passes
}

/// The longest a page goes without a recheck, over every birth pass and checksum (checksums
/// `0..4 * RECHECK_PASSES`: only the checksum's residue counts).
fn longest_unchecked(due: fn(u8, u32, u32) -> bool) -> u32 {
    let mut longest = 0;
    for born in 0..BORN {
        for checksum in 0..4 * RECHECK_PASSES {
            longest = longest.max(longest_gap(rechecks(born, checksum, due), born));
        }
    }
    longest
}

/// Every page is rechecked at least once in every `RECHECK_PASSES + LONGEST_LOOK_PERIOD`
/// passes, whatever its schedule: a change that its sample missed is found.
fn every_page_is_rechecked() -> TestResult {
    let unchecked = longest_unchecked(recheck_due);
    kunit_ensure!(
        unchecked < RECHECK_PASSES + LONGEST_LOOK_PERIOD,
        "a page went {unchecked} passes without a recheck"
    );
    Ok(())
}

/// The same check finds that rechecks at `pass + checksum` alone (before they counted in smart
/// scanning's schedule) never came for most old pages.
fn rechecks_by_pass_alone_miss_old_pages() -> TestResult {
    let by_pass_alone: fn(u8, u32, u32) -> bool =
        |_, checksum, pass| pass.wrapping_add(checksum) % RECHECK_PASSES == 0;
    let unchecked = longest_unchecked(by_pass_alone);
    kunit_ensure!(
        unchecked >= PASSES - BORN - 16,
        "rechecks by the pass alone left a page only {unchecked} passes unchecked"
    );
    Ok(())
}

kunit_suite!(
    "rksm_smart_scan",
    [
        any_two_pages_meet,
        c_schedule_keeps_pairs_apart,
        old_pages_are_skipped,
        every_page_is_rechecked,
        rechecks_by_pass_alone_miss_old_pages
    ]
);
