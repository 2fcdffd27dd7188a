// SPDX-License-Identifier: GPL-2.0

//! `rksm_lookup`: lookups in an unstable tree of thousands of synthetic pages, in C KSM's order
//! (contents from byte 0 at every node, as `memcmp()`) and in rksm's (checksum first, then
//! contents skipping the prefix known equal), for KSM's best, worst and prefix contents.
//!
//! Both orders compare contents with the same routine (`PageBytes::compare_from`), so the ratio
//! is the order's alone. A page not found is not inserted: only the lookup is timed.
//!
//! Every answer is checked against what it must be (a copy of a page in the tree finds that
//! page, a page of new contents finds nothing), so the case fails when a lookup is wrong. It
//! also prints how long each order took per lookup and how many bytes it read: `make bench`
//! boots the native (User-Mode Linux) bench kernel with this suite and `rksm_lookup_large`
//! alone and reports the figures; at hardware memory speed and without page tables, they are
//! the algorithm's gain. The times are printed, never judged: a pass never depends on them. A
//! last case ([`primitives`]) times the per-page primitives themselves, rksm's against C KSM's.
//!
//! The tree of 4096 pages (16 MiB) fits in a large last-level cache, with its upper levels in
//! the faster ones: lookups in C's order, which read a page at every level, gain from that more
//! than rksm's, which read one. `rksm_lookup_large` (User-Mode Linux only) repeats the worst and
//! prefix cases with a tree of 32768 pages, beyond any cache, as a KSM workload's tree is.

use super::pages::{global_probe, items, shuffled, Pattern, TestPages};
use crate::backend::Contents;
use crate::compare::{Order, Stats};
use crate::unstable::{Lookup, UnstableTree};
use kernel::kunit_suite::{Check, TestResult};
use kernel::prelude::*;
use kernel::time::Ktime;
use kernel::{kunit_ensure, kunit_suite};

/// Pages in the tree: 16 MiB, about what a server processor's last-level cache holds.
const PAGES: usize = 4096;

/// Rounds of lookups timed per order (each round looks up every copy and every new page),
/// after one untimed round that checks every answer byte by byte.
const ROUNDS: usize = 2;

/// Which pages a timing looks up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    /// Copies of the tree's pages and pages of new contents.
    All,
    /// Copies only: lookups that find a page.
    Copies,
    /// New contents only: lookups that find none.
    New,
}

/// How an order fared: nanoseconds and bytes read per lookup.
struct Timing {
    ns: u64,
    bytes: u64,
}

/// Builds a tree of the first third of `p`'s pages (`n` pages) in `order`, then times lookups of
/// their copies (pages `n..2 * n`, each equal to page `i - n`) and of pages of new contents
/// (`2 * n..`), checking every answer.
fn time_order(
    p: &TestPages,
    pattern: Pattern,
    order: Order,
    which: Which,
) -> Result<Timing, &'static str> {
    let all = p.len();
    let n = all / 3;
    let its = items(all).map_err(|_| "no memory for the items")?;
    for (i, it) in its.iter().enumerate() {
        // The checksum the volatility gate records, computed before any lookup (both C KSM and
        // rksm checksum every page they scan; a lookup does not).
        let held = p.held(i);
        let bytes = held.bytes();
        it.set_checksum(bytes.checksum(), &bytes);
    }
    let mut tree = UnstableTree::new();
    let mut stats = Stats::default();
    // In rksm's order the tree is built twice, as two passes of ksmd would: the second one is
    // split into buckets by checksum, sized by the first (`UnstableTree::renew`).
    let builds = if order == Order::Checksum { 2 } else { 1 };
    for build in 0..builds {
        if build > 0 {
            tree.renew();
        }
        for i in shuffled(n, 0x7ee).map_err(|_| "no memory")? {
            let key = p.held(i);
            match tree.search_insert::<false>(
                p,
                its[i].as_ref(),
                &key,
                global_probe(order),
                &mut stats,
                || true,
            ) {
                Lookup::Inserted | Lookup::Found(_) => {}
                _ => return Err("building the tree: a lookup gave up"),
            }
        }
    }
    let order_of_lookups = shuffled(all - n, 0x100c).map_err(|_| "no memory")?;
    let mut stats = Stats::default();
    let mut looked = 0u64;
    let mut result = Ok(());
    let mut start = Ktime::ktime_get();
    // Round 0 checks each found page byte by byte against the one looked up, untimed; the timed
    // rounds after it check only that copies are found and new pages are not.
    'rounds: for round in 0..=ROUNDS {
        if round == 1 {
            stats = Stats::default();
            looked = 0;
            start = Ktime::ktime_get();
        }
        for &k in order_of_lookups.iter() {
            let i = n + k;
            if (which == Which::Copies && i >= 2 * n) || (which == Which::New && i < 2 * n) {
                continue;
            }
            let key = p.held(i);
            looked += 1;
            // With the best case's contents every page is equal; else only copies are.
            let equal_in_tree = i < 2 * n || pattern == Pattern::Best;
            // The lookup's answer borrows the tree: checked within this block.
            let ok = {
                let seen = tree.search_insert::<false>(
                    p,
                    its[i].as_ref(),
                    &key,
                    global_probe(order),
                    &mut stats,
                    || false,
                );
                match seen {
                    // A copy finds an equal page of the tree.
                    Lookup::Found(hit) => {
                        equal_in_tree && (round > 0 || p.naive_cmp(hit.page.index, i).is_eq())
                    }
                    // A new page finds none, and is not inserted: a lookup alone is timed.
                    Lookup::Declined => !equal_in_tree,
                    _ => false,
                }
            };
            if !ok {
                result = Err("a lookup found the wrong page, or none where one is equal");
                break 'rounds;
            }
        }
    }
    let ns = (Ktime::ktime_get() - start).to_ns() as u64;
    for it in its.iter() {
        tree.remove(it);
    }
    tree.reset();
    result?;
    Ok(Timing {
        ns: ns / looked.max(1),
        bytes: stats.bytes / looked.max(1),
    })
}

