// SPDX-License-Identifier: GPL-2.0

/*
 * Helpers for the memory-management abstractions of rust/kernel/mm: the inline functions and
 * macros that KSM's work on address spaces, page tables, folios and the reverse map uses, and
 * three functions that mm declares only in mm/internal.h.
 */

#include <kunit/test.h>
#include <linux/freezer.h>
#include <linux/huge_mm.h>
#include <linux/kobject.h>
#include <linux/ksm.h>
#include <linux/kthread.h>
#include <linux/sched/isolation.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/mm_inline.h>
#include <linux/mmu_notifier.h>
#include <linux/oom.h>
#include <linux/pagewalk.h>
#include <linux/rmap.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/swap.h>
#include <linux/wait.h>
#include <trace/events/ksm.h>
#include "../../mm/internal.h"

/* Address spaces. */

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

void rust_helper_dec_mm_counter(struct mm_struct *mm, int member)
{
	dec_mm_counter(mm, member);
}

/* VMAs. */

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

/* Folios and pages. */

struct folio *rust_helper_page_folio(struct page *page)
{
	return page_folio(page);
}

struct page *rust_helper_folio_page(struct folio *folio, unsigned long n)
{
	return folio_page(folio, n);
}

unsigned long rust_helper_page_to_pfn(struct page *page)
{
	return page_to_pfn(page);
}

unsigned long rust_helper_folio_pfn(struct folio *folio)
{
	return folio_pfn(folio);
}

struct folio *rust_helper_pfn_folio(unsigned long pfn)
{
	return pfn_folio(pfn);
}

struct page *rust_helper_pfn_to_page(unsigned long pfn)
{
	return pfn_to_page(pfn);
}

void *rust_helper_page_address(struct page *page)
{
	return page_address(page);
}

int rust_helper_pfn_to_nid_rust(unsigned long pfn)
{
	return page_to_nid(pfn_to_page(pfn));
}

int rust_helper_page_to_nid(struct page *page)
{
	return page_to_nid(page);
}

void rust_helper_folio_get(struct folio *folio)
{
	folio_get(folio);
}

void rust_helper_folio_put(struct folio *folio)
{
	folio_put(folio);
}

bool rust_helper_folio_try_get(struct folio *folio)
{
	return folio_try_get(folio);
}

void rust_helper_folio_lock(struct folio *folio)
{
	folio_lock(folio);
}

bool rust_helper_folio_trylock(struct folio *folio)
{
	return folio_trylock(folio);
}

bool rust_helper_folio_test_locked(struct folio *folio)
{
	return folio_test_locked(folio);
}

bool rust_helper_folio_test_anon(struct folio *folio)
{
	return folio_test_anon(folio);
}

bool rust_helper_folio_test_lru(struct folio *folio)
{
	return folio_test_lru(folio);
}

bool rust_helper_folio_test_ksm(struct folio *folio)
{
	return folio_test_ksm(folio);
}

bool rust_helper_folio_test_large(struct folio *folio)
{
	return folio_test_large(folio);
}

bool rust_helper_folio_test_swapcache(struct folio *folio)
{
	return folio_test_swapcache(folio);
}

bool rust_helper_folio_test_uptodate(struct folio *folio)
{
	return folio_test_uptodate(folio);
}

bool rust_helper_folio_is_zone_device(struct folio *folio)
{
	return folio_is_zone_device(folio);
}

bool rust_helper_folio_test_dirty(struct folio *folio)
{
	return folio_test_dirty(folio);
}

void rust_helper_folio_set_dirty(struct folio *folio)
{
	folio_set_dirty(folio);
}

int rust_helper_folio_mapcount(struct folio *folio)
{
	return folio_mapcount(folio);
}

bool rust_helper_folio_mapped(struct folio *folio)
{
	return folio_mapped(folio);
}

int rust_helper_folio_ref_count(struct folio *folio)
{
	return folio_ref_count(folio);
}

