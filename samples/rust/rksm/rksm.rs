// SPDX-License-Identifier: GPL-2.0

//! rksm: Kernel Samepage Merging written in Rust.
//!
//! Read it top-down, as the kernel runs it:
//!
//! 1. **`ksmd`** ([`scan`]): the address spaces registered with KSM are walked a batch of pages
//!    at a time by the `ksmd` thread and its helpers, and each page goes through
//! 2. **the step** ([`step`], C's `cmp_and_merge_page()`): leave the trees, pass the volatility
//!    gate, look for an equal page in the stable tree, then in the unstable tree; over the trees
//!    split into shards by checksum ([`shards`]), each under its lock.
//! 3. **The trees** ([`trees`]: one stable and one unstable tree per NUMA node): merged pages
//!    ([`stable`]) and candidates ([`unstable`]), indexed by contents, searched with comparisons
//!    that skip a prefix already known to be equal ([`compare`]), and split into merge domains
//!    when `merge_scope` asks ([`domain`]); the rmap_items that record each
//!    tracked page ([`item`]). They reach pages through a [`backend::Backend`], so that KUnit
//!    drives them with pages it fills and the kernel with the pages of processes ([`real`]).
//! 4. **The ABI**: the functions of `<linux/ksm.h>` the rest of the kernel calls ([`abi`]), the
//!    files of `/sys/kernel/mm/ksm` ([`sysfs`]) and the values behind them ([`tunables`]).
//!
//! The layers point one way, but for one circle: [`backend`], [`item`] and [`stable`] import
//! each other, because the backend trait takes items and nodes, and items and nodes are generic
//! over the backend (what a C header would declare as structs that point at each other).

use kernel::c_str;
use kernel::prelude::*;

// ksmd and the scanner.
mod scan;

// The per-page step and the shards it runs over.
mod shards;
mod step;

// The trees and what they index.
mod backend;
mod compare;
mod domain;
mod item;
mod real;
mod stable;
mod trees;
mod unstable;

// What the rest of the kernel and user space see.
mod abi;
mod sysfs;
mod tunables;

module! {
    type: RksmModule,
    name: "rksm",
    author: "rksm developers",
    description: "Kernel Samepage Merging in Rust",
    license: "GPL",
}

struct RksmModule;

impl kernel::Module for RksmModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        scan::init()?;
        kernel::sysfs::register_mm_group(c_str!("ksm"), &sysfs::ATTRS)?;
        scan::set_ready();
        Ok(RksmModule)
    }
}

#[cfg(CONFIG_KUNIT)]
mod kunit;
