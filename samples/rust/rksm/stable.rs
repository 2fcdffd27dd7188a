// SPDX-License-Identifier: GPL-2.0

//! The stable tree: merged (write-protected) pages, indexed by their contents.
//!
//! A stable node stands for one KSM page and lists the rmap_items that map it. A node takes at
//! most `max_page_sharing` items; when a full node's contents come up again, a second KSM page of
//! the same contents is made and the node becomes a *chain* whose *dups* are the nodes of the
//! equal pages (as 6.12's KSM does, to bound the cost of the reverse map of one page). A chain
//! stands in the tree for all its dups, which it owns.
//!
//! This file has the nodes and the lookups by contents; [`remove`] takes mappings and nodes out,
//! and [`known`] finds a node the caller already knows.

use crate::backend::{Backend, Contents};
use crate::compare::{Descent, Key, Order, Stats};
use crate::domain::{Domain, Tag};
use crate::item::RmapItem;
use core::cell::Cell;
use core::sync::atomic::{AtomicU16, Ordering::Relaxed};
use kernel::hlist::{self, HList, HListOwner, TokenCell};
use kernel::kthread;
use kernel::mm::contents::PageBytes;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::search_tree::{
    BoxTree, Occupied, PlaceMark, Prune, Step, TreeLinks, TreeNode, Visit, Walk,
};

mod known;
mod remove;

pub(crate) use remove::{clear_stale, remove_item};

/// A chain's dups, and when its stale dups were last pruned all at once.
struct Chain<B: Backend> {
    dups: KVec<Pin<KBox<StableNode<B>>>>,
    prune_time: u64,
}

type Dups<B> = TokenCell<Chain<B>, <B as Backend>::Token>;

/// A KSM page and the rmap_items that map it, or a chain of such nodes of equal contents.
///
/// 64 bytes, one cache line of the 64-byte kmalloc cache: a descent reads the links, the list's
/// length, the checksum and the domain of every node it passes, and a node of 72 bytes (in the
/// 96-byte cache) straddles two lines.
pub(crate) struct StableNode<B: Backend> {
    links: TreeLinks,
    items: HList<RmapItem<B>, B::Token>,
    kind: Kind<B>,
    /// The merge domain of the pages that map the node's page (see [`crate::domain`]), which
    /// orders it before its checksum: that of the page the node was made from.
    domain: Domain,
}

/// The node's page or dups, with its checksum and tree index. Those two are fields of both
/// variants, not of the node, so that they share the enum's first word with its tag (a field of
/// the node would add a word).
enum Kind<B: Backend> {
    /// A KSM page (in the tree, or a dup in a chain).
    Page {
        page: B::KsmPage,
        /// The checksum of the page, which orders the node with [`Order::Checksum`]; the page is
        /// write-protected, so it does not change.
        checksum: u32,
        /// The index of the tree the node is in (changes when a migrated page's node moves).
        nid: AtomicU16,
    },
    /// A chain of dups of equal contents.
    Chain {
        dups: KBox<Dups<B>>,
        /// The checksum of the dups' pages.
        checksum: u32,
        /// The index of the tree the chain is in.
        nid: AtomicU16,
    },
}

/// What a new node holds: a KSM page, or the dups of a new chain.
enum Holds<B: Backend> {
    Page(B::KsmPage),
    Chain(KBox<Dups<B>>),
}

impl<B: Backend> TreeNode for StableNode<B> {
    const LINKS_OFFSET: usize = core::mem::offset_of!(Self, links);

    fn tree_links(&self) -> Option<&TreeLinks> {
        Some(&self.links)
    }
}

impl<B: Backend> HListOwner<RmapItem<B>, B::Token> for StableNode<B> {
    const HEAD_OFFSET: usize = core::mem::offset_of!(Self, items);

    fn hlist(&self) -> &HList<RmapItem<B>, B::Token> {
        &self.items
    }
}

impl<B: Backend> StableNode<B> {
    /// Records that the node moved to the tree of index `nid`.
    pub(crate) fn set_nid(&self, nid: usize) {
        self.nid_cell().store(nid as u16, Relaxed);
    }

