// SPDX-License-Identifier: GPL-2.0

//! `rksm_merge`: the per-page step of the algorithm (`Step::cmp_and_merge`) over passes: the
//! checksum gate, merges through both trees, chains under `max_page_sharing`, and per-node trees.

use super::pages::{self, items, Pattern, TestMapping, TestPages, TestToken};
use crate::backend::Contents;
use crate::item::{Place, RmapItem, SAMPLE_MISSES};
use crate::trees::{Outcome, Trees};
use core::sync::atomic::Ordering::Relaxed;
use kernel::kunit_suite::{Check, TestResult};
use kernel::mm::contents::{PageBytes, SAMPLE_RUNS};
use kernel::prelude::*;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};

/// The trees, their token and every item the test made, over pages `p`: every item is taken out
/// of the trees when the fixture is dropped, so that a failed check (which returns early) never
/// drops a stable node that still lists mappings.
struct Fix<'p> {
    p: &'p TestPages,
    t: Trees<TestPages>,
    token: TestToken,
    its: KVec<Pin<KBox<RmapItem<TestPages>>>>,
}

impl<'p> Fix<'p> {
    /// Trees for `nodes` NUMA nodes and an item for each of pages `0..n`.
    fn new(p: &'p TestPages, nodes: usize, n: usize) -> Result<Self> {
        Ok(Self {
            p,
            t: Trees::new(nodes)?,
            token: TestToken::acquire().ok_or(EBUSY)?,
            its: items(n)?,
        })
    }

    /// Adds an item for page `page`; returns its index.
    fn add(&mut self, page: usize) -> Result<usize> {
        let item = RmapItem::new_boxed(TestMapping::new(page), GFP_KERNEL)?;
        self.its.push(item, GFP_KERNEL)?;
        Ok(self.its.len() - 1)
    }

    /// Runs the per-page step for item `i` over the trees as one unlocked shard; `None` if its
    /// page is gone.
    fn visit(&mut self, i: usize) -> Option<Outcome> {
        pages::visit(self.p, &mut self.t, &mut self.token, self.its[i].as_ref())
    }

    /// One pass over the items `range`: an empty unstable tree, then every item in order.
    fn pass(&mut self, range: core::ops::Range<usize>) -> KVec<Option<Outcome>> {
        self.t.renew_unstable();
        let mut out = KVec::new();
        for i in range {
            let o = self.visit(i);
            let _ = out.push(o, GFP_KERNEL);
        }
        out
    }

    /// Passes over `range` until nothing changes.
    fn settle(&mut self, range: core::ops::Range<usize>) {
        for _ in 0..20 {
            let out = self.pass(range.clone());
            if out
                .iter()
                .all(|o| matches!(o, Some(Outcome::AlreadyMerged | Outcome::Inserted)))
            {
                return;
            }
        }
    }

    /// Takes item `i` out of the trees.
    fn remove(&mut self, i: usize) {
        self.t.remove_item(self.p, &mut self.token, &self.its[i]);
    }

    /// Where item `i` is.
    fn place(&self, i: usize) -> Place<'_, TestPages> {
        self.its[i].place(&self.token)
    }

    /// The lengths of the dups of the chains in stable tree 0, largest first.
    fn dup_lengths(&self) -> KVec<usize> {
        let mut v = KVec::new();
        for node in self.t.stable(0).iter() {
            for d in node.dups(&self.token) {
                let _ = v.push(d.len(), GFP_KERNEL);
            }
        }
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    }
}

impl Drop for Fix<'_> {
    fn drop(&mut self) {
        for i in 0..self.its.len() {
            self.remove(i);
        }
        self.t.reset_unstable();
    }
}

/// The byte offset of the `k`-th run of eight words that the volatility gate's sample reads, and
/// one it does not read (the run after the first).
fn sampled_at(k: usize) -> usize {
    let runs = kernel::page::PAGE_SIZE / 64;
    k * (runs - 1) / (SAMPLE_RUNS - 1) * 64
}
const UNSAMPLED: usize = 64 + 8;

