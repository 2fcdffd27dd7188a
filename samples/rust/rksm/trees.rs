// SPDX-License-Identifier: GPL-2.0

//! The trees of every NUMA node, and the step of the algorithm that runs them for one page.

use crate::backend::{Backend, Contents};
use crate::compare::Stats;
use crate::item::{Place, RmapItem};
use crate::stable::{self, Counters, Settings, StableTree};
use crate::unstable::{Lookup, UnstableTree};
use kernel::prelude::*;

/// What [`Trees::cmp_and_merge`] did with a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The item's page could not be had (unmapped, or not mergeable any more).
    NoPage,
    /// The page is already the KSM page of the item's stable node.
    AlreadyMerged,
    /// The page was merged into a KSM page of the stable tree.
    MergedStable,
    /// The page and an equal page of the unstable tree became a new KSM page.
    MergedUnstable,
    /// The page changed since the last pass: deferred to the next.
    Volatile,
    /// No equal page: the page went into the unstable tree.
    Inserted,
    /// No equal page, and the page could not go into the unstable tree.
    Missed,
    /// An equal page was found but the merge failed (the page changed meanwhile, or memory ran
    /// out): tried again next pass.
    MergeFailed,
}

/// The stable and unstable trees: one of each per NUMA node, or one of each for all nodes when
/// `merge_across_nodes` is set.
pub(crate) struct Trees<B: Backend> {
    stable: KVec<StableTree<B>>,
    unstable: KVec<UnstableTree<B>>,
    nr_nodes: usize,
    merge_across_nodes: bool,
    /// The stable counters of sysfs.
    pub(crate) counters: Counters,
    /// What comparisons cost.
    pub(crate) stats: Stats,
    /// The most mappings one KSM page may have (`max_page_sharing`).
    pub(crate) max_page_sharing: usize,
    /// Whether comparisons skip the prefix known to be equal (rksm's own; C KSM does not).
    pub(crate) skip_prefix: bool,
}

fn trees<T: Default>(n: usize) -> Result<KVec<T>> {
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    for _ in 0..n {
        v.push(T::default(), GFP_KERNEL)?;
    }
    Ok(v)
}

impl<B: Backend> Trees<B> {
    /// Trees for a machine of `nr_nodes` NUMA nodes, shared across nodes (as
    /// `merge_across_nodes` defaults to).
    pub(crate) fn new(nr_nodes: usize) -> Result<Self> {
        Ok(Self {
            stable: trees(1)?,
            unstable: trees(1)?,
            nr_nodes: nr_nodes.max(1),
            merge_across_nodes: true,
            counters: Counters::default(),
            stats: Stats::default(),
            max_page_sharing: 256,
            skip_prefix: true,
        })
    }

    /// Whether pages of different NUMA nodes merge.
    pub(crate) fn merge_across_nodes(&self) -> bool {
        self.merge_across_nodes
    }

    /// Sets `merge_across_nodes`. Fails with `EBUSY` while KSM pages are mapped by rmap_items
    /// (`pages_shared` is not 0), as C KSM does; an unchanged value always succeeds. Stable nodes
    /// with no mapping left are dropped, and the unstable trees are emptied.
    pub(crate) fn set_merge_across_nodes(&mut self, on: bool) -> Result {
        if on == self.merge_across_nodes {
            return Ok(());
        }
        if self.counters.pages_shared != 0 {
            return Err(EBUSY);
        }
        let n = if on { 1 } else { self.nr_nodes };
        let stable = trees(n)?;
        let unstable = trees(n)?;
        self.reset_unstable();
        // Every stable node is empty (no page has a mapping): dropping them is safe.
        self.stable = stable;
        self.unstable = unstable;
        self.counters.chains = 0;
        self.counters.dups = 0;
        self.merge_across_nodes = on;
        Ok(())
    }

    /// The index of the trees for a page on NUMA node `nid`.
    pub(crate) fn index(&self, nid: usize) -> usize {
        if self.merge_across_nodes {
            0
        } else {
            nid.min(self.nr_nodes - 1)
        }
    }

    /// The stable tree of index `i`.
    pub(crate) fn stable(&self, i: usize) -> &StableTree<B> {
        &self.stable[i]
    }

    /// The unstable tree of index `i`.
    pub(crate) fn unstable(&self, i: usize) -> &UnstableTree<B> {
        &self.unstable[i]
    }

