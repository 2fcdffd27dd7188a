// SPDX-License-Identifier: GPL-2.0

//! `rksm_unstable`: the unstable tree against a naive sorted array, the cost of its lookups, and
//! what it does when pages change under it.

use super::pages::{global_probe, items, max_rb_height, shuffled, Pattern, TestMapping, TestPages};
use crate::backend::Contents;
use crate::compare::{Order, Stats};
use crate::item::RmapItem;
use crate::unstable::{BucketHint, Lookup, UnstableTree, MIN_SPLIT};
use core::cmp::Ordering;
use kernel::kunit_suite::{Check, TestResult};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};

/// What a lookup ended with, in terms the naive reference also speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Found the page at this index.
    Found(usize),
    Inserted,
    GaveUp,
}

/// Looks up a probe item for page `page` that is never left in the tree: if the lookup inserted
/// it, it is taken out again at once.
fn probe(
    tree: &mut UnstableTree<TestPages>,
    p: &TestPages,
    page: usize,
    order: Order,
    stats: &mut Stats,
) -> Result<Seen> {
    let item = RmapItem::new_boxed(TestMapping::new(page), GFP_KERNEL)?;
    let seen = lookup(tree, p, item.as_ref(), order, stats);
    tree.remove(&item);
    Ok(seen)
}

fn lookup(
    tree: &mut UnstableTree<TestPages>,
    p: &TestPages,
    item: Pin<&RmapItem<TestPages>>,
    order: Order,
    stats: &mut Stats,
) -> Seen {
    let key = p.held(item.mapping().page());
    // As the volatility gate does before a lookup: the item records its page's checksum.
    let bytes = key.bytes();
    item.set_checksum(bytes.checksum(), &bytes);
    match tree.search_insert::<false>(p, item, &key, global_probe(order), stats, || true) {
        Lookup::Found(hit) => Seen::Found(hit.page.index),
        Lookup::Inserted => Seen::Inserted,
        Lookup::GaveUp | Lookup::Declined => Seen::GaveUp,
    }
}

/// Inserts the pages of `pattern` in a shuffled order and checks every answer against a naive
/// sorted array of the pages inserted so far: found exactly when an equal page is there, and
/// then an equal page; the tree's order is `order`'s; the tree is balanced.
fn against_naive(pattern: Pattern, n: usize, order: Order) -> TestResult {
    let p = TestPages::new(n, pattern).check()?;
    let items = items(n).check()?;
    let mut tree = UnstableTree::new();
    let mut stats = Stats::default();
    // Twice: the second pass, after `renew`, split into buckets by checksum in rksm's order.
    for round in 0..2 {
        let mut naive: KVec<usize> = KVec::new();
        for i in shuffled(n, 0x5eed + round as u64).check()? {
            let seen = lookup(&mut tree, &p, items[i].as_ref(), order, &mut stats);
            let pos = naive.binary_search_by(|&q| p.order_cmp(order, q, i));
            match (seen, pos) {
                (Seen::Found(j), Ok(_)) => {
                    kunit_ensure_eq!(p.naive_cmp(i, j), Ordering::Equal);
                }
                (Seen::Inserted, Err(at)) => {
                    naive.push(i, GFP_KERNEL).check()?;
                    naive[at..].rotate_right(1);
                }
                (seen, pos) => {
                    kunit_ensure!(
                        false,
                        "round {}, page {}: tree says {:?}, naive search says {:?}",
                        round,
                        i,
                        seen,
                        pos.is_ok()
                    );
                }
            }
        }
        kunit_ensure_eq!(tree.len(), naive.len());
        kunit_ensure_eq!(tree.iter().count(), naive.len());
        // Sorted in the tree's order (within each bucket), every page of the naive array once.
        let mut seen: KVec<usize> = KVec::new();
        for item in tree.iter() {
            seen.push(item.mapping().page(), GFP_KERNEL).check()?;
        }
        seen.sort_unstable_by(|&a, &b| p.order_cmp(order, a, b));
        for (k, &here) in seen.iter().enumerate() {
            kunit_ensure_eq!(p.naive_cmp(here, naive[k]), Ordering::Equal);
            if k > 0 {
                kunit_ensure_eq!(p.order_cmp(order, seen[k - 1], here), Ordering::Less);
            }
        }
        if tree.trees_in_use() <= 1 {
            let mut prev: Option<usize> = None;
            for item in tree.iter() {
                let here = item.mapping().page();
                if let Some(q) = prev {
                    kunit_ensure_eq!(p.order_cmp(order, q, here), Ordering::Less);
                }
                prev = Some(here);
            }
        }
        kunit_ensure!(
            tree.height() <= max_rb_height(tree.len()),
            "height {} for {} nodes",
            tree.height(),
            tree.len()
        );
        // rksm's order is split at the second pass; C's never is.
        let split = round == 1 && order == Order::Checksum && naive.len() >= MIN_SPLIT;
        kunit_ensure_eq!(tree.trees_in_use() > 1, split);
        tree.renew();
    }
    Ok(())
}