/// A page whose contents changed since the last visit is deferred; once it stays the same it is
/// admitted to the unstable tree. The first visit takes the page's checksum and defers it; a
/// visit that finds the sample changed reads only the sample, and the checksum of the whole page
/// is taken again at the visit that admits the page.
fn checksum_gate_defers_changing_pages() -> TestResult {
    let p = TestPages::new(1, Pattern::Random(1)).check()?;
    let mut f = Fix::new(&p, 1, 1).check()?;
    kunit_ensure!(PageBytes::sampled(sampled_at(3)) && !PageBytes::sampled(UNSAMPLED));
    kunit_ensure_eq!(f.pass(0..1)[0], Some(Outcome::Volatile));
    kunit_ensure_eq!(f.its[0].checksum(), p.held(0).bytes().checksum());
    kunit_ensure!(f.its[0].checksum_current());
    kunit_ensure_eq!(f.pass(0..1)[0], Some(Outcome::Inserted));
    kunit_ensure_eq!(f.its[0].checksum(), p.held(0).bytes().checksum());
    kunit_ensure!(f.its[0].checksum_current());
    kunit_ensure!(matches!(f.place(0), Place::Unstable { nid: 0 }));
    kunit_ensure_eq!(f.t.unstable(0).len(), 1);
    p.write(0, sampled_at(2), &[1, 2, 3]);
    kunit_ensure_eq!(f.pass(0..1)[0], Some(Outcome::Volatile));
    kunit_ensure!(f.its[0].is_loose());
    kunit_ensure!(!f.its[0].checksum_current());
    p.write(0, sampled_at(5), &[4]);
    kunit_ensure_eq!(f.pass(0..1)[0], Some(Outcome::Volatile));
    kunit_ensure_eq!(f.pass(0..1)[0], Some(Outcome::Inserted));
    kunit_ensure_eq!(f.its[0].checksum(), p.held(0).bytes().checksum());
    Ok(())
}

/// A change outside the sample goes unseen by the volatility gate until its periodic recheck of
/// the whole page, and costs no wrong merge meanwhile: the page goes on into the unstable tree
/// under its old checksum, and a page of its old contents, which finds it by that checksum,
/// does not merge with it (the merge compares the whole pages). The recheck then defers it and
/// counts the miss (`sample_misses`).
fn unseen_changes_never_merge_wrongly() -> TestResult {
    let p = TestPages::new(2, Pattern::Best).check()?;
    let mut f = Fix::new(&p, 1, 1).check()?;
    kunit_ensure_eq!(f.visit(0), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(0), Some(Outcome::Inserted));
    let old = f.its[0].checksum();
    p.write(0, UNSAMPLED, &[0xa5]);
    kunit_ensure!(!p.held(0).bytes().same_as(&p.held(1).bytes()));
    // Unseen: admitted again, under the old checksum.
    kunit_ensure_eq!(f.visit(0), Some(Outcome::Inserted));
    kunit_ensure_eq!(f.its[0].checksum(), old);
    // Page 1 holds page 0's old contents: it finds page 0 by the checksum, the merge compares
    // them and fails, and page 1 goes into the tree beside it.
    let b = f.add(1).check()?;
    kunit_ensure_eq!(f.visit(b), Some(Outcome::Volatile));
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(b), Some(Outcome::Inserted));
    kunit_ensure_eq!(merge_failures(&p), failed + 1);
    kunit_ensure_eq!(
        (f.its[0].mapping().page(), f.its[b].mapping().page()),
        (0, 1)
    );
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (0, 0)
    );
    let mut byte = [0u8];
    p.held(0).bytes().read_into(UNSAMPLED, &mut byte);
    kunit_ensure_eq!(byte[0], 0xa5);
    // The recheck sees the change: deferred, counted, the new checksum recorded.
    let misses = SAMPLE_MISSES.load(Relaxed);
    kunit_ensure_eq!(
        pages::visit_rechecking(&p, &mut f.t, &mut f.token, f.its[0].as_ref()),
        Some(Outcome::Volatile)
    );
    kunit_ensure_eq!(SAMPLE_MISSES.load(Relaxed), misses + 1);
    kunit_ensure_eq!(f.its[0].checksum(), p.held(0).bytes().checksum());
    // Page 0 made like page 1 again, unseen too: until the next recheck it is ordered by the
    // checksum of the contents it had, and misses page 1 (a merge delayed, never a wrong one).
    p.write(0, UNSAMPLED, &p_byte(&p, 1, UNSAMPLED));
    kunit_ensure_eq!(f.visit(0), Some(Outcome::Inserted));
    kunit_ensure_eq!(f.its[0].mapping().page(), 0);
    kunit_ensure_eq!(
        pages::visit_rechecking(&p, &mut f.t, &mut f.token, f.its[0].as_ref()),
        Some(Outcome::Volatile)
    );
    kunit_ensure_eq!(SAMPLE_MISSES.load(Relaxed), misses + 2);
    kunit_ensure_eq!(f.visit(0), Some(Outcome::MergedUnstable));
    kunit_ensure_eq!(f.its[0].mapping().page(), f.its[b].mapping().page());
    Ok(())
}

