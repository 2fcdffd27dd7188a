// SPDX-License-Identifier: GPL-2.0

//! The contents of a page: reading, comparing and hashing its bytes.
//!
//! C header: [`include/linux/highmem.h`](srctree/include/linux/highmem.h)
//!
//! [`PageBytes`] is a page's `PAGE_SIZE` bytes mapped into the kernel for reading. A user page
//! stays writable by its process until it is write-protected, so the bytes may change while they
//! are read: they are never exposed as a Rust slice, every read is a volatile load of an aligned
//! word, and a result describes the page as it was at some moment of the call (the same contract
//! as a C `memcmp()` of such pages).
//!
//! Comparisons are lexicographic, like `memcmp()`, and report where the pages first differ, so
//! that a caller that knows two pages share a prefix can start comparing after it
//! ([`PageBytes::compare_from`]).
//!
//! [`ReadOnlyMappedPage`] maps any page for reading. [`MappedPage`] maps a page for writing too,
//! and only a page that its mapper may write: never the zero page, which every process reads.

use crate::{bindings, page::Page, page::PAGE_SIZE};
use core::{cmp::Ordering, marker::PhantomData, ptr::NonNull};

const WORD: usize = core::mem::size_of::<u64>();
const WORDS: usize = PAGE_SIZE / WORD;
/// Words compared per test in [`PageBytes::compare_from`].
const BLOCK: usize = 8;
const _: () = assert!(BLOCK == 8 && WORDS % BLOCK == 0);

/// The outcome of comparing two pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comparison {
    /// How the first page orders against the second.
    pub order: Ordering,
    /// The length of their common prefix in bytes (`PAGE_SIZE` when they are equal).
    pub common: usize,
    /// How many bytes of each page the comparison needed: from where it started up to and
    /// including the first differing word (the loads themselves go in blocks of a few words).
    pub read: usize,
}

/// A page's bytes, mapped for reading for as long as `'a`.
///
/// # Invariants
///
/// `ptr` is the 8-byte aligned kernel address of `PAGE_SIZE` bytes that stay mapped and allocated
/// for `'a`. Other CPUs may write them concurrently.
pub struct PageBytes<'a> {
    ptr: NonNull<u64>,
    _p: PhantomData<&'a ()>,
}

// SAFETY: A `PageBytes` only reads memory that stays valid for `'a`, with volatile loads; which
// thread does so does not matter.
unsafe impl Send for PageBytes<'_> {}
// SAFETY: As above: shared use only reads.
unsafe impl Sync for PageBytes<'_> {}

impl<'a> PageBytes<'a> {
    /// Wraps the kernel address of a mapped page.
    ///
    /// # Safety
    ///
    /// `ptr` is the kernel address of a whole page (`PAGE_SIZE` bytes, page aligned) that stays
    /// mapped and allocated for `'a`.
    #[inline]
    pub unsafe fn from_raw(ptr: NonNull<u8>) -> Self {
        // INVARIANT: By the safety requirements; a page-aligned address is 8-byte aligned.
        Self {
            ptr: ptr.cast(),
            _p: PhantomData,
        }
    }