const SKIP: Order = Order::SkipPrefix;
const KEYED: Order = Order::Checksum;

fn best_case_matches_naive() -> TestResult {
    against_naive(Pattern::Best, 2048, SKIP)
}

fn worst_case_matches_naive() -> TestResult {
    against_naive(Pattern::Worst, 4096, SKIP)
}

fn random_pages_match_naive() -> TestResult {
    against_naive(Pattern::Random(0xbeef), 4096, SKIP)
}

fn zero_prefix_pages_match_naive() -> TestResult {
    against_naive(Pattern::ZeroPrefix(0xfeed), 4096, SKIP)
}

fn ragged_prefixes_match_naive() -> TestResult {
    against_naive(Pattern::Ragged, 4096, SKIP)
}

/// Ordered by checksum first, on every pattern.
fn keyed_matches_naive() -> TestResult {
    for pattern in [
        Pattern::Best,
        Pattern::Worst,
        Pattern::Random(0xbeef),
        Pattern::ZeroPrefix(0xfeed),
        Pattern::Ragged,
    ] {
        against_naive(pattern, 2048, KEYED)?;
    }
    Ok(())
}

/// Skipping prefixes, or ordering by checksum first, changes the cost, never the answers: the
/// same lookups in each order give the same results, on every pattern.
fn skipping_gives_naive_answers() -> TestResult {
    for pattern in [
        Pattern::Worst,
        Pattern::Random(3),
        Pattern::ZeroPrefix(4),
        Pattern::Ragged,
        Pattern::Best,
    ] {
        let n = 1024;
        let p = TestPages::new(n, pattern).check()?;
        let (a, b) = (items(n).check()?, items(n).check()?);
        let c = items(n).check()?;
        let (mut skip, mut plain) = (UnstableTree::new(), UnstableTree::new());
        let mut keyed = UnstableTree::new();
        let mut stats = Stats::default();
        for i in shuffled(n, 77).check()? {
            let x = lookup(&mut skip, &p, a[i].as_ref(), SKIP, &mut stats);
            let y = lookup(&mut plain, &p, b[i].as_ref(), Order::Plain, &mut stats);
            let z = lookup(&mut keyed, &p, c[i].as_ref(), KEYED, &mut stats);
            kunit_ensure_eq!(x, y);
            kunit_ensure_eq!(z, y);
        }
        kunit_ensure_eq!(skip.len(), plain.len());
        kunit_ensure_eq!(keyed.len(), plain.len());
        for (x, y) in skip.iter().zip(plain.iter()) {
            kunit_ensure_eq!(x.mapping().page(), y.mapping().page());
        }
        skip.reset();
        plain.reset();
        keyed.reset();
    }
    Ok(())
}

