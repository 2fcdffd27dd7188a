// SPDX-License-Identifier: GPL-2.0

//! rksm's KUnit suites. Built into the rksm crate (as its `kunit` module) when KUnit is enabled.

mod smoke;
