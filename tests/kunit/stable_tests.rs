// SPDX-License-Identifier: GPL-2.0

//! `rksm_stable`: the stable tree against a naive sorted array, its lookup cost, stale nodes and
//! full nodes.

use super::pages::{items, max_rb_height, shuffled, Pattern, TestMapping, TestPages, TestToken};
use crate::backend::Contents;
use crate::compare::{Key, Order, Stats};
use crate::item::RmapItem;
use crate::stable::{Counters, Cx, Search, Settings, StableTree};
use core::cmp::Ordering;
use kernel::kunit_suite::{Check, TestResult};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};

const SET: Settings = Settings {
    order: Order::Checksum,
    max_page_sharing: 256,
    now: 0,
    prune_jiffies: 0,
    trust_checksum: false,
};

/// A stable tree, its token, the items its nodes list and the counters: torn down in that order
/// when dropped, so that a failed check (which returns early) never drops a node that still lists
/// mappings.
struct Fix {
    tree: StableTree<TestPages>,
    token: TestToken,
    its: KVec<Pin<KBox<RmapItem<TestPages>>>>,
    c: Counters,
}

impl Drop for Fix {
    fn drop(&mut self) {
        for it in self.its.iter() {
            crate::stable::remove_item(&mut self.token, it, &mut self.c);
        }
    }
}

/// A stable tree of pages `0..n` of `p`, each with one mapping (its own item).
fn build(p: &TestPages, n: usize, set: Settings, stats: &mut Stats) -> Result<Fix> {
    let mut f = Fix {
        tree: StableTree::new(),
        token: TestToken::acquire().ok_or(EBUSY)?,
        its: items(n)?,
        c: Counters::default(),
    };
    for i in shuffled(n, 0xab)? {
        let held = p.held(i);
        let bytes = held.bytes();
        let key = Key::of(&bytes);
        // As the trees insert: where a lookup of the page missed, without walking again.
        let mut cx = Cx {
            backend: p,
            token: &mut f.token,
            set,
            stats: &mut *stats,
            counters: &mut f.c,
        };
        let at = match f.tree.search(&mut cx, &key, |_| false) {
            Search::Miss(at) => at,
            _ => None,
        };
        let node = f.tree.insert(&mut cx, &key, i, 0, at)?;
        node.append(&f.token, f.its[i].as_ref(), &mut f.c)?;
    }
    Ok(f)
}

/// Looks up `probe` (a page index); returns the index of the KSM page found.
fn search(
    f: &mut Fix,
    p: &TestPages,
    probe: usize,
    set: Settings,
    stats: &mut Stats,
) -> Option<usize> {
    let held = p.held(probe);
    let bytes = held.bytes();
    let mut cx = Cx {
        backend: p,
        token: &mut f.token,
        set,
        stats,
        counters: &mut f.c,
    };
    match f.tree.search(&mut cx, &Key::of(&bytes), |_| false) {
        Search::Found(found) => Some(found.page.index),
        _ => None,
    }
}

/// Lookups of pages equal to tree pages find them; lookups of other pages find nothing; the
/// tree's order is that of `order` (contents, or checksum then contents). For every pattern of
/// distinct pages.
fn matches_naive(order: Order) -> TestResult {
    let set = Settings { order, ..SET };
    for pattern in [Pattern::Worst, Pattern::Random(21), Pattern::ZeroPrefix(22)] {
        let n = 2048;
        let mut p = TestPages::new(n, pattern).check()?;
        let mut stats = Stats::default();
        let sorted = p.sorted(n, order).check()?;
        let mut probes = KVec::new();
        for k in 0..128 {
            let i = (k * 97) % n;
            let probe = p.push(pattern, i, 0).check()?;
            let absent = p.push(pattern, n + 1 + k, 0).check()?;
            probes.push((i, probe, absent), GFP_KERNEL).check()?;
        }
        let mut f = build(&p, n, set, &mut stats).check()?;
        kunit_ensure_eq!(f.tree.len(), n);
        kunit_ensure_eq!(f.c.pages_shared, n as u64);
        kunit_ensure!(f.tree.height() <= max_rb_height(n));
        for (k, node) in f.tree.iter().enumerate() {
            kunit_ensure_eq!(node.ksm_page().copied(), Some(sorted[k]));
        }
        for &(i, probe, absent) in probes.iter() {
            kunit_ensure_eq!(search(&mut f, &p, probe, set, &mut stats), Some(i));
            let naive = p.naive_contains(&sorted, absent, order);
            kunit_ensure_eq!(search(&mut f, &p, absent, set, &mut stats).is_some(), naive);
        }
        drop(f);
    }
    Ok(())
}