/// On the worst case (4096 pages equal but their last 8 bytes), a lookup that skips prefixes
/// reads at most 4096 + 64 bytes per level, where the plain walk reads 4096 at every level, and
/// one ordered by checksum reads no page at all (none of these pages shares a checksum).
fn worst_case_lookup_cost() -> TestResult {
    let n = 4096;
    let p = TestPages::new(n, Pattern::Worst).check()?;
    let (a, b) = (items(n).check()?, items(n).check()?);
    let c = items(n).check()?;
    let (mut skip, mut plain) = (UnstableTree::new(), UnstableTree::new());
    let mut keyed = UnstableTree::new();
    let (mut s, mut q, mut k) = (Stats::default(), Stats::default(), Stats::default());
    for i in shuffled(n, 11).check()? {
        kunit_ensure_eq!(
            lookup(&mut keyed, &p, c[i].as_ref(), KEYED, &mut k),
            Seen::Inserted
        );
        kunit_ensure_eq!(k.last_bytes, 0);
        lookup(&mut skip, &p, a[i].as_ref(), SKIP, &mut s);
        kunit_ensure!(
            s.last_bytes <= PAGE_SIZE as u64 + 64 * u64::from(s.last_depth),
            "lookup of page {} read {} bytes at depth {}",
            i,
            s.last_bytes,
            s.last_depth
        );
        lookup(&mut plain, &p, b[i].as_ref(), Order::Plain, &mut q);
        kunit_ensure_eq!(q.last_bytes, PAGE_SIZE as u64 * u64::from(q.last_depth));
    }
    kunit_ensure!(
        s.max_depth >= 12,
        "a tree of {} pages is at least 12 deep, saw {}",
        n,
        s.max_depth
    );
    kunit_ensure!(
        q.bytes >= 8 * s.bytes,
        "plain {} bytes vs skipping {} bytes",
        q.bytes,
        s.bytes
    );
    kunit_ensure_eq!(k.compares, 0);
    kunit_ensure!(k.max_depth >= 12);
    pr_info!(
        "rksm_unstable: worst case, {} pages: {} bytes per lookup skipping, {} plain, \
         {} by checksum, max depth {}\n",
        n,
        s.bytes / s.lookups,
        q.bytes / q.lookups,
        k.bytes / k.lookups,
        s.max_depth
    );
    skip.reset();
    plain.reset();
    keyed.reset();
    Ok(())
}

/// Lookups of pages equal to ones in the tree find them, and read at most one page plus 64
/// bytes per level before checking the skipped prefix of the match; ordered by checksum, they
/// read the match and nothing else.
fn worst_case_hits_are_cheap_and_exact() -> TestResult {
    for order in [SKIP, KEYED] {
        let n = 4096;
        let mut p = TestPages::new(n, Pattern::Worst).check()?;
        let a = items(n).check()?;
        let mut tree = UnstableTree::new();
        let mut s = Stats::default();
        for i in shuffled(n, 5).check()? {
            lookup(&mut tree, &p, a[i].as_ref(), order, &mut s);
        }
        for k in 0..256 {
            let i = (k * 16 + 3) % n;
            let page = p.push(Pattern::Worst, i, 0).check()?;
            let verify0 = s.verify_bytes;
            let seen = probe(&mut tree, &p, page, order, &mut s).check()?;
            kunit_ensure_eq!(seen, Seen::Found(i));
            if order == KEYED {
                kunit_ensure_eq!(s.last_bytes, PAGE_SIZE as u64);
            } else {
                kunit_ensure!(s.last_bytes <= PAGE_SIZE as u64 + 64 * u64::from(s.last_depth));
            }
            kunit_ensure!(s.verify_bytes - verify0 <= PAGE_SIZE as u64);
        }
        tree.reset();
    }
    Ok(())
}

/// Pages that change after insertion make lookups miss, never report a page whose contents
/// differ; the tree stays balanced, and the pass reset empties it. In both orders.
fn mutation_misses_never_lies() -> TestResult {
    mutation_misses(SKIP)?;
    mutation_misses(KEYED)
}

