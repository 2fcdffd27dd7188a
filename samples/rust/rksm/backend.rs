// SPDX-License-Identifier: GPL-2.0

//! How rksm's trees reach the pages they index.
//!
//! The trees compare page contents but know nothing of processes: a [`Backend`] turns what an
//! rmap_item or a stable node records into a page held for reading, and does the merges. The
//! kernel's backend does so with the folios of real address spaces ([`crate::real`]); the KUnit
//! suites' with kernel pages they fill.

use crate::domain::{Domain, Scope};
use crate::item::RmapItem;
use crate::stable::StableNode;
use core::pin::Pin;
use kernel::hlist::Token;
use kernel::mm::contents::PageBytes;
use kernel::prelude::*;

/// A page held while its contents are read (pinned by a reference, mapped on demand).
pub(crate) trait Contents {
    /// The page's bytes.
    fn bytes(&self) -> PageBytes<'_>;
}

/// What the trees need of the pages and mappings they index.
pub(crate) trait Backend: Sized {
    /// What an rmap_item records of where its page is mapped (an address space and an address).
    type Mapping: Send + Sync;
    /// What a stable node records of its KSM page (its page frame, for real pages).
    type KsmPage: Send + Sync;
    /// What an rmap_item keeps while it is merged (a reference on its anon_vma, for real pages);
    /// set and emptied through shared references.
    type ItemExtra: Send + Sync + Default;
    /// A page held for reading.
    type Page<'a>: Contents
    where
        Self: 'a;
    /// A held page, locked (what guards a KSM page's list of mappings).
    type Locked<'a>
    where
        Self: 'a;
    /// The KSM page of a stable node, held and locked ([`Backend::lock_ksm_page`]).
    type LockedKsm<'a>
    where
        Self: 'a;
    /// The token that governs the lists of rmap_items under stable nodes.
    type Token: Token;

    /// The page `mapping` maps now, if it is still there and may still be merged.
    fn item_page(&self, mapping: &Self::Mapping) -> Option<Self::Page<'_>>;

    /// The merge domain of the pages `mapping`'s address space maps, under `scope` (see
    /// [`crate::domain`]): 0 with [`Scope::Global`]. Read each time, as it is now.
    fn domain(&self, mapping: &Self::Mapping, scope: Scope) -> Domain;