/// The whole case for one pattern and a tree of `n` pages: both orders, the same pages.
fn compare_orders(pattern: Pattern, name: &str, n: usize) -> TestResult {
    let mut p = TestPages::new(n, pattern).check()?;
    for i in 0..n {
        p.push(pattern, i, 0).check()?;
    }
    for i in 0..n {
        p.push(pattern, n + i, 0).check()?;
    }
    let c = time_order(&p, pattern, Order::Plain, Which::All);
    kunit_ensure!(c.is_ok(), "C's order: {}", c.as_ref().err().unwrap_or(&""));
    let r = time_order(&p, pattern, Order::Checksum, Which::All);
    kunit_ensure!(
        r.is_ok(),
        "rksm's order: {}",
        r.as_ref().err().unwrap_or(&"")
    );
    let (c, r) = (
        c.unwrap_or(Timing { ns: 0, bytes: 0 }),
        r.unwrap_or(Timing { ns: 0, bytes: 0 }),
    );
    pr_info!(
        "rksm_lookup: {} pages={} c_ns={} c_bytes={} rksm_ns={} rksm_bytes={}\n",
        name,
        n,
        c.ns,
        c.bytes,
        r.ns,
        r.bytes
    );
    // The same split into lookups that find a page and lookups that find none (the best case's
    // pages are all equal: it has no new pages).
    if pattern != Pattern::Best {
        let mut ns = [0u64; 4];
        for (k, (order, which)) in [
            (Order::Plain, Which::Copies),
            (Order::Plain, Which::New),
            (Order::Checksum, Which::Copies),
            (Order::Checksum, Which::New),
        ]
        .into_iter()
        .enumerate()
        {
            let t = time_order(&p, pattern, order, which);
            kunit_ensure!(t.is_ok(), "{}", t.as_ref().err().unwrap_or(&""));
            ns[k] = t.map(|t| t.ns).unwrap_or(0);
        }
        pr_info!(
            "rksm_lookup: {} split pages={} c_hit_ns={} c_miss_ns={} rksm_hit_ns={} rksm_miss_ns={}\n",
            name,
            n,
            ns[0],
            ns[1],
            ns[2],
            ns[3]
        );
    }
    Ok(())
}

fn best() -> TestResult {
    compare_orders(Pattern::Best, "best", PAGES)
}

fn worst() -> TestResult {
    compare_orders(Pattern::Worst, "worst", PAGES)
}

fn prefix() -> TestResult {
    compare_orders(Pattern::ZeroPrefix(0xbe9c), "prefix", PAGES)
}

/// Rounds of [`primitives`]'s timings; the fastest round of each counts.
const PRIMITIVE_ROUNDS: usize = 3;