    /// The kernel address of the page.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr().cast()
    }

    /// The `i`-th 8-byte word of the page, in memory order (`i < PAGE_SIZE / 8`).
    #[inline(always)]
    pub fn word(&self, i: usize) -> u64 {
        assert!(i < WORDS);
        // SAFETY: By the type invariants the page is mapped for `'a` and 8-byte aligned, and
        // `i` is in it. A volatile load reads what is there even if another CPU writes it.
        unsafe { self.ptr.as_ptr().add(i).read_volatile() }
    }

    /// Copies the bytes at `offset` into `dst` (for tests and diagnostics).
    #[inline]
    pub fn read_into(&self, offset: usize, dst: &mut [u8]) {
        for (k, b) in dst.iter_mut().enumerate() {
            let at = offset + k;
            *b = self.word(at / WORD).to_ne_bytes()[at % WORD];
        }
    }

    /// Compares this page with `other`, lexicographically like `memcmp()`, reading from byte
    /// `from` on: the caller guarantees that the pages are equal before `from` (or accepts a
    /// result that treats them so).
    pub fn compare_from(&self, other: &PageBytes<'_>, from: usize) -> Comparison {
        let first = from.min(PAGE_SIZE) / WORD;
        let (a, b) = (self.ptr.as_ptr(), other.ptr.as_ptr());
        // SAFETY: Both pages are mapped and 8-byte aligned for `'a` (type invariants), and every
        // index below is under `WORDS`; volatile loads read what is there even if another CPU
        // writes it.
        let load = |p: *mut u64, i: usize| unsafe { p.add(i).read_volatile() };
        let mut i = first;
        // Blocks of eight words with one test each (as `memcmp()` does words rather than bytes),
        // then the word that differs. Written out rather than as an iterator: how well an
        // iterator here is optimised changed with unrelated changes elsewhere in the crate, and
        // this is the hottest loop of KSM. The test is of the block's differences
        // through `opaque`, or LLVM turns it back into a compare and a branch per word: a branch
        // costs more than the loads under emulation (every branch ends a TCG translation block),
        // and a well-predicted one costs nothing on hardware either way.
        while i + BLOCK <= WORDS {
            let x = |k: usize| load(a, i + k) ^ load(b, i + k);
            let diff = (x(0) | x(1)) | (x(2) | x(3)) | (x(4) | x(5)) | (x(6) | x(7));
            if opaque(diff) != 0 {
                break;
            }
            i += BLOCK;
        }
        while i < WORDS {
            let (x, y) = (load(a, i), load(b, i));
            if x != y {
                // The first differing byte is the lowest-addressed one; big-endian integers of
                // the words order as their bytes do.
                let at = i * WORD + first_diff_byte(x, y);
                let order =
                    u64::from_be_bytes(x.to_ne_bytes()).cmp(&u64::from_be_bytes(y.to_ne_bytes()));
                return Comparison {
                    order,
                    common: at,
                    read: (i + 1 - first) * WORD,
                };
            }
            i += 1;
        }
        Comparison {
            order: Ordering::Equal,
            common: PAGE_SIZE,
            read: (WORDS - first) * WORD,
        }
    }

    /// Compares the whole of this page with `other`.
    #[inline]
    pub fn compare(&self, other: &PageBytes<'_>) -> Comparison {
        self.compare_from(other, 0)
    }

    /// Whether the two pages hold the same bytes.
    #[inline]
    pub fn same_as(&self, other: &PageBytes<'_>) -> bool {
        self.compare(other).order == Ordering::Equal
    }

    /// Whether every byte of the page is zero.
    pub fn is_zero(&self) -> bool {
        let p = self.ptr.as_ptr();
        // SAFETY: As in `compare_from`: every index below is under `WORDS`, inside the page.
        let load = |i: usize| unsafe { p.add(i).read_volatile() };
        let mut i = 0;
        while i + BLOCK <= WORDS {
            let x = |k: usize| load(i + k);
            let bits = (x(0) | x(1)) | (x(2) | x(3)) | (x(4) | x(5)) | (x(6) | x(7));
            if opaque(bits) != 0 {
                return false;
            }
            i += BLOCK;
        }
        true
    }

    /// The checksum KSM keeps of a page to see whether it changes, and by which rksm's trees
    /// order pages first: 32 bits of a hash of the page's words.
    ///
    /// C KSM takes the low 32 bits of the page's xxhash64. This hash reads the page in eight
    /// lanes of every eighth word, each a chain of `h = swap_bytes((h ^ word) * P)` with `P`
    /// odd, and mixes the lanes at the end. Each step is a bijection of the lane's state, so two
    /// pages whose words differ in one place always leave different lane states. Pages that
    /// differ in several places leave equal ones by a 64-bit coincidence, but for changes of a
    /// special shape: a change of bit 63 alone stays bit 63 through the multiplication, and the
    /// byte swap makes it bit 7, so bit 63 of a word and bit 7 of the word 64 bytes after it,
    /// changed together, cancel. Every word's bit 63 changed (a page of doubles negated) does
    /// not cancel, which a step without the byte swap would: the KUnit case
    /// `checksum_sees_negated_doubles` checks it. The 32 bits kept collide on other pages as
    /// randomly as xxhash's.
    ///
    /// It takes three operations per word where xxhash takes four, one of them a rotation, which
    /// an emulator makes expensive (it must work out the flags). On hardware the time is the
    /// length of a lane's chain of dependent steps (a multiplication and a byte swap, about six
    /// cycles): eight lanes make the chains half as long as xxhash's four, for the same number
    /// of operations. A step of two words to one multiplication would do with fewer operations,
    /// but without a multiplication between them two words of a lane meet the state as one: a
    /// change of a bit in one and of the same bit in the other collide about half the time.
    ///
    /// Nothing depends on its quality for correctness: a change it misses lets a changing page
    /// into the unstable tree, and equal checksums are always followed by a comparison of the
    /// whole pages before anything merges.
    pub fn checksum(&self) -> u32 {
        let p = self.ptr.as_ptr();
        // SAFETY: As in `compare_from`: every index below is under `WORDS`, inside the page. A
        // concurrent write makes the result the checksum of some mix of old and new contents,
        // which is what a checksum of a changing page is allowed to be.
        let load = |i: usize| unsafe { p.add(i).read_volatile() };
        // Eight independent lanes, each a chain of `h = swap_bytes((h ^ word) * P)` over every
        // eighth word. The multiplication carries a change of a bit only to the bits above it;
        // reversing the bytes brings the high bits down before the next one. (A rotation would
        // too, but under emulation it costs as much as the rest of the step: it must work out
        // the flags, which a byte swap leaves alone.)
        let mut h = LANE_SEEDS;
        let mut i = 0;
        while i + LANES <= WORDS {
            h[0] = mix(h[0], load(i));
            h[1] = mix(h[1], load(i + 1));
            h[2] = mix(h[2], load(i + 2));
            h[3] = mix(h[3], load(i + 3));
            h[4] = mix(h[4], load(i + 4));
            h[5] = mix(h[5], load(i + 5));
            h[6] = mix(h[6], load(i + 6));
            h[7] = mix(h[7], load(i + 7));
            i += LANES;
        }
        finish(&h)
    }

    /// A hash of a sample of the page, for seeing cheaply whether it changed: [`SAMPLE_RUNS`]
    /// runs of eight words (64 bytes, a cache line on most machines), the page's first and last
    /// and the others spread evenly between, hashed as [`PageBytes::checksum`] hashes the whole
    /// page. It reads an eighth of a 4 KiB page, less of a larger one.
    ///
    /// A change outside the sample goes unseen; callers must not rely on it for anything but
    /// a guess. rksm's volatility gate uses it to skip the whole page's checksum on the visits
    /// where the sample did not change.
    pub fn sample(&self) -> u32 {
        let p = self.ptr.as_ptr();
        // SAFETY: As in `compare_from`: every index below is under `WORDS` (`run < RUNS`, so
        // `run * BLOCK + BLOCK <= WORDS`), inside the page. A concurrent write makes the result
        // the hash of some mix of old and new contents.
        let load = |i: usize| unsafe { p.add(i).read_volatile() };
        let mut h = LANE_SEEDS;
        for k in 0..SAMPLE_RUNS {
            let i = sample_run(k) * BLOCK;
            for (lane, h) in h.iter_mut().enumerate() {
                *h = mix(*h, load(i + lane));
            }
        }
        finish(&h)
    }

    /// Whether [`PageBytes::sample`] reads the byte at `offset` of a page.
    pub fn sampled(offset: usize) -> bool {
        let run = offset / (BLOCK * WORD);
        offset < PAGE_SIZE && (0..SAMPLE_RUNS).any(|k| sample_run(k) == run)
    }
}