void *rust_helper_folio_mapping_raw(struct folio *folio)
{
	return READ_ONCE(folio->mapping);
}

void rust_helper_folio_set_mapping_raw(struct folio *folio, void *mapping)
{
	WRITE_ONCE(folio->mapping, mapping);
}

pgoff_t rust_helper_folio_index(struct folio *folio)
{
	return folio->index;
}

bool rust_helper_page_anon_exclusive(struct page *page)
{
	return PageAnonExclusive(page);
}

bool rust_helper_page_hwpoison(struct page *page)
{
	return PageHWPoison(page);
}

bool rust_helper_page_trans_compound(struct page *page)
{
	return PageTransCompound(page);
}

int rust_helper_split_huge_page(struct page *page)
{
	return split_huge_page(page);
}

struct page *rust_helper_zero_page(unsigned long addr)
{
	return ZERO_PAGE(addr);
}

bool rust_helper_is_zero_pfn(unsigned long pfn)
{
	return is_zero_pfn(pfn);
}

void rust_helper___folio_mark_uptodate(struct folio *folio)
{
	__folio_mark_uptodate(folio);
}

void rust_helper___folio_set_locked(struct folio *folio)
{
	__folio_set_locked(folio);
}

int rust_helper_mem_cgroup_charge(struct folio *folio, struct mm_struct *mm, gfp_t gfp)
{
	return mem_cgroup_charge(folio, mm, gfp);
}

int rust_helper_copy_mc_user_highpage(struct page *to, struct page *from,
				      unsigned long vaddr, struct vm_area_struct *vma)
{
	return copy_mc_user_highpage(to, from, vaddr, vma);
}

struct folio *rust_helper_vma_alloc_folio_movable(struct vm_area_struct *vma, unsigned long addr)
{
	return vma_alloc_folio(GFP_HIGHUSER_MOVABLE, 0, vma, addr, false);
}

void rust_helper_count_ksm_swpin_copy(void)
{
#ifdef CONFIG_SWAP
	count_vm_event(KSM_SWPIN_COPY);
#endif
}

/* Page tables. */

void rust_helper_folio_walk_end(struct folio_walk *fw, struct vm_area_struct *vma)
{
	folio_walk_end(fw, vma);
}

pte_t rust_helper_ptep_get(pte_t *ptep)
{
	return ptep_get(ptep);
}

bool rust_helper_pte_write(pte_t pte)
{
	return pte_write(pte);
}

bool rust_helper_pte_dirty(pte_t pte)
{
	return pte_dirty(pte);
}

bool rust_helper_pte_same(pte_t a, pte_t b)
{
	return pte_same(a, b);
}

pte_t rust_helper_pte_mkclean(pte_t pte)
{
	return pte_mkclean(pte);
}

pte_t rust_helper_pte_wrprotect(pte_t pte)
{
	return pte_wrprotect(pte);
}

unsigned long rust_helper_pte_pfn(pte_t pte)
{
	return pte_pfn(pte);
}

bool rust_helper_is_ksm_zero_pte(pte_t pte)
{
	return is_ksm_zero_pte(pte);
}

pte_t rust_helper_mk_pte(struct page *page, pgprot_t prot)
{
	return mk_pte(page, prot);
}

pte_t rust_helper_ksm_zero_pte(unsigned long pfn, pgprot_t prot)
{
	/* The dirty bit marks a zero page mapped by KSM (see is_ksm_zero_pte()). */
	return pte_mkdirty(pte_mkspecial(pfn_pte(pfn, prot)));
}

void rust_helper_set_pte_at(struct mm_struct *mm, unsigned long addr, pte_t *ptep, pte_t pte)
{
	set_pte_at(mm, addr, ptep, pte);
}

void rust_helper_flush_cache_page(struct vm_area_struct *vma, unsigned long addr,
				  unsigned long pfn)
{
	flush_cache_page(vma, addr, pfn);
}

