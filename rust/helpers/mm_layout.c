// SPDX-License-Identifier: GPL-2.0

/*
 * The compiler's layout of what rust/kernel/mm reads, writes or allocates directly, in the order
 * of RUST_LAYOUT in rust/kernel/mm/layout.rs, which KUnit compares with bindgen's layout.
 */

#include <kunit/test.h>
#include <linux/array_size.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/mm_types.h>
#include <linux/mmu_notifier.h>
#include <linux/pagewalk.h>
#include <linux/rbtree.h>
#include <linux/rmap.h>
#include <linux/stddef.h>
#include <linux/sysfs.h>
#include <linux/wait.h>

#define LAYOUT_OFF(s, f) { #s "." #f, offsetof(struct s, f) }
#define LAYOUT_SIZE(s) { "sizeof(struct " #s ")", sizeof(struct s) }

/* Entry `i` of the table: its name, with its offset or size in `*value`; NULL past the end. */
const char *rust_helper_c_layout(unsigned int i, size_t *value)
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

#undef LAYOUT_OFF
#undef LAYOUT_SIZE
