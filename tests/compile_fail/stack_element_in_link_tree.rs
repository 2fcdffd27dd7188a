// SPDX-License-Identifier: GPL-2.0
// expect: E0277 HeapPinned
//! A tree of elements owned elsewhere takes only `HeapPinned` types: an element linked from a
//! stack would leave the tree pointing at a freed stack if its task oopses.

use kernel::search_tree::{LinkTree, TreeLinks, TreeNode};

/// An element type that does not promise to live on the heap.
pub struct Item {
    links: TreeLinks,
}

impl TreeNode for Item {
    const LINKS_OFFSET: usize = core::mem::offset_of!(Item, links);
    fn tree_links(&self) -> Option<&TreeLinks> {
        Some(&self.links)
    }
}

/// Makes a tree of them.
pub fn f() -> LinkTree<Item> {
    LinkTree::new()
}
