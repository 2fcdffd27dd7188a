// SPDX-License-Identifier: GPL-2.0

//! rmap_items: the pages of processes that KSM tracks.

use crate::backend::Backend;
use crate::stable::StableNode;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use kernel::hlist::{self, HListNode};
use kernel::mm::contents::PageBytes;
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
    /// Smart scan's age (see [`RmapItem::smart_look`]).
    age: AtomicU8,
    /// What the volatility gate saw of the page at the last visit: [`GLANCE_SAMPLE`] bits of
    /// its sample ([`PageBytes::sample`]), never 0 once seen (0: never looked at), and
    /// [`GLANCE_CURRENT`] if `checksum` is that of the contents the sample was taken of.
    glance: AtomicU8,
    /// The shard (high bits) and the index of its trees (low bits) the item was last put in.
    whereabouts: AtomicU16,
    extra: B::ItemExtra,
}

/// The bits of [`RmapItem::glance`] that hold the sample.
const GLANCE_SAMPLE: u8 = 0x7f;

/// The bit of [`RmapItem::glance`] that says the checksum is current.
const GLANCE_CURRENT: u8 = 0x80;

/// Every how many passes a page whose sample did not change has its whole checksum taken
/// again anyway (see [`RmapItem::glance`]).
pub(crate) const RECHECK_PASSES: u32 = 16;

/// Every how many passes smart scanning looks at a page that it has decided on in `age` passes
/// without a merge: every pass at first, then every 2nd, 4th and 8th, always in the passes whose
/// number is a multiple of the period. C's `skip_age()` slows down as much (every 2nd, 3rd, 5th,
/// then 9th pass) but counts each page's skips from its own last look: two equal pages whose
/// counts are out of phase are never looked at in one pass again, and as a pair (no third page
/// of their contents) never meet in the unstable tree (tests/vm/skipphase.c merged none of 16
/// such pairs in 200 passes on C, and on rksm before). With periods that are powers of two,
/// counted from pass 0, every page is looked at in each pass whose number is a multiple of the
/// longest period, so any two equal pages meet at least that often.
fn look_period(age: u8) -> u32 {
    match age {
        0..=2 => 1,
        3..=5 => 2,
        6..=8 => 4,
        _ => LONGEST_LOOK_PERIOD,
    }
}

/// The longest period of [`look_period`], a multiple of every other.
pub(crate) const LONGEST_LOOK_PERIOD: u32 = 8;

// A recheck falls in a pass that every schedule of smart scanning looks at (see `recheck_due`).
const _: () = assert!(RECHECK_PASSES % LONGEST_LOOK_PERIOD == 0);

/// Whether smart scanning looks at a page of age `age` in pass `pass` (see [`look_period`]).
pub(crate) fn looks_at(age: u8, pass: u32) -> bool {
    pass % look_period(age) == 0
}

/// Whether the volatility gate takes the whole checksum again in pass `pass` of a page whose
/// sample did not change, with `checksum` recorded and smart scan's `age` (see
/// [`RmapItem::glance`]): once every [`RECHECK_PASSES`] passes, at a pass that depends on the
/// checksum so that the pages' rechecks are spread over the passes, and in a pass that smart
/// scanning looks at the page in. A page of period `p` ([`look_period`]) is looked at in the
/// passes that are multiples of `p`, so its recheck is at a multiple of `p` too: where
/// `pass + p * checksum` is a multiple of [`RECHECK_PASSES`]. `age` may be the age after this
/// pass's decision: the period only grows with the age, and each period divides the next.
/// (Rechecks at `pass + checksum` alone never came for 7 in 8 old pages, whose passes are
/// multiples of 8: a change the sample missed stayed unseen for good.)
pub(crate) fn recheck_due(age: u8, checksum: u32, pass: u32) -> bool {
    pass.wrapping_add(checksum.wrapping_mul(look_period(age))) % RECHECK_PASSES == 0
}

/// How many times the volatility gate found a page changed that its sample had seen unchanged
/// (the periodic recheck of [`RmapItem::glance`]): published as `sample_misses`.
pub(crate) static SAMPLE_MISSES: AtomicU64 = AtomicU64::new(0);

/// The bits of [`RmapItem::glance`] that the sample of `bytes` gives: never 0, which is "never
/// seen".
fn sample_bits(bytes: &PageBytes<'_>) -> u8 {
    ((bytes.sample() % u32::from(GLANCE_SAMPLE)) + 1) as u8
}

/// What the volatility gate reads of a page at a visit ([`RmapItem::glance`]), for
/// [`RmapItem::admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Glance {
    /// The page's sample, in [`GLANCE_SAMPLE`]'s bits, never 0.
    sample: u8,
    /// The checksum of the whole page, if the gate needs it.
    sum: Option<u32>,
}

impl Glance {
    /// What the gate is given for a page it must not admit (a KSM page, which never goes
    /// through it): a sample no page has.
    pub(crate) const NONE: Glance = Glance {
        sample: 0,
        sum: None,
    };
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
            glance: AtomicU8::new(0),
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