fn search_matches_naive() -> TestResult {
    matches_naive(Order::SkipPrefix)
}

fn keyed_search_matches_naive() -> TestResult {
    matches_naive(Order::Checksum)
}

/// On the worst case, a stable lookup reads one page plus at most 64 bytes per level; ordered by
/// checksum, it reads only the page it finds.
fn worst_case_search_cost() -> TestResult {
    let n = 4096;
    let mut p = TestPages::new(n, Pattern::Worst).check()?;
    let mut probes = KVec::new();
    for k in 0..512 {
        let i = (k * 8 + 1) % n;
        probes
            .push((i, p.push(Pattern::Worst, i, 0).check()?), GFP_KERNEL)
            .check()?;
    }
    let skip_set = Settings {
        order: Order::SkipPrefix,
        ..SET
    };
    let no_skip = Settings {
        order: Order::Plain,
        ..SET
    };
    let mut f = build(&p, n, skip_set, &mut Stats::default()).check()?;
    let (mut skip, mut plain) = (Stats::default(), Stats::default());
    for &(i, probe) in probes.iter() {
        kunit_ensure_eq!(search(&mut f, &p, probe, skip_set, &mut skip), Some(i));
        kunit_ensure!(
            skip.last_bytes <= PAGE_SIZE as u64 + 64 * u64::from(skip.last_depth),
            "{} bytes at depth {}",
            skip.last_bytes,
            skip.last_depth
        );
        kunit_ensure_eq!(search(&mut f, &p, probe, no_skip, &mut plain), Some(i));
        kunit_ensure_eq!(
            plain.last_bytes,
            PAGE_SIZE as u64 * u64::from(plain.last_depth)
        );
    }
    kunit_ensure!(skip.max_depth >= 12);
    kunit_ensure!(
        plain.bytes >= 8 * skip.bytes,
        "plain {} vs skipping {}",
        plain.bytes,
        skip.bytes
    );
    drop(f);
    // The same tree ordered by checksum: a lookup compares the page it finds and nothing else
    // (no two of these pages share a checksum: checked against the naive order).
    let mut f = build(&p, n, SET, &mut Stats::default()).check()?;
    let mut keyed = Stats::default();
    for &(i, probe) in probes.iter() {
        kunit_ensure_eq!(search(&mut f, &p, probe, SET, &mut keyed), Some(i));
        kunit_ensure_eq!(keyed.last_bytes, PAGE_SIZE as u64);
    }
    kunit_ensure!(keyed.key_steps >= 8 * keyed.lookups);
    kunit_ensure_eq!(keyed.compares, keyed.lookups);
    pr_info!(
        "rksm_stable: worst case, {} pages: {} bytes per lookup skipping, {} plain, \
         {} by checksum, max depth {}\n",
        n,
        skip.bytes / skip.lookups,
        plain.bytes / plain.lookups,
        keyed.bytes / keyed.lookups,
        skip.max_depth
    );
    Ok(())
}

/// Nodes whose KSM page is gone are removed when a lookup meets them; their mappings become
/// loose and the counters follow.
fn stale_nodes_are_removed() -> TestResult {
    let n = 64;
    let mut p = TestPages::new(n, Pattern::Random(5)).check()?;
    let mut probes = KVec::new();
    for i in (0..n).step_by(8) {
        probes
            .push((i, p.push(Pattern::Random(5), i, 0).check()?), GFP_KERNEL)
            .check()?;
    }
    let live = p.push(Pattern::Random(5), 3, 0).check()?;
    let mut stats = Stats::default();
    let mut f = build(&p, n, SET, &mut stats).check()?;
    for &(i, _) in probes.iter() {
        p.set_gone(i);
    }
    for &(i, probe) in probes.iter() {
        kunit_ensure_eq!(search(&mut f, &p, probe, SET, &mut stats), None);
        kunit_ensure!(
            f.its[i].is_loose(),
            "the mapping of gone page {} is still listed",
            i
        );
    }
    kunit_ensure_eq!(f.tree.len(), n - n / 8);
    kunit_ensure_eq!(f.c.pages_shared, (n - n / 8) as u64);
    // The others are still found.
    kunit_ensure_eq!(search(&mut f, &p, live, SET, &mut stats), Some(3));
    Ok(())
}