    /// The number of trees of each kind.
    pub(crate) fn nr_trees(&self) -> usize {
        self.stable.len()
    }

    fn settings(&self) -> Settings {
        Settings {
            skip_prefix: self.skip_prefix,
            max_page_sharing: self.max_page_sharing,
        }
    }

    /// Empties every unstable tree, as each pass starts with.
    pub(crate) fn reset_unstable(&mut self) {
        for t in self.unstable.iter_mut() {
            t.reset();
        }
    }

    /// Takes `item` out of the tree or stable node it is in, if any.
    pub(crate) fn remove_item(&mut self, backend: &B, token: &mut B::Token, item: &RmapItem<B>) {
        let unstable = match item.place(token) {
            Place::Loose => return,
            Place::Unstable { nid } => Some(nid),
            Place::Stable(_) => None,
        };
        match unstable {
            Some(nid) => {
                if let Some(t) = self.unstable.get_mut(nid) {
                    t.remove(item);
                }
            }
            None => {
                if stable::remove_item(token, item, &mut self.counters) {
                    backend.unmerged(item);
                }
            }
        }
    }

    /// Runs the tree algorithm for the page of `item` (C's `cmp_and_merge_page`): if it is not
    /// merged yet, looks for an equal KSM page in the stable tree and merges into it; failing
    /// that, if the page did not change since the last pass, looks for an equal page in the
    /// unstable tree and merges the two into a new KSM page, or inserts the page there.
    pub(crate) fn cmp_and_merge(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        item: Pin<&RmapItem<B>>,
    ) -> Outcome {
        let Some(page) = backend.item_page(item.mapping()) else {
            return Outcome::NoPage;
        };
        if let Place::Stable(node) = item.place(token) {
            if node.ksm_page().is_some_and(|k| backend.page_is(&page, k)) {
                return Outcome::AlreadyMerged;
            }
        }
        self.remove_item(backend, token, &item);

        let set = self.settings();
        let idx = self.index(backend.page_nid(&page));
        let across = self.merge_across_nodes;
        let Self {
            stable,
            unstable,
            counters,
            stats,
            ..
        } = self;
        let key = page.bytes();

        // A KSM page of the same contents?
        if let Some(found) = stable[idx].search(backend, token, &key, set, stats, counters) {
            let merged = match found.node.get(token).ksm_page() {
                Some(ksm) => backend.merge_with_ksm(&item, &page, ksm),
                None => Err(EINVAL),
            };
            if merged.is_err() {
                return Outcome::MergeFailed;
            }
            if found.node.append(token, item, counters).is_err() {
                backend.break_merge(&item);
                return Outcome::MergeFailed;
            }
            backend.merged(&item);
            return Outcome::MergedStable;
        }

        // Only pages that kept their contents since the last pass go further.
        if !item.admit(key.checksum()) {
            return Outcome::Volatile;
        }

        let hit = match unstable[idx].search_insert(
            backend,
            item,
            &page,
            idx,
            !across,
            set.skip_prefix,
            stats,
        ) {
            Lookup::Inserted => return Outcome::Inserted,
            Lookup::GaveUp => return Outcome::Missed,
            Lookup::Found(hit) => hit,
        };
        let Ok(ksm) = backend.merge_pages(&item, &page, hit.item(), &hit.page) else {
            return Outcome::MergeFailed;
        };
        let kidx = if across {
            0
        } else {
            backend.ksm_page_nid(&ksm).min(stable.len() - 1)
        };
        let Some(held) = backend.ksm_page(&ksm) else {
            backend.break_merge(&item);
            backend.break_merge(hit.item());
            return Outcome::MergeFailed;
        };
        let kbytes = held.bytes();
        let node =
            match stable[kidx].insert(backend, token, &kbytes, ksm, kidx, set, stats, counters) {
                Ok(node) => node,
                Err(_) => {
                    backend.break_merge(&item);
                    backend.break_merge(hit.item());
                    return Outcome::MergeFailed;
                }
            };
        // Both mappings go onto the new node: the tree's item moves there straight from the tree.
        backend.merged(hit.item());
        if hit.move_to(&node, token, counters).is_err()
            || node.append(token, item, counters).is_err()
        {
            backend.break_merge(&item);
            return Outcome::MergeFailed;
        }
        backend.merged(&item);
        Outcome::MergedUnstable
    }
}
