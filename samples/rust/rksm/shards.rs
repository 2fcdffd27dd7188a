// SPDX-License-Identifier: GPL-2.0

//! Trees split into shards by page checksum, each shard under its own mutex: what `ksmd` and
//! its helpers run [`Step`](crate::step::Step) over, and what the KUnit suites run it over
//! from several threads at once.
//!
//! Each shard has its own stable and unstable trees (per NUMA node, see [`Trees`]) and its own
//! token, of the shard's number, for the lists of its stable nodes.

use crate::backend::Backend;
use crate::item::MAX_SHARDS;
use crate::step::Shards;
use crate::trees::Trees;
use crate::unstable::{BucketHint, MIN_SPLIT};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use kernel::hlist::Token;
use kernel::prelude::*;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::Mutex;

/// One shard: its trees, and the token of its stable nodes' lists.
pub(crate) struct Shard<B: Backend> {
    /// The token, whose id is the shard's number.
    pub(crate) token: B::Token,
    /// The trees.
    pub(crate) trees: Trees<B>,
}

/// The shards, each under its own lock.
///
/// # Invariants
///
/// `shards.len()` is between 1 and [`MAX_SHARDS`] (which an item can record) and at most 64
/// (one bit each in `changed` and `idle`), and shard `i`'s token has id `i`. Bit `i` of `idle`
/// becomes set only under shard `i`'s lock, with its trees [`Trees::pass_start_idle`], and
/// every lock of shard `i` but [`ShardSet::renew_for_pass`]'s clears it before the lock is
/// dropped: so a shard whose bit is set has not been held since it was idle.
pub(crate) struct ShardSet<B: Backend> {
    shards: KVec<Pin<KBox<Mutex<Shard<B>>>>>,
    /// Where each shard's first unstable tree had its buckets at its last renewal.
    hints: KVec<BucketHint>,
    /// How many pages this pass deferred at the volatility gate, by the shard their checksum
    /// takes them to next pass (see [`Shards::expect_unstable`]). A count, not a proof: two
    /// threads adding at once may lose one of the additions.
    coming: KVec<AtomicUsize>,
    /// The shards whose counters changed since [`ShardSet::take_changed`] last ran (bit `i`
    /// for shard `i`).
    changed: AtomicU64,
    /// The shards that had nothing to do at the start of a pass and were not held since (bit
    /// `i` for shard `i`): [`ShardSet::renew_for_pass`] leaves them alone.
    idle: AtomicU64,
}