fn mutation_misses(order: Order) -> TestResult {
    let n = 2048;
    let mut p = TestPages::new(n, Pattern::Random(0x51)).check()?;
    let a = items(n).check()?;
    let mut tree = UnstableTree::new();
    let mut s = Stats::default();
    for i in shuffled(n, 9).check()? {
        lookup(&mut tree, &p, a[i].as_ref(), order, &mut s);
    }
    // Change a quarter of the pages, at their start, middle and end.
    for i in (0..n).step_by(4) {
        p.write(i, (i * 13) % PAGE_SIZE, &[0xa5, 0x5a, 0xff]);
    }
    let mut found = 0;
    for i in 0..n {
        // A fresh page with what page i held when it was inserted.
        let page = p.push(Pattern::Random(0x51), i, 0).check()?;
        if let Seen::Found(j) = probe(&mut tree, &p, page, order, &mut s).check()? {
            kunit_ensure_eq!(p.naive_cmp(page, j), Ordering::Equal);
            found += 1;
        }
        if i % 256 == 0 {
            kunit_ensure!(tree.height() <= max_rb_height(tree.len()));
        }
    }
    kunit_ensure!(
        found >= n / 2,
        "only {} of {} unchanged pages found",
        found,
        n
    );
    kunit_ensure!(tree.height() <= max_rb_height(tree.len()));
    tree.reset();
    kunit_ensure_eq!(tree.len(), 0);
    kunit_ensure!(a.iter().all(|it| it.is_loose()));
    Ok(())
}

/// A lookup gives up, inserting nothing, when a tree item maps the key's own page (a fork
/// shares it) or its page is gone.
fn gives_up_on_same_or_gone_page() -> TestResult {
    let p = TestPages::new(4, Pattern::Worst).check()?;
    let a = items(4).check()?;
    let mut tree = UnstableTree::new();
    let mut s = Stats::default();
    kunit_ensure_eq!(
        lookup(&mut tree, &p, a[1].as_ref(), SKIP, &mut s),
        Seen::Inserted
    );
    kunit_ensure_eq!(probe(&mut tree, &p, 1, SKIP, &mut s).check()?, Seen::GaveUp);
    p.set_gone(1);
    kunit_ensure_eq!(
        lookup(&mut tree, &p, a[2].as_ref(), SKIP, &mut s),
        Seen::GaveUp
    );
    kunit_ensure_eq!(tree.len(), 1);
    tree.reset();

    // Ordered by checksum, only a lookup of the gone page's contents meets it, and gives up.
    let mut p = TestPages::new(4, Pattern::Worst).check()?;
    let copy = p.push(Pattern::Worst, 1, 0).check()?;
    let a = items(4).check()?;
    kunit_ensure_eq!(
        lookup(&mut tree, &p, a[1].as_ref(), KEYED, &mut s),
        Seen::Inserted
    );
    kunit_ensure_eq!(
        probe(&mut tree, &p, 1, KEYED, &mut s).check()?,
        Seen::GaveUp
    );
    p.set_gone(1);
    kunit_ensure_eq!(
        probe(&mut tree, &p, copy, KEYED, &mut s).check()?,
        Seen::GaveUp
    );
    kunit_ensure_eq!(
        lookup(&mut tree, &p, a[2].as_ref(), KEYED, &mut s),
        Seen::Inserted
    );
    kunit_ensure_eq!(tree.len(), 2);
    tree.reset();
    Ok(())
}

/// A descent orders by the page an item mapped when it was inserted, but reports a match only
/// with the page the item maps now: after the item's page is replaced by one with other
/// contents, a key equal to the old page is not matched, and a match is never a page that
/// differs from the key.
fn peeked_page_is_confirmed() -> TestResult {
    peeked(SKIP)?;
    peeked(KEYED)
}