    fn nid_cell(&self) -> &AtomicU16 {
        match &self.kind {
            Kind::Page { nid, .. } | Kind::Chain { nid, .. } => nid,
        }
    }

    /// A node whose list and chain `token` governs (the token of its shard), for pages whose
    /// domain and checksum are `tag`.
    fn new(holds: Holds<B>, nid: usize, tag: Tag, token: &B::Token) -> Result<Pin<KBox<Self>>> {
        let (checksum, nid) = (tag.sum, AtomicU16::new(nid as u16));
        Ok(KBox::pin(
            Self {
                links: TreeLinks::new(),
                items: HList::new_for(token),
                kind: match holds {
                    Holds::Page(page) => Kind::Page {
                        page,
                        checksum,
                        nid,
                    },
                    Holds::Chain(dups) => Kind::Chain {
                        dups,
                        checksum,
                        nid,
                    },
                },
                domain: tag.domain,
            },
            GFP_KERNEL,
        )?)
    }

    /// The node's KSM page; `None` for a chain.
    pub(crate) fn ksm_page(&self) -> Option<&B::KsmPage> {
        match &self.kind {
            Kind::Page { page: p, .. } => Some(p),
            Kind::Chain { .. } => None,
        }
    }

    /// Whether the node is a chain of dups.
    pub(crate) fn is_chain(&self) -> bool {
        matches!(self.kind, Kind::Chain { .. })
    }

    /// The number of rmap_items that map the node's page (0 for a chain).
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// The id of the token that governs the node's list (the shard it is in).
    pub(crate) fn shard(&self) -> usize {
        self.items.token_id()
    }

    /// The checksum of the node's page.
    pub(crate) fn checksum(&self) -> u32 {
        match self.kind {
            Kind::Page { checksum, .. } | Kind::Chain { checksum, .. } => checksum,
        }
    }

    /// The merge domain of the node's page.
    pub(crate) fn domain(&self) -> Domain {
        self.domain
    }

    /// Whether a page of merge domain `domain` that maps this node's KSM page (a fork's) may be
    /// listed under it: the node is of that domain and, when pages are split into domains
    /// (`scoped`), still has a mapping, which vouches for its domain (an address space's domain
    /// is its address, which a new one may take once the node's mappings are gone: see
    /// [`crate::domain`]).
    pub(crate) fn admits_fork(&self, domain: Domain, scoped: bool) -> bool {
        self.domain == domain && (!scoped || self.len() > 0)
    }

    /// What orders the node before its page's contents: its checksum, then its domain.
    #[inline]
    pub(crate) fn tag(&self) -> Tag {
        Tag::new(self.domain, self.checksum())
    }

    /// The index of the tree the node is in.
    pub(crate) fn nid(&self) -> usize {
        self.nid_cell().load(Relaxed).into()
    }

    /// The rmap_items that map the page, newest first.
    pub(crate) fn items<'t>(
        &'t self,
        token: &'t B::Token,
    ) -> impl Iterator<Item = Pin<&'t RmapItem<B>>> + 't {
        self.items.iter(token)
    }

    /// The rmap_items that map the page, read without the token.
    ///
    /// # Safety
    ///
    /// Nobody changes the node's list meanwhile: the caller holds the node's KSM page locked,
    /// which every writer of the list holds too (see `abi`).
    pub(crate) unsafe fn items_unlocked(&self) -> impl Iterator<Item = Pin<&RmapItem<B>>> + '_ {
        // SAFETY: By the safety requirements.
        unsafe { self.items.iter_unchecked() }
    }

    /// The dups of a chain (none for a plain node).
    pub(crate) fn dups<'t>(&'t self, token: &'t B::Token) -> &'t [Pin<KBox<StableNode<B>>>] {
        match &self.kind {
            Kind::Chain { dups: chain, .. } => &chain.get(token).dups,
            Kind::Page { .. } => &[],
        }
    }

    /// Whether one more page may share this node's page (C's `is_page_sharing_candidate`):
    /// it has a mapping (else its page is about to go) and is under `max_page_sharing`.
    pub(crate) fn has_room(&self, max_page_sharing: usize) -> bool {
        let n = self.items.len();
        n > 0 && n < max_page_sharing
    }
}