impl PageBytes<'_> {
    /// C KSM's checksum of the page: its xxhash64 with seed 0 from the kernel's `xxh64()`, of
    /// which `calc_checksum()` keeps the low 32 bits. For measuring [`PageBytes::checksum`]
    /// against; a concurrent write makes it the hash of some mix of old and new contents.
    pub fn xxhash64(&self) -> u64 {
        // SAFETY: By the type invariants the page's `PAGE_SIZE` bytes are mapped for `'a`;
        // `xxh64()` only reads them.
        unsafe { bindings::xxh64(self.as_ptr().cast(), PAGE_SIZE, 0) }
    }

    /// The order of this page against `other` by the kernel's `memcmp()` of the whole pages, as
    /// C KSM's `memcmp_pages()` compares them. For measuring [`PageBytes::compare`] against; the
    /// same contract for pages that change meanwhile.
    pub fn memcmp(&self, other: &PageBytes<'_>) -> Ordering {
        // SAFETY: By the type invariants both pages' `PAGE_SIZE` bytes are mapped for as long as
        // `self` and `other` live; `memcmp()` only reads them.
        let r = unsafe { bindings::memcmp(self.as_ptr().cast(), other.as_ptr().cast(), PAGE_SIZE) };
        r.cmp(&0)
    }
}

