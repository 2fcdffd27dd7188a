// SPDX-License-Identifier: GPL-2.0

//! `rksm_step`: the per-page step `ksmd` runs (`Step::cmp_and_merge`), over trees split into four
//! shards, each under its lock, from one, two and four kernel threads at once (a `Crew`, as
//! `ksmd` and its helpers share their batches).
//!
//! Groups of equal pages, with `max_page_sharing` below the group size (so that they form
//! chains), and pages of their own, are visited in a shuffled order, pass after pass. Once the
//! passes settle, every outcome must be the naive reference's (a page with an equal page is
//! merged, a page without one stays in the unstable tree), every page must keep its contents,
//! and the trees must be whole: each node in the shard of its checksum, each mapping under the
//! node of the page it maps, no node over `max_page_sharing`, the counters those of the nodes.

use super::pages::{items, shuffled, Pattern, TestPages, TestToken};
use crate::backend::{Backend, Contents};
use crate::domain::Scope;
use crate::item::{Place, RmapItem};
use crate::shards::ShardSet;
use crate::stable::StableNode;
use crate::step::{shard_of, Step};
use crate::trees::Outcome;
use core::cmp::Ordering;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use kernel::global::Global;
use kernel::hlist::Token;
use kernel::kthread::{self, Crew};
use kernel::kunit_suite::{Check, TestResult};
use kernel::prelude::*;
use kernel::{c_str, kunit_ensure, kunit_ensure_eq, kunit_suite};

/// Shards of the trees.
const SHARDS: usize = 4;
/// Contents shared by several pages.
const GROUPS: usize = 40;
/// Pages in groups: `GROUPED / GROUPS` pages of each group's contents.
const GROUPED: usize = 320;
/// All pages: the ones past `GROUPED` have contents of their own.
const PAGES: usize = 400;
/// `max_page_sharing`: a group of 8 pages needs a chain of 3 dups.
const MAX_SHARING: usize = 3;
/// Passes: two before anything merges (the volatility gate), then until nothing changes.
const PASSES: usize = 8;
/// The most passes a case runs while its threads have not yet been seen in steps at once.
const MOST_PASSES: usize = 64;
/// The most threads a case runs.
const MAX_THREADS: usize = 4;

/// The crew the cases run the step with; its helpers are started and stopped by each case.
static CREW: Global<Crew> = Global::new();

/// Takes every item out of the trees, whatever a case's checks found, before they are dropped.
fn leave_trees(p: &TestPages, set: &ShardSet<TestPages>, its: &[Pin<KBox<RmapItem<TestPages>>>]) {
    let mut step = Step::new(p, set, 2000, Scope::Global);
    for it in its.iter() {
        step.remove_item(it);
    }
    for i in 0..SHARDS {
        set.lock(i).trees.reset_unstable();
    }
}

fn crew() -> Result<Pin<&'static Crew>> {
    if let Some(c) = CREW.get() {
        return Ok(c);
    }
    match CREW.set(KBox::pin_init(Crew::new(), GFP_KERNEL)?) {
        Ok(c) => Ok(c),
        Err(_) => CREW.get().ok_or(EBUSY),
    }
}

/// A helper thread of the crew.
fn helper() {
    if let Some(c) = CREW.get() {
        c.serve();
    }
}

/// Group pages, then pages of their own, all on NUMA node 0.
fn pages() -> Result<TestPages> {
    let mut p = TestPages::new(0, Pattern::Random(0x5eed))?;
    for i in 0..PAGES {
        let contents = if i < GROUPED { i % GROUPS } else { i };
        p.push(Pattern::Random(0x5eed), contents, 0)?;
    }
    Ok(p)
}

/// The naive reference: whether page `i` has an equal page among all the others.
fn has_twin(p: &TestPages, i: usize) -> bool {
    (0..PAGES).any(|j| j != i && p.naive_cmp(i, j) == Ordering::Equal)
}

/// What one pass saw, per thread and per outcome.
struct Tally {
    /// Threads that joined the pass.
    joined: AtomicUsize,
    /// Threads in a step now.
    running: AtomicUsize,
    /// The most threads seen in a step at once, over all passes.
    most: AtomicUsize,
    /// Pages each thread ran the step for.
    pages: [AtomicUsize; MAX_THREADS],
    /// The outcome of each page's step (`usize::MAX`: not visited).
    outcome: KVec<AtomicUsize>,
}

