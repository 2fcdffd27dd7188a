// SPDX-License-Identifier: GPL-2.0

//! The unstable tree: pages not merged yet, indexed by contents that may change under the tree.
//!
//! Nothing write-protects these pages, so a page may change after it was inserted and the tree
//! may stop being ordered. The red-black balancing never looks at the contents, so the tree stays
//! balanced whatever they do; lookups may then go the wrong way and miss a match (a false
//! negative), but never report one whose contents differ: a match is checked byte for byte. The
//! tree is emptied at the start of every pass, which repairs whatever changed.
//!
//! A descent orders the key by the page each item mapped when it was inserted, taken again by
//! its frame with a speculative reference ([`Backend::peek_page`]) instead of C's mmap lock and
//! page table walk per node. The frame may hold another page by then: like a page that changed,
//! that can only send the descent the wrong way. A match is confirmed by looking the item's
//! mapping up as C does, and comparing with the page found there if it is another.
//!
//! Ordered by checksum ([`Order::Checksum`], what rksm runs), the tree is split into buckets by
//! checksum, each a red-black tree of its own, sized at each pass for the items recent passes
//! held and the pages the last pass deferred at the volatility gate: a lookup reads the
//! bucket's root from a dense array and then a node or two, where one tree of all items took a
//! node per level, most of them out of the caches (the native profile of the running cost had
//! the unstable lookups as rksm's largest share). Equal pages have equal checksums, so they are
//! in one bucket, ordered there as before. C's orders compare contents from the root and keep
//! one tree.

use crate::backend::{Backend, Contents};
use crate::compare::{verify_prefix, Descent, Order, Stats};
use crate::domain::{Domain, Scope};
use crate::item::RmapItem;
use crate::stable::{Counters, NodeRef};
use core::cell::Cell;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use kernel::alloc::flags::{__GFP_NOWARN, GFP_NOWAIT};
use kernel::hlist::HList;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::search_tree::{LinkTree, Occupied, Step, Walk};

/// The most buckets an unstable tree is split into (a power of two). A bucket is a whole
/// [`LinkTree`] (32 bytes on 64-bit), so at most 128 KiB of them a tree.
const MAX_BUCKETS: usize = 4096;

/// The fewest items a pass must have put into a tree for the next pass to split it into buckets.
pub(crate) const MIN_SPLIT: usize = 16;

/// One unstable tree (of one NUMA node, or of all).
///
/// # Invariants
///
/// `buckets.len()` is 0 or a power of two of at least 2. With [`Order::Checksum`] and buckets,
/// an item is in the bucket of its recorded checksum ([`bucket_of`]); every other item is in
/// `one`. `len` is the number of items in `one` and the buckets.
pub(crate) struct UnstableTree<B: Backend> {
    one: LinkTree<RmapItem<B>>,
    buckets: KVec<LinkTree<RmapItem<B>>>,
    len: Cell<usize>,
    /// The most items held since the last [`UnstableTree::renew`].
    peak: usize,
    /// What the last passes held: the largest of their peaks, each pass's worth 1/16 less than
    /// the one after it (see [`UnstableTree::renew`]).
    recent: usize,
    /// How many items the next pass is likely to put in, besides what `recent` says
    /// ([`UnstableTree::expect`]).
    coming: usize,
    floor: usize,
}

/// The bucket of `checksum` among `n` (a power of two of at least 2): its top bits after a
/// Fibonacci hash, so that the checksum's low bits, which picked its shard, do not matter.
fn bucket_of(checksum: u32, n: usize) -> usize {
    (checksum.wrapping_mul(0x9e37_79b9) >> (32 - n.trailing_zeros())) as usize
}

/// The tree that an item of `checksum` looked up in `order` goes into, of `one` and `buckets`
/// (see [`UnstableTree`]'s invariants).
fn tree_for<'a, B: Backend>(
    one: &'a mut LinkTree<RmapItem<B>>,
    buckets: &'a mut KVec<LinkTree<RmapItem<B>>>,
    checksum: u32,
    order: Order,
) -> &'a mut LinkTree<RmapItem<B>> {
    if order != Order::Checksum || buckets.is_empty() {
        return one;
    }
    let i = bucket_of(checksum, buckets.len());
    &mut buckets[i]
}

impl<B: Backend> Default for UnstableTree<B> {
    fn default() -> Self {
        Self::new()
    }
}