fn peeked(order: Order) -> TestResult {
    let mut p = TestPages::new(64, Pattern::Random(0x77)).check()?;
    let a = items(64).check()?;
    let mut tree = UnstableTree::new();
    let mut s = Stats::default();
    for i in shuffled(64, 3).check()? {
        kunit_ensure_eq!(
            lookup(&mut tree, &p, a[i].as_ref(), order, &mut s),
            Seen::Inserted
        );
    }
    // Items 0..32 now map fresh pages with other contents.
    for i in 0..32 {
        let fresh = p.push(Pattern::Random(0x99), i, 0).check()?;
        a[i].mapping().remap(fresh);
    }
    for i in 0..64 {
        // What item i mapped when it was inserted.
        let old = p.push(Pattern::Random(0x77), i, 0).check()?;
        let seen = probe(&mut tree, &p, old, order, &mut s).check()?;
        if i < 32 {
            kunit_ensure!(
                !matches!(seen, Seen::Found(_)),
                "page {} matched a page that was replaced",
                i
            );
        } else {
            kunit_ensure_eq!(seen, Seen::Found(i));
        }
        // What it maps now: a match, if any, is that page.
        let now = p
            .push(Pattern::Random(if i < 32 { 0x99 } else { 0x77 }), i, 0)
            .check()?;
        if let Seen::Found(j) = probe(&mut tree, &p, now, order, &mut s).check()? {
            kunit_ensure_eq!(j, a[i].mapping().page());
            kunit_ensure_eq!(p.naive_cmp(now, j), Ordering::Equal);
        }
    }
    tree.reset();
    Ok(())
}

/// The items of the bucket cases: [`BUCKETED`] random pages of their own, each with an item, to
/// be looked up in trees the case makes.
struct Bucketed {
    p: TestPages,
    items: KVec<Pin<KBox<RmapItem<TestPages>>>>,
    stats: Stats,
}

/// The pages of a [`Bucketed`] fixture: enough for a tree to be split into buckets.
const BUCKETED: usize = 256;

impl Bucketed {
    /// Pages of the random pattern seeded by `seed`, and their items.
    fn new(seed: u64) -> Result<Self> {
        Ok(Self {
            p: TestPages::new(BUCKETED, Pattern::Random(seed))?,
            items: items(BUCKETED)?,
            stats: Stats::default(),
        })
    }

    /// Looks every item up in `tree` in rksm's order, each of a page of its own: each is
    /// inserted.
    fn insert_all(&mut self, tree: &mut UnstableTree<TestPages>) -> TestResult {
        for item in &self.items {
            kunit_ensure_eq!(
                lookup(tree, &self.p, item.as_ref(), KEYED, &mut self.stats),
                Seen::Inserted
            );
        }
        Ok(())
    }
}

/// An item is taken out of a tree split into buckets wherever it is, even if its recorded
/// checksum, which chose its bucket, changed while it was linked (left linked, it would panic
/// when freed).
fn removed_from_any_bucket() -> TestResult {
    let mut f = Bucketed::new(0xb0c).check()?;
    let mut tree = UnstableTree::new();
    f.insert_all(&mut tree)?;
    tree.renew();
    f.insert_all(&mut tree)?;
    kunit_ensure!(tree.trees_in_use() > 1);
    let mut result = Ok(());
    for (i, item) in f.items.iter().enumerate() {
        let held = f.p.held(i);
        let bytes = held.bytes();
        // Another checksum, most often of another bucket.
        item.set_checksum(bytes.checksum() ^ 0x8000_0001, &bytes);
        if !tree.remove(item) {
            result = Err(i);
            break;
        }
    }
    let left = tree.len();
    // Whatever happened, nothing stays linked when the items are freed.
    tree.reset();
    kunit_ensure_eq!(result, Ok(()));
    kunit_ensure_eq!(left, 0);
    Ok(())
}

/// A tree that held many items keeps its buckets through the passes of smart scan's skips, in
/// which it holds few: the pass in which the skipped pages come back, all at once, needs them
/// most (sized by the last pass alone, it had one tree of all of them).
fn buckets_outlast_skipped_passes() -> TestResult {
    let mut f = Bucketed::new(0x5c1b).check()?;
    let mut tree = UnstableTree::new();
    f.insert_all(&mut tree)?;
    // Eight passes that hold nothing (C's longest skip), then the pages come back.
    for _ in 0..9 {
        tree.renew();
    }
    f.insert_all(&mut tree)?;
    let (used, height) = (tree.trees_in_use(), tree.height());
    tree.reset();
    kunit_ensure!(
        used > BUCKETED / 4,
        "{} of the trees hold the {} items",
        used,
        BUCKETED
    );
    kunit_ensure!(height <= 4, "the tallest bucket is {} high", height);
    Ok(())
}