/// What the stable counters of sysfs count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// KSM pages with at least one mapping (`pages_shared`).
    pub(crate) pages_shared: u64,
    /// Mappings beyond the first of each KSM page (`pages_sharing`).
    pub(crate) pages_sharing: u64,
    /// Chains (`stable_node_chains`).
    pub(crate) chains: u64,
    /// Dups in chains (`stable_node_dups`).
    pub(crate) dups: u64,
}

/// The settings a lookup needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    /// How the trees order their pages.
    pub(crate) order: Order,
    /// The most mappings one KSM page may have.
    pub(crate) max_page_sharing: usize,
    /// The time now, in jiffies.
    pub(crate) now: u64,
    /// How often a chain is pruned whole, in jiffies (`stable_node_chains_prune_millisecs`).
    pub(crate) prune_jiffies: u64,
    /// With [`Order::Checksum`], whether [`StableTree::search`] takes the first node of the key's
    /// checksum as the match without comparing the pages. The caller must then prove the match
    /// itself (a merge compares the whole pages once they are write-protected) and search again
    /// without it if the pages differ: a checksum may collide.
    pub(crate) trust_checksum: bool,
}

/// What an operation on a stable tree works with besides the tree: the pages, the token of the
/// nodes' lists (the shard's), the lookup's settings, and what it counts.
pub(crate) struct Cx<'b, 'w, B: Backend> {
    /// The pages, which pages found are borrowed from.
    pub(crate) backend: &'b B,
    /// The token of the nodes' lists.
    pub(crate) token: &'w mut B::Token,
    /// The settings.
    pub(crate) set: Settings,
    /// What comparisons cost.
    pub(crate) stats: &'w mut Stats,
    /// The stable counters of sysfs.
    pub(crate) counters: &'w mut Counters,
}

/// A stable node in a tree: a plain node, or a dup of a chain in the tree.
pub(crate) struct NodeRef<'a, B: Backend> {
    node: Pin<&'a StableNode<B>>,
    dup: Option<usize>,
}

impl<'a, B: Backend> NodeRef<'a, B> {
    /// The node, for as long as the token is borrowed.
    pub(crate) fn get<'t>(&'t self, token: &'t B::Token) -> Pin<&'t StableNode<B>> {
        match (self.dup, &self.node.kind) {
            (Some(k), Kind::Chain { dups: chain, .. }) => chain.get(token).dups[k].as_ref(),
            _ => self.node,
        }
    }

    /// Adds `item` to the mappings of the node (C's `stable_tree_append`).
    pub(crate) fn append(
        &self,
        token: &B::Token,
        item: Pin<&RmapItem<B>>,
        c: &mut Counters,
    ) -> Result {
        let node = self.get(token);
        HList::push_front(node, token, item)?;
        if node.items.len() > 1 {
            c.pages_sharing += 1;
        } else {
            c.pages_shared += 1;
        }
        Ok(())
    }
}

/// Where a lookup that found no node of its key's contents would put one: taken by
/// [`StableTree::insert`] without walking again, if the tree has not changed since.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Insertion {
    mark: PlaceMark,
    /// The tree's floor once a page is put there.
    floor: usize,
}

/// A stable node a lookup found (borrowed from the tree for `'a`), with its KSM page held.
pub(crate) struct Found<'a, 'b, B: Backend + 'b> {
    /// The node.
    pub(crate) node: NodeRef<'a, B>,
    /// Its KSM page, held.
    pub(crate) page: B::Page<'b>,
}

