// SPDX-License-Identifier: GPL-2.0

//! Comparing a key page with the pages of a tree while descending it, skipping the prefix that is
//! already known to be equal (paper section 21), and counting what it costs.
//!
//! # Why a prefix can be skipped
//!
//! Write `lcp(a, b)` for the length of the common prefix of two pages. For any pages `a`, `b`, `c`,
//! `lcp(a, c) >= min(lcp(a, b), lcp(b, c))`, and if `a <= b <= c` in lexicographic order then
//! `lcp(a, b) >= lcp(a, c)` and `lcp(b, c) >= lcp(a, c)`: every page between two others shares at
//! least their common prefix.
//!
//! A descent keeps `lo`, the common prefix of the key with the nearest ancestor that the key went
//! right of, and `hi`, the same for the nearest it went left of. Every node `n` below lies between
//! those two ancestors `l` and `h`, and so does the key, hence
//! `lcp(key, n) >= min(lcp(key, l), lcp(l, n)) >= min(lo, lcp(l, h)) >= min(lo, hi)`.
//!
//! When only one bound exists, say `h`, the nodes below lie between the tree's smallest page and
//! `h`. The tree keeps `floor`, the common prefix of its smallest and largest pages (which every
//! page in the tree shares): `lcp(h, n) >= floor`, hence `lcp(key, n) >= min(hi, floor)`. Before
//! the first comparison nothing is known and the comparison starts at byte 0.
//!
//! So each comparison starts at that bound instead of at byte 0. On KSM's worst case (pages equal
//! but their last 8 bytes) a lookup reads one page at the root and 8 bytes at every other level,
//! where a plain `memcmp()` reads almost 4 KiB at every level.
//!
//! The argument needs the tree to be ordered, which the stable tree is (its pages are
//! write-protected). The unstable tree's pages may change under it; a comparison that skips a
//! prefix may then be wrong, which, like a wrong plain comparison there, only sends the descent
//! the wrong way. A match is never reported from a partial comparison: the unstable tree checks
//! the skipped prefix of a match, and a merge compares the whole pages again once they are
//! write-protected.
//!
//! # Ordering by checksum first
//!
//! Every page the trees look up already has its checksum computed (the volatility gate needs it).
//! With [`Order::Checksum`] the trees order pages by that checksum first and by contents only
//! among equal checksums. Equal pages have equal checksums, so a lookup still finds exactly the
//! pages equal to its key, but a descent past a node of another checksum compares two integers
//! the tree keeps (an rmap_item's recorded checksum, a stable node's) and touches no page at all.
//! Only nodes of the key's checksum, in practice the matches, are compared byte by byte. On the
//! worst case, where every page differs in its last 8 bytes, that is one page per lookup instead
//! of a page per level.
//!
//! Among nodes of the key's checksum the prefix argument above still holds: the nodes of one
//! checksum are consecutive in the tree's order, and a bound set by comparing contents with an
//! ancestor of that checksum still encloses every node below it. Steps decided by checksum set no
//! bound, and the tree keeps no floor (its smallest and largest pages need not share a prefix with
//! the nodes of one checksum), so with one bound a comparison starts at byte 0.
//!
//! With merge domains (`merge_scope`, see [`crate::domain`]) the domain follows the checksum:
//! the pair is a page's [`Tag`]. A descent passes every page of another domain by its tag, as it
//! passes pages of another checksum, and so never reads one. (The other orders are
//! C's, kept for KUnit's comparisons; they have one domain.)

use crate::domain::{Domain, Tag};
use kernel::mm::contents::{Comparison, PageBytes};
use kernel::page::PAGE_SIZE;
use kernel::search_tree::Step;

/// How a tree orders its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// By contents, every comparison from byte 0 (C KSM's `memcmp()`).
    Plain,
    /// By contents, each comparison skipping the prefix known to be equal.
    SkipPrefix,
    /// By checksum, then by contents (skipping the known prefix) among equal checksums: what
    /// rksm's trees use.
    Checksum,
}

