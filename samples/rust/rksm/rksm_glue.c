// SPDX-License-Identifier: GPL-2.0
/*
 * rksm's C glue: what must be defined in C when rksm replaces mm/ksm.c. KSM's trace points
 * (trace/events/ksm.h, called through rust/helpers) and the count of zero pages KSM maps, which
 * the inline functions of <linux/ksm.h> update from page table code.
 */

#include <linux/atomic.h>
#include <linux/ksm.h>

#define CREATE_TRACE_POINTS
#include <trace/events/ksm.h>

atomic_long_t ksm_zero_pages = ATOMIC_LONG_INIT(0);