/// The multiplier of [`PageBytes::checksum`]: odd (so multiplying by it is a bijection of 64-bit
/// words), with its bits spread over the word.
const P: u64 = 0x9e37_79b9_7f4a_7c15;

/// The starting values of [`PageBytes::checksum`]'s lanes: odd and distinct, so that no page
/// (the zero page in particular) has checksum 0 by construction.
const LANE_SEEDS: [u64; LANES] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6d,
    0xc0ac_29b7_c97c_50dd,
    0x3f84_d5b5_b547_0917,
];

/// The lanes of [`PageBytes::checksum`].
const LANES: usize = 8;

/// The runs of eight words a page holds.
const RUNS: usize = WORDS / BLOCK;

/// The runs of eight words that [`PageBytes::sample`] reads.
pub const SAMPLE_RUNS: usize = 8;
const _: () = assert!(SAMPLE_RUNS >= 2 && SAMPLE_RUNS <= RUNS && LANES == BLOCK);

/// One step of a lane of [`PageBytes::checksum`] and [`PageBytes::sample`]: a bijection of the
/// lane's state for each word.
#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    ((h ^ w).wrapping_mul(P)).swap_bytes()
}

/// The `k`-th run of eight words that [`PageBytes::sample`] reads (below `RUNS`).
#[inline(always)]
fn sample_run(k: usize) -> usize {
    k * (RUNS - 1) / (SAMPLE_RUNS - 1)
}

/// The hash of [`PageBytes::checksum`] and [`PageBytes::sample`] from their lanes: the lanes
/// mixed in turn, then a finaliser that spreads every bit over the 32 kept.
#[inline(always)]
fn finish(lanes: &[u64; LANES]) -> u32 {
    let mut h = lanes.iter().fold(0, |acc, &lane| mix(acc, lane));
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h as u32
}
const _: () = assert!(WORDS % LANES == 0);

/// `x`, through an empty assembly block that the optimiser cannot see into, so that a test of
/// an accumulated value stays one test (see [`PageBytes::compare_from`]).
#[inline(always)]
fn opaque(mut x: u64) -> u64 {
    // SAFETY: The assembly is empty: it reads and writes no memory and no register but the one
    // holding `x`, which it leaves as it is.
    unsafe {
        core::arch::asm!("/* {0} */", inout(reg) x, options(pure, nomem, nostack, preserves_flags))
    };
    x
}

/// The index (0..8) of the first byte, in memory order, at which two different words differ.
#[inline(always)]
fn first_diff_byte(a: u64, b: u64) -> usize {
    let x = a ^ b;
    if cfg!(target_endian = "little") {
        x.trailing_zeros() as usize / 8
    } else {
        x.leading_zeros() as usize / 8
    }
}

/// A page mapped for reading with `kmap_local_page()`, for as long as this guard lives.
///
/// Local mappings nest: guards must be dropped in the reverse order of their creation, which
/// Rust's scoping does for guards held in local variables.
///
/// The mapping gives no way to write the page: any page may be mapped so, including the zero
/// page, which every process reads for its untouched anonymous memory, and pages that others
/// share read-only (KSM pages, the page cache). A page that may be written is mapped as a
/// [`MappedPage`].
///
/// # Invariants
///
/// `addr` is the local mapping of a page that the guard's borrow keeps allocated.
pub struct ReadOnlyMappedPage<'a> {
    addr: NonNull<u8>,
    _p: PhantomData<&'a Page>,
}

impl<'a> ReadOnlyMappedPage<'a> {
    /// Maps `page` for reading.
    #[inline]
    pub fn new(page: &'a Page) -> Self {
        // SAFETY: `page.as_ptr()` is a valid page for as long as `page` is borrowed.
        unsafe { Self::from_raw(page.as_ptr()) }
    }

