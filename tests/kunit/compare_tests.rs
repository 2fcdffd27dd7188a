// SPDX-License-Identifier: GPL-2.0

//! `rksm_compare`: page comparison, prefix skipping bounds and checksums, against byte-by-byte
//! references.

use super::pages::{Pattern, TestPages};
use crate::backend::Contents;
use crate::compare::{verify_prefix, Descent, Order, Stats};
use crate::domain::Tag;
use core::cmp::Ordering;
use kernel::kunit_suite::{Check, TestResult};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::search_tree::Step;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};

/// The common prefix of pages `a` and `b`, byte by byte.
fn naive_lcp(p: &TestPages, a: usize, b: usize) -> usize {
    let (ha, hb) = (p.held(a), p.held(b));
    let (ba, bb) = (ha.bytes(), hb.bytes());
    let (mut x, mut y) = ([0u8; 1], [0u8; 1]);
    for at in 0..PAGE_SIZE {
        ba.read_into(at, &mut x);
        bb.read_into(at, &mut y);
        if x != y {
            return at;
        }
    }
    PAGE_SIZE
}

/// Order and common prefix agree with `memcmp()` semantics on pages of every pattern.
fn compare_is_memcmp() -> TestResult {
    for pattern in [
        Pattern::Worst,
        Pattern::Random(7),
        Pattern::ZeroPrefix(9),
        Pattern::Ragged,
    ] {
        let p = TestPages::new(48, pattern).check()?;
        for a in 0..p.len() {
            let b = (a * 7 + 3) % p.len();
            let (ha, hb) = (p.held(a), p.held(b));
            let c = ha.bytes().compare(&hb.bytes());
            kunit_ensure_eq!(c.order, p.naive_cmp(a, b));
            kunit_ensure_eq!(c.common, naive_lcp(&p, a, b));
        }
    }
    Ok(())
}

/// Starting after a prefix known to be equal gives the same answer and reads less.
fn compare_from_skips_known_prefix() -> TestResult {
    let p = TestPages::new(64, Pattern::Worst).check()?;
    let (a, b) = (p.held(3), p.held(40));
    let full = a.bytes().compare(&b.bytes());
    let skipped = a.bytes().compare_from(&b.bytes(), PAGE_SIZE - 8);
    kunit_ensure_eq!(full.order, skipped.order);
    kunit_ensure_eq!(full.common, skipped.common);
    kunit_ensure_eq!(full.read, PAGE_SIZE);
    kunit_ensure_eq!(skipped.read, 8);
    kunit_ensure_eq!(full.order, Ordering::Less);
    Ok(())
}

/// Equal pages have equal checksums; one changed byte anywhere changes it.
fn checksum_follows_contents() -> TestResult {
    let p = TestPages::new(2, Pattern::Best).check()?;
    let c0 = p.held(0).bytes().checksum();
    kunit_ensure_eq!(c0, p.held(1).bytes().checksum());
    for at in [0, 1, 2047, PAGE_SIZE - 1] {
        p.write(1, at, &[0x11]);
        kunit_ensure!(
            p.held(1).bytes().checksum() != c0,
            "byte {} changed, checksum did not",
            at
        );
        p.write(1, at, &[0x5a]);
        kunit_ensure_eq!(p.held(1).bytes().checksum(), c0);
    }
    Ok(())
}