pmd_t *rust_helper_mm_find_pmd(struct mm_struct *mm, unsigned long address)
{
	return mm_find_pmd(mm, address);
}

/* Whether `pmd` (read locklessly) is a present page table, not a huge page. */
bool rust_helper_pmd_maps_pte_table(pmd_t *pmd)
{
	pmd_t pmde = pmdp_get_lockless(pmd);

	return pmd_present(pmde) && !pmd_trans_huge(pmde);
}

/* Whether `pmd` (read locklessly) is empty. */
bool rust_helper_pmd_none_lockless(pmd_t *pmd)
{
	return pmd_none(pmdp_get_lockless(pmd));
}

/*
 * The page that `pte` maps at `addr` of `vma` if it is an ordinary anonymous page (not device
 * memory, not the zero page), with a reference taken on its folio, put in `*foliop`; NULL
 * otherwise. What KSM's scan takes of each entry (as folio_walk_start() with no flags, then the
 * checks of scan_get_next_rmap_item()), as one call: Rust cannot inline the C functions it is
 * made of, and it runs for every page scanned. The caller holds the page table lock.
 */
struct page *rust_helper_vm_normal_anon_page_get(struct vm_area_struct *vma, unsigned long addr,
						 pte_t pte, struct folio **foliop)
{
	struct folio *folio;
	struct page *page;

	if (!pte_present(pte))
		return NULL;
	page = vm_normal_page(vma, addr, pte);
	if (!page)
		return NULL;
	folio = page_folio(page);
	if (folio_is_zone_device(folio) || !folio_test_anon(folio))
		return NULL;
	folio_get(folio);
	*foliop = folio;
	return page;
}

pte_t *rust_helper_pte_offset_map_lock(struct mm_struct *mm, pmd_t *pmd, unsigned long addr,
				       spinlock_t **ptlp)
{
	return pte_offset_map_lock(mm, pmd, addr, ptlp);
}

void rust_helper_pte_unmap_unlock(pte_t *pte, spinlock_t *ptl)
{
	pte_unmap_unlock(pte, ptl);
}

void rust_helper_init_folio_vma_walk(struct page_vma_mapped_walk *pvmw, struct folio *folio,
				     struct vm_area_struct *vma, unsigned long address)
{
	DEFINE_FOLIO_VMA_WALK(walk, folio, vma, address, 0);

	*pvmw = walk;
}

void rust_helper_page_vma_mapped_walk_done(struct page_vma_mapped_walk *pvmw)
{
	page_vma_mapped_walk_done(pvmw);
}

void rust_helper_mmu_notifier_range_init_clear(struct mmu_notifier_range *range,
					       struct mm_struct *mm, unsigned long start,
					       unsigned long end)
{
	mmu_notifier_range_init(range, MMU_NOTIFY_CLEAR, 0, mm, start, end);
}

void rust_helper_mmu_notifier_invalidate_range_start(struct mmu_notifier_range *range)
{
	mmu_notifier_invalidate_range_start(range);
}

void rust_helper_mmu_notifier_invalidate_range_end(struct mmu_notifier_range *range)
{
	mmu_notifier_invalidate_range_end(range);
}

/* The reverse map. */

struct anon_vma *rust_helper_folio_anon_vma(struct folio *folio)
{
	return folio_anon_vma(folio);
}

bool rust_helper_folio_try_share_anon_rmap_pte(struct folio *folio, struct page *page)
{
	return folio_try_share_anon_rmap_pte(folio, page);
}

void rust_helper_folio_add_anon_rmap_pte(struct folio *folio, struct page *page,
					 struct vm_area_struct *vma, unsigned long address)
{
	folio_add_anon_rmap_pte(folio, page, vma, address, RMAP_NONE);
}

void rust_helper_folio_remove_rmap_pte(struct folio *folio, struct page *page,
				       struct vm_area_struct *vma)
{
	folio_remove_rmap_pte(folio, page, vma);
}