    /// Maps the page at `page` for reading.
    ///
    /// # Safety
    ///
    /// `page` is a valid page that stays allocated for `'a`.
    #[inline]
    pub unsafe fn from_raw(page: *mut bindings::page) -> Self {
        // SAFETY: By the safety requirements, `page` is valid.
        let addr = unsafe { bindings::kmap_local_page(page) };
        // INVARIANT: `kmap_local_page` returns the non-null address of the mapping.
        Self {
            addr: NonNull::new(addr.cast()).expect("kmap_local_page returned NULL"),
            _p: PhantomData,
        }
    }

    /// The page's bytes.
    #[inline]
    pub fn bytes(&self) -> PageBytes<'_> {
        // SAFETY: By the type invariant the page is mapped and allocated while `self` lives.
        unsafe { PageBytes::from_raw(self.addr) }
    }
}

impl Drop for ReadOnlyMappedPage<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `addr` is a live local mapping made by `kmap_local_page` in `from_raw`.
        unsafe { bindings::kunmap_local(self.addr.as_ptr().cast()) };
    }
}

/// A page mapped for reading and writing with `kmap_local_page()`, for as long as this guard
/// lives (and nesting as [`ReadOnlyMappedPage`] does).
///
/// Only a page that its mapper may write is mapped so: a [`Page`] it allocated, which is nobody
/// else's (and so never the zero page, a KSM page or any page of a process), or, through the
/// unsafe [`MappedPage::from_raw`], a page the caller vouches for. A page of a folio
/// ([`super::folio::FolioPage`]) is mapped only for reading.
///
/// # Invariants
///
/// `map` maps a page that the mapper may write: not the zero page, nor any other page whose
/// contents others rely on (see [`MappedPage::from_raw`]).
pub struct MappedPage<'a> {
    map: ReadOnlyMappedPage<'a>,
}

impl<'a> MappedPage<'a> {
    /// Maps `page`, which the caller allocated, for reading and writing.
    #[inline]
    pub fn new(page: &'a Page) -> Self {
        // SAFETY: `page.as_ptr()` is a valid page for as long as `page` is borrowed. A `Page`
        // owns its allocation (from `alloc_page()`): it is not the zero page, nor a page that
        // anyone but the `Page`'s owner, and those it lends it to, reads.
        unsafe { Self::from_raw(page.as_ptr()) }
    }

    /// Maps the page at `page` for reading and writing.
    ///
    /// # Safety
    ///
    /// `page` is a valid page that stays allocated for `'a`, and the caller may change its
    /// contents: it is not the zero page (C's `ZERO_PAGE()`, `is_zero_pfn()`), which every
    /// process reads for its untouched anonymous memory, nor any other page that others read and
    /// rely on not to change behind their back (a KSM page, a page-cache page, a page of a
    /// process that the caller has not been given to write).
    #[inline]
    pub unsafe fn from_raw(page: *mut bindings::page) -> Self {
        // INVARIANT: The page may be written, by the safety requirements.
        Self {
            // SAFETY: By the safety requirements, `page` is valid and stays allocated for `'a`.
            map: unsafe { ReadOnlyMappedPage::from_raw(page) },
        }
    }

    /// The page's bytes.
    #[inline]
    pub fn bytes(&self) -> PageBytes<'_> {
        self.map.bytes()
    }

    /// Writes `src` at byte `offset` of the page.
    ///
    /// The page is borrowed shared: writers and readers of pages that others may map race like C
    /// code on the same page would, which volatile accesses keep defined.
    #[inline]
    pub fn write(&self, offset: usize, src: &[u8]) {
        assert!(offset <= PAGE_SIZE && src.len() <= PAGE_SIZE - offset);
        let p = self.map.addr.as_ptr();
        for (k, b) in src.iter().enumerate() {
            // SAFETY: `offset + k < PAGE_SIZE`, inside the mapped page, which may be written
            // (type invariants).
            unsafe { p.add(offset + k).write_volatile(*b) };
        }
    }

    /// Fills the whole page with 8-byte words given by `word(i)`, `i` in `0..PAGE_SIZE / 8`.
    pub fn fill_words(&self, mut word: impl FnMut(usize) -> u64) {
        let p = self.map.addr.as_ptr().cast::<u64>();
        for i in 0..WORDS {
            // SAFETY: Word `i` lies inside the mapped, page-aligned page, which may be written
            // (type invariants).
            unsafe { p.add(i).write_volatile(word(i)) };
        }
    }
}