/// The byte at `offset` of page `i`.
fn p_byte(p: &TestPages, i: usize, offset: usize) -> [u8; 1] {
    let mut b = [0u8];
    p.held(i).bytes().read_into(offset, &mut b);
    b
}

/// Two equal pages meet in the unstable tree and become one KSM page; a third merges into it
/// through the stable tree at its first visit; later visits find them merged.
fn equal_pages_merge_through_both_trees() -> TestResult {
    let p = TestPages::new(3, Pattern::Best).check()?;
    let mut f = Fix::new(&p, 1, 2).check()?;
    kunit_ensure_eq!(
        &f.pass(0..2)[..],
        &[Some(Outcome::Volatile), Some(Outcome::Volatile)]
    );
    kunit_ensure_eq!(
        &f.pass(0..2)[..],
        &[Some(Outcome::Inserted), Some(Outcome::MergedUnstable)]
    );
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 1)
    );
    kunit_ensure_eq!(f.its[0].mapping().page(), f.its[1].mapping().page());
    kunit_ensure!(f.t.unstable(0).is_empty());
    // The checksum gate comes first (as in 6.12): a new page waits one visit, then merges
    // through the stable tree.
    let third = f.add(2).check()?;
    kunit_ensure_eq!(f.visit(third), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(third), Some(Outcome::MergedStable));
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 2)
    );
    kunit_ensure_eq!(
        &f.pass(0..2)[..],
        &[Some(Outcome::AlreadyMerged), Some(Outcome::AlreadyMerged)]
    );
    match f.place(0) {
        Place::Stable(node) => {
            kunit_ensure_eq!(node.len(), 3);
            kunit_ensure_eq!(node.items(&f.token).count(), 3);
            let t: &RmapItem<TestPages> = &f.its[third];
            kunit_ensure!(node.items(&f.token).any(|i| core::ptr::eq(&*i, t)));
        }
        _ => kunit_ensure!(false, "item 0 is not merged"),
    }
    for i in 0..3 {
        f.remove(i);
    }
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (0, 0)
    );
    Ok(())
}

