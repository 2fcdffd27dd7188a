// SPDX-License-Identifier: GPL-2.0

//! The scan-time advisor (`advisor_mode=scan-time`, C's `scan_time_advisor()`): scales
//! `pages_to_scan` so that a pass takes about `advisor_target_scan_time`, within the CPU bounds,
//! counting the CPU time of every scanner thread.

use super::*;

/// The scan-time advisor's state (C's `struct advisor_ctx`).
#[derive(Default)]
pub(super) struct Advisor {
    pub(super) start_ns: i64,
    pub(super) scan_time: u64,
    pub(super) change: u64,
    pub(super) cpu_ns: u64,
}

/// Forgets the scan-time advisor's history (it was just switched on).
pub(crate) fn reset_advisor() {
    ksm().scan.lock().advisor = Advisor::default();
}

impl ScanState {
    /// C's `scan_time_advisor()`: scales `pages_to_scan` so that a pass takes about
    /// `advisor_target_scan_time` seconds, within the CPU bounds. The CPU time is that of every
    /// scanner thread, `ksmd`'s helpers included (they do part of the pass's work).
    pub(super) fn scan_time_advisor(&mut self, k: &Ksm) {
        let a = &mut self.advisor;
        let scan_time = (((Ktime::ktime_get().to_ns() - a.start_ns) / 1_000_000_000) as u64).max(1);
        let cpu: u64 = k.threads.lock().iter().map(|t| t.runtime_ns()).sum();
        let cpu_ms = cpu.saturating_sub(a.cpu_ns) / 1_000_000;
        let cpu_percent = ((cpu_ms * 100) / (scan_time * 1000)).max(1);
        let last = if a.scan_time != 0 {
            a.scan_time
        } else {
            scan_time
        };
        let target = tunables::ADVISOR_TARGET_SCAN_TIME.load(Relaxed) as u64;
        let factor = (target * 100 / scan_time).max(1);
        let change = (scan_time * 100 / last).max(1);
        let change = ((100 - 30) * a.change + 30 * change) / 100;
        let cur = tunables::PAGES_TO_SCAN.load(Relaxed) as u64;
        let mut pages = cur * 100 / factor;
        pages = pages * change / 100;
        let per_page_cost = (cur / cpu_percent).max(1);
        pages = pages.min(per_page_cost * tunables::ADVISOR_MAX_CPU.load(Relaxed) as u64);
        pages = pages.max(per_page_cost * 10);
        pages = pages.min(tunables::ADVISOR_MAX_PAGES.load(Relaxed) as u64);
        a.change = change;
        a.scan_time = scan_time;
        a.cpu_ns = cpu;
        tunables::PAGES_TO_SCAN.store(pages as u32, Relaxed);
        trace::advisor(scan_time as i64, pages as usize, cpu_percent as u32);
    }
}
