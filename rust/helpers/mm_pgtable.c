// SPDX-License-Identifier: GPL-2.0

/*
 * Page tables: reading, building and setting PTEs, PMDs read locklessly, page table locks, walks
 * of the page tables that map a folio, and the MMU notifiers and cache flushes around a change.
 */

#include <linux/cacheflush.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/pagewalk.h>
#include <linux/pgtable.h>
#include <linux/rmap.h>

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

int rust_helper_pte_soft_dirty(pte_t pte)
{
	return pte_soft_dirty(pte);
}

pte_t rust_helper_pte_mksoft_dirty(pte_t pte)
{
	return pte_mksoft_dirty(pte);
}

int rust_helper_pte_uffd_wp(pte_t pte)
{
	return pte_uffd_wp(pte);
}

pte_t rust_helper_pte_mkuffd_wp(pte_t pte)
{
	return pte_mkuffd_wp(pte);
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

pte_t rust_helper_mk_pte(struct page *page, pgprot_t prot)
{
	return mk_pte(page, prot);
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

/* Whether `pmd` (read locklessly) is a present page table, not a huge page. */
bool rust_helper_pmd_maps_pte_table(pmd_t *pmd)
{
	pmd_t pmde = pmdp_get_lockless(pmd);

	return pmd_present(pmde) && !pmd_trans_huge(pmde);
}

/*
 * The first of the `nr` entries from `pte`, the entry of `addr` in a page table the caller has
 * mapped and locked, that maps an ordinary anonymous page (not device memory, not the zero page):
 * that page, with a reference taken on its folio, put in `*foliop`, and its entry's index in
 * `*idx`; NULL, with `*idx` set to `nr`, if none does. What KSM's scan takes of each entry (as
 * folio_walk_start() with no flags, then the checks of scan_get_next_rmap_item()), over a run of
 * entries in one call: Rust cannot inline the C functions it is made of, and a call per entry,
 * empty or not, would cost the scan more than the reading of the table.
 */
struct page *rust_helper_next_anon_page_get(struct vm_area_struct *vma, unsigned long addr,
					    pte_t *pte, unsigned int nr, unsigned int *idx,
					    struct folio **foliop)
{
	unsigned int i;

	for (i = 0; i < nr; i++, addr += PAGE_SIZE) {
		pte_t entry = ptep_get(pte + i);
		struct folio *folio;
		struct page *page;

		if (!pte_present(entry))
			continue;
		page = vm_normal_page(vma, addr, entry);
		if (!page)
			continue;
		folio = page_folio(page);
		if (folio_is_zone_device(folio) || !folio_test_anon(folio))
			continue;
		folio_get(folio);
		*foliop = folio;
		*idx = i;
		return page;
	}
	*idx = nr;
	return NULL;
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