/// What a lookup of the stable tree found.
pub(crate) enum Search<'a, 'b, B: Backend> {
    /// An equal KSM page that may take one more mapping.
    Found(Found<'a, 'b, B>),
    /// An equal KSM page that lies on another NUMA node than the tree's (it was migrated there):
    /// its node was taken out of the tree, for the caller to put in its node's tree.
    Misplaced(Pin<KBox<StableNode<B>>>),
    /// No equal page that may take one more mapping; where the key's page would go into the
    /// tree, if it is not there at all (see [`StableTree::insert`]).
    Miss(Option<Insertion>),
    /// With [`Settings::trust_checksum`]: the node of the key's checksum that the lookup met
    /// differs from the key (a checksum collision), and the lookup must be made again without
    /// trusting checksums.
    Unproven,
}

/// One stable tree (of one NUMA node, or of all).
pub(crate) struct StableTree<B: Backend> {
    tree: BoxTree<StableNode<B>>,
    floor: usize,
}

impl<B: Backend> Default for StableTree<B> {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a descent of the stable tree ended.
struct Descended<'a, 'b, B: Backend + 'b> {
    walk: Walk<'a, StableNode<B>, BoxTree<StableNode<B>>>,
    /// For a match: the dup of a chain it came from (`None` for a plain node), and its page.
    hit: Option<(Option<usize>, B::Page<'b>)>,
    descent: Descent,
}

impl<B: Backend> StableTree<B> {
    /// An empty tree.
    pub(crate) const fn new() -> Self {
        Self {
            tree: BoxTree::new(),
            floor: PAGE_SIZE,
        }
    }

    /// The number of nodes in the tree (chains count once).
    pub(crate) fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether the tree is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// The height of the tree (a walk of the whole tree).
    pub(crate) fn height(&self) -> usize {
        self.tree.height()
    }

    /// The nodes in the tree's order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &StableNode<B>> {
        self.tree.iter()
    }

