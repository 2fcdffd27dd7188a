// SPDX-License-Identifier: GPL-2.0

//! rksm: Kernel Samepage Merging written in Rust.
//!
//! The core is the paper's algorithm: a stable tree of merged pages and an unstable tree of
//! candidates, both indexed by page contents ([`stable`], [`unstable`], per NUMA node in
//! [`trees`]), searched with comparisons that skip a prefix already known to be equal
//! ([`compare`]). The trees reach pages through a [`backend::Backend`], so that KUnit drives them
//! with pages it fills and the kernel with the pages of processes ([`real`]). [`scan`] is the
//! scanner and `ksmd`, [`sysfs`] the files of `/sys/kernel/mm/ksm`, and [`abi`] the functions of
//! `<linux/ksm.h>` the rest of the kernel calls.

use kernel::c_str;
use kernel::prelude::*;

mod abi;
mod backend;
mod compare;
mod item;
mod real;
mod scan;
mod shards;
mod stable;
mod step;
mod sysfs;
mod trees;
mod tunables;
mod unstable;

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