impl<B: Backend> ShardSet<B> {
    /// `n` shards, for a machine of `nr_nodes` NUMA nodes; `token(i)` gives shard `i`'s token,
    /// which must have id `i` (`EINVAL` otherwise, and for `n` out of range).
    pub(crate) fn new(
        n: usize,
        nr_nodes: usize,
        mut token: impl FnMut(usize) -> Result<B::Token>,
    ) -> Result<Self> {
        if n == 0 || n > MAX_SHARDS || n > u64::BITS as usize {
            return Err(EINVAL);
        }
        let mut shards = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut hints = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut coming = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            let token = token(i)?;
            if token.id() != i {
                return Err(EINVAL);
            }
            let shard = Shard {
                token,
                trees: Trees::new(nr_nodes)?,
            };
            shards.push(
                KBox::pin_init(kernel::new_mutex!(shard, "ksm_shard"), GFP_KERNEL)?,
                GFP_KERNEL,
            )?;
            hints.push(BucketHint::new(), GFP_KERNEL)?;
            coming.push(AtomicUsize::new(0), GFP_KERNEL)?;
        }
        // INVARIANT: `n` is in range, and each token was checked.
        Ok(Self {
            shards,
            hints,
            coming,
            changed: AtomicU64::new(0),
            idle: AtomicU64::new(0),
        })
    }

    /// The number of shards.
    pub(crate) fn len(&self) -> usize {
        self.shards.len()
    }

    /// Locks shard `i`; the caller is to publish its counters (see [`ShardSet::take_changed`]
    /// for the shards a step changed).
    pub(crate) fn lock(&self, i: usize) -> Guard<'_, Shard<B>, MutexBackend> {
        let guard = self.shards[i].lock();
        self.not_idle(i);
        guard
    }

    /// Forgets that shard `i` was idle; with its lock held (see the type's invariants).
    fn not_idle(&self, i: usize) {
        let bit = 1u64 << i;
        // Most locks find the bit clear: a load does not take the cache line from the others.
        if self.idle.load(Relaxed) & bit != 0 {
            self.idle.fetch_and(!bit, Relaxed);
        }
    }

    /// Runs `f` on each shard that may have something to do at the start of a pass (C empties
    /// its unstable trees and walks `migrate_nodes` there), under its lock, and returns how many
    /// it ran on. A shard whose trees have nothing to do once `f` ran is left alone at the next
    /// pass starts, until something holds it: a pass over a few pages costs as little as C's,
    /// not a lock of every shard.
    ///
    /// `f` must leave the trees [`Trees::pass_start_idle`] if they were so (renewing a settled
    /// unstable tree and retrying no misplaced node change nothing), which is what makes
    /// skipping a shard the same as running `f` on it. A shard that enough pages deferred in
    /// the last pass are expected in to split its trees ([`Shards::expect_unstable`],
    /// [`MIN_SPLIT`]) is not skipped: its trees are told how many
    /// ([`Trees::expect_unstable`]) before `f` runs.
    pub(crate) fn renew_for_pass(&self, mut f: impl FnMut(&mut Shard<B>)) -> usize {
        let mut ran = 0;
        for (i, shard) in self.shards.iter().enumerate() {
            let bit = 1u64 << i;
            // Only a step makes a shard's trees non-idle (it puts items into an unstable tree,
            // or a node into `misplaced`); every other holder (unmerging, the knobs, memory
            // going offline) only takes things out. The caller runs this between batches, and
            // its steps, and those of the helpers, which it waits for at the end of each batch
            // (`Crew::run_beside`), cleared their bits before it: so a set bit read here is of
            // a shard that is idle still, and a bit cleared concurrently by another holder
            // only stands for removals, after which the shard is idle or renewed next pass.
            // Fewer items than split a tree change nothing in an idle shard's trees.
            let coming = self.coming[i].swap(0, Relaxed);
            if self.idle.load(Relaxed) & bit != 0 && coming < MIN_SPLIT {
                continue;
            }
            let mut guard = shard.lock();
            // Items expected make an idle shard's trees split, not idle: its bit is cleared,
            // as every other lock clears it, and set again below if they stay idle.
            self.not_idle(i);
            guard.trees.expect_unstable(coming);
            f(&mut guard);
            self.hints[i].record(guard.trees.unstable(0));
            ran += 1;
            if guard.trees.pass_start_idle() {
                // INVARIANT: under the lock, with the trees idle.
                self.idle.fetch_or(bit, Relaxed);
            }
        }
        ran
    }

    /// Where shard `i`'s first unstable tree had its buckets when the shard was last renewed.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn hint(&self, i: usize) -> &BucketHint {
        &self.hints[i]
    }

    /// The shards that steps held since the last call, as a bit mask (bit `i` for shard `i`),
    /// and forgets them.
    pub(crate) fn take_changed(&self) -> u64 {
        self.changed.swap(0, Relaxed)
    }
}

impl<B: Backend> Shards<B> for &ShardSet<B> {
    fn count(&self) -> usize {
        self.shards.len()
    }

    fn with<R>(&mut self, i: usize, f: impl FnOnce(&mut Trees<B>, &mut B::Token) -> R) -> R {
        let bit = 1u64 << i;
        if self.changed.load(Relaxed) & bit == 0 {
            self.changed.fetch_or(bit, Relaxed);
        }
        let mut guard = self.shards[i].lock();
        self.not_idle(i);
        let Shard { trees, token } = &mut *guard;
        f(trees, token)
    }

    #[inline]
    fn expect_unstable(&self, i: usize) {
        if let Some(n) = self.coming.get(i) {
            // A load and a store, not an atomic add: an estimate, which a lost addition does
            // not spoil, is not worth a locked instruction per page.
            n.store(n.load(Relaxed).saturating_add(1), Relaxed);
        }
    }

    #[inline]
    fn prefetch_unstable(&self, i: usize, checksum: u32) {
        if let Some(hint) = self.hints.get(i) {
            hint.prefetch::<B>(checksum);
        }
    }
}