fn outcome_code(o: Outcome) -> usize {
    o as usize
}

/// What [`run`] saw: the last pass's outcomes, the passes run, the most threads seen in a step
/// at once, and per thread the pages it ran the step for over all passes.
struct Ran {
    last: KVec<Option<Outcome>>,
    passes: usize,
    most: usize,
    per_thread: [usize; MAX_THREADS],
}

/// Runs `passes` passes over every item with `threads` threads, and more (up to
/// [`MOST_PASSES`]) until two threads were seen in a step at once: the checks are worth
/// something only if the steps overlapped, and how a loaded machine schedules the threads is
/// not the test's to assume.
fn run(
    p: &TestPages,
    set: &ShardSet<TestPages>,
    its: &[Pin<KBox<RmapItem<TestPages>>>],
    threads: usize,
    passes: usize,
) -> Result<Ran> {
    let crew = crew()?;
    let mut helpers = KVec::new();
    for _ in 1..threads {
        helpers.push(kthread::run(helper, c_str!("rksm_step"))?, GFP_KERNEL)?;
    }
    let order = shuffled(PAGES, 0x0dd)?;
    let mut tally = Tally {
        joined: AtomicUsize::new(0),
        running: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
        pages: Default::default(),
        outcome: KVec::with_capacity(PAGES, GFP_KERNEL)?,
    };
    for _ in 0..PAGES {
        tally
            .outcome
            .push(AtomicUsize::new(usize::MAX), GFP_KERNEL)?;
    }
    let mut per_thread = [0; MAX_THREADS];
    let mut ran = 0;
    while ran < passes || (threads > 1 && tally.most.load(Relaxed) < 2 && ran < MOST_PASSES) {
        ran += 1;
        set.renew_for_pass(|sh| sh.trees.renew_unstable());
        tally.joined.store(0, Relaxed);
        tally
            .outcome
            .iter()
            .for_each(|o| o.store(usize::MAX, Relaxed));
        let next = AtomicUsize::new(0);
        let job = |t: usize| {
            tally.joined.fetch_add(1, Relaxed);
            // Every thread waits for the others (a few seconds at most), so that they run the
            // step at once rather than one after another.
            let until = kthread::jiffies() + kernel::time::msecs_to_jiffies(5000) as u64;
            while tally.joined.load(Relaxed) < threads && kthread::jiffies() < until {
                kthread::yield_now();
            }
            let mut step = Step::new(p, set, 2000, Scope::Global);
            loop {
                let k = next.fetch_add(1, Relaxed);
                if k >= PAGES {
                    break;
                }
                let i = order[k];
                if let Some(page) = p.item_page(its[i].mapping()) {
                    let now = tally.running.fetch_add(1, Relaxed) + 1;
                    tally.most.fetch_max(now, Relaxed);
                    let o = step.cmp_and_merge(its[i].as_ref(), &page);
                    tally.running.fetch_sub(1, Relaxed);
                    tally.outcome[i].store(outcome_code(o), Relaxed);
                }
                tally.pages[t.min(MAX_THREADS - 1)].fetch_add(1, Relaxed);
                kthread::cond_resched();
            }
        };
        crew.run(threads - 1, &job);
    }
    for h in helpers {
        h.stop();
    }
    for (t, n) in per_thread.iter_mut().enumerate() {
        *n = tally.pages[t].load(Relaxed);
    }
    let all = [
        Outcome::AlreadyMerged,
        Outcome::MergedStable,
        Outcome::MergedUnstable,
        Outcome::Zero,
        Outcome::Volatile,
        Outcome::Inserted,
        Outcome::Missed,
        Outcome::MergeFailed,
        Outcome::Busy,
        Outcome::Unmerged,
        Outcome::Unproven,
    ];
    let mut last = KVec::with_capacity(PAGES, GFP_KERNEL)?;
    for o in tally.outcome.iter() {
        let code = o.load(Relaxed);
        last.push(
            all.iter().copied().find(|a| outcome_code(*a) == code),
            GFP_KERNEL,
        )?;
    }
    Ok(Ran {
        last,
        passes: ran,
        most: tally.most.load(Relaxed),
        per_thread,
    })
}