    /// A page to order `item` by in the unstable tree without looking its mapping up: the page
    /// it mapped when it was inserted ([`Backend::note_page`]), if that frame still holds a page
    /// that may be read. The mapping may no longer map it; a match must be confirmed with
    /// [`Backend::item_page`]. `None` when there is no such shortcut.
    fn peek_page(&self, _item: &RmapItem<Self>) -> Option<Self::Page<'_>> {
        None
    }

    /// `item`, which maps `page`, is going into the unstable tree.
    fn note_page(&self, _item: &RmapItem<Self>, _page: &Self::Page<'_>) {}

    /// The KSM page of a stable node, or `None` if it is gone (the node is stale).
    fn ksm_page(&self, node: &StableNode<Self>) -> Option<Self::Page<'_>>;

    /// Whether the KSM page of a stable node seems to be there still, checked more cheaply than
    /// [`Backend::ksm_page`] and without holding it: `false` only if the node may be stale, which
    /// [`Backend::ksm_page`] then decides.
    fn ksm_page_present(&self, node: &StableNode<Self>) -> bool {
        self.ksm_page(node).is_some()
    }

    /// What a new stable node records of `page`, which has just become a KSM page.
    fn ksm_page_of(&self, page: &Self::Page<'_>) -> Self::KsmPage;

    /// The NUMA node of a held page.
    fn page_nid(&self, page: &Self::Page<'_>) -> usize;

    /// Whether two held pages are the same page (not merely equal contents).
    fn same_page(&self, a: &Self::Page<'_>, b: &Self::Page<'_>) -> bool;

    /// Whether `page` is the KSM page of `node`.
    fn page_is(&self, page: &Self::Page<'_>, node: &StableNode<Self>) -> bool;

    /// Whether `item`'s mapping still maps `page`, the KSM page of the stable node it is listed
    /// under, which has `listed` mappings listed: the page was looked up a moment before (a scan
    /// looks a batch of pages up before it works on them), and a write may have given the
    /// mapping a copy of its own since. Cheap when every listed mapping still maps the page.
    fn still_maps(&self, _item: &RmapItem<Self>, _page: &Self::Page<'_>, _listed: usize) -> bool {
        true
    }

    /// Whether `page` is a KSM page (of some node, or still of none).
    fn is_ksm(&self, page: &Self::Page<'_>) -> bool;

    /// The NUMA node of a KSM page.
    fn ksm_page_nid(&self, ksm: &Self::KsmPage) -> usize;

    /// Whether what a stable node records of its KSM page names a frame in `frames` (a range of
    /// memory going offline).
    fn ksm_page_in(&self, ksm: &Self::KsmPage, frames: &core::ops::Range<usize>) -> bool;

    /// Locks `page`, sleeping until it is free.
    fn lock<'a>(&'a self, page: &'a Self::Page<'_>) -> Self::Locked<'a>;

    /// The KSM page of a stable node, locked, if it is still the node's once locked; `None` if
    /// the node is stale (C's `ksm_get_folio(KSM_GET_FOLIO_LOCK)`). While the lock is waited
    /// for, the page may be freed, or migrated and the node moved to the copy: the copy is then
    /// locked instead, so that `None` means that no page points at the node any more.
    fn lock_ksm_page(&self, node: &StableNode<Self>) -> Option<Self::LockedKsm<'_>>;

    /// Makes the locked KSM page point at `node`.
    fn link_node(&self, locked: &Self::Locked<'_>, node: Pin<&StableNode<Self>>);

    /// The stable node the locked KSM page points at.
    fn node_of<'a>(&self, locked: &'a Self::Locked<'_>) -> Option<Pin<&'a StableNode<Self>>>;

    /// Lets page migration see a raised reference on `kpage`, the KSM page of `node` found in the
    /// stable tree, by taking and dropping its lock; `EBUSY` if it is locked, `EAGAIN` if it is no
    /// longer `node`'s page once locked (a migration that had checked its reference count before
    /// the lookup took its reference moved the node to a copy: the lookup must be made again).
    fn settle(&self, kpage: &Self::Page<'_>, node: &StableNode<Self>) -> Result;

    /// Maps the KSM page `kpage` where `item` maps `page`, whose contents are equal (C's
    /// `try_to_merge_with_ksm_page()`); `kpage` may be `page` itself (a fork shares a KSM page).
    fn merge_with_ksm(
        &self,
        item: &RmapItem<Self>,
        page: &Self::Page<'_>,
        kpage: &Self::Page<'_>,
    ) -> Result;

    /// Turns `page` into a KSM page and maps it where `tree_item` maps the equal `tree_page`
    /// (C's `try_to_merge_two_pages()`).
    fn merge_pages(
        &self,
        item: &RmapItem<Self>,
        page: &Self::Page<'_>,
        tree_item: &RmapItem<Self>,
        tree_page: &Self::Page<'_>,
    ) -> Result;

    /// If zero pages are merged (`use_zero_pages`) and `page` is all zero by its checksum, maps
    /// the zero page instead (C's `try_to_merge_with_zero_page()`). `true` when done with the
    /// page (merged, or its area is gone), `false` to go on to the trees.
    fn merge_zero(&self, item: &RmapItem<Self>, page: &Self::Page<'_>) -> bool;

    /// Whether a page whose checksum is `checksum` is tried against the zero page before the
    /// trees ([`Backend::merge_zero`] would look at it).
    fn zero_candidate(&self, checksum: u32) -> bool;

    /// Gives `item` a private copy of its page again (C's `break_cow()`), after a merge that could
    /// not be recorded.
    fn break_merge(&self, item: &RmapItem<Self>);

    /// Whether a stable node with no mappings may go: its KSM page is gone or unmapped (then
    /// made to point at no node), not still mapped somewhere.
    fn release(&self, node: &StableNode<Self>) -> bool;

    /// `item` went onto the list of a stable node.
    fn merged(&self, _item: &RmapItem<Self>) {}

    /// `item` left the list of a stable node.
    fn unmerged(&self, _item: &RmapItem<Self>) {}

    /// Every mapping of `node` is about to be taken off it: its KSM page is gone, or the node is
    /// being freed (C's `remove_node_from_stable_tree()`).
    fn dropping_mappings(&self, _node: &StableNode<Self>, _token: &Self::Token) {}

    /// `node`, the node of a KSM page (not a chain), is being freed.
    fn dropping_node(&self, _node: &StableNode<Self>) {}
}