    /// The page a chain stands for in comparisons (C's `stable_node_dup()`): that of the dup a
    /// lookup would use. Dups are tried in order; the first one with room is taken, unless the
    /// chain is due for pruning (`prune` and `stable_node_chains_prune_millisecs` elapsed), when
    /// every dup is looked at and the fullest one with room is taken. Dups whose page is gone are
    /// removed when met. A taken dup that can take one more page after this one moves to the
    /// front. Returns the dup's index and its page; `None` if every dup is stale.
    fn chain_page<'b>(
        backend: &'b B,
        token: &mut B::Token,
        cell: &Dups<B>,
        set: Settings,
        prune: bool,
        c: &mut Counters,
    ) -> Option<(usize, B::Page<'b>)> {
        let max = set.max_page_sharing;
        let prune = prune && {
            let chain = cell.get_mut(token);
            let due = set.now >= chain.prune_time.saturating_add(set.prune_jiffies);
            if due {
                chain.prune_time = set.now;
            }
            due
        };
        let mut found: Option<(usize, B::Page<'b>)> = None;
        let mut i = 0;
        while i < cell.get(token).dups.len() {
            let Some(page) = backend.ksm_page(&cell.get(token).dups[i]) else {
                // Stale: out of the chain at once, keeping the others' order.
                let chain = cell.get_mut(token);
                chain.dups[i..].rotate_left(1);
                if let Some(dup) = chain.dups.pop() {
                    Self::free_node(backend, token, dup, c, true);
                }
                continue;
            };
            let dups = &cell.get(token).dups;
            let d = &dups[i];
            let better = match &found {
                None => true,
                Some((f, _)) => {
                    let f = &dups[*f];
                    d.has_room(max) && (!f.has_room(max) || d.len() > f.len())
                }
            };
            if better {
                let room = d.has_room(max);
                found = Some((i, page));
                if !prune && room {
                    break;
                }
            }
            i += 1;
        }
        let (k, page) = found?;
        let d = &cell.get(token).dups[k];
        if k != 0 && d.len() > 0 && d.len() + 1 < max {
            cell.get_mut(token).dups[..=k].rotate_right(1);
            return Some((0, page));
        }
        Some((k, page))
    }

    /// Descends `tree`, whose pages share `floor` bytes, comparing `key` with each node's page (a
    /// chain's best dup's), and removes the stale nodes it meets (starting again from the root
    /// after each). With [`Order::Checksum`] a node of another checksum is passed by its
    /// checksum; a plain one without mappings is still checked for staleness, cheaply, so that
    /// stale nodes keep being pruned where lookups go.
    fn descend<'a, 'b, const SCOPED: bool>(
        tree: &'a mut BoxTree<StableNode<B>>,
        floor: usize,
        cx: &mut Cx<'b, '_, B>,
        key: &Key<'_, SCOPED>,
        prune: bool,
    ) -> Descended<'a, 'b, B> {
        let (backend, set) = (cx.backend, cx.set);
        let mut descent = Descent::new(floor, set.order);
        let mut hit = None;
        // The common step, kept small and inside the walk's loop: a node of another checksum
        // that has mappings is passed by its checksum. Only a node without mappings is checked
        // for staleness: one with mappings loses them when the scanner meets them and finds its
        // page gone (`clear_stale`), and is met here again after that. (A chain has none: its
        // dups have them.) A node of the key's checksum goes to the visit below, which compares
        // the domains (the tag's second field) if `SCOPED`: this loop reads no domain.
        let passed = Cell::new(0u32);
        let by_sum = set.order == Order::Checksum;
        let pass = |node: &StableNode<B>| {
            if !by_sum || (node.items.is_empty() && !node.is_chain()) {
                return None;
            }
            let step = match key.sum.cmp(&node.checksum()) {
                core::cmp::Ordering::Less => Step::Left,
                core::cmp::Ordering::Greater => Step::Right,
                core::cmp::Ordering::Equal => return None,
            };
            passed.set(passed.get() + 1);
            Some(step)
        };
        let walk = tree.walk_prune_with(pass, |visit| match visit {
            Visit::At(node) => {
                if let Some(step) = descent.by_tag::<SCOPED>(key.tag(), node.tag()) {
                    return if Self::is_stale(backend, node) {
                        Prune::Remove
                    } else {
                        Prune::Go(step)
                    };
                }
                Self::visit_equal(cx, node, key, prune, &mut descent, &mut hit)
            }
            Visit::Removed(node) => {
                // Its page is gone (a chain's: every dup's). The walk starts again.
                descent.count_key_steps(passed.take());
                descent.finish(cx.stats);
                descent = Descent::new(floor, set.order);
                Self::free_node(backend, cx.token, node, cx.counters, false);
                Prune::Go(Step::Stop)
            }
        });
        descent.count_key_steps(passed.take());
        descent.finish(cx.stats);
        Descended { walk, hit, descent }
    }

    /// Whether `node` is a plain node without mappings whose page is gone (cheaply checked
    /// first).
    #[inline(never)]
    fn is_stale(backend: &B, node: &StableNode<B>) -> bool {
        matches!(node.kind, Kind::Page { .. })
            && node.items.is_empty()
            && !backend.ksm_page_present(node)
            && backend.ksm_page(node).is_none()
    }

    /// The step of [`StableTree::descend`] at a node of the key's checksum: its page (a chain's
    /// best dup's) is taken as the match when trusting checksums, or compared with the key.
    #[inline(never)]
    fn visit_equal<'b, const SCOPED: bool>(
        cx: &mut Cx<'b, '_, B>,
        node: &StableNode<B>,
        key: &Key<'_, SCOPED>,
        prune: bool,
        descent: &mut Descent,
        hit: &mut Option<(Option<usize>, B::Page<'b>)>,
    ) -> Prune {
        let trust = cx.set.trust_checksum && cx.set.order == Order::Checksum;
        let page = match &node.kind {
            Kind::Page { .. } => cx.backend.ksm_page(node).map(|page| (None, page)),
            Kind::Chain { dups: cell, .. } => {
                Self::chain_page(cx.backend, cx.token, cell, cx.set, prune, cx.counters)
                    .map(|(k, page)| (Some(k), page))
            }
        };
        match page {
            None => Prune::Remove,
            Some(found) if trust => {
                // Taken on its checksum (see `Settings::trust_checksum`).
                descent.trusted();
                *hit = Some(found);
                Prune::Go(Step::Stop)
            }
            Some(found) => {
                let (step, _) = descent.compare(key.bytes, &found.1.bytes());
                if step == Step::Stop {
                    *hit = Some(found);
                }
                Prune::Go(step)
            }
        }
    }

    /// Looks up `key` (C's `stable_tree_search`, for a page that is not a KSM page yet).
    ///
    /// Returns the node whose page equals `key` if it may take one more mapping, with its page
    /// held. If every equal page is at `max_page_sharing`, finds nothing: the key must then meet
    /// its match in the unstable tree, and start a new dup. An equal page for which `misplaced`
    /// says it is on the wrong NUMA node has its node taken out (C's `migrate_nodes`).
    ///
    /// With [`Settings::trust_checksum`], the node found is only of the key's checksum, unless it
    /// would be turned down (full) or moved: then it is compared first, and if it differs,
    /// [`Search::Unproven`] asks for a lookup without trusting checksums.
    pub(crate) fn search<'a, 'b, const SCOPED: bool>(
        &'a mut self,
        cx: &mut Cx<'b, '_, B>,
        key: &Key<'_, SCOPED>,
        misplaced: impl Fn(&B::Page<'_>) -> bool,
    ) -> Search<'a, 'b, B> {
        let was_empty = self.tree.is_empty();
        let d = Self::descend(&mut self.tree, self.floor, cx, key, true);
        let (backend, set) = (cx.backend, cx.set);
        let (token, c) = (&mut *cx.token, &mut *cx.counters);
        let (mut at, (mut dup, page)) = match (d.walk, d.hit) {
            (Walk::Stopped(at), Some(hit)) => (at, hit),
            (Walk::Vacant(mut place), _) => {
                return Search::Miss(Some(Insertion {
                    mark: place.mark(),
                    floor: d.descent.floor_after_insert(was_empty),
                }))
            }
            _ => return Search::Miss(None),
        };
        if set.trust_checksum {
            // A node taken on its checksum is proven by the caller's merge; but one that would
            // be moved or turned down here must be proven first, or a checksum collision would
            // hide the equal page.
            let node: &StableNode<B> = at.get();
            let target = match (dup, &node.kind) {
                (Some(k), Kind::Chain { dups: cell, .. }) => &*cell.get(token).dups[k],
                _ => node,
            };
            let full = !target.has_room(set.max_page_sharing);
            if (full || misplaced(&page)) && !key.bytes.same_as(&page.bytes()) {
                return Search::Unproven;
            }
        }
        if misplaced(&page) {
            drop(page);
            return match Self::take_at(backend, token, at, dup, c) {
                Some(node) => Search::Misplaced(node),
                None => Search::Miss(None),
            };
        }
        // A chain down to one dup is no chain: the dup takes its place in the tree.
        let single = match &at.get().kind {
            Kind::Chain { dups: cell, .. } if dup.is_some() && cell.get(token).dups.len() == 1 => {
                cell.get_mut(token).dups.pop()
            }
            _ => None,
        };
        if let Some(single) = single {
            match at.replace(single) {
                Ok(chain) => {
                    c.chains -= 1;
                    c.dups -= 1;
                    drop(chain);
                    dup = None;
                }
                Err(single) => {
                    // Cannot be (the dup's links are free); keep the chain as it was.
                    if let Kind::Chain { dups: cell, .. } = &at.get().kind {
                        let _ = cell.get_mut(token).dups.push(single, GFP_KERNEL);
                    }
                }
            }
        }
        let node = NodeRef {
            node: at.into_pinned(),
            dup,
        };
        if !node.get(token).has_room(set.max_page_sharing) {
            return Search::Miss(None);
        }
        Search::Found(Found { node, page })
    }

    /// Adds the new KSM page `page`, whose contents and checksum are `key` and which lies on NUMA
    /// node `nid` (C's `stable_tree_insert`). If the tree has a node of equal contents (a full
    /// one), the page becomes a dup of it, which turns into a chain if it is not one yet.
    ///
    /// `at`, where a lookup of this key missed ([`Search::Miss`]), saves walking the tree again
    /// if the tree has not changed since.
    ///
    /// Returns the new node, to which the caller appends the page's mappings.
    pub(crate) fn insert<'a, const SCOPED: bool>(
        &'a mut self,
        cx: &mut Cx<'_, '_, B>,
        key: &Key<'_, SCOPED>,
        page: B::KsmPage,
        nid: usize,
        at: Option<Insertion>,
    ) -> Result<NodeRef<'a, B>> {
        let new = StableNode::new(Holds::Page(page), nid, key.tag(), cx.token)?;
        // Where a lookup of the same key just missed, if nothing changed the tree since.
        if let Some(at) = at.filter(|at| self.tree.holds_place(&at.mark)) {
            // Checked just above, with the tree borrowed since: the place is there.
            let place = self.tree.vacant_at(at.mark).ok_or(EINVAL)?;
            let node = place.try_insert(new).map_err(|_| ENOMEM)?;
            self.floor = at.floor;
            return Ok(NodeRef { node, dup: None });
        }
        self.insert_node(cx, key.bytes, new).map_err(|_| ENOMEM)
    }

    /// Puts the plain node `new`, whose KSM page's contents are `bytes`, into the tree (by its
    /// recorded checksum and `bytes`), as a dup if a node of equal contents is there (see
    /// [`StableTree::insert`]). Gives `new` back if memory for a chain could not be had.
    pub(crate) fn insert_node<'a>(
        &'a mut self,
        cx: &mut Cx<'_, '_, B>,
        bytes: &PageBytes<'_>,
        new: Pin<KBox<StableNode<B>>>,
    ) -> core::result::Result<NodeRef<'a, B>, Pin<KBox<StableNode<B>>>> {
        let was_empty = self.tree.is_empty();
        let nid = new.nid();
        let key = Key::<true>::new(bytes, new.checksum(), new.domain);
        let d = Self::descend(&mut self.tree, self.floor, cx, &key, false);
        let (set, token, c) = (cx.set, &mut *cx.token, &mut *cx.counters);
        drop(d.hit);
        match d.walk {
            Walk::Vacant(place) => {
                let node = place.try_insert(new)?;
                self.floor = d.descent.floor_after_insert(was_empty);
                Ok(NodeRef { node, dup: None })
            }
            Walk::Stopped(mut at) => {
                if !at.get().is_chain() {
                    // A plain node of the same contents: it becomes the first dup of a chain that
                    // takes its place in the tree. Room for both dups is made first, so that no
                    // node with mappings is ever dropped for want of memory.
                    let Ok(mut list) = KVec::with_capacity(2, GFP_KERNEL) else {
                        return Err(new);
                    };
                    let Ok(cell) = KBox::new(
                        TokenCell::new_for(
                            Chain {
                                dups: KVec::new(),
                                prune_time: set.now,
                            },
                            token,
                        ),
                        GFP_KERNEL,
                    ) else {
                        return Err(new);
                    };
                    let Ok(chain) = StableNode::new(Holds::Chain(cell), nid, key.tag(), token)
                    else {
                        return Err(new);
                    };
                    let Ok(old) = at.replace(chain) else {
                        return Err(new);
                    };
                    if let Err(old) = list.push_within_capacity(old) {
                        // Cannot be (room for two was made); never free a node with mappings.
                        core::mem::forget(old);
                    }
                    if let Kind::Chain { dups: cell, .. } = &at.get().kind {
                        cell.get_mut(token).dups = list;
                    }
                    c.chains += 1;
                    c.dups += 1;
                }
                let chain = at.into_pinned();
                let Kind::Chain { dups: cell, .. } = &chain.get_ref().kind else {
                    return Err(new);
                };
                let list = &mut cell.get_mut(token).dups;
                if list.reserve(1, GFP_KERNEL).is_err() {
                    return Err(new);
                }
                list.push_within_capacity(new)?;
                c.dups += 1;
                Ok(NodeRef {
                    node: chain,
                    dup: Some(list.len() - 1),
                })
            }
        }
    }
}
