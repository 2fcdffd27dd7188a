// SPDX-License-Identifier: GPL-2.0

//! Writers of the knobs that need empty trees (`max_page_sharing`, `merge_across_nodes`), two
//! kernel threads at once, against the running rksm: whatever order their writes land in, the
//! value the knob shows afterwards is the value every shard's trees use. rksm once published
//! the value after dropping the scan lock, so that the first of two writers could publish its
//! value last, over the value the second had given the trees.
//!
//! With `max_page_sharing` the two writers always change the value, so the old order could
//! show one writer's value over the other's, in a window of a few instructions (seen with a
//! delay added there; see Documentation/mm/rksm-measurements.rst, "The review's defects and
//! their regression tests"). With `merge_across_nodes`, a boolean, one
//! of the two always finds the value it asks for already there and changes nothing, so only one
//! change races: that half checks that a change applies to every shard or none.
//!
//! This suite changes rksm's knobs. It runs at boot, before any process registered with KSM (the
//! writes need empty trees), and puts the boot values back.

use crate::scan;
use crate::tunables::STATS;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
use kernel::kthread;
use kernel::kunit_suite::{Check, TestResult};
use kernel::prelude::*;
use kernel::{c_str, kunit_ensure, kunit_ensure_eq, kunit_suite};

/// Rounds of two racing writes each.
const ROUNDS: u32 = 400;

/// The round the writers are to write in (0: none yet).
static ROUND: AtomicU32 = AtomicU32::new(0);
/// Writes done, over all rounds and both writers.
static WRITES: AtomicU32 = AtomicU32::new(0);
/// Writes that failed.
static FAILED: AtomicU32 = AtomicU32::new(0);
/// Which knob the writers write: `max_page_sharing` (false) or `merge_across_nodes` (true).
static MERGE_ACROSS: AtomicBool = AtomicBool::new(false);

/// The `max_page_sharing` writer `which` writes in round `r`: the two writers' values differ
/// from each other and from the previous round's.
fn sharing_value(r: u32, which: u32) -> usize {
    2 + (2 * (r % 64) + which) as usize
}

/// One writer: waits for each new round, and writes its value once.
fn writer(which: u32) {
    let mut seen = 0;
    while !kthread::should_stop() {
        let r = ROUND.load(Acquire);
        if r == seen {
            kernel::kthread::cond_resched();
            continue;
        }
        seen = r;
        let res = if MERGE_ACROSS.load(Relaxed) {
            // One writer asks for the value the trees have, the other for the other one.
            scan::set_merge_across_nodes((r + which) % 2 == 0)
        } else {
            scan::set_max_page_sharing(sharing_value(r, which))
        };
        if res.is_err() {
            FAILED.fetch_add(1, Relaxed);
        }
        WRITES.fetch_add(1, Release);
    }
}

fn writer_0() {
    writer(0)
}

fn writer_1() {
    writer(1)
}

/// Runs `ROUNDS` rounds of the two writers and checks after each that the knob shows what the
/// trees use. Returns the rounds whose outcome was inconsistent.
fn race(merge_across: bool) -> Result<u32> {
    MERGE_ACROSS.store(merge_across, Relaxed);
    ROUND.store(0, Relaxed);
    WRITES.store(0, Relaxed);
    FAILED.store(0, Relaxed);
    let w0 = kthread::run(writer_0, c_str!("rksm_knob_w0"))?;
    let w1 = match kthread::run(writer_1, c_str!("rksm_knob_w1")) {
        Ok(w) => w,
        Err(e) => {
            w0.stop();
            return Err(e);
        }
    };
    let mut bad = 0;
    'rounds: for r in 1..=ROUNDS {
        ROUND.store(r, Release);
        while WRITES.load(Acquire) < 2 * r {
            // KUnit gave up on this test (its timeout): stop the writers and return.
            if kthread::should_stop() {
                bad += 1;
                break 'rounds;
            }
            kernel::kthread::cond_resched();
        }
        let shown = (
            STATS.merge_across_nodes.load(Relaxed),
            STATS.max_page_sharing.load(Relaxed) as usize,
        );
        if scan::tree_knobs() != Some(shown) {
            bad += 1;
        }
    }
    w0.stop();
    w1.stop();
    Ok(bad)
}

fn racing_writers_show_the_value_in_use() -> TestResult {
    let boot = (
        STATS.merge_across_nodes.load(Relaxed),
        STATS.max_page_sharing.load(Relaxed) as usize,
    );
    kunit_ensure_eq!(scan::tree_knobs(), Some(boot));
    let sharing = race(false).check()?;
    let sharing_failed = FAILED.load(Relaxed);
    let across = race(true).check()?;
    let across_failed = FAILED.load(Relaxed);
    // Back to the boot values.
    scan::set_max_page_sharing(boot.1).check()?;
    scan::set_merge_across_nodes(boot.0).check()?;
    kunit_ensure_eq!(scan::tree_knobs(), Some(boot));
    kunit_ensure!(
        sharing == 0,
        "max_page_sharing: {} of {} rounds showed a value the trees do not use",
        sharing,
        ROUNDS
    );
    kunit_ensure!(
        across == 0,
        "merge_across_nodes: {} of {} rounds showed a value the trees do not use",
        across,
        ROUNDS
    );
    kunit_ensure!(
        sharing_failed == 0 && across_failed == 0,
        "every write with empty trees succeeds ({} and {} failed)",
        sharing_failed,
        across_failed
    );
    Ok(())
}

kunit_suite!("rksm_knobs", [racing_writers_show_the_value_in_use]);