/// A page to look up: its contents, its checksum and its merge domain (used with
/// [`Order::Checksum`], which orders by checksum, then domain: see [`crate::domain`]).
///
/// `SCOPED` says whether the tree's pages are split into domains. Without, every page of the
/// trees is of domain 0 (see [`crate::trees::Trees`]), so a key compares tags by checksum alone
/// and never reads a domain: `merge_scope=global` runs the step without domain code (see
/// [`crate::step::Step::cmp_and_merge`]). A key with `SCOPED` orders correctly in either tree.
pub(crate) struct Key<'a, const SCOPED: bool = true> {
    /// The page's bytes.
    pub(crate) bytes: &'a PageBytes<'a>,
    /// The page's checksum ([`PageBytes::checksum`]), as recorded for it.
    pub(crate) sum: u32,
    /// The page's merge domain (0 unless pages are split into domains).
    pub(crate) domain: Domain,
}

impl<'a> Key<'a> {
    /// The key of `bytes`, computing their checksum, in domain 0.
    pub(crate) fn of(bytes: &'a PageBytes<'a>) -> Self {
        Self::new(bytes, bytes.checksum(), 0)
    }
}

impl<'a, const SCOPED: bool> Key<'a, SCOPED> {
    /// The key of `bytes`, whose checksum was recorded as `sum`, in domain `domain` (0 without
    /// `SCOPED`, whatever `domain` says).
    #[inline]
    pub(crate) fn new(bytes: &'a PageBytes<'a>, sum: u32, domain: Domain) -> Self {
        Self {
            bytes,
            sum,
            domain: if SCOPED { domain } else { 0 },
        }
    }

    /// What orders the key before its contents.
    #[inline]
    pub(crate) fn tag(&self) -> Tag {
        Tag::new(self.domain, self.sum)
    }

    /// The key's tag against a node's, `node` ([`Tag::cmp_in`]).
    #[inline]
    pub(crate) fn cmp_tag(&self, node: &Tag) -> core::cmp::Ordering {
        self.tag().cmp_in::<SCOPED>(node)
    }
}

/// What it cost to compare pages, kept cheaply as the trees work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Lookups and insertions (descents) made.
    pub(crate) lookups: u64,
    /// Page comparisons made while descending.
    pub(crate) compares: u64,
    /// Steps decided by checksum alone, without reading a page.
    pub(crate) key_steps: u64,
    /// Bytes read by those comparisons (of each of the two pages).
    pub(crate) bytes: u64,
    /// Bytes read to check the skipped prefix of a match in the unstable tree.
    pub(crate) verify_bytes: u64,
    /// The deepest descent, in nodes visited.
    pub(crate) max_depth: u32,
    /// Nodes visited by the last descent.
    pub(crate) last_depth: u32,
    /// Bytes read by the last descent's comparisons.
    pub(crate) last_bytes: u64,
}

/// The state of one descent: the common prefixes of the key with its nearest bounds.
pub(crate) struct Descent {
    lo: Option<usize>,
    hi: Option<usize>,
    floor: usize,
    order: Order,
    /// The common prefix with the last node compared.
    pub(crate) last_common: usize,
    /// Whether the descent has only gone left (or not moved): it is at the smallest page.
    pub(crate) leftmost: bool,
    /// Whether it has only gone right (or not moved).
    pub(crate) rightmost: bool,
    depth: u32,
    key_steps: u32,
    bytes: u64,
}

impl Descent {
    /// A descent of a tree ordered by `order`, whose pages all share `floor` bytes (ignored with
    /// [`Order::Checksum`], whose trees keep no floor).
    pub(crate) fn new(floor: usize, order: Order) -> Self {
        Self {
            lo: None,
            hi: None,
            floor: if order == Order::Checksum { 0 } else { floor },
            order,
            last_common: 0,
            leftmost: true,
            rightmost: true,
            depth: 0,
            key_steps: 0,
            bytes: 0,
        }
    }

    /// With [`Order::Checksum`], where a node whose recorded tag (checksum and domain) is `node`
    /// sends the key whose tag is `key`, compared as [`Tag::cmp_in`] (by checksum alone without
    /// `SCOPED`), or `None` if the tags are equal and the pages must be compared. Always `None`
    /// with the other orders.
    #[inline]
    pub(crate) fn by_tag<const SCOPED: bool>(&mut self, key: Tag, node: Tag) -> Option<Step> {
        self.by_order(key.cmp_in::<SCOPED>(&node))
    }