/// Where an unstable tree's buckets were when it was last renewed, for a thread that does not
/// hold the tree: it prefetches the bucket of the checksum it is about to look up before it
/// reads the page or searches the stable tree (see [`BucketHint::prefetch`]).
///
/// Once a pass puts thousands of pages into the trees (smart scan's pass that looks at every old
/// page), a lookup's first read is a bucket's root out of a table of up to [`MAX_BUCKETS`] per
/// shard: a cache miss, the largest share of the unstable step in the native profile of the
/// running cost. Read while the page is, it is in the caches by the time the lookup needs it.
///
/// A hint read while the tree is renewed may pair the table of one renewal with the size of
/// another, or name a table that is freed: then the wrong line is prefetched, which costs a few
/// cycles and is never a read of that memory ([`kernel::prefetch::prefetch`]).
pub(crate) struct BucketHint {
    /// The address of the first bucket.
    base: AtomicUsize,
    /// The number of buckets: 0, or a power of two of at least 2.
    n: AtomicUsize,
}

impl BucketHint {
    /// A hint of no buckets.
    pub(crate) const fn new() -> Self {
        Self {
            base: AtomicUsize::new(0),
            n: AtomicUsize::new(0),
        }
    }

    /// Records where `tree`'s buckets are now.
    pub(crate) fn record<B: Backend>(&self, tree: &UnstableTree<B>) {
        self.n.store(0, Relaxed);
        self.base.store(tree.buckets.as_ptr() as usize, Relaxed);
        self.n.store(tree.buckets.len(), Relaxed);
    }

    /// The address of the bucket of `checksum` in the table recorded last, for a tree of items
    /// of type `RmapItem<B>` ordered by checksum ([`Order::Checksum`]); `None` if it had no
    /// buckets. Only an address: the table may be gone.
    #[inline]
    pub(crate) fn bucket<B: Backend>(&self, checksum: u32) -> Option<usize> {
        let n = self.n.load(Relaxed);
        if n < 2 || !n.is_power_of_two() {
            return None;
        }
        let stride = core::mem::size_of::<LinkTree<RmapItem<B>>>();
        Some(
            self.base
                .load(Relaxed)
                .wrapping_add(bucket_of(checksum, n).wrapping_mul(stride)),
        )
    }

    /// Hints that the bucket of `checksum` ([`BucketHint::bucket`]) is about to be read.
    #[inline]
    pub(crate) fn prefetch<B: Backend>(&self, checksum: u32) {
        if let Some(at) = self.bucket::<B>(checksum) {
            kernel::prefetch::prefetch(at as *const u8);
        }
    }
}

/// An rmap_item of the tree whose page equals the key, with its page held.
pub(crate) struct Hit<'a, B: Backend> {
    at: Occupied<'a, RmapItem<B>, LinkTree<RmapItem<B>>>,
    /// The tree's count of items.
    len: &'a Cell<usize>,
    /// The item's page, held.
    pub(crate) page: B::Page<'a>,
}

impl<'a, B: Backend> Hit<'a, B> {
    /// The item.
    pub(crate) fn item(&self) -> &RmapItem<B> {
        self.at.get()
    }

    /// Moves the item out of the tree onto the mappings of the stable node `node`, which its
    /// page has become (the move never leaves the item in neither place).
    pub(crate) fn move_to(
        self,
        node: &NodeRef<'_, B>,
        token: &B::Token,
        c: &mut Counters,
    ) -> Result {
        let node = node.get(token);
        let len = self.len;
        HList::move_from_tree(node, token, self.at)?;
        len.set(len.get() - 1);
        if node.len() > 1 {
            c.pages_sharing += 1;
        } else {
            c.pages_shared += 1;
        }
        Ok(())
    }
}

