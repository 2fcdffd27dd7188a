// SPDX-License-Identifier: GPL-2.0

//! Finding a node the caller already knows in the stable tree, rather than looking contents up:
//! a node by its address, to move it to another NUMA node's tree ([`StableTree::take`]), and the
//! node of a KSM page by the page ([`StableTree::node_of_page`]).

use super::*;

impl<B: Backend> StableTree<B> {
    /// Takes the node a walk stopped at out of the tree, or its dup `dup` out of the chain it is
    /// (a chain left without dups goes too).
    pub(super) fn take_at(
        backend: &B,
        token: &mut B::Token,
        at: Occupied<'_, StableNode<B>, BoxTree<StableNode<B>>>,
        dup: Option<usize>,
        c: &mut Counters,
    ) -> Option<Pin<KBox<StableNode<B>>>> {
        let Some(k) = dup else {
            return Some(at.remove());
        };
        let (taken, empty) = {
            let Kind::Chain { dups: cell, .. } = &at.get().kind else {
                return None;
            };
            let chain = cell.get_mut(token);
            if k >= chain.dups.len() {
                return None;
            }
            chain.dups[k..].rotate_left(1);
            (chain.dups.pop(), chain.dups.is_empty())
        };
        c.dups -= 1;
        if empty {
            Self::free_node(backend, token, at.remove(), c, false);
        }
        taken
    }

    /// Takes the node at `addr`, whose KSM page's contents and checksum are `key`, out of the tree
    /// (or out of the chain it is a dup of), for it to move to another tree; `None` if it is not
    /// in this tree.
    pub(crate) fn take(
        &mut self,
        cx: &mut Cx<'_, '_, B>,
        key: &Key<'_>,
        addr: *const StableNode<B>,
    ) -> Option<Pin<KBox<StableNode<B>>>> {
        let d = Self::descend(&mut self.tree, self.floor, cx, key, false);
        let (backend, token, c) = (cx.backend, &mut *cx.token, &mut *cx.counters);
        drop(d.hit);
        let Walk::Stopped(at) = d.walk else {
            return None;
        };
        if core::ptr::eq(at.get(), addr) {
            return Some(at.remove());
        }
        let k = match &at.get().kind {
            Kind::Chain { dups: cell, .. } => cell
                .get(token)
                .dups
                .iter()
                .position(|d| core::ptr::eq(&**d, addr))?,
            Kind::Page { .. } => return None,
        };
        Self::take_at(backend, token, at, Some(k), c)
    }

    /// The node whose KSM page is `kpage` (held, and locked by the caller), whose contents and
    /// checksum are `key`: a plain node, or a dup of a chain; `None` if no node of this tree has
    /// that page. The descent passes nodes of other checksums by their checksum, and finds the
    /// page among the nodes of its checksum by frame; it compares contents only at a node of its
    /// checksum that is not the page's (none, unless checksums collide).
    pub(crate) fn node_of_page<'a, const SCOPED: bool>(
        &'a mut self,
        backend: &B,
        token: &B::Token,
        key: &Key<'_, SCOPED>,
        order: Order,
        kpage: &B::Page<'_>,
    ) -> Option<NodeRef<'a, B>> {
        let mut descent = Descent::new(self.floor, order);
        let (mut dup, mut found) = (None, false);
        let pass = |node: &StableNode<B>| match key.cmp_tag(&node.tag()) {
            _ if order != Order::Checksum => None,
            core::cmp::Ordering::Less => Some(Step::Left),
            core::cmp::Ordering::Greater => Some(Step::Right),
            core::cmp::Ordering::Equal => None,
        };
        let walk = self.tree.walk_mut_with(pass, |node| {
            let steer = match &node.kind {
                Kind::Page { .. } if backend.page_is(kpage, node) => {
                    found = true;
                    return Step::Stop;
                }
                Kind::Page { .. } => backend.ksm_page(node),
                Kind::Chain { dups: cell, .. } => {
                    let dups = &cell.get(token).dups;
                    if let Some(k) = dups.iter().position(|d| backend.page_is(kpage, d)) {
                        (dup, found) = (Some(k), true);
                        return Step::Stop;
                    }
                    dups.iter().find_map(|d| backend.ksm_page(d))
                }
            };
            // Another node of the key's checksum: its contents say where to go (if they are
            // equal, or its page is gone, the page is nowhere).
            steer.map_or(Step::Stop, |p| descent.compare(key.bytes, &p.bytes()).0)
        });
        match walk {
            Walk::Stopped(at) if found => Some(NodeRef {
                node: at.into_pinned(),
                dup,
            }),
            _ => None,
        }
    }
}
