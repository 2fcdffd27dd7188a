// SPDX-License-Identifier: GPL-2.0

//! The step of the algorithm for one page (C's `cmp_and_merge_page()`), the one `ksmd`, its
//! helpers and the KUnit suites all run.
//!
//! The trees are split into shards by page checksum (see [`Shards`]): equal pages have equal
//! checksums, so every merge the algorithm can make happens inside one shard. A page goes
//! through the shards in two holds: its item leaves the trees of the shard it was last put in;
//! then, its checksum known, the page is looked up and merged or inserted in the trees of its
//! checksum's shard. Most pages stay in their shard, and one hold does both. A merge into a KSM
//! page of the stable tree runs between two holds (see [`trees::join_merging`]), so that
//! threads merge pages into one KSM page at once. No thread ever holds two shards.
//!
//! With one shard the step is exactly the paper's: leave the trees, pass the volatility gate,
//! look in the stable tree, then in the unstable tree.

use crate::backend::{Backend, Contents};
use crate::domain::Scope;
use crate::item::{Glance, RmapItem};
use crate::trees::{self, Joined, Left, Looked, Outcome, Trees};
use core::pin::Pin;

/// How the step reaches the trees of a shard. `ksmd` holds each shard's lock for the time of
/// one call; a KUnit suite that runs the step on one thread may hand out one set of trees with
/// no lock at all.
pub(crate) trait Shards<B: Backend> {
    /// The number of shards (at least one). A page of checksum `c` belongs to shard
    /// `c % count()`.
    fn count(&self) -> usize;

    /// Runs `f` on the trees of shard `i` and that shard's token, with no other thread in them
    /// meanwhile.
    fn with<R>(&mut self, i: usize, f: impl FnOnce(&mut Trees<B>, &mut B::Token) -> R) -> R;

    /// Hints that shard `i`'s unstable tree is about to be looked up by `checksum`, without
    /// holding the shard (see [`crate::unstable::BucketHint`]); by default nothing.
    #[inline]
    fn prefetch_unstable(&self, _i: usize, _checksum: u32) {}

    /// Counts a page deferred at the volatility gate whose item goes to shard `i` next pass,
    /// so that its unstable trees are sized for it at the next pass start (see
    /// [`crate::unstable::UnstableTree::expect`]); by default nothing.
    #[inline]
    fn expect_unstable(&self, _i: usize) {}
}

/// The shard of a page of checksum `checksum`, of `count` shards.
#[inline]
pub(crate) fn shard_of(checksum: u32, count: usize) -> usize {
    checksum as usize % count
}

/// What the first hold of [`Step::cmp_and_merge`], in the item's shard, did.
enum First<'b, B: Backend> {
    /// The item left the trees, and this is what is left to do.
    Left(Left),
    /// The page was looked up too (its shard is the item's).
    Joined(Joined<'b, B>),
}

/// The per-page step over a backend and its shards.
pub(crate) struct Step<'b, B: Backend, S: Shards<B>> {
    /// The pages and their merges.
    pub(crate) backend: &'b B,
    /// The trees.
    pub(crate) shards: S,
    /// `stable_node_chains_prune_millisecs`, for the lookups of this step.
    pub(crate) chain_prune_ms: u32,
    /// The merge scope of the trees, which chooses the step's code (see
    /// [`Step::cmp_and_merge`]).
    pub(crate) scope: Scope,
    /// The number of the pass the step is made in, which spreads the volatility gate's rechecks
    /// of the whole pages over the passes (see [`RmapItem::glance`]).
    pub(crate) pass: u32,
}

impl<'b, B: Backend, S: Shards<B>> Step<'b, B, S> {
    /// A step over `backend` and `shards`, whose trees' merge scope is `scope`. (A step made for
    /// [`Scope::Global`] does nothing in trees split into domains: [`Outcome::Busy`].)
    pub(crate) fn new(backend: &'b B, shards: S, chain_prune_ms: u32, scope: Scope) -> Self {
        Self {
            backend,
            shards,
            chain_prune_ms,
            scope,
            pass: 0,
        }
    }

    /// The step, made in the `pass`-th pass.
    pub(crate) fn in_pass(mut self, pass: u32) -> Self {
        self.pass = pass;
        self
    }

