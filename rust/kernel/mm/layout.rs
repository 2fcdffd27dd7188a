// SPDX-License-Identifier: GPL-2.0

//! The C structures that the mm abstractions read, write or allocate directly, as bindgen lays
//! them out, next to the compiler's layout of them (from a C helper).
//!
//! bindgen does not always agree with the compiler: with clang 19 and this kernel's
//! configuration it places `task_struct::mm` 16 bytes before where C has it, which is why
//! `task_struct` is only ever read through helpers. Every field and size the abstractions rely on
//! is listed here, and the `rksm_layout` KUnit suite checks that both sides agree.

use crate::bindings;
use crate::str::CStr;
use core::mem::{offset_of, size_of};

macro_rules! layout {
    ($($name:literal => $value:expr,)*) => {
        /// Every (name, bindgen's offset or size) the abstractions rely on, in the order of the C
        /// helper's table (see [`c_layout`]).
        pub const RUST_LAYOUT: &[(&str, usize)] = &[$(($name, $value)),*];
    };
}

layout! {
    "sizeof(struct rb_node)" => size_of::<bindings::rb_node>(),
    "sizeof(struct rb_root)" => size_of::<bindings::rb_root>(),
    "sizeof(struct hlist_node)" => size_of::<bindings::hlist_node>(),
    "sizeof(struct list_head)" => size_of::<bindings::list_head>(),
    "folio.page" => offset_of!(bindings::folio, __bindgen_anon_1.page),
    "sizeof(struct folio_walk)" => size_of::<bindings::folio_walk>(),
    "folio_walk.page" => offset_of!(bindings::folio_walk, page),
    "folio_walk.pte" => offset_of!(bindings::folio_walk, __bindgen_anon_2.pte),
    "sizeof(struct page_vma_mapped_walk)" => size_of::<bindings::page_vma_mapped_walk>(),
    "page_vma_mapped_walk.pte" => offset_of!(bindings::page_vma_mapped_walk, pte),
    "sizeof(struct mmu_notifier_range)" => size_of::<bindings::mmu_notifier_range>(),
    "sizeof(struct wait_queue_head)" => size_of::<bindings::wait_queue_head>(),
    "sizeof(struct wait_queue_entry)" => size_of::<bindings::wait_queue_entry>(),
    "vm_area_struct.vm_start" =>
        offset_of!(bindings::vm_area_struct, __bindgen_anon_1.__bindgen_anon_1.vm_start),
    "vm_area_struct.vm_end" =>
        offset_of!(bindings::vm_area_struct, __bindgen_anon_1.__bindgen_anon_1.vm_end),
    "vm_area_struct.vm_mm" => offset_of!(bindings::vm_area_struct, vm_mm),
    "vm_area_struct.vm_page_prot" => offset_of!(bindings::vm_area_struct, vm_page_prot),
    "vm_area_struct.vm_flags" => offset_of!(bindings::vm_area_struct, __bindgen_anon_2.vm_flags),
    "vm_area_struct.anon_vma" => offset_of!(bindings::vm_area_struct, anon_vma),
    "anon_vma.root" => offset_of!(bindings::anon_vma, root),
    "anon_vma.rb_root" => offset_of!(bindings::anon_vma, rb_root),
    "anon_vma_chain.vma" => offset_of!(bindings::anon_vma_chain, vma),
    "rmap_walk_control.arg" => offset_of!(bindings::rmap_walk_control, arg),
    "rmap_walk_control.try_lock" => offset_of!(bindings::rmap_walk_control, try_lock),
    "rmap_walk_control.contended" => offset_of!(bindings::rmap_walk_control, contended),
    "rmap_walk_control.rmap_one" => offset_of!(bindings::rmap_walk_control, rmap_one),
    "rmap_walk_control.done" => offset_of!(bindings::rmap_walk_control, done),
    "rmap_walk_control.invalid_vma" => offset_of!(bindings::rmap_walk_control, invalid_vma),
    "sizeof(struct kobj_attribute)" => size_of::<bindings::kobj_attribute>(),
    "kobj_attribute.attr" => offset_of!(bindings::kobj_attribute, attr),
    "kobj_attribute.show" => offset_of!(bindings::kobj_attribute, show),
    "kobj_attribute.store" => offset_of!(bindings::kobj_attribute, store),
    "sizeof(struct attribute)" => size_of::<bindings::attribute>(),
    "sizeof(struct attribute_group)" => size_of::<bindings::attribute_group>(),
    "attribute_group.name" => offset_of!(bindings::attribute_group, name),
    "attribute_group.attrs" => offset_of!(bindings::attribute_group, attrs),
    "sizeof(struct kunit_case)" => size_of::<bindings::kunit_case>(),
    "kunit_case.run_case" => offset_of!(bindings::kunit_case, run_case),
    "kunit_case.name" => offset_of!(bindings::kunit_case, name),
    "sizeof(struct kunit_suite)" => size_of::<bindings::kunit_suite>(),
    "kunit_suite.name" => offset_of!(bindings::kunit_suite, name),
    "kunit_suite.test_cases" => offset_of!(bindings::kunit_suite, test_cases),
}

/// Entry `i` of the C helper's table: its name and the compiler's offset or size; `None` past
/// the end.
pub fn c_layout(i: usize) -> Option<(&'static CStr, usize)> {
    let mut value = 0;
    // SAFETY: The helper writes `value` and returns a static string, or null past the end.
    let name = unsafe { bindings::c_layout(i as _, &mut value) };
    if name.is_null() {
        return None;
    }
    // SAFETY: A non-null name is a static NUL-terminated string of the helper's table.
    Some((unsafe { CStr::from_char_ptr(name) }, value))
}
