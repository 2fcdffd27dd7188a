// SPDX-License-Identifier: GPL-2.0

/*
 * KSM only: the KSM fields and counters of address spaces, KSM's zero pages, its trace points
 * (defined by whichever KSM is built), and the mm functions that only mm/ declares.
 */

#include <linux/ksm.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/swap.h>
#include <linux/swapops.h>
#include <linux/vmstat.h>
#include <trace/events/ksm.h>

/*
 * folio_anon_vma() (mm/util.c), and task_early_kill() and
 * add_to_kill_ksm() (mm/memory-failure.c) are declared only in mm/internal.h, for the rest of
 * mm/ such as KSM: no include/ header has them, so bindgen cannot see them.
 */
#include "../../mm/internal.h"

struct anon_vma *rust_helper_folio_anon_vma(struct folio *folio)
{
	return folio_anon_vma(folio);
}

#ifdef CONFIG_MEMORY_FAILURE
struct task_struct *rust_helper_task_early_kill(struct task_struct *tsk, int force_early)
{
	return task_early_kill(tsk, force_early);
}

void rust_helper_add_to_kill_ksm(struct task_struct *tsk, struct page *p,
				 struct vm_area_struct *vma, struct list_head *to_kill,
				 unsigned long addr)
{
	add_to_kill_ksm(tsk, p, vma, to_kill, addr);
}
#endif

unsigned long *rust_helper_mm_ksm_merging_pages(struct mm_struct *mm)
{
	return &mm->ksm_merging_pages;
}

unsigned long *rust_helper_mm_ksm_rmap_items(struct mm_struct *mm)
{
	return &mm->ksm_rmap_items;
}

long rust_helper_mm_ksm_zero_pages(struct mm_struct *mm)
{
	return mm_ksm_zero_pages(mm);
}

long rust_helper_ksm_zero_pages_read(void)
{
	return atomic_long_read(&ksm_zero_pages);
}

void rust_helper_ksm_map_zero_page(struct mm_struct *mm)
{
	ksm_map_zero_page(mm);
}

bool rust_helper_is_ksm_zero_pte(pte_t pte)
{
	return is_ksm_zero_pte(pte);
}

/*
 * The index of the first of the `nr` entries from `pte`, the entry of `addr` in a page table the
 * caller has mapped and locked, that maps a small KSM folio (or is a migration entry of one: it
 * stays a KSM folio) or a zero page that KSM mapped: what break_ksm() must break; `nr` if none
 * does. One call for a run of entries, as rust_helper_next_anon_page_get() for the scan.
 */
unsigned int rust_helper_next_ksm_pte(struct vm_area_struct *vma, unsigned long addr, pte_t *pte,
				      unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++, addr += PAGE_SIZE) {
		pte_t entry = ptep_get(pte + i);
		struct folio *folio = NULL;

		if (pte_present(entry)) {
			if (is_ksm_zero_pte(entry))
				return i;
			folio = vm_normal_folio(vma, addr, entry);
		} else if (!pte_none(entry)) {
			swp_entry_t swp = pte_to_swp_entry(entry);

			if (is_migration_entry(swp))
				folio = pfn_swap_entry_folio(swp);
		}
		if (folio && !folio_test_large(folio) && folio_test_ksm(folio))
			return i;
	}
	return nr;
}

pte_t rust_helper_ksm_zero_pte(unsigned long pfn, pgprot_t prot)
{
	/* The dirty bit marks a zero page mapped by KSM (see is_ksm_zero_pte()). */
	return pte_mkdirty(pte_mkspecial(pfn_pte(pfn, prot)));
}

void rust_helper_count_ksm_swpin_copy(void)
{
#ifdef CONFIG_SWAP
	count_vm_event(KSM_SWPIN_COPY);
#endif
}

void rust_helper_trace_ksm_start_scan(int seq, u32 rmap_entries)
{
	trace_ksm_start_scan(seq, rmap_entries);
}

void rust_helper_trace_ksm_stop_scan(int seq, u32 rmap_entries)
{
	trace_ksm_stop_scan(seq, rmap_entries);
}

void rust_helper_trace_ksm_enter(void *mm)
{
	trace_ksm_enter(mm);
}

void rust_helper_trace_ksm_exit(void *mm)
{
	trace_ksm_exit(mm);
}

void rust_helper_trace_ksm_merge_one_page(unsigned long pfn, void *rmap_item, void *mm, int err)
{
	trace_ksm_merge_one_page(pfn, rmap_item, mm, err);
}

void rust_helper_trace_ksm_merge_with_ksm_page(void *ksm_page, unsigned long pfn,
					       void *rmap_item, void *mm, int err)
{
	trace_ksm_merge_with_ksm_page(ksm_page, pfn, rmap_item, mm, err);
}

void rust_helper_trace_ksm_remove_ksm_page(unsigned long pfn)
{
	trace_ksm_remove_ksm_page(pfn);
}

void rust_helper_trace_ksm_remove_rmap_item(unsigned long pfn, void *rmap_item, void *mm)
{
	trace_ksm_remove_rmap_item(pfn, rmap_item, mm);
}

void rust_helper_trace_ksm_advisor(s64 scan_time, unsigned long pages_to_scan,
				   unsigned int cpu_percent)
{
	trace_ksm_advisor(scan_time, pages_to_scan, cpu_percent);
}