/// With `max_page_sharing` 4, ten equal pages make three KSM pages (4 + 4 + 2 mappings), the
/// dups of one chain; taking mappings away shrinks them, and a dup whose page goes is pruned.
fn chains_form_and_shrink() -> TestResult {
    let p = TestPages::new(10, Pattern::Best).check()?;
    let mut f = Fix::new(&p, 1, 10).check()?;
    f.t.max_page_sharing = 4;
    f.settle(0..10);
    kunit_ensure_eq!(f.t.stable(0).len(), 1);
    kunit_ensure_eq!(&f.dup_lengths()[..], &[4, 4, 2]);
    let c = f.t.counters;
    kunit_ensure_eq!(
        (c.pages_shared, c.pages_sharing, c.chains, c.dups),
        (3, 7, 1, 3)
    );
    // Every item maps the KSM page of the dup it is listed under.
    for i in 0..10 {
        match f.place(i) {
            Place::Stable(node) => {
                kunit_ensure_eq!(node.ksm_page().copied(), Some(f.its[i].mapping().page()));
                kunit_ensure!(f.its[i].is_under(node));
            }
            _ => kunit_ensure!(false, "item {} is not merged", i),
        }
    }
    // Take three mappings of a full dup away.
    let chain = f.t.stable(0).iter().next().check()?;
    let full = chain.dups(&f.token)[0].ksm_page().copied().check()?;
    let mut taken = 0;
    for i in 0..10 {
        if taken < 3 && f.its[i].mapping().page() == full {
            f.remove(i);
            taken += 1;
        }
    }
    kunit_ensure_eq!(&f.dup_lengths()[..], &[4, 2, 1]);
    let c = f.t.counters;
    kunit_ensure_eq!((c.pages_shared, c.pages_sharing), (3, 4));
    // That dup's page goes: the next lookup through the chain prunes it.
    p.set_gone(full);
    let probe = f.add(9).check()?;
    kunit_ensure!(full != 9);
    kunit_ensure_eq!(f.visit(probe), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(probe), Some(Outcome::MergedStable));
    kunit_ensure_eq!(f.dup_lengths().len(), 2);
    kunit_ensure_eq!(f.t.counters.dups, 2);
    Ok(())
}

/// With `merge_across_nodes` off, equal pages of different NUMA nodes do not merge (each node
/// gets its own KSM page); the knob cannot change while KSM pages exist; turned on, they merge.
fn per_node_trees_keep_nodes_apart() -> TestResult {
    let mut p = TestPages::new(0, Pattern::Best).check()?;
    for nid in [0, 1, 0, 1] {
        p.push(Pattern::Best, 0, nid).check()?;
    }
    let mut f = Fix::new(&p, 2, 4).check()?;
    f.t.set_merge_across_nodes(&p, &mut f.token, false)
        .check()?;
    kunit_ensure_eq!(f.t.nr_trees(), 2);
    f.settle(0..4);
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (2, 2)
    );
    kunit_ensure_eq!((f.t.stable(0).len(), f.t.stable(1).len()), (1, 1));
    kunit_ensure!(!f.t.merge_across_nodes());
    for i in 0..2 {
        kunit_ensure!(f.t.stable(i).iter().all(|n| n.nid() == i));
    }
    kunit_ensure!(f.its[0].mapping().page() != f.its[1].mapping().page());
    kunit_ensure_eq!(f.its[0].mapping().page(), f.its[2].mapping().page());
    kunit_ensure_eq!(
        f.t.set_merge_across_nodes(&p, &mut f.token, true),
        Err(EBUSY)
    );
    kunit_ensure_eq!(f.t.set_merge_across_nodes(&p, &mut f.token, false), Ok(()));
    for i in 0..4 {
        f.remove(i);
    }
    f.t.set_merge_across_nodes(&p, &mut f.token, true).check()?;
    kunit_ensure_eq!(f.t.nr_trees(), 1);
    kunit_ensure!(f.t.stable(0).is_empty() && f.t.merge_across_nodes());
    // Fresh items (the old ones map KSM pages of the old trees' making).
    for page in 0..4 {
        f.add(page).check()?;
    }
    f.settle(4..8);
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 3)
    );
    Ok(())
}