    /// [`Descent::by_tag`] for a comparison of the two tags already made: `key` against the
    /// node's.
    #[inline]
    pub(crate) fn by_order(&mut self, key: core::cmp::Ordering) -> Option<Step> {
        if self.order != Order::Checksum {
            return None;
        }
        let step = match key {
            core::cmp::Ordering::Less => Step::Left,
            core::cmp::Ordering::Greater => Step::Right,
            core::cmp::Ordering::Equal => return None,
        };
        // No bound is set: the node is not of the key's checksum (see the module documentation),
        // and such trees keep no floor, so `leftmost` and `rightmost` do not matter.
        self.depth += 1;
        self.key_steps += 1;
        Some(step)
    }

    /// Counts `n` steps decided by checksum elsewhere (by a walk's own test of the nodes'
    /// checksums).
    #[inline]
    pub(crate) fn count_key_steps(&mut self, n: u32) {
        self.depth += n;
        self.key_steps += n;
    }

    /// Counts a node of the key's checksum taken as the match without comparing (a lookup that
    /// trusts checksums, see [`crate::stable::Settings::trust_checksum`]): a step decided by
    /// checksum alone.
    #[inline]
    pub(crate) fn trusted(&mut self) {
        self.depth += 1;
        self.key_steps += 1;
    }

    /// Where the next comparison may start: a prefix the key shares with every node below.
    pub(crate) fn start(&self) -> usize {
        if self.order == Order::Plain {
            return 0;
        }
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) => lo.min(hi),
            (Some(one), None) | (None, Some(one)) => one.min(self.floor),
            (None, None) => 0,
        }
    }

    /// Compares `key` with the page of the node the descent is at, and says where to go.
    pub(crate) fn compare(
        &mut self,
        key: &PageBytes<'_>,
        node: &PageBytes<'_>,
    ) -> (Step, Comparison) {
        let c = key.compare_from(node, self.start());
        self.depth += 1;
        self.bytes += c.read as u64;
        self.last_common = c.common;
        let step = match c.order {
            core::cmp::Ordering::Less => {
                self.hi = Some(c.common);
                self.rightmost = false;
                Step::Left
            }
            core::cmp::Ordering::Greater => {
                self.lo = Some(c.common);
                self.leftmost = false;
                Step::Right
            }
            core::cmp::Ordering::Equal => Step::Stop,
        };
        (step, c)
    }

    /// The prefix a match found by this descent has not compared.
    pub(crate) fn unchecked_prefix(&self) -> usize {
        self.start()
    }

    /// Adds this descent's costs to `stats`.
    pub(crate) fn finish(&self, stats: &mut Stats) {
        stats.lookups += 1;
        stats.compares += u64::from(self.depth - self.key_steps);
        stats.key_steps += u64::from(self.key_steps);
        stats.bytes += self.bytes;
        stats.max_depth = stats.max_depth.max(self.depth);
        stats.last_depth = self.depth;
        stats.last_bytes = self.bytes;
    }

    /// The tree's new floor after a page compared by this descent was linked at the place it
    /// reached (a new smallest or largest page lowers it). Trees ordered by checksum keep none.
    pub(crate) fn floor_after_insert(&self, tree_was_empty: bool) -> usize {
        if self.order == Order::Checksum {
            0
        } else if tree_was_empty {
            PAGE_SIZE
        } else if self.leftmost || self.rightmost {
            self.floor.min(self.last_common)
        } else {
            self.floor
        }
    }
}

/// Checks the prefix of a match that a descent skipped: whether `key` and `node` are equal in
/// their first `len` bytes. Counts what it reads.
pub(crate) fn verify_prefix(
    key: &PageBytes<'_>,
    node: &PageBytes<'_>,
    len: usize,
    stats: &mut Stats,
) -> bool {
    if len == 0 {
        return true;
    }
    // Compare the whole prefix: a difference anywhere in it, even one that orders the pages the
    // same way, means the pages differ.
    let mut at = 0;
    let mut read = 0;
    let mut equal = true;
    while at < len {
        let i = at / 8;
        read += 8;
        if key.word(i) != node.word(i) {
            equal = false;
            break;
        }
        at += 8;
    }
    stats.verify_bytes += read;
    equal
}
