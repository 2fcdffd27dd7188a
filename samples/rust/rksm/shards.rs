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
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
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
/// (one bit each in `changed`), and shard `i`'s token has id `i`.
pub(crate) struct ShardSet<B: Backend> {
    shards: KVec<Pin<KBox<Mutex<Shard<B>>>>>,
    /// The shards whose counters changed since [`ShardSet::take_changed`] last ran (bit `i`
    /// for shard `i`).
    changed: AtomicU64,
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
        }
        // INVARIANT: `n` is in range, and each token was checked.
        Ok(Self {
            shards,
            changed: AtomicU64::new(0),
        })
    }

    /// The number of shards.
    pub(crate) fn len(&self) -> usize {
        self.shards.len()
    }

    /// Locks shard `i`; the caller is to publish its counters (see [`ShardSet::take_changed`]
    /// for the shards a step changed).
    pub(crate) fn lock(&self, i: usize) -> Guard<'_, Shard<B>, MutexBackend> {
        self.shards[i].lock()
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
        let Shard { trees, token } = &mut *guard;
        f(trees, token)
    }
}
