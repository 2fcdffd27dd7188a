// SPDX-License-Identifier: GPL-2.0

//! `/sys/kernel/mm/ksm/`: the tunables and statistics ([`crate::tunables`]), with C KSM's names,
//! modes, formats and errors. A store that changes what the scanner does goes through the
//! scanner ([`crate::scan`]).

use crate::domain::Scope;
use crate::scan;
use crate::tunables::*;
use core::fmt::Write;
use core::sync::atomic::{
    AtomicI64,
    Ordering::{Acquire, Relaxed},
};
use kernel::c_str;
use kernel::mm::ksm as mmksm;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sysfs::{self, Attribute, ShowBuf};

/// The sum of one counter over the shards.
fn trees(counter: impl Fn(&TreeStats) -> &AtomicI64) -> i64 {
    TREE_STATS.iter().map(|t| counter(t).load(Relaxed)).sum()
}

fn get(a: &AtomicI64) -> i64 {
    a.load(Relaxed)
}

/// The memory KSM saves in all, as C's `general_profit`.
fn general_profit() -> i64 {
    (trees(|t| &t.pages_sharing) + mmksm::zero_pages() as i64) * PAGE_SIZE as i64
        - get(&STATS.rmap_items) * scan::ITEM_SIZE as i64
}

macro_rules! show_value {
    ($f:ident, $e:expr) => {
        fn $f(b: &mut ShowBuf) -> core::fmt::Result {
            writeln!(b, "{}", $e)
        }
    };
}

show_value!(show_run, RUN.load(Relaxed));
show_value!(show_pages_to_scan, PAGES_TO_SCAN.load(Relaxed));
show_value!(show_sleep, SLEEP_MS.load(Relaxed));
show_value!(show_scanned, get(&STATS.pages_scanned));
show_value!(show_shared, trees(|t| &t.pages_shared));
show_value!(show_sharing, trees(|t| &t.pages_sharing));
show_value!(show_unshared, trees(|t| &t.pages_unshared));
show_value!(show_skipped, get(&STATS.pages_skipped));
show_value!(show_zero_pages, mmksm::zero_pages());
// Acquire: a reader that sees a pass end sees the counters published before it (`publish`).
show_value!(show_full_scans, STATS.full_scans.load(Acquire));
show_value!(show_sample_misses, crate::item::SAMPLE_MISSES.load(Relaxed));
show_value!(
    show_merge_across_nodes,
    u32::from(STATS.merge_across_nodes.load(Relaxed))
);
show_value!(show_max_page_sharing, get(&STATS.max_page_sharing));
show_value!(show_chains, trees(|t| &t.chains));
show_value!(show_dups, trees(|t| &t.dups));
show_value!(show_prune_ms, CHAINS_PRUNE_MS.load(Relaxed));
show_value!(show_use_zero_pages, u32::from(USE_ZERO_PAGES.load(Relaxed)));
show_value!(show_general_profit, general_profit());
show_value!(show_smart_scan, u32::from(SMART_SCAN.load(Relaxed)));
show_value!(show_advisor_max_cpu, ADVISOR_MAX_CPU.load(Relaxed));
show_value!(show_advisor_min_pages, ADVISOR_MIN_PAGES.load(Relaxed));
show_value!(show_advisor_max_pages, ADVISOR_MAX_PAGES.load(Relaxed));
show_value!(show_advisor_target, ADVISOR_TARGET_SCAN_TIME.load(Relaxed));
show_value!(show_scan_threads, SCAN_THREADS.load(Relaxed));

fn show_volatile(b: &mut ShowBuf) -> core::fmt::Result {
    // Not worth any locking, as in C; so it may come out negative: hide that.
    let v = get(&STATS.rmap_items)
        - trees(|t| &t.pages_shared)
        - trees(|t| &t.pages_sharing)
        - trees(|t| &t.pages_unshared);
    writeln!(b, "{}", v.max(0))
}