/// Checks one node (a plain node or a dup) of shard `shard`: in its checksum's shard, no more
/// mappings than allowed, and each mapping it lists maps its page. Returns its mappings.
fn check_node(
    p: &TestPages,
    token: &TestToken,
    node: &StableNode<TestPages>,
    shard: usize,
) -> Result<usize, &'static str> {
    if node.shard() != shard || shard_of(node.checksum(), SHARDS) != shard {
        return Err("a node is outside its checksum's shard");
    }
    if node.len() > MAX_SHARING {
        return Err("a node has more mappings than max_page_sharing");
    }
    let kpage = *node.ksm_page().ok_or("a dup or node without a page")?;
    let held = p.held(kpage);
    if held.bytes().checksum() != node.checksum() {
        return Err("a node's checksum is not its page's");
    }
    for item in node.items(token) {
        if item.mapping().page() != kpage {
            return Err("a listed mapping maps another page than its node's");
        }
        if item.shard() != shard {
            return Err("a listed item records another shard");
        }
    }
    Ok(node.len())
}

/// The whole check of a case with `threads` threads.
fn merges_as_the_reference(threads: usize) -> TestResult {
    let p = pages().check()?;
    p.yield_in_steps(threads > 1);
    let set = ShardSet::new(SHARDS, 1, |i| TestToken::acquire_nth(i).ok_or(EBUSY)).check()?;
    for i in 0..SHARDS {
        set.lock(i).trees.max_page_sharing = MAX_SHARING;
    }
    let its = items(PAGES).check()?;
    let result = run(&p, &set, &its, threads, PASSES);
    // Whatever the checks find, every item leaves the trees before they are dropped.
    let checked = (|| -> TestResult {
        let Ran {
            last,
            passes,
            most,
            per_thread,
        } = result.check()?;
        pr_info!(
            "rksm_step: {} threads, {} passes, at most {} in a step at once, \
             steps per thread {:?}\n",
            threads,
            passes,
            most,
            &per_thread[..threads]
        );
        kunit_ensure!(
            threads == 1 || most >= 2,
            "{} passes and never two threads in a step at once",
            passes
        );
        // Outcomes and places against the naive reference.
        for i in 0..PAGES {
            let twin = has_twin(&p, i);
            let want = if twin {
                Outcome::AlreadyMerged
            } else {
                Outcome::Inserted
            };
            kunit_ensure!(
                last[i] == Some(want),
                "page {}: {:?} in the last pass, not {:?}",
                i,
                last[i],
                want
            );
            kunit_ensure!(
                p.naive_cmp(its[i].mapping().page(), i) == Ordering::Equal,
                "page {} maps other contents",
                i
            );
            let sh = set.lock(its[i].shard());
            match its[i].place(&sh.token) {
                Place::Stable(node) => {
                    kunit_ensure!(twin, "page {} merged without an equal page", i);
                    kunit_ensure!(its[i].is_under(node));
                }
                Place::Unstable { .. } => kunit_ensure!(!twin, "page {} unmerged", i),
                Place::Loose => kunit_ensure!(false, "page {} in no tree", i),
            }
        }
        // The trees of every shard, and their counters.
        let (mut shared, mut sharing, mut unshared) = (0, 0, 0);
        for s in 0..SHARDS {
            let sh = set.lock(s);
            let t = &sh.trees;
            let mut nodes = 0;
            let mut mapped = 0;
            for node in t.stable(0).iter() {
                let dups = node.dups(&sh.token);
                let each: &mut dyn Iterator<Item = &StableNode<TestPages>> = if node.is_chain() {
                    &mut dups.iter().map(|d| &**d)
                } else {
                    &mut core::iter::once(node)
                };
                for d in each {
                    let n = check_node(&p, &sh.token, d, s).check()?;
                    nodes += usize::from(n > 0);
                    mapped += n;
                }
            }
            let c = t.counters;
            kunit_ensure!(c.pages_shared == nodes as u64, "shard {} pages_shared", s);
            kunit_ensure!(
                c.pages_sharing == (mapped - nodes) as u64,
                "shard {} pages_sharing",
                s
            );
            for item in t.unstable(0).iter() {
                kunit_ensure!(item.shard() == s, "an unstable item of another shard");
            }
            shared += nodes;
            sharing += mapped - nodes;
            unshared += t.unshared();
        }
        kunit_ensure!(shared + sharing == GROUPED, "not every grouped page merged");
        kunit_ensure!(
            unshared == PAGES - GROUPED,
            "not every page of its own unshared"
        );
        // Each group of 8 needs 3 KSM pages at least; one thread packs them exactly so.
        let fewest = GROUPS * (GROUPED / GROUPS).div_ceil(MAX_SHARING);
        kunit_ensure!(
            shared >= fewest,
            "{} KSM pages for {} groups",
            shared,
            GROUPS
        );
        if threads == 1 {
            kunit_ensure_eq!(shared, fewest);
        }
        Ok(())
    })();
    leave_trees(&p, &set, &its);
    checked
}

