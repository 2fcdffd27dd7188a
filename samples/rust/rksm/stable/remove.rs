// SPDX-License-Identifier: GPL-2.0

//! Taking mappings and nodes out of the stable tree: one item (C's `remove_rmap_item_from_tree()`
//! for a stable item), every mapping of a stale node, a node and its dups, the nodes of memory
//! that went offline (C's `ksm_check_stable_tree()`), and every node that may go (C's
//! `remove_all_stable_nodes()`).

use super::*;

/// Takes every mapping off the stable node `item` is under, whose KSM page is gone (C's
/// `remove_node_from_stable_tree()`, but the empty node itself stays in the tree until a lookup
/// meets it and prunes it). Each item becomes loose.
pub(crate) fn clear_stale<B: Backend>(
    backend: &B,
    token: &mut B::Token,
    item: &RmapItem<B>,
    c: &mut Counters,
) {
    if let Some(node) = hlist::owner_of(item, token) {
        backend.dropping_mappings(node, token);
    }
    let n = hlist::clear_list_of(item, token, |i| backend.unmerged(i)) as u64;
    if n > 0 {
        c.pages_shared -= 1;
        c.pages_sharing -= n - 1;
    }
}

/// Takes `item` off the mappings of the stable node it is under (C's
/// `remove_rmap_item_from_tree` for a stable item) and returns `true`; `false` if it is under
/// none. The caller holds the node's KSM page locked. The node stays, even if empty: its page may
/// still be mapped by forked processes, and the node goes when its page does.
pub(crate) fn remove_item<B: Backend>(
    token: &mut B::Token,
    item: &RmapItem<B>,
    c: &mut Counters,
) -> bool {
    let last = match hlist::owner_of(item, token) {
        Some(node) => node.items.len() == 1,
        None => return false,
    };
    hlist::unlink(item, token);
    // As in C: the last mapping of a page counts as shared, the others as sharing.
    if last {
        c.pages_shared -= 1;
    } else {
        c.pages_sharing -= 1;
    }
    true
}

impl<B: Backend> StableTree<B> {
    /// Frees a node taken out of the tree or a chain, and its dups: their items become loose.
    pub(crate) fn free_node(
        backend: &B,
        token: &mut B::Token,
        node: Pin<KBox<StableNode<B>>>,
        c: &mut Counters,
        dup: bool,
    ) {
        let n = node.items.len() as u64;
        if n > 0 {
            c.pages_shared -= 1;
            c.pages_sharing -= n - 1;
            backend.dropping_mappings(&node, token);
        }
        node.items.clear(token, |item| backend.unmerged(item));
        if !node.is_chain() {
            backend.dropping_node(&node);
        }
        if dup {
            c.dups -= 1;
        }
        if let Kind::Chain { dups: chain, .. } = &node.kind {
            c.chains -= 1;
            let dups = core::mem::take(&mut chain.get_mut(token).dups);
            for d in dups {
                Self::free_node(backend, token, d, c, true);
            }
        }
    }

    /// Takes out every node whose KSM page's frame `in_range` says lies in a range of memory
    /// that went offline, and the dups of chains so (C's `ksm_check_stable_tree()`): offlining
    /// migrated every page in use out of the range, so such a node is stale, and its frame may
    /// stop having a `struct page` when the range is removed. Their mappings become loose.
    pub(crate) fn remove_range(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        c: &mut Counters,
        in_range: impl Fn(&B::KsmPage) -> bool,
    ) {
        let stale = |n: &StableNode<B>| n.ksm_page().is_some_and(&in_range);
        // Dups first: a chain left without dups goes with the plain nodes below.
        for node in self.tree.iter() {
            let Kind::Chain { dups: cell, .. } = &node.kind else {
                continue;
            };
            loop {
                let chain = cell.get_mut(token);
                let Some(i) = chain.dups.iter().position(|d| stale(d)) else {
                    break;
                };
                // The others keep their order (see `chain_page`).
                chain.dups[i..].rotate_left(1);
                let Some(dup) = chain.dups.pop() else {
                    break;
                };
                Self::free_node(backend, token, dup, c, true);
                kthread::cond_resched();
            }
        }
        while let Some(node) = self.tree.take_first(|n| match &n.kind {
            Kind::Page { .. } => stale(n),
            Kind::Chain { dups: cell, .. } => cell.get(token).dups.is_empty(),
        }) {
            Self::free_node(backend, token, node, c, false);
            kthread::cond_resched();
        }
        if self.tree.is_empty() {
            self.floor = PAGE_SIZE;
        }
    }

    /// Takes out every node that may go (C's `remove_all_stable_nodes()`): nodes with no mapping
    /// whose KSM page is gone or unmapped. Returns `false` if some could not (a page still
    /// mapped), as C's `EBUSY`.
    pub(crate) fn remove_all(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        c: &mut Counters,
    ) -> bool {
        let mut busy = false;
        // Like C, take the root out again and again, and give up on a busy one.
        let _ = self.tree.walk_prune(|visit| match visit {
            Visit::At(node) => {
                let free = match &node.kind {
                    Kind::Page { .. } => node.items.is_empty() && backend.release(node),
                    Kind::Chain { dups: chain, .. } => chain
                        .get(token)
                        .dups
                        .iter()
                        .all(|d| d.items.is_empty() && backend.release(d)),
                };
                if free {
                    Prune::Remove
                } else {
                    busy = true;
                    Prune::Go(Step::Stop)
                }
            }
            Visit::Removed(node) => {
                Self::free_node(backend, token, node, c, false);
                Prune::Go(Step::Stop)
            }
        });
        if self.tree.is_empty() {
            self.floor = PAGE_SIZE;
        }
        !busy
    }
}