/// With `merge_across_nodes` off, a KSM page that migrates to another NUMA node takes its stable
/// node to that node's tree when one of its mappings is visited: an equal KSM page there makes a
/// chain with it, pages of the new node merge with it, pages of the old node do not.
fn migrated_ksm_pages_follow_their_node() -> TestResult {
    let mut p = TestPages::new(0, Pattern::Best).check()?;
    for nid in [0, 0, 1, 1, 1, 0] {
        p.push(Pattern::Best, 0, nid).check()?;
    }
    let mut f = Fix::new(&p, 2, 4).check()?;
    f.t.set_merge_across_nodes(&p, &mut f.token, false)
        .check()?;
    f.settle(0..4);
    kunit_ensure_eq!((f.t.stable(0).len(), f.t.stable(1).len()), (1, 1));
    let k0 = f.its[0].mapping().page();
    kunit_ensure!(k0 < 2);
    p.migrate(k0, 1);
    kunit_ensure_eq!(f.visit(0), Some(Outcome::AlreadyMerged));
    kunit_ensure_eq!((f.t.stable(0).len(), f.t.stable(1).len()), (0, 1));
    let c = f.t.counters;
    kunit_ensure_eq!(
        (c.pages_shared, c.pages_sharing, c.chains, c.dups),
        (2, 2, 1, 2)
    );
    kunit_ensure!(f.t.stable(1).iter().all(|n| n.nid() == 1));
    kunit_ensure!(f
        .t
        .stable(1)
        .iter()
        .all(|n| n.dups(&f.token).iter().all(|d| d.nid() == 1)));
    kunit_ensure_eq!(f.t.misplaced(), 0);
    // Every mapping still maps its KSM page and is listed under its node.
    for i in 0..4 {
        match f.place(i) {
            Place::Stable(node) => {
                kunit_ensure_eq!(node.ksm_page().copied(), Some(f.its[i].mapping().page()))
            }
            _ => kunit_ensure!(false, "item {} is not merged", i),
        }
    }
    let n1 = f.add(4).check()?;
    kunit_ensure_eq!(f.visit(n1), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(n1), Some(Outcome::MergedStable));
    let n0 = f.add(5).check()?;
    kunit_ensure_eq!(f.visit(n0), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(n0), Some(Outcome::Inserted));
    let c = f.t.counters;
    kunit_ensure_eq!((c.pages_shared, c.pages_sharing), (2, 3));
    Ok(())
}

/// A lookup from the old node that meets a migrated KSM page takes its node out of the old tree
/// and into the new one, and finds nothing: pages never merge across nodes.
fn lookups_move_migrated_ksm_pages() -> TestResult {
    let mut p = TestPages::new(0, Pattern::Worst).check()?;
    for nid in [0, 0, 0] {
        p.push(Pattern::Worst, 7, nid).check()?;
    }
    let mut f = Fix::new(&p, 2, 2).check()?;
    f.t.set_merge_across_nodes(&p, &mut f.token, false)
        .check()?;
    f.settle(0..2);
    let k = f.its[0].mapping().page();
    p.migrate(k, 1);
    let probe = f.add(2).check()?;
    kunit_ensure_eq!(f.visit(probe), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(probe), Some(Outcome::Inserted));
    kunit_ensure_eq!((f.t.stable(0).len(), f.t.stable(1).len()), (0, 1));
    kunit_ensure!(f.t.stable(1).iter().all(|n| n.nid() == 1));
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 1)
    );
    // The mappings of the moved page are still merged and stay so.
    f.t.reset_unstable();
    kunit_ensure_eq!(
        &f.pass(0..2)[..],
        &[Some(Outcome::AlreadyMerged), Some(Outcome::AlreadyMerged)]
    );
    Ok(())
}

/// A page that is not there any more is skipped, and nothing merges by mistake.
fn gone_pages_and_failed_merges() -> TestResult {
    let p = TestPages::new(2, Pattern::Random(8)).check()?;
    let mut f = Fix::new(&p, 1, 2).check()?;
    p.set_gone(1);
    kunit_ensure_eq!(&f.pass(0..2)[..], &[Some(Outcome::Volatile), None]);
    kunit_ensure!(f.its[1].is_loose());
    kunit_ensure_eq!(
        p.merge_failures.load(core::sync::atomic::Ordering::Relaxed),
        0
    );
    Ok(())
}

/// Two contents of one checksum, for each page size the kernel may have: pages zero but their
/// first 8 bytes, which hold the first or the second number of the pair (their checksums,
/// `PageBytes::checksum`, are equal: the first such pair from 1 up, found by
/// `scripts/dev/checksum-collide.c`, a model of the checksum, with `PAGE_SIZE` as its argument).
const COLLIDING: [(usize, u64, u64); 3] = [
    (4096, 15300, 55660),
    (16384, 66483, 124200),
    (65536, 120522, 140838),
];

