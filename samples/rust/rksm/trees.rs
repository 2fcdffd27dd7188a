// SPDX-License-Identifier: GPL-2.0

//! The trees of every NUMA node: one stable and one unstable tree per node, or one of each for
//! all nodes with `merge_across_nodes`, with their upkeep (knob changes, nodes of migrated pages,
//! removals). The phases of the per-page step ([`crate::step`]) that work in them are in
//! [`phases`].

use crate::backend::{Backend, Contents};
use crate::compare::{Key, Order, Stats};
use crate::domain::{Domain, Scope, Tag};
use crate::item::{Glance, Place, RmapItem};
use crate::stable::{self, Counters, Cx, Insertion, Search, Settings, StableNode, StableTree};
use crate::unstable::{Lookup, Probe, UnstableTree};
use core::pin::Pin;
use kernel::hlist::Token;
use kernel::prelude::*;

mod phases;

pub(crate) use phases::{admit, join_merging, may_go_stable_first, Joined, Left, Looked};

/// What the per-page step ([`crate::step::Step::cmp_and_merge`]) did with a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The page is already the KSM page of the item's stable node.
    AlreadyMerged,
    /// The page was merged into a KSM page of the stable tree (or, a KSM page shared by a fork,
    /// was listed under its node).
    MergedStable,
    /// The page and an equal page of the unstable tree became a new KSM page.
    MergedUnstable,
    /// The page was all zero and replaced by the zero page (or its area went meanwhile).
    Zero,
    /// The page changed since the last pass: deferred to the next.
    Volatile,
    /// No equal page: the page went into the unstable tree.
    Inserted,
    /// No equal page, and the page could not go into the unstable tree.
    Missed,
    /// An equal page was found but the merge failed (the page changed meanwhile, is pinned, or
    /// memory ran out): tried again next pass.
    MergeFailed,
    /// The equal KSM page was locked (being migrated, say): tried again next pass.
    Busy,
    /// The page was merged in another merge domain than its own now (its process moved to
    /// another memory cgroup, or it is a fork's), and was unmerged: it is looked up in its own
    /// domain next pass (see [`crate::domain`]).
    Unmerged,
    /// A match taken on its checksum turned out to differ from the page (a checksum collision,
    /// or a page that changed): the lookup is made again comparing contents. Never the outcome
    /// of a whole step.
    Unproven,
}

/// The stable and unstable trees: one of each per NUMA node, or one of each for all nodes when
/// `merge_across_nodes` is set.
///
/// # Invariants
///
/// With `scope` [`Scope::Global`], every stable node (in a tree or in `misplaced`) is of domain
/// 0: the scope changes only while there is none ([`Trees::set_scope`]), and under
/// [`Scope::Global`] every page is of domain 0 ([`Backend::domain`]). So the step may then order
/// and match pages by checksum and contents alone (see [`crate::compare::Key`]).
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
    /// How the trees order pages: by checksum, then by contents skipping the prefix known to be
    /// equal (rksm's own; C KSM orders by contents alone). Set while the trees are empty.
    pub(crate) order: Order,
    /// How often a chain's dups are all checked for staleness
    /// (`stable_node_chains_prune_millisecs`).
    pub(crate) chain_prune_ms: u32,
    /// What a page's merge domain is (`merge_scope`, see [`crate::domain`]). Set while the
    /// stable trees are empty ([`Trees::set_scope`]); every shard has the same.
    scope: Scope,
    /// Nodes of KSM pages that migrated to another NUMA node and could not be put in that node's
    /// tree yet (C's `migrate_nodes`); tried again at each pass. Out of every tree, still the
    /// nodes of their pages. Keeps room for one more, so that a node taken out of a tree always
    /// has a place.
    misplaced: KVec<Pin<KBox<StableNode<B>>>>,
}

