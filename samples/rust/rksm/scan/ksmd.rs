// SPDX-License-Identifier: GPL-2.0

//! The scanner threads: `ksmd` (C's `ksm_scan_thread()`), which scans `pages_to_scan` pages
//! and sleeps `sleep_millisecs`, and its helpers (`scan_threads`), which join its batches.

use super::*;

/// Wakes `ksmd` if it waits for work.
pub(crate) fn wake_thread() {
    ksm().thread_wait.wake_up_interruptible();
}

/// Wakes `ksmd` from its sleep between batches (the sleep time changed).
pub(crate) fn wake_iter() {
    ksm().iter_wait.wake_up_interruptible();
}

pub(super) fn should_run() -> bool {
    tunables::RUN.load(Relaxed) & RUN_MERGE != 0 && ksm().nr_slots.load(Relaxed) != 0
}

/// `ksmd` (C's `ksm_scan_thread()`).
pub(super) fn ksmd() {
    kthread::set_freezable();
    kthread::set_current_nice(5);
    let k = ksm();
    while !kthread::should_stop() {
        {
            let mut st = k.lock_scan();
            if should_run() {
                st.do_scan(&k, tunables::PAGES_TO_SCAN.load(Relaxed) as usize);
            }
        }
        if should_run() {
            let ms = tunables::SLEEP_MS.load(Relaxed);
            k.iter_wait.wait_freezable(
                || ms != tunables::SLEEP_MS.load(Relaxed),
                Some(kernel::time::msecs_to_jiffies(ms) as usize),
            );
        } else {
            k.thread_wait
                .wait_freezable(|| should_run() || kthread::should_stop(), None);
        }
    }
}

/// A helper of `ksmd` (`ksmd/1`, ...): works on the batches `ksmd` shares.
pub(super) fn ksmd_helper() {
    kthread::set_freezable();
    kthread::set_current_nice(5);
    ksm().crew.serve();
}

/// Sets `scan_threads`, starting helper threads as needed. It does not wait for the scan in
/// progress: each wakeup of `ksmd` reads the knob once, when it starts, and a batch hands work
/// only to helpers that were running when it read their number.
pub(crate) fn set_scan_threads(n: u32) -> Result {
    if !(1..=MAX_SCAN_THREADS).contains(&n) {
        return Err(EINVAL);
    }
    let k = ksm();
    // The thread list's lock orders the starts.
    let mut threads = k.threads.lock();
    threads.reserve(n as usize, GFP_KERNEL)?;
    while k.helpers.load(Relaxed) < n as usize - 1 {
        let i = k.helpers.load(Relaxed) + 1;
        let name = CString::try_from_fmt(kernel::fmt!("ksmd/{i}"))?;
        let thread = kthread::run(ksmd_helper, &name)?;
        // Cannot fail: room was made above.
        let _ = threads.push_within_capacity(thread);
        k.helpers.store(i, Relaxed);
    }
    // Each scanner thread gets its share of the CPUs, so that they work side by side; one
    // thread, `ksmd` alone, may run anywhere, as C's does.
    for (i, t) in threads.iter().enumerate().take(n as usize) {
        t.set_cpu_share(i, n as usize)?;
    }
    tunables::SCAN_THREADS.store(n, Relaxed);
    Ok(())
}