/// `TestPages` of `n` pages, page `i` of the first contents where `colliding[i]`.
fn colliding_pages(colliding: &[bool]) -> Result<TestPages> {
    let Some(&(_, first, second)) = COLLIDING
        .iter()
        .find(|(size, _, _)| *size == kernel::page::PAGE_SIZE)
    else {
        pr_err!(
            "no colliding pair for {}-byte pages: scripts/dev/checksum-collide.c finds one\n",
            kernel::page::PAGE_SIZE
        );
        return Err(EINVAL);
    };
    let p = TestPages::new(colliding.len(), Pattern::Worst)?;
    for (i, a) in colliding.iter().enumerate() {
        let v: u64 = if *a { first } else { second };
        p.write(i, kernel::page::PAGE_SIZE - 8, &[0; 8]);
        p.write(i, 0, &v.to_le_bytes());
    }
    // The pair must still collide: a change to the checksum needs a new pair (see above).
    let a = colliding.iter().position(|&first| first);
    let b = colliding.iter().position(|&first| !first);
    if let (Some(a), Some(b)) = (a, b) {
        if p.held(a).bytes().checksum() != p.held(b).bytes().checksum() {
            pr_err!("the colliding test pages no longer share a checksum\n");
            return Err(EINVAL);
        }
    }
    Ok(p)
}

fn merge_failures(p: &TestPages) -> usize {
    p.merge_failures.load(core::sync::atomic::Ordering::Relaxed)
}

/// The stable lookup takes the first KSM page of a page's checksum without comparing, and the
/// merge proves it. When the two differ (a checksum collision), the merge fails and the lookup
/// is made again comparing contents: the page still merges with its equal KSM page, as it would
/// with C's lookup.
fn checksum_collision_falls_back_to_contents() -> TestResult {
    let p = colliding_pages(&[true, true, false, false, false, true]).check()?;
    kunit_ensure_eq!(p.held(0).bytes().checksum(), p.held(2).bytes().checksum());
    kunit_ensure!(!p.held(0).bytes().same_as(&p.held(2).bytes()));
    let mut f = Fix::new(&p, 1, 2).check()?;
    f.settle(0..2);
    // The KSM page of the first contents is the root: the first node of the checksum.
    kunit_ensure_eq!(f.t.stable(0).len(), 1);
    let b = f.add(2).check()?;
    f.add(3).check()?;
    f.settle(b..b + 2);
    kunit_ensure_eq!(f.t.stable(0).len(), 2);
    kunit_ensure_eq!(f.its[b].mapping().page(), f.its[b + 1].mapping().page());
    let c = f.add(4).check()?;
    kunit_ensure_eq!(f.visit(c), Some(Outcome::Volatile));
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(c), Some(Outcome::MergedStable));
    // The trusted match (the other contents) failed to merge once, then the equal page was found.
    kunit_ensure_eq!(merge_failures(&p), failed + 1);
    kunit_ensure_eq!(f.its[c].mapping().page(), f.its[b].mapping().page());
    // A page of the root's contents merges with it at once.
    let a = f.add(5).check()?;
    kunit_ensure_eq!(f.visit(a), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(a), Some(Outcome::MergedStable));
    kunit_ensure_eq!(merge_failures(&p), failed + 1);
    kunit_ensure_eq!(f.its[a].mapping().page(), f.its[0].mapping().page());
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (2, 4)
    );
    Ok(())
}

/// A node of the page's checksum that could not take the page (at `max_page_sharing`) is
/// compared before the lookup gives up: a full KSM page of other contents does not hide the equal
/// one.
fn checksum_collision_with_a_full_node() -> TestResult {
    let p = colliding_pages(&[true, true, true, false, false, false]).check()?;
    let mut f = Fix::new(&p, 1, 3).check()?;
    f.t.max_page_sharing = 3;
    f.settle(0..3);
    kunit_ensure_eq!(f.t.stable(0).len(), 1);
    let b = f.add(3).check()?;
    f.add(4).check()?;
    f.settle(b..b + 2);
    kunit_ensure_eq!(f.t.stable(0).len(), 2);
    let c = f.add(5).check()?;
    kunit_ensure_eq!(f.visit(c), Some(Outcome::Volatile));
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(c), Some(Outcome::MergedStable));
    // The full node was compared, not merged with.
    kunit_ensure_eq!(merge_failures(&p), failed);
    kunit_ensure_eq!(f.its[c].mapping().page(), f.its[b].mapping().page());
    Ok(())
}

