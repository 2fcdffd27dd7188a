// SPDX-License-Identifier: GPL-2.0

//! Red-black trees whose order the caller decides while walking.
//!
//! C header: [`include/linux/rbtree.h`](srctree/include/linux/rbtree.h)
//!
//! [`crate::rbtree::RBTree`] orders its nodes by a stored key of an [`Ord`] type. Some trees have
//! no such key: KSM's trees are ordered by the *contents* of pages, which the caller reads and
//! compares at each node while it descends, and which may even change under the tree (KSM's
//! unstable tree), so that only the caller can say where a walk goes. The trees of this module
//! take the direction from a closure at every node and leave the comparison to the caller.
//!
//! The trees are intrusive: an element embeds its [`TreeLinks`] (a C `struct rb_node`), so that
//! being in a tree costs no allocation. The same three words can instead put the element on an
//! [`crate::hlist::HList`], so that one field lets an element be in a tree, on a list, or in
//! neither (KSM's rmap_items move between its unstable tree and the lists of stable nodes).
//! Two flavours of tree share one implementation:
//!
//! - [`LinkTree`] links elements that are owned elsewhere (pinned, for example in a [`KBox`]);
//! - [`BoxTree`] owns its elements: they enter as `Pin<KBox<T>>` and leave as one.
//!
//! # Why this is sound without lifetimes
//!
//! A tree keeps raw pointers to its elements' links. Three rules keep them valid:
//!
//! - elements are pinned, so they do not move while linked;
//! - [`TreeLinks`] panics when it is dropped while linked, so a linked element is never freed (a
//!   kernel panic is a `BUG()`; it does not return, and a heap allocation whose drop did not
//!   return is never freed, so the memory stays valid). A stack frame is not kept so: the task
//!   that oopses exits and its stack goes. A [`BoxTree`] owns its elements in boxes; a
//!   [`LinkTree`] links only elements of [`HeapPinned`] types, whose implementer promises that
//!   they are never linked from a stack;
//! - the offset of the links inside an element is declared by [`TreeNode::LINKS_OFFSET`] and
//!   checked against the links' real address when the element is linked, so that converting a
//!   link back into its element is always right. Implementing [`TreeNode`] therefore needs no
//!   `unsafe`, and links may live inside an enum variant that only some states of the element have:
//!   the variant cannot change while linked, because that would drop linked links.
//!
//! Removing an element checks that it is linked in *this* tree by walking up to the root, which
//! costs the depth of the tree (the nodes just walked are usually still cached).
//!
//! # Where the code is
//!
//! This file holds what an element embeds and implements, which the lists of [`crate::hlist`]
//! share: [`TreeLinks`], [`TreeNode`] and [`HeapPinned`]. The trees are in three private
//! submodules, whose public items are re-exported here:
//!
//! - `raw`: the C `struct rb_root` both flavours share, and every operation that follows or
//!   rewrites its pointers, so that the unsafe code of the trees is in one place;
//! - `trees`: the two flavours, [`LinkTree`] and [`BoxTree`], their [`Iter`], and the sealed
//!   [`Tree`] trait that says how each takes elements in and gives them back;
//! - `walk`: what a walk asks at each node ([`Step`], [`Prune`], [`Visit`]) and where it ends
//!   ([`Walk`], [`Occupied`], [`Vacant`], [`PlaceMark`]), for either flavour.
//!
//! # Examples
//!
//! ```
//! use kernel::search_tree::{HeapPinned, LinkTree, Step, TreeLinks, TreeNode, Walk};
//! use kernel::prelude::*;
//! use core::cmp::Ordering;
//!
//! struct Item {
//!     links: TreeLinks,
//!     value: u32,
//! }
//!
//! impl TreeNode for Item {
//!     const LINKS_OFFSET: usize = core::mem::offset_of!(Item, links);
//!     fn tree_links(&self) -> Option<&TreeLinks> {
//!         Some(&self.links)
//!     }
//! }
//! // SAFETY: Items are linked only from the boxes below.
//! unsafe impl HeapPinned for Item {}
//!
//! let mut items = KVec::new();
//! for value in [3u32, 1, 2] {
//!     items.push(KBox::pin(Item { links: TreeLinks::new(), value }, GFP_KERNEL)?, GFP_KERNEL)?;
//! }
//! let mut tree = LinkTree::<Item>::new();
//! for item in &items {
//!     // The walk compares the new value with each node and stops at a free place.
//!     let key = item.value;
//!     match tree.walk_mut(|node| match key.cmp(&node.value) {
//!         Ordering::Less => Step::Left,
//!         Ordering::Greater => Step::Right,
//!         Ordering::Equal => Step::Stop,
//!     }) {
//!         Walk::Vacant(place) => {
//!             place.insert(item.as_ref())?;
//!         }
//!         Walk::Stopped(_) => return Err(EEXIST),
//!     }
//! }
//! let mut order = tree.iter().map(|item| item.value);
//! assert_eq!(
//!     (order.next(), order.next(), order.next(), order.next()),
//!     (Some(1), Some(2), Some(3), None)
//! );
//! tree.clear(|_| {});
//! # Ok::<(), Error>(())
//! ```
//!
//! [`KBox`]: crate::alloc::KBox

