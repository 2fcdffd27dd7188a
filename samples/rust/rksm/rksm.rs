// SPDX-License-Identifier: GPL-2.0

//! rksm: Kernel Samepage Merging written in Rust.
//!
//! The core is the paper's algorithm: a stable tree of merged pages and an unstable tree of
//! candidates, both indexed by page contents ([`stable`], [`unstable`], per NUMA node in
//! [`trees`]), searched with comparisons that skip a prefix already known to be equal
//! ([`compare`]). The trees reach pages through a [`backend::Backend`], so that KUnit drives them
//! with pages it fills and the scanner with the pages of processes.

use kernel::prelude::*;

mod backend;
mod compare;
mod item;
mod stable;
mod trees;
mod unstable;

module! {
    type: Rksm,
    name: "rksm",
    author: "rksm developers",
    description: "Kernel Samepage Merging in Rust",
    license: "GPL",
}

struct Rksm;

impl kernel::Module for Rksm {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Rksm)
    }
}

#[cfg(CONFIG_KUNIT)]
mod kunit;