/// `merge_scope`: every scope, the one in use in brackets (as `advisor_mode` shows its modes).
fn show_merge_scope(b: &mut ShowBuf) -> core::fmt::Result {
    let now = scan::merge_scope();
    for (i, s) in Scope::ALL.iter().enumerate() {
        let sep = if i == 0 { "" } else { " " };
        if *s == now {
            write!(b, "{sep}[{}]", s.name())?;
        } else {
            write!(b, "{sep}{}", s.name())?;
        }
    }
    writeln!(b)
}

fn store_merge_scope(s: &CStr) -> Result {
    let scope = Scope::ALL
        .into_iter()
        .find(|sc| sysfs::streq(s, sc.name()))
        .ok_or(EINVAL)?;
    scan::set_merge_scope(scope)
}

fn show_advisor_mode(b: &mut ShowBuf) -> core::fmt::Result {
    if ADVISOR_SCAN_TIME.load(Relaxed) {
        writeln!(b, "none [scan-time]")
    } else {
        writeln!(b, "[none] scan-time")
    }
}

/// Any parse error becomes `EINVAL`, as most of C KSM's stores do.
fn inval<T>(r: Result<T>) -> Result<T> {
    r.map_err(|_| EINVAL)
}

fn store_sleep(s: &CStr) -> Result {
    SLEEP_MS.store(inval(sysfs::kstrtouint(s))?, Relaxed);
    scan::wake_iter();
    Ok(())
}

fn store_pages_to_scan(s: &CStr) -> Result {
    if ADVISOR_SCAN_TIME.load(Relaxed) {
        return Err(EINVAL);
    }
    PAGES_TO_SCAN.store(inval(sysfs::kstrtouint(s))?, Relaxed);
    Ok(())
}

fn store_run(s: &CStr) -> Result {
    let flags = inval(sysfs::kstrtouint(s))?;
    if flags > RUN_UNMERGE {
        return Err(EINVAL);
    }
    scan::set_run(flags)?;
    if flags & RUN_MERGE != 0 {
        scan::wake_thread();
    }
    Ok(())
}

fn store_merge_across_nodes(s: &CStr) -> Result {
    // C returns the parse error itself here (`EINVAL` or `ERANGE`).
    let knob = sysfs::kstrtoul(s)?;
    if knob > 1 {
        return Err(EINVAL);
    }
    scan::set_merge_across_nodes(knob == 1)
}

fn store_use_zero_pages(s: &CStr) -> Result {
    USE_ZERO_PAGES.store(inval(sysfs::kstrtobool(s))?, Relaxed);
    Ok(())
}

fn store_max_page_sharing(s: &CStr) -> Result {
    // C returns the parse error itself here, and `EINVAL` below 2 (which catches negatives).
    let knob = sysfs::kstrtoint(s)?;
    if knob < 2 {
        return Err(EINVAL);
    }
    if get(&STATS.max_page_sharing) == i64::from(knob) {
        return Ok(());
    }
    scan::set_max_page_sharing(knob as usize)
}

fn store_prune_ms(s: &CStr) -> Result {
    CHAINS_PRUNE_MS.store(inval(sysfs::kstrtouint(s))?, Relaxed);
    Ok(())
}

fn store_smart_scan(s: &CStr) -> Result {
    SMART_SCAN.store(inval(sysfs::kstrtobool(s))?, Relaxed);
    Ok(())
}

fn store_advisor_mode(s: &CStr) -> Result {
    let scan_time = if sysfs::streq(s, c_str!("scan-time")) {
        true
    } else if sysfs::streq(s, c_str!("none")) {
        false
    } else {
        return Err(EINVAL);
    };
    if ADVISOR_SCAN_TIME.swap(scan_time, Relaxed) != scan_time {
        // C's `set_advisor_defaults()`.
        if scan_time {
            scan::reset_advisor();
            PAGES_TO_SCAN.store(ADVISOR_MIN_PAGES.load(Relaxed) as u32, Relaxed);
        } else {
            PAGES_TO_SCAN.store(100, Relaxed);
        }
    }
    Ok(())
}