fn one_thread() -> TestResult {
    merges_as_the_reference(1)
}

fn two_threads() -> TestResult {
    merges_as_the_reference(2)
}

fn four_threads() -> TestResult {
    merges_as_the_reference(4)
}

/// The start of a pass renews every shard that steps held, leaves the others alone once they
/// have nothing left to do, and renews a shard again once anything held it. The pages the first
/// pass deferred have their shards' trees split into buckets at the next pass start, before any
/// item went into a tree.
fn pass_start_skips_idle_shards() -> TestResult {
    let p = pages().check()?;
    let set = ShardSet::new(SHARDS, 1, |i| TestToken::acquire_nth(i).ok_or(EBUSY)).check()?;
    let its = items(PAGES).check()?;
    let renew = || set.renew_for_pass(|sh| sh.trees.renew_unstable());
    let checked = (|| -> TestResult {
        kunit_ensure_eq!(renew(), SHARDS);
        kunit_ensure_eq!(renew(), 0);
        // Two passes of steps: the second puts the pages of their own into the unstable trees.
        let mut step = Step::new(&p, &set, 2000, Scope::Global);
        let mut split_early = 0;
        for pass in 0..2 {
            renew();
            if pass == 1 {
                // Read from the hints, which take no lock (a lock would mark the shard held).
                split_early = (0..SHARDS)
                    .filter(|&s| set.hint(s).bucket::<TestPages>(0).is_some())
                    .count();
            }
            // Only the shards of the last pass's steps count.
            set.take_changed();
            for it in its.iter() {
                if let Some(page) = p.item_page(it.mapping()) {
                    step.cmp_and_merge(it.as_ref(), &page);
                }
            }
        }
        // Every shard the steps held is renewed, with what its unstable tree held (steps hold
        // shards through `Shards::with`, which must mark them; nothing else held them since).
        let stepped = set.take_changed();
        kunit_ensure!(stepped != 0, "the steps held no shard");
        kunit_ensure_eq!(split_early, SHARDS);
        let (mut renewed, mut held) = (0u64, 0);
        set.renew_for_pass(|sh| {
            renewed |= 1 << sh.token.id();
            held += usize::from(sh.trees.unstable(0).iter().next().is_some());
            sh.trees.renew_unstable();
        });
        kunit_ensure!(
            renewed & stepped == stepped,
            "shards {:#x} held by steps, {:#x} renewed",
            stepped,
            renewed
        );
        kunit_ensure!(held > 0, "no unstable tree held an item");
        for s in 0..SHARDS {
            kunit_ensure!(
                set.lock(s).trees.unstable(0).iter().next().is_none(),
                "shard {}'s unstable tree not emptied",
                s
            );
        }
        // Each renewed shard's hint names the buckets its tree has now, which the items held
        // last pass sized.
        let mut split = 0;
        for s in 0..SHARDS {
            let guard = set.lock(s);
            let tree = guard.trees.unstable(0);
            for sum in [0, 1, 0x9e37_79b9, u32::MAX] {
                kunit_ensure_eq!(set.hint(s).bucket::<TestPages>(sum), tree.bucket_addr(sum));
            }
            split += usize::from(tree.bucket_addr(0).is_some());
        }
        kunit_ensure!(split > 0, "no shard's unstable tree was split into buckets");
        // What the trees remember of the last passes fades, and then nothing is left to do.
        let mut passes = 0;
        while renew() != 0 {
            passes += 1;
            kunit_ensure!(passes < 1000, "a shard is never idle");
        }
        kunit_ensure_eq!(renew(), 0);
        drop(set.lock(1));
        kunit_ensure_eq!(renew(), 1);
        kunit_ensure_eq!(renew(), 0);
        Ok(())
    })();
    leave_trees(&p, &set, &its);
    checked
}

kunit_suite!(
    "rksm_step",
    [
        one_thread,
        two_threads,
        four_threads,
        pass_start_skips_idle_shards
    ]
);