/// A tree told to expect items ([`UnstableTree::expect`]: the pages a workload's first pass
/// deferred) is split into buckets at the renewal that starts the pass that fills it, though
/// no pass before held an item; it is not settled until then, and the expectation lasts for
/// that one renewal.
fn expected_items_get_buckets() -> TestResult {
    let mut f = Bucketed::new(0xe4b).check()?;
    // Told nothing: one tree of all items (the control).
    let mut plain = UnstableTree::new();
    plain.renew();
    f.insert_all(&mut plain)?;
    let (plain_used, plain_height) = (plain.trees_in_use(), plain.height());
    plain.reset();
    let mut tree = UnstableTree::new();
    tree.expect(BUCKETED);
    let settled = tree.is_settled();
    tree.renew();
    f.insert_all(&mut tree)?;
    let (used, height) = (tree.trees_in_use(), tree.height());
    tree.reset();
    // Told nothing more, and holding nothing for long: back to no buckets, settled.
    for _ in 0..200 {
        tree.renew();
    }
    let settled_after = tree.is_settled();
    kunit_ensure_eq!(plain_used, 1);
    kunit_ensure!(
        plain_height > 4,
        "one tree of {} items is {} high",
        BUCKETED,
        plain_height
    );
    kunit_ensure!(!settled, "a tree expecting items is settled");
    kunit_ensure!(
        used > BUCKETED / 4,
        "{} of the trees hold the {} items",
        used,
        BUCKETED
    );
    kunit_ensure!(height <= 4, "the tallest bucket is {} high", height);
    kunit_ensure!(settled_after, "the expectation outlived its renewal");
    Ok(())
}

/// The hint that a scanner thread prefetches by before it holds the tree names, for every item,
/// the bucket that holds it; a hint of a tree with no buckets names none, and a hint recorded
/// before the table was made anew still gives an address (which the prefetch may not read).
fn hint_names_each_items_bucket() -> TestResult {
    let mut f = Bucketed::new(0x41e7).check()?;
    let mut tree = UnstableTree::new();
    let hint = BucketHint::new();
    hint.record(&tree);
    kunit_ensure_eq!(hint.bucket::<TestPages>(1), None);
    f.insert_all(&mut tree)?;
    tree.renew();
    hint.record(&tree);
    f.insert_all(&mut tree)?;
    let mut wrong = None;
    for (i, item) in f.items.iter().enumerate() {
        let sum = item.checksum();
        let (named, holds) = (hint.bucket::<TestPages>(sum), tree.bucket_holding(item));
        if named.is_none() || named != holds || named != tree.bucket_addr(sum) {
            wrong = Some((i, named, holds));
            break;
        }
    }
    let used = tree.trees_in_use();
    // Made anew (no items left to size it by): the old hint names the old table.
    for _ in 0..200 {
        tree.renew();
    }
    let stale = hint.bucket::<TestPages>(f.items[0].checksum());
    tree.reset();
    kunit_ensure!(used > 1, "the tree was not split into buckets");
    kunit_ensure!(wrong.is_none(), "item, hint, holder: {:?}", wrong);
    kunit_ensure!(stale.is_some());
    Ok(())
}

kunit_suite!(
    "rksm_unstable",
    [
        best_case_matches_naive,
        worst_case_matches_naive,
        random_pages_match_naive,
        zero_prefix_pages_match_naive,
        ragged_prefixes_match_naive,
        keyed_matches_naive,
        skipping_gives_naive_answers,
        worst_case_lookup_cost,
        worst_case_hits_are_cheap_and_exact,
        mutation_misses_never_lies,
        gives_up_on_same_or_gone_page,
        peeked_page_is_confirmed,
        removed_from_any_bucket,
        buckets_outlast_skipped_passes,
        expected_items_get_buckets,
        hint_names_each_items_bucket,
    ]
);