fn store_advisor_max_cpu(s: &CStr) -> Result {
    // C parses an `unsigned long` and keeps its low 32 bits (`4294967296` reads back `0`).
    ADVISOR_MAX_CPU.store(inval(sysfs::kstrtoul(s))? as u32, Relaxed);
    Ok(())
}

fn store_advisor_min_pages(s: &CStr) -> Result {
    ADVISOR_MIN_PAGES.store(inval(sysfs::kstrtoul(s))?, Relaxed);
    Ok(())
}

fn store_advisor_max_pages(s: &CStr) -> Result {
    ADVISOR_MAX_PAGES.store(inval(sysfs::kstrtoul(s))?, Relaxed);
    Ok(())
}

fn store_advisor_target(s: &CStr) -> Result {
    let v = inval(sysfs::kstrtoul(s))?;
    if v < 1 {
        return Err(EINVAL);
    }
    ADVISOR_TARGET_SCAN_TIME.store(v, Relaxed);
    Ok(())
}

fn store_scan_threads(s: &CStr) -> Result {
    scan::set_scan_threads(inval(sysfs::kstrtouint(s))?)
}

const RW: u16 = 0o644;
const RO: u16 = 0o444;

macro_rules! attr {
    ($name:literal, $show:ident) => {
        Attribute {
            name: c_str!($name),
            mode: RO,
            show: $show,
            store: None,
        }
    };
    ($name:literal, $show:ident, $store:ident) => {
        Attribute {
            name: c_str!($name),
            mode: RW,
            show: $show,
            store: Some($store),
        }
    };
}

/// The files of `/sys/kernel/mm/ksm`, in C KSM's order, and then rksm's own.
pub(crate) static ATTRS: [Attribute; 27] = [
    attr!("sleep_millisecs", show_sleep, store_sleep),
    attr!("pages_to_scan", show_pages_to_scan, store_pages_to_scan),
    attr!("run", show_run, store_run),
    attr!("pages_scanned", show_scanned),
    attr!("pages_shared", show_shared),
    attr!("pages_sharing", show_sharing),
    attr!("pages_unshared", show_unshared),
    attr!("pages_volatile", show_volatile),
    attr!("pages_skipped", show_skipped),
    attr!("ksm_zero_pages", show_zero_pages),
    attr!("full_scans", show_full_scans),
    attr!(
        "merge_across_nodes",
        show_merge_across_nodes,
        store_merge_across_nodes
    ),
    attr!(
        "max_page_sharing",
        show_max_page_sharing,
        store_max_page_sharing
    ),
    attr!("stable_node_chains", show_chains),
    attr!("stable_node_dups", show_dups),
    attr!(
        "stable_node_chains_prune_millisecs",
        show_prune_ms,
        store_prune_ms
    ),
    attr!("use_zero_pages", show_use_zero_pages, store_use_zero_pages),
    attr!("general_profit", show_general_profit),
    attr!("smart_scan", show_smart_scan, store_smart_scan),
    attr!("advisor_mode", show_advisor_mode, store_advisor_mode),
    attr!(
        "advisor_max_cpu",
        show_advisor_max_cpu,
        store_advisor_max_cpu
    ),
    attr!(
        "advisor_min_pages_to_scan",
        show_advisor_min_pages,
        store_advisor_min_pages
    ),
    attr!(
        "advisor_max_pages_to_scan",
        show_advisor_max_pages,
        store_advisor_max_pages
    ),
    attr!(
        "advisor_target_scan_time",
        show_advisor_target,
        store_advisor_target
    ),
    attr!("scan_threads", show_scan_threads, store_scan_threads),
    attr!("merge_scope", show_merge_scope, store_merge_scope),
    attr!("sample_misses", show_sample_misses),
];