/// How [`UnstableTree::search_insert`] looks a page up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Probe {
    /// The index of the tree (the NUMA node's, or 0), recorded in the item.
    pub(crate) tree_nid: usize,
    /// Whether matches on another NUMA node than the key's are refused.
    pub(crate) same_node_only: bool,
    /// How the tree orders its items: with [`Order::Checksum`], by their recorded checksum
    /// first (the item's must be its page's: [`RmapItem::admit`] records it). Every lookup of one
    /// tree must use the same order.
    pub(crate) order: Order,
    /// With [`Order::Checksum`], whether the first item of the key's checksum that still maps a
    /// page is the match, taken without comparing: the caller's merge compares the whole pages
    /// once they are write-protected, and if they differ (a checksum collision, or a page that
    /// changed), the caller looks up again without it.
    pub(crate) trust: bool,
    /// What an item's merge domain is: with [`Order::Checksum`] and a scope that splits pages
    /// into domains, the tree orders items of one checksum by their domain (as the backend says
    /// it is now), and a lookup never reads a page of another domain.
    pub(crate) scope: Scope,
    /// The key's merge domain under `scope`.
    pub(crate) domain: Domain,
}

/// The result of [`UnstableTree::search_insert`].
pub(crate) enum Lookup<'a, B: Backend> {
    /// An item of the tree has a page equal to the key.
    Found(Hit<'a, B>),
    /// No equal page: the item was inserted.
    Inserted,
    /// No equal page, and the item was not inserted: its page did not pass the volatility gate
    /// that the caller runs before an insertion (see [`UnstableTree::search_insert`]).
    Declined,
    /// The lookup gave up (a tree item's page could not be had, or is the key page itself, or
    /// the match is on another NUMA node while trees are per node): nothing was inserted.
    GaveUp,
}

impl<B: Backend> UnstableTree<B> {
    /// An empty tree.
    pub(crate) const fn new() -> Self {
        Self {
            one: LinkTree::new(),
            buckets: KVec::new(),
            len: Cell::new(0),
            peak: 0,
            recent: 0,
            coming: 0,
            floor: PAGE_SIZE,
        }
    }

    /// The number of items in the tree.
    pub(crate) fn len(&self) -> usize {
        self.len.get()
    }

