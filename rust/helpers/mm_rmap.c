// SPDX-License-Identifier: GPL-2.0

/*
 * The reverse map of anonymous memory: a folio's mappings as the rmap counts them, and the
 * anon_vma that a walk of those mappings references and locks.
 */

#include <linux/rmap.h>

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