use crate::{bindings, types::Opaque};
use core::ptr;

mod raw;
mod trees;
mod walk;

#[doc(hidden)]
pub use raw::RawTree;
pub use trees::{BoxTree, Iter, LinkTree, Tree};
pub use walk::{Occupied, PlaceMark, Prune, Step, Vacant, Visit, Walk};

/// The links that put an element into a tree of this module, or on an [`crate::hlist::HList`].
///
/// Three words. In a tree they are a C `struct rb_node` (parent and colour, right, left); on a
/// list they are the next element's links, the address of the pointer that points at these links,
/// and the list's head with bit 0 set.
///
/// # Invariants
///
/// All three words are zero exactly when the links are in no tree and on no list. In a tree, the
/// first word is non-zero (the root is black, which sets bit 0; every other node has a parent) and
/// bit 0 of the third is clear (it is an aligned pointer or null); on a list, bit 0 of the third is
/// set. While linked, the links are written only by the tree or list they are in.
#[repr(transparent)]
pub struct TreeLinks {
    node: Opaque<bindings::rb_node>,
}

// SAFETY: The links are plain pointers. A tree writes them only through `&mut` of the tree, a list
// only with its token held exclusively; reads from other threads are volatile reads of words.
unsafe impl Send for TreeLinks {}
// SAFETY: As for `Send`: shared references only read the links.
unsafe impl Sync for TreeLinks {}

/// Where a [`TreeLinks`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linked {
    /// In no tree and on no list.
    Free,
    /// In a tree.
    InTree,
    /// On a list.
    OnList,
}

impl TreeLinks {
    /// Links that are in no tree and on no list.
    pub const fn new() -> Self {
        // INVARIANT: All-zero words mean free.
        Self {
            node: Opaque::new(bindings::rb_node {
                __rb_parent_color: 0,
                rb_right: ptr::null_mut(),
                rb_left: ptr::null_mut(),
            }),
        }
    }

    /// The `i`-th word of the links.
    #[inline]
    pub(crate) fn word(&self, i: usize) -> usize {
        debug_assert!(i < 3);
        // SAFETY: The links are three words, valid for reads while `self` is borrowed; a volatile
        // read of one aligned word does not tear.
        unsafe {
            crate::mm::opaque_ptr(&self.node)
                .cast::<usize>()
                .add(i)
                .read_volatile()
        }
    }

    /// Where the links are.
    #[inline]
    pub fn linked(&self) -> Linked {
        if self.word(2) & 1 != 0 {
            Linked::OnList
        } else if self.word(0) != 0 {
            Linked::InTree
        } else {
            Linked::Free
        }
    }

    /// Whether the links are in a tree or on a list.
    #[inline]
    pub fn is_linked(&self) -> bool {
        self.linked() != Linked::Free
    }

    #[inline]
    pub(crate) fn raw(&self) -> *mut bindings::rb_node {
        crate::mm::opaque_ptr(&self.node)
    }

    /// Marks links that nothing points to any more as free.
    ///
    /// # Safety
    ///
    /// `links` are valid links that no tree or list refers to.
    #[inline]
    pub(crate) unsafe fn clear_raw(links: *mut bindings::rb_node) {
        // INVARIANT: All-zero words mean free.
        // SAFETY: By the safety requirements, `links` are valid for writes and unreferenced.
        unsafe {
            (*links).__rb_parent_color = 0;
            (*links).rb_right = ptr::null_mut();
            (*links).rb_left = ptr::null_mut();
        }
    }
}

impl Default for TreeLinks {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TreeLinks {
    #[inline]
    fn drop(&mut self) {
        // A tree or list still points at these links: freeing them would leave it a dangling
        // pointer. Panicking (a `BUG()` in the kernel) never returns, so the memory is never
        // reused.
        if self.is_linked() {
            panic!("search_tree: links dropped while still in a tree or on a list");
        }
    }
}

/// An element of the trees of this module.
///
/// Nothing here is `unsafe` to implement: a tree checks, when it links an element, that the links
/// returned by [`TreeNode::tree_links`] lie at [`TreeNode::LINKS_OFFSET`] inside the element.
pub trait TreeNode: Sized {
    /// The offset in bytes of the element's [`TreeLinks`] from the start of the element, in the
    /// states in which it has links.
    const LINKS_OFFSET: usize;

    /// The element's links, or `None` in a state of the element that carries none.
    fn tree_links(&self) -> Option<&TreeLinks>;
}

/// A [`TreeNode`] type whose values are linked into a [`LinkTree`] or onto an
/// [`crate::hlist::HList`] only where they stay allocated if their drop panics.
///
/// A linked element's [`TreeLinks`] panic when dropped, and the kernel's panic is a `BUG()`
/// that never returns: an element in a heap allocation (a [`KBox`], an `Arc`) is then never
/// freed, and the tree's pointers to it stay valid. An element pinned on a stack is not kept so:
/// the task that oopses exits, and its stack is freed.
///
/// # Safety
///
/// A value of the type is never linked into a tree or onto a list while it lives on a stack (or
/// anywhere else that is freed without running its drop to completion).
///
/// [`KBox`]: crate::alloc::KBox
pub unsafe trait HeapPinned: TreeNode {}
