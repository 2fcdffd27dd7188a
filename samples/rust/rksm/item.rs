// SPDX-License-Identifier: GPL-2.0

//! rmap_items: the pages of processes that KSM tracks.

use crate::backend::Backend;
use crate::stable::StableNode;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU8, Ordering::Relaxed};
use kernel::hlist::{self, HListNode};
use kernel::prelude::*;
use kernel::search_tree::{HeapPinned, Linked, TreeLinks, TreeNode};
use kernel::slist::{SListLinks, SListNode};

/// One page of a process that KSM tracks (C's `struct ksm_rmap_item`).
///
/// An item is in the unstable tree, on the list of one stable node, or in neither; its
/// [`TreeLinks`] say which, and [`RmapItem::place`] turns that into a [`Place`]. The links are
/// changed only by the tree or list they are in, so an item cannot claim a place it is not in.
/// The rest of its state is kept in atomics: it is set through shared references, since the
/// item of the other process in a merge is reached through the tree, not owned.
///
/// With the kernel's backend an item is 64 bytes, like C's.
pub(crate) struct RmapItem<B: Backend> {
    scan: SListLinks,
    mapping: B::Mapping,
    links: TreeLinks,
    checksum: AtomicU32,
    age: AtomicU8,
    skips: AtomicU8,
    /// The shard (high bits) and the index of its trees (low bits) the item was last put in.
    whereabouts: AtomicU16,
    extra: B::ItemExtra,
}

/// The bits of [`RmapItem::whereabouts`] that hold the tree index.
const NID_BITS: u32 = 10;

/// The most shards an item can record (see [`RmapItem::shard`]).
pub(crate) const MAX_SHARDS: usize = 1 << (16 - NID_BITS);

/// The most tree indices (NUMA nodes) an item can record.
pub(crate) const MAX_NIDS: usize = 1 << NID_BITS;

/// Where an [`RmapItem`] is.
pub(crate) enum Place<'t, B: Backend> {
    /// In no tree and on no stable node's list.
    Loose,
    /// In the unstable tree of index `nid` (0 when trees are shared across NUMA nodes).
    Unstable {
        /// The index of the tree.
        nid: usize,
    },
    /// On the list of this stable node: the page is merged.
    Stable(&'t StableNode<B>),
}

impl<B: Backend> RmapItem<B> {
    /// A loose item for `mapping`, whose checksum is not known yet, in a box allocated with
    /// `flags` (items are only ever made boxed: see the `HeapPinned` implementation below).
    pub(crate) fn new_boxed(
        mapping: B::Mapping,
        flags: kernel::alloc::Flags,
    ) -> Result<Pin<KBox<Self>>> {
        KBox::pin(Self::new(mapping), flags).map_err(|_| ENOMEM)
    }

    fn new(mapping: B::Mapping) -> Self {
        Self {
            scan: SListLinks::new(),
            mapping,
            links: TreeLinks::new(),
            checksum: AtomicU32::new(0),
            age: AtomicU8::new(0),
            skips: AtomicU8::new(0),
            whereabouts: AtomicU16::new(0),
            extra: B::ItemExtra::default(),
        }
    }

    /// Where the page is mapped.
    pub(crate) fn mapping(&self) -> &B::Mapping {
        &self.mapping
    }

    /// Where the item is; the stable node is borrowed for as long as the token.
    #[inline]
    pub(crate) fn place<'t>(&self, token: &'t B::Token) -> Place<'t, B> {
        match self.links.linked() {
            Linked::Free => Place::Loose,
            Linked::InTree => Place::Unstable {
                nid: usize::from(self.whereabouts.load(Relaxed)) % MAX_NIDS,
            },
            Linked::OnList => match hlist::owner_of(self, token) {
                Some(node) => Place::Stable(node),
                None => Place::Loose,
            },
        }
    }

    /// Whether the item is in neither tree.
    pub(crate) fn is_loose(&self) -> bool {
        !self.links.is_linked()
    }

    /// Whether the item is on the list of `node`.
    pub(crate) fn is_under(&self, node: &StableNode<B>) -> bool {
        hlist::is_on(self, node)
    }

    /// The volatility gate: admits the page to the unstable tree only if its contents have not
    /// changed since the item was last looked at (its checksum is the same); otherwise records
    /// the new checksum and defers the page to the next pass.
    pub(crate) fn admit(&self, checksum: u32) -> bool {
        self.checksum.swap(checksum, Relaxed) == checksum
    }

    /// The checksum recorded at the last visit.
    pub(crate) fn checksum(&self) -> u32 {
        self.checksum.load(Relaxed)
    }

    /// Smart-scan data: how many passes the page has been looked at without merging, and how
    /// many more it may be skipped.
    pub(crate) fn age(&self) -> (u8, u8) {
        (self.age.load(Relaxed), self.skips.load(Relaxed))
    }

    /// Sets the smart-scan data.
    pub(crate) fn set_age(&self, age: u8, skips: u8) {
        self.age.store(age, Relaxed);
        self.skips.store(skips, Relaxed);
    }

    /// What the item keeps while merged.
    pub(crate) fn extra(&self) -> &B::ItemExtra {
        &self.extra
    }

    /// Records the index of the tree the item goes into (below `MAX_NIDS`).
    pub(crate) fn set_nid(&self, nid: usize) {
        let w = self.whereabouts.load(Relaxed) & !(MAX_NIDS as u16 - 1);
        self.whereabouts.store(w | (nid % MAX_NIDS) as u16, Relaxed);
    }

    /// The shard whose trees the item was last put in (0 for a new item): the one whose lock
    /// is taken to see where it is. Only the thread that works on the item's page changes it,
    /// while the item is in no tree.
    pub(crate) fn shard(&self) -> usize {
        usize::from(self.whereabouts.load(Relaxed)) >> NID_BITS
    }

    /// Records that the item goes into the trees of `shard` (below `MAX_SHARDS`). Only while the
    /// item is on no stable node's list: its shard is the id of its list's token
    /// ([`HListNode::list_id`]), and ignored otherwise (no caller does).
    pub(crate) fn set_shard(&self, shard: usize) {
        if self.links.linked() == Linked::OnList {
            debug_assert!(false, "rksm: shard of an item on a list changed");
            return;
        }
        let w = self.whereabouts.load(Relaxed) & (MAX_NIDS as u16 - 1);
        self.whereabouts
            .store(w | ((shard % MAX_SHARDS) << NID_BITS) as u16, Relaxed);
    }
}

impl<B: Backend> TreeNode for RmapItem<B> {
    const LINKS_OFFSET: usize = core::mem::offset_of!(Self, links);

    fn tree_links(&self) -> Option<&TreeLinks> {
        Some(&self.links)
    }
}

// SAFETY: Items are only made boxed (`RmapItem::new_boxed`; `new` is private to this module) and
// linked only from their box, pinned.
unsafe impl<B: Backend> HeapPinned for RmapItem<B> {}

// SAFETY: `list_id` is the item's shard, which `set_shard` changes only while the item is on no
// list (it checks). Its callers set it while the item is in no tree and on no list either (it has
// just left them, or never entered them): then only the thread that works on the item reaches it,
// since other threads reach items only through the trees and lists of a shard.
unsafe impl<B: Backend> HListNode for RmapItem<B> {
    type Owner = StableNode<B>;
    type Token = B::Token;

    #[inline]
    fn list_id(&self) -> usize {
        self.shard()
    }
}

impl<B: Backend> SListNode for RmapItem<B> {
    const LINKS_OFFSET: usize = core::mem::offset_of!(Self, scan);

    fn slist_links(&self) -> &SListLinks {
        &self.scan
    }
}
