// SPDX-License-Identifier: GPL-2.0

//! Synthetic pages for the tree suites: kernel pages the tests allocate and fill, a [`Backend`]
//! over them, page patterns, and the naive references the trees are checked against.
//!
//! An rmap_item's mapping is the index of the page it maps; merging points it at the KSM page
//! (after checking, as a real merge does once the pages are write-protected, that the contents
//! are equal). A page can be marked gone, to make stable nodes stale.

use crate::backend::{Backend, Contents};
use crate::compare::Order;
use crate::domain::{Domain, Scope};
use crate::item::RmapItem;
use crate::stable::StableNode;
use crate::step::{Shards, Step};
use crate::trees::{Outcome, Trees};
use crate::unstable::Probe;
use core::cmp::Ordering;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use kernel::mm::contents::{MappedPage, PageBytes};
use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;

kernel::define_token!(pub(crate) TestToken, 4);

/// One set of trees as the only shard, with no lock: what a suite that runs the per-page step
/// on one thread hands it ([`crate::step::Step`]).
pub(crate) struct Unlocked<'t> {
    /// The trees.
    pub(crate) trees: &'t mut Trees<TestPages>,
    /// Their token.
    pub(crate) token: &'t mut TestToken,
}

impl Shards<TestPages> for Unlocked<'_> {
    fn count(&self) -> usize {
        1
    }

    fn with<R>(
        &mut self,
        _i: usize,
        f: impl FnOnce(&mut Trees<TestPages>, &mut TestToken) -> R,
    ) -> R {
        f(self.trees, self.token)
    }
}

const WORDS: usize = PAGE_SIZE / 8;

/// Contents the suites fill pages with. Every pattern gives each page index its own contents
/// unless said otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// Every page the same (KSM's best case).
    Best,
    /// Zero but the last 8 bytes, which hold `i + 1` (KSM's worst case, as `ksmpages`).
    Worst,
    /// A pseudo-random stream per page.
    Random(u64),
    /// 128 zero bytes, then a pseudo-random stream (PageONE's variant).
    ZeroPrefix(u64),
    /// Zero up to a position that varies with `i`, then a byte that varies, then zero: common
    /// prefixes of every length, many pages equal.
    Ragged,
}

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Pattern {
    /// The `w`-th word of page `i`, for words filled in order.
    fn word(self, i: usize, w: usize, state: &mut u64) -> u64 {
        match self {
            Pattern::Best => 0x5a5a_5a5a_5a5a_5a5a,
            Pattern::Worst => {
                if w == WORDS - 1 {
                    i as u64 + 1
                } else {
                    0
                }
            }
            Pattern::Random(_) => splitmix(state),
            Pattern::ZeroPrefix(_) => {
                if w < 16 {
                    0
                } else {
                    splitmix(state)
                }
            }
            Pattern::Ragged => {
                let at = (i * 37) % WORDS;
                if w == at {
                    ((i % 7) as u64 + 1) << ((i % 8) * 8)
                } else {
                    0
                }
            }
        }
    }

    fn seed(self, i: usize) -> u64 {
        match self {
            Pattern::Random(s) | Pattern::ZeroPrefix(s) => {
                s ^ (i as u64).wrapping_mul(0x1000_0000_01b3)
            }
            _ => 0,
        }
    }
}

/// What an rmap_item of the test backend maps: the index of a page, the one it had first, and
/// the merge domain of its "process" (what `merge_scope` splits pages by).
pub(crate) struct TestMapping {
    page: AtomicUsize,
    orig: usize,
    domain: AtomicU64,
}

impl TestMapping {
    pub(crate) fn new(page: usize) -> Self {
        Self {
            page: AtomicUsize::new(page),
            orig: page,
            domain: AtomicU64::new(0),
        }
    }

    /// The merge domain of the mapping's process (with any scope but `Global`).
    pub(crate) fn domain(&self) -> Domain {
        self.domain.load(Relaxed)
    }

    /// Moves the mapping's process to domain `domain` (as a process moves to another cgroup).
    pub(crate) fn set_domain(&self, domain: Domain) {
        self.domain.store(domain, Relaxed);
    }

    /// The page mapped now.
    pub(crate) fn page(&self) -> usize {
        self.page.load(Relaxed)
    }

    /// Maps page `page` instead (as a copy-on-write fault gives a process a new page).
    pub(crate) fn remap(&self, page: usize) {
        self.page.store(page, Relaxed);
    }
}