/// The unstable lookup, too, takes the first item of a page's checksum without comparing, and
/// the merge proves it. When the two differ (a checksum collision), the merge fails and the
/// lookup is made again comparing contents: the page goes into the tree, or merges with its
/// equal page if one is there, as with C's lookup.
fn unstable_checksum_collision_falls_back_to_contents() -> TestResult {
    let p = colliding_pages(&[true, false, true]).check()?;
    let mut f = Fix::new(&p, 1, 3).check()?;
    kunit_ensure_eq!(
        &f.pass(0..3)[..],
        &[
            Some(Outcome::Volatile),
            Some(Outcome::Volatile),
            Some(Outcome::Volatile)
        ]
    );
    f.t.reset_unstable();
    kunit_ensure_eq!(f.visit(0), Some(Outcome::Inserted));
    // The only item of the checksum has the other contents: one failed merge, then an insert.
    kunit_ensure_eq!(f.visit(1), Some(Outcome::Inserted));
    kunit_ensure_eq!(merge_failures(&p), 1);
    kunit_ensure_eq!(f.t.unstable(0).len(), 2);
    // Whichever of the two the lookup meets first, the page merges with its equal one.
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(2), Some(Outcome::MergedUnstable));
    kunit_ensure!(merge_failures(&p) <= failed + 1);
    kunit_ensure_eq!(f.its[2].mapping().page(), f.its[0].mapping().page());
    kunit_ensure!(matches!(f.place(1), Place::Unstable { .. }));
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 1)
    );
    Ok(())
}

/// A page whose item recorded a checksum is looked up in the stable tree by it before its own
/// checksum is taken (`Trees::stable_first`), with C's result, where the volatility gate comes
/// first: a page that changed since its last visit waits one visit even when it now equals a
/// KSM page, and a page that equalled a KSM page at its last visit but changed since does not
/// merge (its merge, tried on the recorded checksum, fails) and records its new checksum.
fn stable_first_keeps_the_volatility_gate() -> TestResult {
    let p = TestPages::new(4, Pattern::Best).check()?;
    let mut f = Fix::new(&p, 1, 2).check()?;
    f.settle(0..2);
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 1)
    );
    let at = sampled_at(1) + 36;
    let fill = p_byte(&p, 2, at);
    // Other contents at its first visit, the KSM page's at its second: deferred, then merged.
    p.write(2, at, &[7]);
    let a = f.add(2).check()?;
    kunit_ensure_eq!(f.visit(a), Some(Outcome::Volatile));
    p.write(2, at, &fill);
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(a), Some(Outcome::Volatile));
    // Its checksum is taken once its sample stays the same.
    kunit_ensure!(!f.its[a].checksum_current());
    kunit_ensure_eq!(f.visit(a), Some(Outcome::MergedStable));
    // Found by the recorded checksum and proven by the merge: no failed attempt.
    kunit_ensure_eq!(merge_failures(&p), failed);
    kunit_ensure_eq!(f.its[a].mapping().page(), f.its[0].mapping().page());
    // The KSM page's contents at its last visit (its item recorded their checksum: made up
    // here, as a page merged and then copied on write keeps it), other ones now: the merge tried
    // on the recorded checksum fails, the gate defers the page, and it goes to the unstable tree
    // once it keeps its contents.
    let b = f.add(3).check()?;
    {
        let held = p.held(3);
        let bytes = held.bytes();
        f.its[b].set_checksum(bytes.checksum(), &bytes);
    }
    p.write(3, at, &[7]);
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(b), Some(Outcome::Volatile));
    kunit_ensure_eq!(merge_failures(&p), failed + 1);
    kunit_ensure_eq!(f.its[b].mapping().page(), 3);
    kunit_ensure!(!f.its[b].checksum_current());
    kunit_ensure!(f.its[b].is_loose());
    kunit_ensure_eq!(f.visit(b), Some(Outcome::Inserted));
    kunit_ensure_eq!(merge_failures(&p), failed + 1);
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 2)
    );
    Ok(())
}

