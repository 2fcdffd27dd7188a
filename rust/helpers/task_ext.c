// SPDX-License-Identifier: GPL-2.0

/*
 * Tasks: the fields that Rust reads through helpers, and the list of processes.
 */

#include <linux/sched.h>
#include <linux/sched/signal.h>

/*
 * bindgen lays out struct task_struct differently from the compiler (mm at 880 instead of 896
 * with clang 19 and this config), so Rust reads its fields here.
 */
struct mm_struct *rust_helper_task_mm(struct task_struct *t)
{
	return t->mm;
}

struct task_struct *rust_helper_next_task(struct task_struct *p)
{
	return next_task(p);
}