/// The page an rmap_item of the test backend mapped when it went into the unstable tree (the
/// test backend's [`Backend::peek_page`] reads it, as the kernel's reads the frame it noted).
pub(crate) struct NotedPage(AtomicUsize);

impl Default for NotedPage {
    fn default() -> Self {
        Self(AtomicUsize::new(usize::MAX))
    }
}

/// A held test page.
pub(crate) struct Held<'a> {
    pub(crate) index: usize,
    map: MappedPage<'a>,
}

impl Contents for Held<'_> {
    fn bytes(&self) -> PageBytes<'_> {
        self.map.bytes()
    }
}

/// Kernel pages filled by a test, each on a NUMA node of the test's choosing.
pub(crate) struct TestPages {
    pages: KVec<Page>,
    nid: KVec<AtomicUsize>,
    gone: KVec<AtomicBool>,
    /// Merges that were attempted and failed because the contents differed.
    pub(crate) merge_failures: AtomicUsize,
    /// Whether the backend gives up the CPU where the kernel's may sleep (see
    /// [`TestPages::yield_in_steps`]).
    yields: AtomicBool,
}

impl TestPages {
    /// `n` pages of `pattern`, all on node 0.
    pub(crate) fn new(n: usize, pattern: Pattern) -> Result<Self> {
        let mut t = Self {
            pages: KVec::with_capacity(n, GFP_KERNEL)?,
            nid: KVec::with_capacity(n, GFP_KERNEL)?,
            gone: KVec::with_capacity(n, GFP_KERNEL)?,
            merge_failures: AtomicUsize::new(0),
            yields: AtomicBool::new(false),
        };
        for i in 0..n {
            t.push(pattern, i, 0)?;
        }
        Ok(t)
    }

    /// Adds a page filled as page `i` of `pattern`, on node `nid`; returns its index.
    pub(crate) fn push(&mut self, pattern: Pattern, i: usize, nid: usize) -> Result<usize> {
        let page = Page::alloc_page(GFP_KERNEL)?;
        let mut state = pattern.seed(i);
        MappedPage::new(&page).fill_words(|w| pattern.word(i, w, &mut state));
        self.pages.push(page, GFP_KERNEL)?;
        self.nid.push(AtomicUsize::new(nid), GFP_KERNEL)?;
        self.gone.push(AtomicBool::new(false), GFP_KERNEL)?;
        Ok(self.pages.len() - 1)
    }

    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// Writes `bytes` at `offset` of page `i` (the page changes under the trees).
    pub(crate) fn write(&self, i: usize, offset: usize, bytes: &[u8]) {
        MappedPage::new(&self.pages[i]).write(offset, bytes);
    }

    /// Moves page `i` to NUMA node `nid`, contents and all, as page migration does.
    pub(crate) fn migrate(&self, i: usize, nid: usize) {
        self.nid[i].store(nid, Relaxed);
    }

    /// Marks page `i` gone: it can no longer be had, like a freed KSM page.
    pub(crate) fn set_gone(&self, i: usize) {
        self.gone[i].store(true, Relaxed);
    }

    /// Makes the backend give up the CPU where the kernel's may sleep (locking a page, merging),
    /// so that threads running the step take turns inside it even on one CPU that does not
    /// preempt (User-Mode Linux), and more often on several.
    pub(crate) fn yield_in_steps(&self, on: bool) {
        self.yields.store(on, Relaxed);
    }

    /// Where the kernel's backend may sleep.
    fn may_sleep(&self) {
        if self.yields.load(Relaxed) {
            kernel::kthread::yield_now();
        }
    }

