// SPDX-License-Identifier: GPL-2.0

/*
 * Kernel threads: the freezer, rescheduling, the jiffies counter, and the CPU masks that a
 * thread's affinity is set from.
 */

#include <linux/cpumask.h>
#include <linux/freezer.h>
#include <linux/jiffies.h>
#include <linux/sched.h>
#include <linux/sched/isolation.h>

u64 rust_helper_get_jiffies_64(void)
{
	return get_jiffies_64();
}

#ifndef CONFIG_FREEZER
void rust_helper_set_freezable(void)
{
	set_freezable();
}
#endif

bool rust_helper_freezing(struct task_struct *p)
{
	return freezing(p);
}

void rust_helper_cond_resched(void)
{
	cond_resched();
}

bool rust_helper_cpu_online(unsigned int cpu)
{
	return cpu_online(cpu);
}

void rust_helper_cpumask_set_cpu(unsigned int cpu, struct cpumask *dstp)
{
	cpumask_set_cpu(cpu, dstp);
}

#ifndef CONFIG_CPU_ISOLATION
const struct cpumask *rust_helper_housekeeping_cpumask(enum hk_type type)
{
	return housekeeping_cpumask(type);
}
#endif

#ifndef CONFIG_SMP
int rust_helper_set_cpus_allowed_ptr(struct task_struct *p, const struct cpumask *new_mask)
{
	return set_cpus_allowed_ptr(p, new_mask);
}
#endif
