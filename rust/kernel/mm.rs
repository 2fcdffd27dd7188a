// SPDX-License-Identifier: GPL-2.0

//! Memory management: what code that works on pages and address spaces needs.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h)

pub mod contents;
