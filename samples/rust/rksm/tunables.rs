// SPDX-License-Identifier: GPL-2.0

//! KSM's tunables and published statistics: the values behind `/sys/kernel/mm/ksm/`
//! ([`crate::sysfs`]), below the scanner, which reads the tunables as it goes and publishes the
//! statistics.
//!
//! Tunables are atomics read by the scanner as it goes; the statistics are published by the
//! scanner into atomics after each batch, so that reading them never waits for a scan batch
//! (C reads its plain counters without locks for the same reason).

use core::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU8, AtomicUsize, Ordering::Relaxed,
};

/// How many shards the trees are split into (see [`crate::step`]): one [`TreeStats`] each.
pub(crate) const NR_SHARDS: usize = 64;

/// `run` stops the scanner.
pub(crate) const RUN_STOP: u32 = 0;
/// `run` lets the scanner merge.
pub(crate) const RUN_MERGE: u32 = 1;
/// `run` unmerges everything and stops.
pub(crate) const RUN_UNMERGE: u32 = 2;

/// `run`: 0 stop, 1 merge, 2 unmerge everything and stop. Without sysfs nobody could start
/// KSM, so it starts running, as C KSM does.
pub(crate) static RUN: AtomicU32 = AtomicU32::new(if cfg!(CONFIG_SYSFS) { 0 } else { 1 });
/// `pages_to_scan`.
pub(crate) static PAGES_TO_SCAN: AtomicU32 = AtomicU32::new(100);
/// `sleep_millisecs`.
pub(crate) static SLEEP_MS: AtomicU32 = AtomicU32::new(20);
/// `use_zero_pages`.
pub(crate) static USE_ZERO_PAGES: AtomicBool = AtomicBool::new(false);
/// `smart_scan`.
pub(crate) static SMART_SCAN: AtomicBool = AtomicBool::new(true);
/// `stable_node_chains_prune_millisecs`.
pub(crate) static CHAINS_PRUNE_MS: AtomicU32 = AtomicU32::new(2000);
/// `advisor_mode`: false none, true scan-time.
pub(crate) static ADVISOR_SCAN_TIME: AtomicBool = AtomicBool::new(false);
/// `advisor_max_cpu`: an `unsigned int` in C KSM, parsed as an `unsigned long`.
pub(crate) static ADVISOR_MAX_CPU: AtomicU32 = AtomicU32::new(70);
/// `advisor_min_pages_to_scan`.
pub(crate) static ADVISOR_MIN_PAGES: AtomicUsize = AtomicUsize::new(500);
/// `advisor_max_pages_to_scan`.
pub(crate) static ADVISOR_MAX_PAGES: AtomicUsize = AtomicUsize::new(30000);
/// `scan_threads`: how many threads scan (rksm's own; 1, C KSM's one `ksmd`, by default).
pub(crate) static SCAN_THREADS: AtomicU32 = AtomicU32::new(1);
/// `advisor_target_scan_time` (seconds).
pub(crate) static ADVISOR_TARGET_SCAN_TIME: AtomicUsize = AtomicUsize::new(200);
/// `merge_scope` (rksm's own), the index of its value in [`crate::domain::Scope::ALL`]: what
/// the trees of every shard use, shown once they all do.
pub(crate) static MERGE_SCOPE: AtomicU8 = AtomicU8::new(0);

/// The statistics, as last published by the scanner.
pub(crate) struct Published {
    pub(crate) pages_scanned: AtomicI64,
    pub(crate) pages_skipped: AtomicI64,
    pub(crate) rmap_items: AtomicI64,
    pub(crate) full_scans: AtomicI64,
    pub(crate) max_page_sharing: AtomicI64,
    pub(crate) merge_across_nodes: AtomicBool,
}

pub(crate) static STATS: Published = Published {
    pages_scanned: AtomicI64::new(0),
    pages_skipped: AtomicI64::new(0),
    rmap_items: AtomicI64::new(0),
    full_scans: AtomicI64::new(0),
    max_page_sharing: AtomicI64::new(256),
    merge_across_nodes: AtomicBool::new(true),
};

/// The counters of the trees of one shard, as the shard last published them.
pub(crate) struct TreeStats {
    pub(crate) pages_shared: AtomicI64,
    pub(crate) pages_sharing: AtomicI64,
    pub(crate) pages_unshared: AtomicI64,
    pub(crate) chains: AtomicI64,
    pub(crate) dups: AtomicI64,
}

impl TreeStats {
    const fn new() -> Self {
        Self {
            pages_shared: AtomicI64::new(0),
            pages_sharing: AtomicI64::new(0),
            pages_unshared: AtomicI64::new(0),
            chains: AtomicI64::new(0),
            dups: AtomicI64::new(0),
        }
    }
}

/// The counters of each shard's trees: each shard stores its own (plain stores under its lock,
/// no shared read-modify-write on the scan path), and sysfs adds them up.
pub(crate) static TREE_STATS: [TreeStats; NR_SHARDS] = [const { TreeStats::new() }; NR_SHARDS];

/// Whether zero pages are merged with the kernel's zero page.
pub(crate) fn use_zero_pages() -> bool {
    USE_ZERO_PAGES.load(Relaxed)
}