/// The trees taken apart for a phase that works in one of them while it counts into the rest:
/// the trees, the nodes waiting for a tree, and a context ([`Cx`]) over the pages, the shard's
/// token, the settings, the statistics and the counters.
pub(crate) struct Parts<'t, 'b, B: Backend> {
    pub(crate) stable: &'t mut KVec<StableTree<B>>,
    pub(crate) unstable: &'t mut KVec<UnstableTree<B>>,
    pub(crate) misplaced: &'t mut KVec<Pin<KBox<StableNode<B>>>>,
    pub(crate) cx: Cx<'b, 't, B>,
}

/// Empty trees for a change of `merge_across_nodes`.
pub(crate) struct NewTrees<B: Backend> {
    stable: KVec<StableTree<B>>,
    unstable: KVec<UnstableTree<B>>,
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
            order: Order::Checksum,
            chain_prune_ms: 2000,
            scope: Scope::Global,
            misplaced: KVec::new(),
        })
    }

    /// Whether pages of different NUMA nodes merge.
    pub(crate) fn merge_across_nodes(&self) -> bool {
        self.merge_across_nodes
    }

    /// Empties the stable trees for a change of `merge_across_nodes` or `max_page_sharing`: fails
    /// with `EBUSY`, as C KSM does, while KSM pages are mapped by rmap_items (`pages_shared` is
    /// not 0) or while a KSM page of an empty node is still mapped (by forks).
    pub(crate) fn drain_for_knob(&mut self, backend: &B, token: &mut B::Token) -> Result {
        if self.counters.pages_shared != 0 {
            return Err(EBUSY);
        }
        self.remove_all_stable_nodes(backend, token)
    }

    /// Sets `merge_across_nodes` (see [`Trees::drain_for_knob`] for when it cannot change); an
    /// unchanged value always succeeds. The unstable trees are emptied.
    pub(crate) fn set_merge_across_nodes(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        on: bool,
    ) -> Result {
        if on == self.merge_across_nodes {
            return Ok(());
        }
        self.drain_for_knob(backend, token)?;
        let new = self.prepare_merge_across_nodes(on)?;
        self.commit_merge_across_nodes(on, new);
        Ok(())
    }

    /// The empty trees for `merge_across_nodes` set to `on`.
    pub(crate) fn prepare_merge_across_nodes(&self, on: bool) -> Result<NewTrees<B>> {
        let n = if on { 1 } else { self.nr_nodes };
        Ok(NewTrees {
            stable: trees(n)?,
            unstable: trees(n)?,
        })
    }

    /// Switches `merge_across_nodes` to `on` with the trees `new`, once the stable trees were
    /// emptied (see [`Trees::drain_for_knob`]). The unstable trees are emptied.
    pub(crate) fn commit_merge_across_nodes(&mut self, on: bool, new: NewTrees<B>) {
        self.reset_unstable();
        self.stable = new.stable;
        self.unstable = new.unstable;
        self.merge_across_nodes = on;
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
            order: self.order,
            max_page_sharing: self.max_page_sharing,
            now: kernel::kthread::jiffies(),
            prune_jiffies: kernel::time::msecs_to_jiffies(self.chain_prune_ms) as u64,
            trust_checksum: false,
        }
    }

    /// Takes the trees apart (see [`Parts`]), with `backend` and `token` (the shard's).
    fn parts<'t, 'b>(&'t mut self, backend: &'b B, token: &'t mut B::Token) -> Parts<'t, 'b, B> {
        let set = self.settings();
        let Self {
            stable,
            unstable,
            misplaced,
            stats,
            counters,
            ..
        } = self;
        Parts {
            stable,
            unstable,
            misplaced,
            cx: Cx {
                backend,
                token,
                set,
                stats,
                counters,
            },
        }
    }

    /// Empties every unstable tree.
    pub(crate) fn reset_unstable(&mut self) {
        for t in self.unstable.iter_mut() {
            t.reset();
        }
    }

    /// Whether the start of a pass has nothing to do in these trees: every unstable tree is
    /// settled ([`UnstableTree::is_settled`]) and no stable node waits in `misplaced`. (Asked
    /// right after a pass start's work, by [`crate::shards::ShardSet::renew_for_pass`].)
    pub(crate) fn pass_start_idle(&self) -> bool {
        self.misplaced.is_empty() && self.unstable.iter().all(|t| t.is_settled())
    }

    /// Tells the next [`Trees::renew_unstable`] that about `n` items are likely to be put in
    /// these trees in the pass it starts (see [`UnstableTree::expect`]). The items of one
    /// checksum may go into the tree of any node: each tree is told all `n`.
    pub(crate) fn expect_unstable(&mut self, n: usize) {
        for t in self.unstable.iter_mut() {
            t.expect(n);
        }
    }

    /// Empties every unstable tree for a new pass, sized for what the last ones held (see
    /// [`UnstableTree::renew`]).
    pub(crate) fn renew_unstable(&mut self) {
        for t in self.unstable.iter_mut() {
            t.renew();
        }
    }

    /// What a page's merge domain is in these trees (`merge_scope`).
    #[inline]
    pub(crate) fn scope(&self) -> Scope {
        self.scope
    }

    /// Whether the stable trees hold no node, and no node waits for one.
    pub(crate) fn stable_is_empty(&self) -> bool {
        self.misplaced.is_empty() && self.stable.iter().all(|t| t.is_empty())
    }

    /// Sets the merge scope, emptying the unstable trees (they were ordered by the old domains);
    /// `EBUSY` while a stable node exists (see [`Trees::drain_for_knob`]), which would keep the
    /// domain of the old scope.
    pub(crate) fn set_scope(&mut self, scope: Scope) -> Result {
        if !self.stable_is_empty() {
            return Err(EBUSY);
        }
        self.reset_unstable();
        self.scope = scope;
        Ok(())
    }

    /// Puts the nodes of migrated KSM pages that are out of every tree into the tree of their
    /// page's node (C's walk of `migrate_nodes` at the start of a pass); a node whose page is gone
    /// is freed.
    pub(crate) fn retry_misplaced(&mut self, backend: &B, token: &mut B::Token) {
        if self.misplaced.is_empty() {
            return;
        }
        let mut pending = core::mem::take(&mut self.misplaced);
        if self
            .misplaced
            .reserve(pending.len() + 1, GFP_KERNEL)
            .is_err()
        {
            self.misplaced = pending;
            return;
        }
        let Parts {
            stable,
            misplaced,
            mut cx,
            ..
        } = self.parts(backend, token);
        while let Some(node) = pending.pop() {
            rehome(stable, misplaced, &mut cx, node);
        }
    }

    /// Moves the node at `addr`, in the tree of index `from`, whose KSM page `page` (of domain
    /// and checksum `tag`) migrated to another NUMA node, to the tree of that node.
    fn relocate(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        from: usize,
        addr: *const StableNode<B>,
        tag: Tag,
        page: &B::Page<'_>,
    ) {
        if self.misplaced.reserve(1, GFP_KERNEL).is_err() {
            return;
        }
        let bytes = page.bytes();
        let key = Key::<true>::new(&bytes, tag.sum, tag.domain);
        let Parts {
            stable,
            misplaced,
            mut cx,
            ..
        } = self.parts(backend, token);
        if let Some(node) = stable[from].take(&mut cx, &key, addr) {
            rehome(stable, misplaced, &mut cx, node);
        }
    }

    /// The number of nodes waiting for their node's tree (see [`Trees::retry_misplaced`]).
    pub(crate) fn misplaced(&self) -> usize {
        self.misplaced.len()
    }

    /// The number of items in the unstable trees (`pages_unshared`).
    pub(crate) fn unshared(&self) -> usize {
        self.unstable.iter().map(|t| t.len()).sum()
    }

    /// Takes `item` out of the tree or stable node it is in, if any. For a stable item, the
    /// node's KSM page is locked meanwhile (its list is what the reverse map walks); if that page
    /// is gone, every mapping of the stale node is taken off it.
    pub(crate) fn remove_item(&mut self, backend: &B, token: &mut B::Token, item: &RmapItem<B>) {
        let unstable = match item.place(token) {
            Place::Loose => return,
            Place::Unstable { nid } => Some(nid),
            Place::Stable(_) => None,
        };
        if let Some(nid) = unstable {
            if let Some(t) = self.unstable.get_mut(nid) {
                t.remove(item);
            }
            return;
        }
        let locked = match item.place(token) {
            Place::Stable(node) => backend.lock_ksm_page(node),
            _ => return,
        };
        if let Some(locked) = locked {
            stable::remove_item(token, item, &mut self.counters);
            drop(locked);
            backend.unmerged(item);
        } else {
            stable::clear_stale(backend, token, item, &mut self.counters);
        }
    }

    /// Takes out every stable node whose KSM page's frame is in `frames`, a range of memory that
    /// went offline (C's `ksm_check_stable_tree()`): such a node is stale (offlining migrated
    /// every page in use out of the range), and its frame may stop having a `struct page` when
    /// the range is removed.
    pub(crate) fn remove_range(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        frames: &core::ops::Range<usize>,
    ) {
        let in_range = |k: &B::KsmPage| backend.ksm_page_in(k, frames);
        for t in self.stable.iter_mut() {
            t.remove_range(backend, token, &mut self.counters, in_range);
        }
        let mut i = 0;
        while i < self.misplaced.len() {
            if self.misplaced[i].ksm_page().is_some_and(in_range) {
                let node = self.misplaced.swap_remove(i);
                StableTree::free_node(backend, token, node, &mut self.counters, false);
            } else {
                i += 1;
            }
        }
    }

    /// Takes out every stable node that may go (C's `remove_all_stable_nodes()`); `EBUSY` if a
    /// KSM page is still mapped somewhere.
    pub(crate) fn remove_all_stable_nodes(&mut self, backend: &B, token: &mut B::Token) -> Result {
        let mut all = true;
        for t in self.stable.iter_mut() {
            all &= t.remove_all(backend, token, &mut self.counters);
        }
        let mut i = 0;
        while i < self.misplaced.len() {
            let node = &self.misplaced[i];
            if node.len() == 0 && backend.release(node) {
                let node = self.misplaced.swap_remove(i);
                StableTree::free_node(backend, token, node, &mut self.counters, false);
            } else {
                all = false;
                i += 1;
            }
        }
        if all {
            Ok(())
        } else {
            Err(EBUSY)
        }
    }
}

/// Puts `node`, out of every tree, into the tree of the NUMA node its KSM page is on now (the
/// one tree when merging across nodes); frees it if its page is gone; keeps it in `misplaced` if
/// memory for a chain could not be had. `misplaced` has room for one more.
fn rehome<B: Backend>(
    stable: &mut KVec<StableTree<B>>,
    misplaced: &mut KVec<Pin<KBox<StableNode<B>>>>,
    cx: &mut Cx<'_, '_, B>,
    node: Pin<KBox<StableNode<B>>>,
) {
    let backend = cx.backend;
    let Some(page) = backend.ksm_page(&node) else {
        StableTree::free_node(backend, cx.token, node, cx.counters, false);
        return;
    };
    let to = backend.page_nid(&page).min(stable.len() - 1);
    node.set_nid(to);
    // The KSM page's own contents key the insertion: they cannot change (write-protected).
    let key = page.bytes();
    if let Err(node) = stable[to].insert_node(cx, &key, node) {
        if let Err(node) = misplaced.push_within_capacity(node) {
            // Cannot be (callers make room first); never free a node with mappings.
            core::mem::forget(node);
        }
    }
}