    /// The shard of a page of checksum `checksum`.
    #[inline]
    pub(crate) fn shard_of(&self, checksum: u32) -> usize {
        shard_of(checksum, self.shards.count())
    }

    /// Runs `f` on the trees of shard `i`, set for this step's lookups.
    fn in_shard<R>(&mut self, i: usize, f: impl FnOnce(&mut Trees<B>, &mut B::Token) -> R) -> R {
        let prune_ms = self.chain_prune_ms;
        self.shards.with(i, |t, token| {
            t.chain_prune_ms = prune_ms;
            f(t, token)
        })
    }

    /// Notes that the page of the loose `item` was deferred at the volatility gate: next pass the
    /// item is most likely in the shard of the checksum just recorded (it is looked for there).
    /// If that checksum is of the page's contents now (its first visit, or a change the
    /// checksum found), the page goes into that shard's unstable tree next pass if it stays the
    /// same, and is counted for it; one whose sample changed has its checksum taken next time,
    /// and is deferred again.
    fn deferred(&self, item: &RmapItem<B>) {
        let i = self.shard_of(item.checksum());
        item.set_shard(i);
        if item.checksum_current() {
            self.shards.expect_unstable(i);
        }
    }

    /// Takes `item` out of the tree or stable node it is in (see [`Trees::remove_item`]).
    pub(crate) fn remove_item(&mut self, item: &RmapItem<B>) {
        let b = self.backend;
        self.in_shard(item.shard(), |t, token| t.remove_item(b, token, item));
    }

    /// Runs the tree algorithm for `page`, the page of `item` (C's `cmp_and_merge_page()`):
    ///
    /// 1. a page already merged with its item's node is left alone; a KSM page a fork shares is
    ///    listed under its node; a page merged in another merge domain than its own now is
    ///    unmerged (see [`crate::domain`]);
    /// 2. a page whose checksum changed since the last pass is deferred (the volatility gate),
    ///    and with `use_zero_pages` an all-zero page becomes the zero page;
    /// 3. an equal KSM page of the stable tree takes the page;
    /// 4. else an equal page of the unstable tree makes a new KSM page with it, or the page
    ///    joins the unstable tree.
    ///
    /// Where [`Trees::stable_first`] allows, step 3 goes before step 2, with the same result.
    /// Any thread may call it, for an item no other thread works on.
    ///
    /// The step is compiled twice: for [`Scope::Global`] without its domain code (one domain:
    /// no page's domain is computed or tested, and pages are ordered and matched by checksum
    /// and contents alone, as before merge domains existed), and for the scopes that split
    /// pages into domains. So `global`, the default, pays nothing for them.
    #[inline]
    pub(crate) fn cmp_and_merge(&mut self, item: Pin<&RmapItem<B>>, page: &B::Page<'_>) -> Outcome {
        if self.scope.is_scoped() {
            self.merge_in::<true>(item, page)
        } else {
            self.merge_in::<false>(item, page)
        }
    }