/// The unstable lookup, too, goes by the checksum an item recorded at its last visit
/// (`Trees::join_unstable`), with C's result: a page that changed since its last visit is turned
/// away by the volatility gate even when it now equals a page of the unstable tree, and so is a
/// page that equalled one at its last visit but changed since (its merge, tried on the recorded
/// checksum, fails); a page that kept its contents merges.
fn unstable_lookup_keeps_the_volatility_gate() -> TestResult {
    // Worst-case pages: all different; page 1 is made equal to page 0 where needed.
    let p = TestPages::new(4, Pattern::Worst).check()?;
    let mut f = Fix::new(&p, 1, 1).check()?;
    let last = kernel::page::PAGE_SIZE - 8;
    kunit_ensure_eq!(f.visit(0), Some(Outcome::Volatile));
    kunit_ensure_eq!(f.visit(0), Some(Outcome::Inserted));
    // Other contents at its first visit, page 0's at its second: turned away, then merged.
    let a = f.add(1).check()?;
    kunit_ensure_eq!(f.visit(a), Some(Outcome::Volatile));
    p.write(1, last, &1u64.to_le_bytes());
    kunit_ensure!(p.held(1).bytes().same_as(&p.held(0).bytes()));
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(a), Some(Outcome::Volatile));
    kunit_ensure!(f.its[a].is_loose());
    kunit_ensure_eq!(f.visit(a), Some(Outcome::MergedUnstable));
    kunit_ensure_eq!(merge_failures(&p), failed);
    kunit_ensure_eq!(f.its[a].mapping().page(), f.its[0].mapping().page());
    // Page 3 made equal to page 2, which goes into the tree; page 3 then changes before its
    // second visit: its merge, tried on the recorded checksum, fails and the gate turns it away;
    // it goes into the tree at its next visit.
    p.write(3, last, &3u64.to_le_bytes());
    let c = f.add(2).check()?;
    let d = f.add(3).check()?;
    kunit_ensure_eq!(f.visit(c), Some(Outcome::Volatile));
    // Page 3's item recorded its checksum at its last visit (made up here: the gate takes it
    // at the visit that admits the page, which would have merged it).
    {
        let held = p.held(3);
        let bytes = held.bytes();
        f.its[d].set_checksum(bytes.checksum(), &bytes);
    }
    kunit_ensure_eq!(f.visit(c), Some(Outcome::Inserted));
    p.write(3, last, &9u64.to_le_bytes());
    let failed = merge_failures(&p);
    kunit_ensure_eq!(f.visit(d), Some(Outcome::Volatile));
    kunit_ensure_eq!(merge_failures(&p), failed + 1);
    kunit_ensure!(!f.its[d].checksum_current());
    kunit_ensure!(f.its[d].is_loose());
    kunit_ensure_eq!(f.visit(d), Some(Outcome::Inserted));
    kunit_ensure_eq!(
        (f.t.counters.pages_shared, f.t.counters.pages_sharing),
        (1, 1)
    );
    Ok(())
}

kunit_suite!(
    "rksm_merge",
    [
        checksum_gate_defers_changing_pages,
        unseen_changes_never_merge_wrongly,
        equal_pages_merge_through_both_trees,
        chains_form_and_shrink,
        per_node_trees_keep_nodes_apart,
        migrated_ksm_pages_follow_their_node,
        lookups_move_migrated_ksm_pages,
        gone_pages_and_failed_merges,
        checksum_collision_falls_back_to_contents,
        checksum_collision_with_a_full_node,
        unstable_checksum_collision_falls_back_to_contents,
        stable_first_keeps_the_volatility_gate,
        unstable_lookup_keeps_the_volatility_gate,
    ]
);