void rust_helper_get_anon_vma(struct anon_vma *anon_vma)
{
	get_anon_vma(anon_vma);
}

void rust_helper_put_anon_vma(struct anon_vma *anon_vma)
{
	put_anon_vma(anon_vma);
}

void rust_helper_anon_vma_lock_read(struct anon_vma *anon_vma)
{
	anon_vma_lock_read(anon_vma);
}

bool rust_helper_anon_vma_trylock_read(struct anon_vma *anon_vma)
{
	return anon_vma_trylock_read(anon_vma);
}

void rust_helper_anon_vma_unlock_read(struct anon_vma *anon_vma)
{
	anon_vma_unlock_read(anon_vma);
}

/*
 * bindgen lays out struct task_struct differently from the compiler (mm at 880 instead of 896
 * with clang 19 and this config), so Rust reads its fields here.
 */
struct mm_struct *rust_helper_task_mm(struct task_struct *t)
{
	return t->mm;
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

long rust_helper_ksm_zero_pages_read(void)
{
	return atomic_long_read(&ksm_zero_pages);
}

void rust_helper_ksm_map_zero_page(struct mm_struct *mm)
{
	ksm_map_zero_page(mm);
}

struct task_struct *rust_helper_next_process(struct task_struct *p)
{
	return next_task(p);
}

void rust_helper_rcu_read_lock(void)
{
	rcu_read_lock();
}

void rust_helper_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

/* Kernel threads and waiting. */

u64 rust_helper_get_jiffies_64(void)
{
	return get_jiffies_64();
}

/*
 * Lets task `t` run only on its share of the online CPUs, those whose position among them is
 * `i` modulo `n`; with `n` < 2, or an empty share, on every CPU kernel threads may use. One call
 * for what takes a cpumask and its iterators (macros and inline functions) in C.
 */
int rust_helper_set_cpu_share(struct task_struct *t, unsigned int i, unsigned int n)
{
	cpumask_var_t mask;
	unsigned int cpu, k = 0;
	int ret;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	if (n > 1) {
		for_each_online_cpu(cpu) {
			if (k++ % n == i)
				cpumask_set_cpu(cpu, mask);
		}
	}
	if (cpumask_empty(mask))
		cpumask_copy(mask, housekeeping_cpumask(HK_TYPE_KTHREAD));
	ret = set_cpus_allowed_ptr(t, mask);
	free_cpumask_var(mask);
	return ret;
}

void rust_helper_kthread_set_freezable(void)
{
	set_freezable();
}

bool rust_helper_kthread_freezing(void)
{
	return freezing(current);
}

void rust_helper_cond_resched(void)
{
	cond_resched();
}

bool rust_helper_signal_pending_current(void)
{
	return signal_pending(current);
}

/* KSM's trace points: defined by whichever KSM is built (mm/ksm.c or rksm). */

void rust_helper_trace_ksm_start_scan_rust(int seq, u32 rmap_entries)
{
	trace_ksm_start_scan(seq, rmap_entries);
}

void rust_helper_trace_ksm_stop_scan_rust(int seq, u32 rmap_entries)
{
	trace_ksm_stop_scan(seq, rmap_entries);
}

void rust_helper_trace_ksm_enter_rust(void *mm)
{
	trace_ksm_enter(mm);
}

void rust_helper_trace_ksm_exit_rust(void *mm)
{
	trace_ksm_exit(mm);
}

void rust_helper_trace_ksm_merge_one_page_rust(unsigned long pfn, void *rmap_item, void *mm,
					       int err)
{
	trace_ksm_merge_one_page(pfn, rmap_item, mm, err);
}

void rust_helper_trace_ksm_merge_with_ksm_page_rust(void *ksm_page, unsigned long pfn,
						    void *rmap_item, void *mm, int err)
{
	trace_ksm_merge_with_ksm_page(ksm_page, pfn, rmap_item, mm, err);
}

void rust_helper_trace_ksm_remove_ksm_page_rust(unsigned long pfn)
{
	trace_ksm_remove_ksm_page(pfn);
}

void rust_helper_trace_ksm_remove_rmap_item_rust(unsigned long pfn, void *rmap_item, void *mm)
{
	trace_ksm_remove_rmap_item(pfn, rmap_item, mm);
}

void rust_helper_trace_ksm_advisor_rust(s64 scan_time, unsigned long pages_to_scan,
					unsigned int cpu_percent)
{
	trace_ksm_advisor(scan_time, pages_to_scan, cpu_percent);
}

/*
 * The compiler's layout of what rust/kernel/mm reads, writes or allocates directly, in the order
 * of RUST_LAYOUT in rust/kernel/mm/layout.rs (checked by the rksm_layout KUnit suite).
 */
#define LAYOUT_OFF(s, f) { #s "." #f, offsetof(struct s, f) }
#define LAYOUT_SIZE(s) { "sizeof(struct " #s ")", sizeof(struct s) }

const char *rust_helper_rksm_c_layout(unsigned int i, size_t *value)
{
	static const struct {
		const char *name;
		size_t value;
	} table[] = {
		LAYOUT_SIZE(rb_node),
		LAYOUT_SIZE(rb_root),
		LAYOUT_SIZE(hlist_node),
		LAYOUT_SIZE(list_head),
		LAYOUT_OFF(folio, page),
		LAYOUT_SIZE(folio_walk),
		LAYOUT_OFF(folio_walk, page),
		LAYOUT_OFF(folio_walk, pte),
		LAYOUT_SIZE(page_vma_mapped_walk),
		LAYOUT_OFF(page_vma_mapped_walk, pte),
		LAYOUT_SIZE(mmu_notifier_range),
		LAYOUT_SIZE(wait_queue_head),
		LAYOUT_SIZE(wait_queue_entry),
		LAYOUT_OFF(vm_area_struct, vm_start),
		LAYOUT_OFF(vm_area_struct, vm_end),
		LAYOUT_OFF(vm_area_struct, vm_mm),
		LAYOUT_OFF(vm_area_struct, vm_page_prot),
		LAYOUT_OFF(vm_area_struct, vm_flags),
		LAYOUT_OFF(vm_area_struct, anon_vma),
		LAYOUT_OFF(anon_vma, root),
		LAYOUT_OFF(anon_vma, rb_root),
		LAYOUT_OFF(anon_vma_chain, vma),
		LAYOUT_OFF(rmap_walk_control, arg),
		LAYOUT_OFF(rmap_walk_control, try_lock),
		LAYOUT_OFF(rmap_walk_control, contended),
		LAYOUT_OFF(rmap_walk_control, rmap_one),
		LAYOUT_OFF(rmap_walk_control, done),
		LAYOUT_OFF(rmap_walk_control, invalid_vma),
		LAYOUT_SIZE(kobj_attribute),
		LAYOUT_OFF(kobj_attribute, attr),
		LAYOUT_OFF(kobj_attribute, show),
		LAYOUT_OFF(kobj_attribute, store),
		LAYOUT_SIZE(attribute),
		LAYOUT_SIZE(attribute_group),
		LAYOUT_OFF(attribute_group, name),
		LAYOUT_OFF(attribute_group, attrs),
		LAYOUT_SIZE(kunit_case),
		LAYOUT_OFF(kunit_case, run_case),
		LAYOUT_OFF(kunit_case, name),
		LAYOUT_SIZE(kunit_suite),
		LAYOUT_OFF(kunit_suite, name),
		LAYOUT_OFF(kunit_suite, test_cases),
	};

	if (i >= ARRAY_SIZE(table))
		return NULL;
	*value = table[i].value;
	return table[i].name;
}

void rust_helper_set_current_oom_origin(void)
{
	set_current_oom_origin();
}

void rust_helper_clear_current_oom_origin(void)
{
	clear_current_oom_origin();
}