    /// [`Step::cmp_and_merge`], with pages split into domains (`SCOPED`) or not.
    fn merge_in<const SCOPED: bool>(
        &mut self,
        item: Pin<&RmapItem<B>>,
        page: &B::Page<'_>,
    ) -> Outcome {
        let b = self.backend;
        let from = item.shard();
        // A page that is not a KSM page is first looked up in the stable tree by the checksum its
        // item recorded, if that is the shard the item is in (most often: it went there by that
        // checksum) and the trees allow it (`Trees::stable_first`); it passes the volatility
        // gate only if that finds nothing. A KSM page most often is merged already and needs
        // no glance (C takes no checksum then).
        let ksm = b.is_ksm(page);
        let first_try = !ksm && self.shard_of(item.checksum()) == from;
        if first_try {
            // Its unstable lookup, if it comes to that, is by the recorded checksum: the bucket
            // comes into the caches while the page is read or the stable tree searched.
            self.shards.prefetch_unstable(from, item.checksum());
        }
        // What the gate needs of the page (its sample, and its checksum on the visits that need
        // it: see `RmapItem::glance`). A page whose stable lookup goes first needs it only if
        // neither tree merges it: it is read then (with the shard held, or after a merge that
        // failed), at most once (the paths below that read it exclude each other). The
        // sample's lines of a page out of the caches cost about as much as the whole page, and
        // a page that merges is read whole by the merge's comparison anyway. Any other page
        // needs it: it is read here, before the shard is held, so that other threads need not
        // wait for it.
        let pass = self.pass;
        let goes_first = first_try && trees::may_go_stable_first(b, &item);
        let early = (!(ksm || goes_first)).then(|| item.glance(&page.bytes(), pass));
        let glance = || match early {
            Some(glance) => glance,
            None if ksm => Glance::NONE,
            None => item.glance(&page.bytes(), pass),
        };
        let count = self.shards.count();
        // Whether the stable lookup went first (then a retry passes the volatility gate first).
        let mut went_first = false;
        // The page's merge domain, as it is now, under the trees' scope (every shard's).
        let (mut domain, mut scoped) = (0, false);
        let first = self.in_shard(from, |t, token| {
            // Without domains, the trees must have none (see `Trees`); with them, a step in
            // trees of `global` is merely slower.
            if !SCOPED && t.scope().is_scoped() {
                return First::Left(Left::Done(Outcome::Busy));
            }
            if SCOPED {
                domain = b.domain(item.mapping(), t.scope());
                scoped = t.scope().is_scoped();
            }
            match t.leave::<SCOPED>(b, token, item, page, domain) {
                Left::Loose if t.stable_first(goes_first) => {
                    went_first = true;
                    match t.look_stable::<SCOPED>(b, token, item, page, domain, true) {
                        // Nothing to merge into (its KSM page was locked, say): the gate still
                        // records a changed checksum, as C's would have first.
                        Looked::Joined(Joined::Done(outcome)) => First::Left(Left::Done(
                            trees::admit(b, &item, page, glance()).unwrap_or(outcome),
                        )),
                        Looked::Joined(joined) => First::Joined(joined),
                        // The unstable lookup too by the recorded checksum; it runs the gate (a
                        // `Volatile` outcome is seen to below).
                        Looked::Missed(missed) => First::Left(Left::Done(
                            t.join_unstable::<SCOPED>(b, token, item, page, missed, Some(&glance)),
                        )),
                    }
                }
                Left::Loose => match trees::admit(b, &item, page, glance()) {
                    Some(outcome) => First::Left(Left::Done(outcome)),
                    None if shard_of(item.checksum(), count) == from => {
                        First::Joined(t.join::<SCOPED>(b, token, item, page, domain, true))
                    }
                    None => First::Left(Left::Loose),
                },
                other => First::Left(other),
            }
        });
        let joined = match first {
            First::Joined(joined) => Some(joined),
            First::Left(Left::Loose) => None,
            First::Left(Left::Done(outcome)) => {
                if outcome == Outcome::Volatile {
                    self.deferred(&item);
                }
                return outcome;
            }
            First::Left(Left::Foreign) => {
                b.break_merge(&item);
                return Outcome::Unmerged;
            }
            First::Left(Left::Fork) => {
                // The shard of the KSM page's node (a node that went meanwhile is seen to), and
                // whether the page may not be listed there (a node of another domain, or one
                // whose domain no mapping vouches for: the page is unmerged).
                let (shard, foreign) = {
                    let locked = b.lock(page);
                    b.node_of(&locked)
                        .map_or((0, false), |n| (n.shard(), !n.admits_fork(domain, scoped)))
                };
                if foreign {
                    b.break_merge(&item);
                    return Outcome::Unmerged;
                }
                return self.in_shard(shard, |t, token| t.list_fork(b, token, item, page, domain));
            }
        };
        trees::join_merging(
            b,
            item,
            page,
            self,
            joined,
            |step, trust| {
                // After a KSM page found by the recorded checksum differed from the page (a
                // collision, or the page changed), the page passes the volatility gate first.
                if !trust && went_first {
                    if let Some(outcome) = trees::admit(b, &item, page, glance()) {
                        if outcome == Outcome::Volatile {
                            step.deferred(&item);
                        }
                        return Joined::Done(outcome);
                    }
                }
                let i = step.shard_of(item.checksum());
                step.in_shard(i, |t, token| {
                    t.join::<SCOPED>(b, token, item, page, domain, trust)
                })
            },
            // The shard the lookup that found the KSM page ran in.
            |step, kpage| {
                step.in_shard(item.shard(), |t, token| {
                    t.append_merged::<SCOPED>(b, token, item, kpage, domain)
                })
            },
        )
    }
}