/// A zero page whose every word, in turn, has one bit set (bits 0, 31 and 63): every such change
/// changes the checksum, the high bit included, which sums of words weighted by their place would
/// lose; the changes' checksums collide no more than a random 32-bit function's would (for
/// `3 * PAGE_SIZE / 8` values, about `n * n / 2^33` pairs: 0.0003 with 4 KiB pages, 0.07 with
/// 64 KiB ones; more than two is a broken checksum, as a sum of words gives thousands); a zero
/// page's checksum is not 0 (0 marks an item with none recorded yet); two equal words trading
/// places change it.
fn checksum_sees_every_word() -> TestResult {
    let mut p = TestPages::new(0, Pattern::Worst).check()?;
    let z = p.push(Pattern::Ragged, 0, 0).check()?;
    p.write(z, 0, &[0; 8]);
    kunit_ensure!(p.held(z).bytes().is_zero());
    let zero = p.held(z).bytes().checksum();
    kunit_ensure!(zero != 0);
    let mut seen = KVec::with_capacity(3 * PAGE_SIZE / 8, GFP_KERNEL).check()?;
    for word in 0..PAGE_SIZE / 8 {
        for bit in [0u32, 31, 63] {
            p.write(z, word * 8, &(1u64 << bit).to_le_bytes());
            let c = p.held(z).bytes().checksum();
            kunit_ensure!(c != zero, "word {} bit {}: checksum unchanged", word, bit);
            seen.push(c, GFP_KERNEL).check()?;
            p.write(z, word * 8, &[0; 8]);
        }
    }
    kunit_ensure_eq!(p.held(z).bytes().checksum(), zero);
    seen.sort_unstable();
    let collisions = seen.windows(2).filter(|w| w[0] == w[1]).count();
    kunit_ensure!(
        collisions <= 2,
        "{} single-word changes collided",
        collisions
    );
    // The same value in words 3 and 12 (both of lane 3 and of lane 0), then in 4 and 11.
    let v = 0x8000_0000_0000_0001u64.to_le_bytes();
    p.write(z, 3 * 8, &v);
    p.write(z, 12 * 8, &v);
    let a = p.held(z).bytes().checksum();
    p.write(z, 3 * 8, &[0; 8]);
    p.write(z, 12 * 8, &[0; 8]);
    p.write(z, 4 * 8, &v);
    p.write(z, 11 * 8, &v);
    kunit_ensure!(p.held(z).bytes().checksum() != a);
    Ok(())
}

/// Changing bit 63 of every word of a random page (its doubles negated) changes its checksum,
/// and changing it back restores it: a step that carried a change of bit 63 no further than bit
/// 63 would see each lane's even number of changes cancel.
fn checksum_sees_negated_doubles() -> TestResult {
    let p = TestPages::new(1, Pattern::Random(3)).check()?;
    let before = p.held(0).bytes().checksum();
    let flip_sign_bits = || {
        let mut w = [0u8; 8];
        for at in (0..PAGE_SIZE).step_by(8) {
            p.held(0).bytes().read_into(at, &mut w);
            p.write(0, at, &(u64::from_ne_bytes(w) ^ 1 << 63).to_ne_bytes());
        }
    };
    flip_sign_bits();
    kunit_ensure!(
        p.held(0).bytes().checksum() != before,
        "every word's bit 63 changed, checksum did not"
    );
    flip_sign_bits();
    kunit_ensure_eq!(p.held(0).bytes().checksum(), before);
    Ok(())
}

/// `is_zero` sees a single set byte anywhere.
fn zero_page_detected() -> TestResult {
    let mut p = TestPages::new(0, Pattern::Worst).check()?;
    // Page `usize::MAX` of the worst pattern would carry 0 in its last word: make a zero page by
    // hand instead, from a ragged page whose only set byte we clear.
    let i = p.push(Pattern::Ragged, 0, 0).check()?;
    kunit_ensure!(!p.held(i).bytes().is_zero());
    p.write(i, 0, &[0; 8]);
    kunit_ensure!(p.held(i).bytes().is_zero());
    p.write(i, PAGE_SIZE - 1, &[1]);
    kunit_ensure!(!p.held(i).bytes().is_zero());
    Ok(())
}

/// A descent starts at 0, then at the smaller bound, and uses the tree's floor when one side has
/// no bound yet.
fn descent_start_follows_bounds() -> TestResult {
    let p = TestPages::new(8, Pattern::Worst).check()?;
    let key = p.held(4);
    let mut d = Descent::new(PAGE_SIZE - 8, Order::SkipPrefix);
    kunit_ensure_eq!(d.start(), 0);
    // Key (page 4) against page 6: the key is smaller, go left; one bound, floor applies.
    let (step, c) = d.compare(&key.bytes(), &p.held(6).bytes());
    kunit_ensure_eq!(step, Step::Left);
    kunit_ensure_eq!(c.common, PAGE_SIZE - 8);
    kunit_ensure_eq!(d.start(), PAGE_SIZE - 8);
    let (step, _) = d.compare(&key.bytes(), &p.held(1).bytes());
    kunit_ensure_eq!(step, Step::Right);
    kunit_ensure_eq!(d.start(), PAGE_SIZE - 8);
    let mut stats = Stats::default();
    d.finish(&mut stats);
    kunit_ensure_eq!(stats.compares, 2);
    kunit_ensure_eq!(stats.bytes, (PAGE_SIZE + 8) as u64);
    // Without skipping every comparison starts at 0.
    let mut naive = Descent::new(PAGE_SIZE - 8, Order::Plain);
    naive.compare(&key.bytes(), &p.held(6).bytes());
    kunit_ensure_eq!(naive.start(), 0);
    Ok(())
}

