// SPDX-License-Identifier: GPL-2.0

/*
 * Folios and pages: conversions between pages, folios and frame numbers, references, the folio
 * lock, page flags, mapping counts, and allocating, charging and copying a page.
 */

#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/huge_mm.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/pagemap.h>

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

int rust_helper_pfn_to_nid(unsigned long pfn)
{
	return pfn_to_nid(pfn);
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