/// A range of frames going offline takes out exactly the nodes whose KSM page's frame lies in it
/// (C's `ksm_check_stable_tree()`): their mappings become loose, the counters follow, the tree
/// keeps its order, and every other page is still found.
fn offlined_range_is_pruned() -> TestResult {
    let n = 64;
    let mut p = TestPages::new(n, Pattern::Random(9)).check()?;
    let mut probes = KVec::new();
    for i in 0..n {
        probes
            .push(p.push(Pattern::Random(9), i, 0).check()?, GFP_KERNEL)
            .check()?;
    }
    let mut stats = Stats::default();
    let mut f = build(&p, n, SET, &mut stats).check()?;
    let frames = 16..40;
    f.tree
        .remove_range(&p, &mut f.token, &mut f.c, |k| frames.contains(k));
    kunit_ensure_eq!(f.tree.len(), n - frames.len());
    kunit_ensure_eq!(f.c.pages_shared, (n - frames.len()) as u64);
    for i in 0..n {
        let gone = frames.contains(&i);
        kunit_ensure_eq!(f.its[i].is_loose(), gone);
        let want = (!gone).then_some(i);
        kunit_ensure_eq!(search(&mut f, &p, probes[i], SET, &mut stats), want);
    }
    // Nothing in the range: nothing changes.
    f.tree
        .remove_range(&p, &mut f.token, &mut f.c, |k| *k >= 2 * n);
    kunit_ensure_eq!(f.tree.len(), n - frames.len());
    Ok(())
}

/// A node at `max_page_sharing` is not offered, and neither is a node with no mapping left.
fn full_or_empty_nodes_are_not_offered() -> TestResult {
    let mut p = TestPages::new(1, Pattern::Best).check()?;
    let probe = p.push(Pattern::Best, 0, 0).check()?;
    let mut stats = Stats::default();
    let set = Settings {
        max_page_sharing: 2,
        ..SET
    };
    let mut f = build(&p, 1, set, &mut stats).check()?;
    kunit_ensure_eq!(search(&mut f, &p, probe, set, &mut stats), Some(0));
    let second = RmapItem::new_boxed(TestMapping::new(0), GFP_KERNEL).check()?;
    f.its.push(second, GFP_KERNEL).check()?;
    {
        let held = p.held(0);
        let bytes = held.bytes();
        let mut cx = Cx {
            backend: &p,
            token: &mut f.token,
            set,
            stats: &mut stats,
            counters: &mut f.c,
        };
        let Search::Found(found) = f.tree.search(&mut cx, &Key::of(&bytes), |_| false) else {
            kunit_ensure!(false, "page 0 not found");
            return Ok(());
        };
        found
            .node
            .append(&f.token, f.its[1].as_ref(), &mut f.c)
            .check()?;
    }
    kunit_ensure_eq!((f.c.pages_shared, f.c.pages_sharing), (1, 1));
    kunit_ensure_eq!(search(&mut f, &p, probe, set, &mut stats), None);
    for k in 0..2 {
        crate::stable::remove_item(&mut f.token, &f.its[k], &mut f.c);
    }
    kunit_ensure_eq!((f.c.pages_shared, f.c.pages_sharing), (0, 0));
    kunit_ensure_eq!(search(&mut f, &p, probe, set, &mut stats), None);
    kunit_ensure_eq!(p.naive_cmp(0, probe), Ordering::Equal);
    Ok(())
}

kunit_suite!(
    "rksm_stable",
    [
        search_matches_naive,
        keyed_search_matches_naive,
        worst_case_search_cost,
        stale_nodes_are_removed,
        offlined_range_is_pruned,
        full_or_empty_nodes_are_not_offered,
    ]
);
