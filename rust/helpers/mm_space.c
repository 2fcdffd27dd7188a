// SPDX-License-Identifier: GPL-2.0

/*
 * Address spaces (struct mm_struct) and their areas (struct vm_area_struct): references, the
 * mmap lock, flags and counters, VMA lookup, the memory cgroup an address space is charged to,
 * and marking the current task as the OOM killer's first choice while it faults pages in for an
 * address space.
 */

#include <linux/cgroup.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/mm_inline.h>
#include <linux/oom.h>
#include <linux/pagemap.h>
#include <linux/sched/mm.h>

void rust_helper_mmgrab(struct mm_struct *mm)
{
	mmgrab(mm);
}

void rust_helper_mmdrop(struct mm_struct *mm)
{
	mmdrop(mm);
}

bool rust_helper_mmget_not_zero(struct mm_struct *mm)
{
	return mmget_not_zero(mm);
}

int rust_helper_mm_users(struct mm_struct *mm)
{
	return atomic_read(&mm->mm_users);
}

void rust_helper_mmap_read_lock(struct mm_struct *mm)
{
	mmap_read_lock(mm);
}

void rust_helper_mmap_read_unlock(struct mm_struct *mm)
{
	mmap_read_unlock(mm);
}

void rust_helper_mmap_write_lock(struct mm_struct *mm)
{
	mmap_write_lock(mm);
}

void rust_helper_mmap_write_unlock(struct mm_struct *mm)
{
	mmap_write_unlock(mm);
}

void rust_helper_mmap_assert_write_locked(struct mm_struct *mm)
{
	mmap_assert_write_locked(mm);
}

bool rust_helper_mm_tlb_flush_pending(struct mm_struct *mm)
{
	return mm_tlb_flush_pending(mm);
}

bool rust_helper_mm_test_flag(struct mm_struct *mm, int bit)
{
	return test_bit(bit, &mm->flags);
}

void rust_helper_mm_set_flag(struct mm_struct *mm, int bit)
{
	set_bit(bit, &mm->flags);
}

void rust_helper_mm_clear_flag(struct mm_struct *mm, int bit)
{
	clear_bit(bit, &mm->flags);
}

void rust_helper_dec_mm_counter(struct mm_struct *mm, int member)
{
	dec_mm_counter(mm, member);
}

struct vm_area_struct *rust_helper_vma_lookup(struct mm_struct *mm, unsigned long addr)
{
	return vma_lookup(mm, addr);
}

struct vm_area_struct *rust_helper_find_vma_from(struct mm_struct *mm, unsigned long addr)
{
	VMA_ITERATOR(vmi, mm, addr);

	return vma_next(&vmi);
}

void rust_helper_vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vm_flags_set(vma, flags);
}

void rust_helper_vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
	vm_flags_clear(vma, flags);
}

void rust_helper_vma_start_write(struct vm_area_struct *vma)
{
	vma_start_write(vma);
}

bool rust_helper_vma_is_dax(struct vm_area_struct *vma)
{
	return vma_is_dax(vma);
}

pgoff_t rust_helper_linear_page_index(struct vm_area_struct *vma, unsigned long address)
{
	return linear_page_index(vma, address);
}

void rust_helper_set_current_oom_origin(void)
{
	set_current_oom_origin();
}

void rust_helper_clear_current_oom_origin(void)
{
	clear_current_oom_origin();
}

bool rust_helper_mm_memcg_enabled(void)
{
	return IS_ENABLED(CONFIG_MEMCG) && !mem_cgroup_disabled();
}

/*
 * The id (cgroup_id()) of the memory cgroup that the address space is charged to: that of its
 * owner task (mm->owner); 0 without memory cgroups, or if the address space has no owner any more.
 */
u64 rust_helper_mm_memcg_cgroup_id(struct mm_struct *mm)
{
#ifdef CONFIG_MEMCG
	struct mem_cgroup *memcg;
	u64 id = 0;

	if (mem_cgroup_disabled())
		return 0;
	rcu_read_lock();
	memcg = mem_cgroup_from_task(rcu_dereference(mm->owner));
	if (memcg)
		id = cgroup_id(memcg->css.cgroup);
	rcu_read_unlock();
	return id;
#else
	return 0;
#endif
}
