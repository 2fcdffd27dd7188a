// SPDX-License-Identifier: GPL-2.0

//! rksm's KUnit suites. Built into the rksm crate (as its `kunit` module) when KUnit is enabled.
//!
//! `pages` is the synthetic backend the tree suites drive: kernel pages the tests fill, no
//! process and no address space.

mod compare_tests;
mod domain_tests;
mod knob_tests;
mod layout_tests;
mod lookup_bench;
mod merge_tests;
mod pages;
mod smart_tests;
mod smoke;
mod stable_tests;
mod step_tests;
mod unstable_tests;