    /// Reads what the volatility gate ([`RmapItem::admit`]) needs of the page `bytes` at this
    /// visit, the `pass`-th: its sample, and the checksum of the whole page only where the gate
    /// will need it: at the first visit, when the sample is the one seen at the last visit but
    /// the checksum recorded is not of those contents (the sample changed at the last visit), and
    /// once every [`RECHECK_PASSES`] passes ([`recheck_due`]) to find changes the sample missed.
    /// Most pages that stay the same are then read whole once, not at every pass; a page that
    /// changes is read whole only once its sample stops changing.
    ///
    /// Only the thread that works on the item's page calls it, before [`RmapItem::admit`].
    pub(crate) fn glance(&self, bytes: &PageBytes<'_>, pass: u32) -> Glance {
        let seen = self.glance.load(Relaxed);
        if seen == 0 {
            // Never seen: the whole page, in order, then the sample from the caches. Read alone,
            // the sample's lines of a page out of the caches cost as much as the whole page
            // (each a miss that no prefetch hides; natively, in the profile of the best case,
            // more than the checksum); with the checksum recorded, the next visit needs only
            // the sample, and no more if a KSM page of that checksum takes the page.
            let sum = bytes.checksum();
            return Glance {
                sample: sample_bits(bytes),
                sum: Some(sum),
            };
        }
        let recheck = recheck_due(self.age.load(Relaxed), self.checksum(), pass);
        if recheck && seen & GLANCE_CURRENT != 0 {
            // A recheck of a page whose sample is most likely unchanged: the whole page first, in
            // order, and the sample from the caches, as at the first visit; given only if the
            // sample is unchanged, as below.
            let sum = bytes.checksum();
            let sample = sample_bits(bytes);
            return Glance {
                sample,
                sum: (seen & GLANCE_SAMPLE == sample).then_some(sum),
            };
        }
        let sample = sample_bits(bytes);
        let sum = (seen & GLANCE_SAMPLE == sample && (seen & GLANCE_CURRENT == 0 || recheck))
            .then(|| bytes.checksum());
        Glance { sample, sum }
    }

    /// The volatility gate: admits the page to the unstable tree only if its contents have not
    /// changed since the item was last looked at, as far as `glance` ([`RmapItem::glance`]) can
    /// tell: its sample is the same, and so is its checksum where the glance took it; otherwise
    /// records what changed and defers the page to the next pass.
    ///
    /// C compares the checksum of the whole page at every visit. Here a change outside the
    /// sample goes unseen until the next recheck: the page goes on into the unstable tree,
    /// ordered by its old checksum, where it can only miss pages it equals now, and a merge of it
    /// compares the whole pages once they are write-protected, as every merge does; at worst a
    /// page that is still being written is merged and soon copied again on write. Never a
    /// wrong merge.
    pub(crate) fn admit(&self, glance: Glance) -> bool {
        let seen = self.glance.load(Relaxed);
        if let (0, Some(sum)) = (seen, glance.sum) {
            // Never seen: deferred, as C defers a page at its first visit, with its checksum.
            self.checksum.store(sum, Relaxed);
            self.glance.store(glance.sample | GLANCE_CURRENT, Relaxed);
            return false;
        }
        if seen & GLANCE_SAMPLE != glance.sample {
            // Changed: the checksum is not of these contents.
            self.glance.store(glance.sample, Relaxed);
            return false;
        }
        let Some(sum) = glance.sum else {
            return seen & GLANCE_CURRENT != 0;
        };
        let was = self.checksum.swap(sum, Relaxed);
        self.glance.store(glance.sample | GLANCE_CURRENT, Relaxed);
        if seen & GLANCE_CURRENT != 0 && was != sum {
            // A recheck found a change the sample did not see: as C's gate would, defer the
            // page, which has its new checksum now.
            SAMPLE_MISSES.fetch_add(1, Relaxed);
            return false;
        }
        true
    }

    /// Whether the checksum recorded is of the contents the last visit saw (see
    /// [`RmapItem::glance`]): not after the sample changed, nor before the first checksum.
    pub(crate) fn checksum_current(&self) -> bool {
        self.glance.load(Relaxed) & GLANCE_CURRENT != 0
    }

    /// Records `checksum` as the page's, current, as a gate that took it would: for the KUnit
    /// suites' items, made up without a visit.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn set_checksum(&self, checksum: u32, bytes: &PageBytes<'_>) {
        self.checksum.store(checksum, Relaxed);
        self.glance
            .store(sample_bits(bytes) | GLANCE_CURRENT, Relaxed);
    }

    /// The checksum recorded at the last visit.
    pub(crate) fn checksum(&self) -> u32 {
        self.checksum.load(Relaxed)
    }

    /// Smart scanning's decision on the page in pass `pass` (C's `should_skip_rmap_item()`):
    /// whether to look at it ([`looks_at`]). Counts the pass in smart scan's age: in how many
    /// passes smart scanning has decided on the page since the item was made (C's
    /// `rmap_item->age`), up to `u8::MAX`. KSM pages are looked at without a decision. Only
    /// the thread that gathers a batch calls it (no two increments race).
    pub(crate) fn smart_look(&self, pass: u32) -> bool {
        let age = self.age.load(Relaxed);
        self.age.store(age.saturating_add(1), Relaxed);
        looks_at(age, pass)
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
