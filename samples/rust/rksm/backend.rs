// SPDX-License-Identifier: GPL-2.0

//! How rksm's trees reach the pages they index.
//!
//! The trees compare page contents but know nothing of processes: a [`Backend`] turns what an
//! rmap_item or a stable node records into a page held for reading. The scanner's backend does so
//! with the folios of real address spaces; the KUnit suites' with kernel pages they fill.

use crate::item::RmapItem;
use kernel::hlist::Token;
use kernel::mm::contents::PageBytes;
use kernel::prelude::*;

/// A page held while its contents are read (pinned by a reference, mapped).
pub(crate) trait Contents {
    /// The page's bytes.
    fn bytes(&self) -> PageBytes<'_>;
}

/// What the trees need of the pages and mappings they index.
pub(crate) trait Backend: Sized {
    /// What an rmap_item records of where its page is mapped (an address space and an address).
    type Mapping: Send + Sync;
    /// What a stable node records of its KSM page (the page frame number, for real pages).
    type KsmPage: Send + Sync;
    /// A page held for reading.
    type Page<'a>: Contents
    where
        Self: 'a;
    /// The token that governs the lists of rmap_items under stable nodes.
    type Token: Token;

    /// The page `mapping` maps now, if it is still there and may still be merged.
    fn item_page(&self, mapping: &Self::Mapping) -> Option<Self::Page<'_>>;

    /// The KSM page of a stable node, or `None` if it is gone (the node is stale).
    fn ksm_page(&self, page: &Self::KsmPage) -> Option<Self::Page<'_>>;

    /// The NUMA node of a held page.
    fn page_nid(&self, page: &Self::Page<'_>) -> usize;

    /// Whether two held pages are the same page (not merely equal contents).
    fn same_page(&self, a: &Self::Page<'_>, b: &Self::Page<'_>) -> bool;

    /// Whether a held page is the KSM page `ksm`.
    fn page_is(&self, page: &Self::Page<'_>, ksm: &Self::KsmPage) -> bool;

    /// The NUMA node of a KSM page.
    fn ksm_page_nid(&self, ksm: &Self::KsmPage) -> usize;

    /// Maps the KSM page `ksm` where `item` maps `page`, whose contents are equal (C's
    /// `try_to_merge_with_ksm_page`). Fails if the page changed or could not be replaced.
    fn merge_with_ksm(
        &self,
        item: &RmapItem<Self>,
        page: &Self::Page<'_>,
        ksm: &Self::KsmPage,
    ) -> Result;

    /// Turns two equal pages into one KSM page mapped by both items (C's
    /// `try_to_merge_two_pages`), and returns it.
    fn merge_pages(
        &self,
        item: &RmapItem<Self>,
        page: &Self::Page<'_>,
        tree_item: &RmapItem<Self>,
        tree_page: &Self::Page<'_>,
    ) -> Result<Self::KsmPage>;

    /// Gives `item` a private copy of its page again (C's `break_cow`), after a merge that could
    /// not be recorded.
    fn break_merge(&self, item: &RmapItem<Self>);

    /// `item` went onto the list of a stable node.
    fn merged(&self, _item: &RmapItem<Self>) {}

    /// `item` left the list of a stable node.
    fn unmerged(&self, _item: &RmapItem<Self>) {}
}