/// The two per-page primitives that KSM spends its time in, natively, rksm's against C KSM's:
/// rksm's checksum (eight lanes without rotations, chosen where an emulator makes rotations
/// expensive) against C's xxhash64, and rksm's comparison (blocks of eight words, one test each)
/// against the kernel's `memcmp()`, both reading equal pages whole. Prints nanoseconds per
/// page. Checked: a page's copy has its checksum and its xxhash64, every copy compares equal by
/// both, and the two comparisons order every pair of neighbouring pages alike. 4096 pages are
/// 16 MiB (32 with their copies): more than most caches hold.
fn primitives() -> TestResult {
    let pattern = Pattern::ZeroPrefix(0x5eed);
    let mut p = TestPages::new(PAGES, pattern).check()?;
    for i in 0..PAGES {
        p.push(pattern, i, 0).check()?;
    }
    // Each page is mapped where it is used (`kmap_local_page()`, which nests), in every timing
    // alike.
    for i in 0..PAGES {
        let (ha, hb) = (p.held(i), p.held(PAGES + i));
        let (a, b) = (ha.bytes(), hb.bytes());
        kunit_ensure!(
            a.checksum() == b.checksum(),
            "page {}: copies' checksums differ",
            i
        );
        kunit_ensure!(
            a.xxhash64() == b.xxhash64(),
            "page {}: copies' xxhashes differ",
            i
        );
        kunit_ensure!(
            a.same_as(&b) && a.memcmp(&b).is_eq(),
            "page {}: copies differ",
            i
        );
        if i + 1 < PAGES {
            let hc = p.held(i + 1);
            let c = hc.bytes();
            kunit_ensure!(
                a.compare(&c).order == a.memcmp(&c),
                "pages {} and {}: compare and memcmp order them differently",
                i,
                i + 1
            );
        }
    }
    // Fastest of the rounds, per primitive: [checksum, xxhash64, compare, memcmp].
    let mut best = [u64::MAX; 4];
    let mut sink = 0u64;
    // Each timing follows an untimed pass of the same primitive over the same pages, so that
    // every primitive meets the caches as the one before left them for it (a checksum, reading
    // half the pages a comparison reads, would otherwise leave the next one a warmer cache).
    let pass = |k: usize| {
        let mut sum = 0u64;
        for i in 0..PAGES {
            let (ha, hb) = (p.held(i), p.held(PAGES + i));
            let (a, b) = (ha.bytes(), hb.bytes());
            sum = sum.wrapping_add(match k {
                0 => a.checksum().into(),
                1 => a.xxhash64(),
                2 => a.compare(&b).common as u64,
                _ => a.memcmp(&b) as i8 as u64,
            });
        }
        sum
    };
    for round in 0..PRIMITIVE_ROUNDS {
        for j in 0..best.len() {
            // The order rotates from round to round.
            let k = (j + round) % best.len();
            sink = sink.wrapping_add(pass(k));
            let start = Ktime::ktime_get();
            sink = sink.wrapping_add(pass(k));
            let ns = (Ktime::ktime_get() - start).to_ns() as u64 / PAGES as u64;
            best[k] = best[k].min(ns);
        }
    }
    core::hint::black_box(sink);
    pr_info!(
        "rksm_lookup: primitives pages={} checksum_ns={} xxhash64_ns={} compare_ns={} memcmp_ns={}\n",
        PAGES,
        best[0],
        best[1],
        best[2],
        best[3]
    );
    Ok(())
}

kunit_suite!("rksm_lookup", [best, worst, prefix, primitives]);

/// The worst and prefix cases again with a tree of 32768 pages (128 MiB), far beyond any cache,
/// as the unstable tree of the bench's ksmpages workloads is (65536 pages, two processes of 256
/// MiB). With the copies and the new pages it takes 384 MiB, so it is built for User-Mode Linux
/// only, the native kernels (`make kunit` boots them with 1 GiB, `make bench` with 2): under an
/// emulator, lookups in C's order in so large a tree would take minutes.
#[cfg(CONFIG_UML)]
mod large {
    use super::*;

    /// Pages in the large tree.
    const LARGE: usize = 32768;

    fn worst_large() -> TestResult {
        compare_orders(Pattern::Worst, "worst", LARGE)
    }

    fn prefix_large() -> TestResult {
        compare_orders(Pattern::ZeroPrefix(0xbe9c), "prefix", LARGE)
    }

    kunit_suite!("rksm_lookup_large", [worst_large, prefix_large]);
}
