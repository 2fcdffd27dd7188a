// SPDX-License-Identifier: GPL-2.0

//! rksm: Kernel Samepage Merging written in Rust.

use kernel::prelude::*;

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