/// Ordered by checksum, a node of another checksum decides the step with no bound set and no
/// byte read; a node of the same checksum is compared, from byte 0 while only one side is
/// bounded (such trees keep no floor). The other orders never decide by checksum.
fn descent_by_checksum() -> TestResult {
    let p = TestPages::new(8, Pattern::Worst).check()?;
    let key = p.held(4);
    let mut d = Descent::new(PAGE_SIZE - 8, Order::Checksum);
    let (t, f) = (Descent::by_tag::<true>, Descent::by_tag::<false>);
    for by in [t, f] {
        kunit_ensure_eq!(by(&mut d, Tag::new(0, 5), Tag::new(0, 9)), Some(Step::Left));
        kunit_ensure_eq!(
            by(&mut d, Tag::new(0, 5), Tag::new(0, 1)),
            Some(Step::Right)
        );
        kunit_ensure_eq!(by(&mut d, Tag::new(0, 5), Tag::new(0, 5)), None);
    }
    // Then the domain: a node of the key's checksum but another domain is passed unread; the
    // checksum decides before the domain. Without domains (`merge_scope=global`, where every
    // node is of domain 0) the domain is not compared.
    kunit_ensure_eq!(t(&mut d, Tag::new(2, 5), Tag::new(1, 5)), Some(Step::Right));
    kunit_ensure_eq!(t(&mut d, Tag::new(1, 5), Tag::new(2, 5)), Some(Step::Left));
    kunit_ensure_eq!(t(&mut d, Tag::new(2, 5), Tag::new(1, 9)), Some(Step::Left));
    kunit_ensure_eq!(f(&mut d, Tag::new(2, 5), Tag::new(1, 5)), None);
    kunit_ensure_eq!(f(&mut d, Tag::new(2, 5), Tag::new(1, 9)), Some(Step::Left));
    kunit_ensure_eq!(d.start(), 0);
    let (step, _) = d.compare(&key.bytes(), &p.held(6).bytes());
    kunit_ensure_eq!(step, Step::Left);
    kunit_ensure_eq!(d.start(), 0);
    let (step, _) = d.compare(&key.bytes(), &p.held(1).bytes());
    kunit_ensure_eq!(step, Step::Right);
    kunit_ensure_eq!(d.start(), PAGE_SIZE - 8);
    let mut stats = Stats::default();
    d.finish(&mut stats);
    kunit_ensure_eq!((stats.compares, stats.key_steps), (2, 8));
    kunit_ensure_eq!(stats.bytes, (2 * PAGE_SIZE) as u64);
    kunit_ensure_eq!(d.floor_after_insert(false), 0);
    for order in [Order::Plain, Order::SkipPrefix] {
        kunit_ensure_eq!(
            Descent::new(0, order).by_tag::<true>(Tag::new(0, 5), Tag::new(0, 9)),
            None
        );
    }
    Ok(())
}

/// Checking a skipped prefix catches a difference anywhere in it, and counts what it reads.
fn verify_prefix_finds_differences() -> TestResult {
    let p = TestPages::new(2, Pattern::Best).check()?;
    let mut stats = Stats::default();
    kunit_ensure!(verify_prefix(
        &p.held(0).bytes(),
        &p.held(1).bytes(),
        128,
        &mut stats
    ));
    kunit_ensure_eq!(stats.verify_bytes, 128);
    p.write(1, 100, &[0]);
    kunit_ensure!(!verify_prefix(
        &p.held(0).bytes(),
        &p.held(1).bytes(),
        128,
        &mut stats
    ));
    kunit_ensure!(verify_prefix(
        &p.held(0).bytes(),
        &p.held(1).bytes(),
        96,
        &mut stats
    ));
    Ok(())
}

kunit_suite!(
    "rksm_compare",
    [
        compare_is_memcmp,
        compare_from_skips_known_prefix,
        checksum_follows_contents,
        checksum_sees_every_word,
        checksum_sees_negated_doubles,
        zero_page_detected,
        descent_start_follows_bounds,
        descent_by_checksum,
        verify_prefix_finds_differences,
    ]
);