    fn hold(&self, i: usize) -> Option<Held<'_>> {
        if i >= self.pages.len() || self.gone[i].load(Relaxed) {
            return None;
        }
        Some(Held {
            index: i,
            map: MappedPage::new(&self.pages[i]),
        })
    }

    /// Page `i`, held.
    pub(crate) fn held(&self, i: usize) -> Held<'_> {
        self.hold(i).expect("test page gone")
    }

    /// Compares pages `a` and `b` byte by byte: the naive reference.
    pub(crate) fn naive_cmp(&self, a: usize, b: usize) -> Ordering {
        let (pa, pb) = (self.held(a), self.held(b));
        let (ba, bb) = (pa.bytes(), pb.bytes());
        let (mut x, mut y) = ([0u8; 64], [0u8; 64]);
        let mut at = 0;
        while at < PAGE_SIZE {
            ba.read_into(at, &mut x);
            bb.read_into(at, &mut y);
            match x.cmp(&y) {
                Ordering::Equal => at += 64,
                o => return o,
            }
        }
        Ordering::Equal
    }

    /// Compares pages `a` and `b` in the order `order` of a tree: by contents, or by checksum
    /// first for [`Order::Checksum`].
    pub(crate) fn order_cmp(&self, order: Order, a: usize, b: usize) -> Ordering {
        let by_sum = if order == Order::Checksum {
            let sum = |i: usize| self.held(i).bytes().checksum();
            sum(a).cmp(&sum(b))
        } else {
            Ordering::Equal
        };
        by_sum.then_with(|| self.naive_cmp(a, b))
    }

    /// The page indexes `0..n` sorted in the order `order` (the naive reference order).
    pub(crate) fn sorted(&self, n: usize, order: Order) -> Result<KVec<usize>> {
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            v.push(i, GFP_KERNEL)?;
        }
        v.sort_unstable_by(|&a, &b| self.order_cmp(order, a, b));
        Ok(v)
    }

    /// Whether `sorted` (a list of pages sorted in the order `order`) has a page equal to page
    /// `key`: the naive search, by bisection.
    pub(crate) fn naive_contains(&self, sorted: &[usize], key: usize, order: Order) -> bool {
        sorted
            .binary_search_by(|&p| self.order_cmp(order, p, key))
            .is_ok()
    }
}

impl Backend for TestPages {
    type Mapping = TestMapping;
    type KsmPage = usize;
    type ItemExtra = NotedPage;
    type Page<'a> = Held<'a>;
    type Locked<'a> = ();
    type LockedKsm<'a> = Held<'a>;
    type Token = TestToken;

    fn item_page(&self, mapping: &TestMapping) -> Option<Held<'_>> {
        self.hold(mapping.page())
    }

    fn domain(&self, mapping: &TestMapping, scope: Scope) -> Domain {
        if scope.is_scoped() {
            mapping.domain()
        } else {
            0
        }
    }

    fn peek_page(&self, item: &RmapItem<Self>) -> Option<Held<'_>> {
        self.hold(item.extra().0.load(Relaxed))
    }

    fn note_page(&self, item: &RmapItem<Self>, page: &Held<'_>) {
        item.extra().0.store(page.index, Relaxed);
    }

    fn ksm_page(&self, node: &StableNode<Self>) -> Option<Held<'_>> {
        self.hold(*node.ksm_page()?)
    }

    fn ksm_page_of(&self, page: &Held<'_>) -> usize {
        page.index
    }

    fn page_nid(&self, page: &Held<'_>) -> usize {
        self.nid[page.index].load(Relaxed)
    }

    fn same_page(&self, a: &Held<'_>, b: &Held<'_>) -> bool {
        a.index == b.index
    }

    fn page_is(&self, page: &Held<'_>, node: &StableNode<Self>) -> bool {
        node.ksm_page() == Some(&page.index)
    }

    fn is_ksm(&self, _page: &Held<'_>) -> bool {
        // Test pages are not told apart by their own state; the trees know which are KSM pages.
        false
    }

    fn ksm_page_nid(&self, ksm: &usize) -> usize {
        self.nid[*ksm].load(Relaxed)
    }

    fn ksm_page_in(&self, ksm: &usize, frames: &core::ops::Range<usize>) -> bool {
        frames.contains(ksm)
    }

    fn lock<'a>(&'a self, _page: &'a Held<'_>) {
        self.may_sleep();
    }

    fn lock_ksm_page(&self, node: &StableNode<Self>) -> Option<Held<'_>> {
        self.may_sleep();
        self.ksm_page(node)
    }

    fn link_node(&self, _locked: &(), _node: Pin<&StableNode<Self>>) {}

    fn node_of<'a>(&self, _locked: &'a ()) -> Option<Pin<&'a StableNode<Self>>> {
        None
    }

    fn settle(&self, _kpage: &Held<'_>, _node: &StableNode<Self>) -> Result {
        Ok(())
    }

    fn merge_with_ksm(&self, item: &RmapItem<Self>, page: &Held<'_>, kpage: &Held<'_>) -> Result {
        self.may_sleep();
        if self.naive_cmp(page.index, kpage.index) != Ordering::Equal {
            self.merge_failures.fetch_add(1, Relaxed);
            return Err(EBUSY);
        }
        item.mapping().page.store(kpage.index, Relaxed);
        Ok(())
    }

    fn merge_pages(
        &self,
        _item: &RmapItem<Self>,
        page: &Held<'_>,
        tree_item: &RmapItem<Self>,
        tree_page: &Held<'_>,
    ) -> Result {
        self.may_sleep();
        if self.naive_cmp(page.index, tree_page.index) != Ordering::Equal {
            self.merge_failures.fetch_add(1, Relaxed);
            return Err(EBUSY);
        }
        // As in C KSM, the scanned page becomes the KSM page; the tree's item maps it too.
        tree_item.mapping().page.store(page.index, Relaxed);
        Ok(())
    }

    fn merge_zero(&self, _item: &RmapItem<Self>, _page: &Held<'_>) -> bool {
        false
    }

    fn zero_candidate(&self, _checksum: u32) -> bool {
        false
    }

    fn break_merge(&self, item: &RmapItem<Self>) {
        let m = item.mapping();
        m.page.store(m.orig, Relaxed);
    }

    fn release(&self, _node: &StableNode<Self>) -> bool {
        true
    }
}