    /// Whether the tree is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of the bucket of `checksum` (see [`BucketHint::bucket`]), if the tree is
    /// split into buckets.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn bucket_addr(&self, checksum: u32) -> Option<usize> {
        let n = self.buckets.len();
        (n > 0).then(|| &self.buckets[bucket_of(checksum, n)] as *const _ as usize)
    }

    /// The address of the bucket that holds `item`, if the tree is split into buckets and one
    /// does (a walk of every item).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn bucket_holding(&self, item: &RmapItem<B>) -> Option<usize> {
        self.buckets
            .iter()
            .find(|t| t.iter().any(|x| core::ptr::eq(x, item)))
            .map(|t| t as *const _ as usize)
    }

    /// The height of the tree's tallest bucket (a walk of every item).
    pub(crate) fn height(&self) -> usize {
        self.trees().map(|t| t.height()).max().unwrap_or(0)
    }

    /// How many of its trees hold items: more than one once it is split into buckets.
    pub(crate) fn trees_in_use(&self) -> usize {
        self.trees().filter(|t| !t.is_empty()).count()
    }

    /// Every item, in the tree's order within each bucket.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &RmapItem<B>> {
        self.trees().flat_map(|t| t.iter())
    }

    fn trees(&self) -> impl Iterator<Item = &LinkTree<RmapItem<B>>> {
        Iterator::chain(core::iter::once(&self.one), self.buckets.iter())
    }

    /// Looks up the page `key` of `item` and inserts `item` if no equal page is in the tree (C's
    /// `unstable_tree_search_insert`), as `how` says (see [`Probe`]).
    ///
    /// `SCOPED` is `how.scope`'s [`Scope::is_scoped`], or `true` (see [`crate::compare::Key`]):
    /// without it the items' domains are not looked up.
    ///
    /// `admit` runs when no equal page is found, before `item` is inserted, and says whether to
    /// insert it: a caller that looked the page up by the checksum its item recorded at the last
    /// visit, without taking it again, runs the volatility gate there (and an item whose
    /// checksum changed is not inserted: it was ordered by the old one).
    pub(crate) fn search_insert<'a, const SCOPED: bool>(
        &'a mut self,
        backend: &'a B,
        item: Pin<&'a RmapItem<B>>,
        key: &B::Page<'_>,
        how: Probe,
        stats: &mut Stats,
        admit: impl FnOnce() -> bool,
    ) -> Lookup<'a, B> {
        let Probe {
            tree_nid,
            same_node_only,
            order,
            trust,
            scope,
            domain,
        } = how;
        let trust = trust && order == Order::Checksum;
        let key_bytes = key.bytes();
        let key_sum = item.checksum();
        let Self {
            one,
            buckets,
            len,
            peak,
            floor,
            ..
        } = self;
        let tree = tree_for(one, buckets, key_sum, order);
        let was_empty = tree.is_empty();
        // The key's tag against an item's, in the order of `Tag`: the item's recorded checksum,
        // then, with `SCOPED`, its domain now. The item's domain is looked up only when the
        // checksums are equal: at the one node of a descent, or the few, they do not decide.
        let cmp_tag = |node: &RmapItem<B>| {
            key_sum.cmp(&node.checksum()).then_with(|| {
                if SCOPED {
                    domain.cmp(&backend.domain(node.mapping(), scope))
                } else {
                    core::cmp::Ordering::Equal
                }
            })
        };
        let mut descent = Descent::new(*floor, order);
        let mut hit: Option<B::Page<'a>> = None;
        let mut gave_up = false;
        // Nodes of another checksum are passed inside the walk's loop, by their checksum.
        let passed = Cell::new(0u32);
        let pass = |node: &RmapItem<B>| {
            if order != Order::Checksum {
                return None;
            }
            let step = match cmp_tag(node) {
                core::cmp::Ordering::Less => Step::Left,
                core::cmp::Ordering::Greater => Step::Right,
                core::cmp::Ordering::Equal => return None,
            };
            passed.set(passed.get() + 1);
            Some(step)
        };
        let walk = tree.walk_mut_with(pass, |node| {
            // Another checksum: decided without reading a page.
            if let Some(step) = descent.by_order(cmp_tag(node)) {
                return step;
            }
            if trust {
                // Taken on its checksum, with the page it had when it was inserted if that frame
                // still holds a page (the merge fails if its mapping maps another page now), or
                // the page it maps; an item whose page is gone is compared instead.
                if let Some(page) = backend
                    .peek_page(node)
                    .or_else(|| backend.item_page(node.mapping()))
                    .filter(|p| !backend.same_page(p, key))
                {
                    descent.trusted();
                    hit = Some(page);
                    return Step::Stop;
                }
            }
            // Order by the page the item mapped when it was inserted, read without taking the
            // mmap lock or walking page tables; only a match needs the mapping looked up.
            let peeked = backend
                .peek_page(node)
                .filter(|p| !backend.same_page(p, key));
            if let Some(p) = &peeked {
                let (step, _) = descent.compare(&key_bytes, &p.bytes());
                if step != Step::Stop {
                    return step;
                }
            }
            match backend.item_page(node.mapping()) {
                Some(page) if !backend.same_page(&page, key) => {
                    let step = if peeked.is_some_and(|p| backend.same_page(&p, &page)) {
                        // The match is the page the item maps now.
                        Step::Stop
                    } else {
                        descent.compare(&key_bytes, &page.bytes()).0
                    };
                    if step == Step::Stop {
                        hit = Some(page);
                    }
                    step
                }
                // The page is gone, or it is the key page itself (a fork shares it).
                _ => {
                    gave_up = true;
                    Step::Stop
                }
            }
        });
        descent.count_key_steps(passed.get());
        descent.finish(stats);
        match walk {
            Walk::Vacant(place) => {
                if !admit() {
                    return Lookup::Declined;
                }
                item.set_nid(tree_nid);
                backend.note_page(&item, key);
                match place.insert(item) {
                    Ok(_) => {
                        if order != Order::Checksum {
                            *floor = descent.floor_after_insert(was_empty);
                        }
                        len.set(len.get() + 1);
                        *peak = (*peak).max(len.get());
                        Lookup::Inserted
                    }
                    Err(_) => Lookup::GaveUp,
                }
            }
            Walk::Stopped(at) => {
                let Some(page) = hit.filter(|_| !gave_up) else {
                    return Lookup::GaveUp;
                };
                // The descent compared only what it did not know to be equal; the tree may have
                // changed since, so check the rest before reporting a match.
                if !verify_prefix(&key_bytes, &page.bytes(), descent.unchecked_prefix(), stats) {
                    return Lookup::GaveUp;
                }
                if same_node_only && backend.page_nid(&page) != backend.page_nid(key) {
                    return Lookup::GaveUp;
                }
                Lookup::Found(Hit {
                    at,
                    page,
                    len: &*len,
                })
            }
        }
    }

    /// Takes `item` out of the tree; `false` if it is not in this tree.
    pub(crate) fn remove(&mut self, item: &RmapItem<B>) -> bool {
        // In the bucket of its checksum, or in `one` if it went in by another order. An item
        // whose recorded checksum changed while it was linked (no caller of rksm's does that) is
        // looked for in every bucket: left linked, it would panic when freed.
        let Self { one, buckets, .. } = self;
        let removed = if buckets.is_empty() {
            one.remove(item)
        } else {
            let i = bucket_of(item.checksum(), buckets.len());
            buckets[i].remove(item)
                || one.remove(item)
                || buckets.iter_mut().any(|t| t.remove(item))
        };
        if removed {
            self.len.set(self.len.get() - 1);
        }
        removed
    }

    /// Tells the next [`UnstableTree::renew`] that about `n` items are likely to go into the tree
    /// in the pass it starts: pages the last pass deferred at the volatility gate, most of which
    /// come back unchanged and go into the tree of their checksum. A workload's first pass
    /// defers every page and puts none in a tree, and its second puts most in: sized by the
    /// passes before alone, its trees had no buckets in the pass that fills them.
    pub(crate) fn expect(&mut self, n: usize) {
        self.coming = n;
    }

    /// Whether [`UnstableTree::renew`] would change nothing: the tree is empty, no pass since
    /// the last renewal put an item in it, no recent pass is remembered, and no items are
    /// expected ([`UnstableTree::expect`]).
    pub(crate) fn is_settled(&self) -> bool {
        self.len.get() == 0
            && self.peak == 0
            && self.recent == 0
            && self.coming == 0
            && self.buckets.is_empty()
            && self.floor == PAGE_SIZE
    }

    /// Empties the tree.
    pub(crate) fn reset(&mut self) {
        // An empty tree's buckets are empty: under smart scan most passes leave most trees so,
        // and clearing each bucket would read (and write) every bucket's root for nothing.
        if self.len.get() == 0 {
            self.floor = PAGE_SIZE;
            return;
        }
        for t in Iterator::chain(core::iter::once(&mut self.one), self.buckets.iter_mut()) {
            t.clear(|_| {});
        }
        self.len.set(0);
        self.floor = PAGE_SIZE;
    }

    /// Empties the tree for a new pass, split into about as many buckets as the most items it
    /// held in recent passes (see the module's doc) or is expected to hold in this one
    /// ([`UnstableTree::expect`], then forgotten), or fewer (a quarter at least, and more than
    /// it has) if no memory can be had at once, or into as many as it was: an allocation that
    /// would wait is not worth a faster lookup.
    ///
    /// Recent, not the last: under smart scan most pages that do not merge come back only every
    /// few passes (every eighth at most, `item::looks_at`), all in one pass, and the passes
    /// between hold few. Sized by the last pass alone, the pass that needs buckets most had none.
    /// A peak's worth falls by 1/16 a pass (rounded up, so that it reaches 0): a peak of a few
    /// hundred items or more keeps buckets for the eight passes after it (from 4096, a tree has
    /// no memory of it 96 passes later).
    pub(crate) fn renew(&mut self) {
        self.reset();
        self.recent = self.peak.max(self.recent - self.recent.div_ceil(16));
        self.peak = 0;
        let expected = self.recent.max(core::mem::take(&mut self.coming));
        let want = if expected < MIN_SPLIT {
            0
        } else {
            expected.next_power_of_two().min(MAX_BUCKETS)
        };
        // Within a factor of two of what there is: kept, not allocated again every pass.
        let have = self.buckets.len();
        if want == have || (want > 0 && have > 0 && want / 2 <= have && have <= want * 2) {
            return;
        }
        let mut buckets = KVec::new();
        if want > 0 {
            // Fewer buckets if that many cannot be had, down to a quarter of them.
            let mut n = want;
            while buckets.reserve(n, GFP_NOWAIT | __GFP_NOWARN).is_err() {
                if n <= have || n <= want / 4 {
                    return;
                }
                n /= 2;
            }
            for _ in 0..n {
                // Cannot fail: there is room (reserved above).
                let _ = buckets.push_within_capacity(LinkTree::new());
            }
        }
        // The old buckets are empty (reset above).
        self.buckets = buckets;
    }
}