/// Runs the per-page step for `item` over `trees` as one unlocked shard (as a one-thread suite
/// drives it); `None` if its page is gone. The visit is made in a pass where the volatility gate
/// does not recheck the item's whole page (see `RmapItem::glance`), so that what a visit does
/// depends on the pages alone; [`visit_rechecking`] makes the other kind.
pub(crate) fn visit(
    p: &TestPages,
    trees: &mut Trees<TestPages>,
    token: &mut TestToken,
    item: Pin<&RmapItem<TestPages>>,
) -> Option<Outcome> {
    visit_in(p, trees, token, item, false)
}

/// [`visit`], in a pass where the volatility gate rechecks the item's whole page.
pub(crate) fn visit_rechecking(
    p: &TestPages,
    trees: &mut Trees<TestPages>,
    token: &mut TestToken,
    item: Pin<&RmapItem<TestPages>>,
) -> Option<Outcome> {
    visit_in(p, trees, token, item, true)
}

fn visit_in(
    p: &TestPages,
    trees: &mut Trees<TestPages>,
    token: &mut TestToken,
    item: Pin<&RmapItem<TestPages>>,
    recheck: bool,
) -> Option<Outcome> {
    let page = p.item_page(item.mapping())?;
    let (prune_ms, scope) = (trees.chain_prune_ms, trees.scope());
    // The gate rechecks at the passes where the pass number plus the checksum is a multiple of
    // `RECHECK_PASSES`.
    let pass = u32::from(!recheck).wrapping_sub(item.checksum());
    Some(
        Step::new(p, Unlocked { trees, token }, prune_ms, scope)
            .in_pass(pass)
            .cmp_and_merge(item, &page),
    )
}

/// Items for pages `0..n` of `pages`, pinned.
pub(crate) fn items(n: usize) -> Result<KVec<Pin<KBox<RmapItem<TestPages>>>>> {
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    for i in 0..n {
        v.push(
            RmapItem::new_boxed(TestMapping::new(i), GFP_KERNEL)?,
            GFP_KERNEL,
        )?;
    }
    Ok(v)
}

/// A permutation of `0..n` (a fixed pseudo-random order).
pub(crate) fn shuffled(n: usize, seed: u64) -> Result<KVec<usize>> {
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    for i in 0..n {
        v.push(i, GFP_KERNEL)?;
    }
    let mut s = seed;
    for i in (1..n).rev() {
        let j = (splitmix(&mut s) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    Ok(v)
}

/// The largest height a red-black tree of `n` nodes can have: floor(2 log2(n + 1)), computed
/// exactly as floor(log2((n + 1)^2)).
pub(crate) fn max_rb_height(n: usize) -> usize {
    let sq = (n as u128 + 1) * (n as u128 + 1);
    (u128::BITS - 1 - sq.leading_zeros()) as usize
}

/// How the one-node suites look a page up in an unstable tree: on node 0, every page in one merge
/// domain, each candidate's page taken and compared (no trust in a recorded checksum).
pub(crate) fn global_probe(order: Order) -> Probe {
    Probe {
        tree_nid: 0,
        same_node_only: false,
        order,
        trust: false,
        scope: Scope::Global,
        domain: 0,
    }
}
