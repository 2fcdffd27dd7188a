// SPDX-License-Identifier: GPL-2.0

//! The tree structure both flavours share: a C `struct rb_root`, and every operation that follows
//! or rewrites its pointers (descending, linking, unlinking, replacing, clearing, iterating from
//! the first node), each with the contract that makes it sound.
//!
//! It is kept apart so that the unsafe code of the trees is in one place: the flavours (`trees`)
//! and the walks' entries (`walk`) reach the nodes only through these functions, `pub(super)` for
//! them. `RawTree` is public, but hidden, only because the sealed `Tree` trait returns it.

use super::{Linked, PlaceMark, Step, TreeLinks, TreeNode};
use crate::{bindings, prelude::*};
use core::{marker::PhantomData, ptr};

/// The tree structure shared by [`LinkTree`] and [`BoxTree`]; not usable outside this module.
///
/// # Invariants
///
/// Every `rb_node` reachable from `root` is the [`TreeLinks`] of a pinned, live `T`, found at
/// `T::LINKS_OFFSET` from the start of that `T`; `len` is the number of those nodes.
///
/// `changes` counts every change of the tree's shape (a node linked, unlinked or replaced); `id`
/// is 0 until a [`PlaceMark`] of the tree is made, and then an id no other tree ever has.
///
/// [`LinkTree`]: super::LinkTree
/// [`BoxTree`]: super::BoxTree
#[doc(hidden)]
pub struct RawTree<T: TreeNode> {
    root: bindings::rb_root,
    pub(super) len: usize,
    pub(super) id: u64,
    pub(super) changes: u64,
    _p: PhantomData<*const T>,
}

impl<T: TreeNode> RawTree<T> {
    pub(super) const fn new() -> Self {
        // INVARIANT: An empty tree reaches no node, and has no id yet.
        Self {
            root: bindings::rb_root {
                rb_node: ptr::null_mut(),
            },
            len: 0,
            id: 0,
            changes: 0,
            _p: PhantomData,
        }
    }

    /// Whether `mark` is a place of this tree, which has not changed since it was made: its
    /// parent is then still a node of this tree, and the child slot still free.
    #[inline]
    pub(super) fn holds(&self, mark: &PlaceMark) -> bool {
        self.id != 0 && mark.tree == self.id && mark.changes == self.changes
    }

    /// The element whose links are `node`.
    ///
    /// # Safety
    ///
    /// `node` is a node of this tree.
    #[inline]
    pub(super) unsafe fn elem<'a>(&'a self, node: *mut bindings::rb_node) -> &'a T {
        // SAFETY: By the type invariant, `node` is the links of a live, pinned `T` that begins
        // `LINKS_OFFSET` bytes before it, and stays linked (hence alive) while `self` is borrowed.
        unsafe { &*node.cast::<u8>().sub(T::LINKS_OFFSET).cast::<T>() }
    }

    /// The links of `elem`, checked to be where `T::LINKS_OFFSET` says and to be unlinked.
    pub(super) fn links_of_new(elem: &T) -> Result<*mut bindings::rb_node> {
        const {
            assert!(
                T::LINKS_OFFSET + core::mem::size_of::<TreeLinks>() <= core::mem::size_of::<T>()
            )
        };
        let links = elem.tree_links().ok_or(EINVAL)?;
        let offset = (links as *const TreeLinks as usize).wrapping_sub(elem as *const T as usize);
        if offset != T::LINKS_OFFSET {
            return Err(EINVAL);
        }
        if links.is_linked() {
            return Err(EBUSY);
        }
        Ok(links.raw())
    }

    /// The links of `elem` if it is linked in this tree.
    pub(super) fn links_in_tree(&self, elem: &T) -> Option<*mut bindings::rb_node> {
        let links = elem.tree_links()?;
        if links.linked() != Linked::InTree {
            return None;
        }
        let offset = (links as *const TreeLinks as usize).wrapping_sub(elem as *const T as usize);
        if offset != T::LINKS_OFFSET {
            return None;
        }
        // Walk up to the top node: it must be this tree's.
        let mut node = links.raw();
        loop {
            // SAFETY: `node` is a linked `rb_node` (its links are in some tree, and so are all its
            // ancestors); its parent word is valid to read.
            let parent = unsafe { ((*node).__rb_parent_color & !3) as *mut bindings::rb_node };
            if parent.is_null() {
                break;
            }
            node = parent;
        }
        (node == self.root.rb_node).then_some(links.raw())
    }

    /// Walks down from the root, asking `pass` first for the direction at each node, and `visit`
    /// where `pass` gives none.
    ///
    /// Returns the node it stopped at, or the free child slot it fell into with its parent.
    #[inline]
    pub(super) fn descend<'a>(
        &'a self,
        mut pass: impl FnMut(&'a T) -> Option<Step>,
        mut visit: impl FnMut(&'a T) -> Step,
    ) -> core::result::Result<*mut bindings::rb_node, (*mut bindings::rb_node, bool)> {
        let mut parent = ptr::null_mut();
        let mut left = false;
        let mut node = self.root.rb_node;
        while !node.is_null() {
            // SAFETY: `node` is reachable from the root, hence a node of this tree.
            let elem = unsafe { self.elem(node) };
            parent = node;
            let step = match pass(elem) {
                Some(step) => step,
                None => visit(elem),
            };
            node = match step {
                Step::Stop => return Ok(node),
                Step::Left => {
                    left = true;
                    // SAFETY: `node` is a valid node of this tree; its child pointers are valid
                    // to read.
                    unsafe { (*node).rb_left }
                }
                Step::Right => {
                    left = false;
                    // SAFETY: As above.
                    unsafe { (*node).rb_right }
                }
            };
        }
        Err((parent, left))
    }

    /// Links `links` as the `left` or right child of `parent` (the root if `parent` is null) and
    /// rebalances.
    ///
    /// # Safety
    ///
    /// `parent` is null and the tree empty, or `parent` is a node of this tree whose `left` (or
    /// right) child is null; `links` are unlinked links of a pinned `T` at `T::LINKS_OFFSET`,
    /// that stay alive while linked.
    pub(super) unsafe fn link(
        &mut self,
        links: *mut bindings::rb_node,
        parent: *mut bindings::rb_node,
        left: bool,
    ) {
        let slot = if parent.is_null() {
            ptr::addr_of_mut!(self.root.rb_node)
        } else if left {
            // SAFETY: `parent` is a valid node of this tree, by the safety requirements.
            unsafe { ptr::addr_of_mut!((*parent).rb_left) }
        } else {
            // SAFETY: As above.
            unsafe { ptr::addr_of_mut!((*parent).rb_right) }
        };
        // SAFETY: `slot` is the null child slot of `parent` (or the empty root), `links` are
        // unlinked; `rb_link_node` makes them a red leaf there, `rb_insert_color` rebalances the
        // tree whose root is `self.root`.
        unsafe {
            bindings::rb_link_node(links, parent, slot);
            bindings::rb_insert_color(links, &mut self.root);
        }
        // INVARIANT: The new node is the links of a pinned `T` at `LINKS_OFFSET`.
        self.len += 1;
        self.changes += 1;
    }

    /// Unlinks `links`, a node of this tree.
    ///
    /// # Safety
    ///
    /// `links` is a node of this tree.
    #[inline]
    pub(super) unsafe fn unlink(&mut self, links: *mut bindings::rb_node) {
        // SAFETY: `links` is a node of the tree rooted at `self.root`.
        unsafe { bindings::rb_erase(links, &mut self.root) };
        // SAFETY: `links` points to valid links that no tree refers to any more.
        unsafe { TreeLinks::clear_raw(links) };
        self.len -= 1;
        self.changes += 1;
    }

    /// Puts `new` in the place of `old` in this tree; `old` ends unlinked.
    ///
    /// # Safety
    ///
    /// `old` is a node of this tree; `new` are unlinked links of a pinned `T` at
    /// `T::LINKS_OFFSET` that stay alive while linked.
    #[inline]
    pub(super) unsafe fn replace(
        &mut self,
        old: *mut bindings::rb_node,
        new: *mut bindings::rb_node,
    ) {
        // SAFETY: `old` is in the tree rooted at `self.root`, `new` is unlinked: `rb_replace_node`
        // copies `old`'s parent, colour and children into `new` and repoints them at `new`.
        unsafe { bindings::rb_replace_node(old, new, &mut self.root) };
        // SAFETY: `old` are valid links that no tree refers to any more.
        unsafe { TreeLinks::clear_raw(old) };
        self.changes += 1;
    }

    /// Unlinks every node, calling `each` for each element before it is unlinked (in postorder,
    /// so that no node is visited after its children are gone).
    ///
    pub(super) fn unlink_all(&mut self, mut each: impl FnMut(*mut bindings::rb_node)) {
        // SAFETY: `self.root` is a valid root.
        let mut node = unsafe { bindings::rb_first_postorder(&self.root) };
        while !node.is_null() {
            // SAFETY: `node` is a node of this tree; its postorder successor does not depend on
            // the links of nodes already visited, which are children of later nodes.
            let next = unsafe { bindings::rb_next_postorder(node) };
            // SAFETY: Postorder visits children before parents: once `next` is known, nothing
            // reads `node` any more.
            unsafe { TreeLinks::clear_raw(node) };
            each(node);
            node = next;
        }
        self.root.rb_node = ptr::null_mut();
        // INVARIANT: No node is reachable from the root.
        self.len = 0;
        self.changes += 1;
    }

    #[inline]
    pub(super) fn first(&self) -> *mut bindings::rb_node {
        // SAFETY: `self.root` is a valid root.
        unsafe { bindings::rb_first(&self.root) }
    }

    pub(super) fn height(&self) -> usize {
        // The deepest leaf: walk every node and count its ancestors. O(n log n), for checks.
        let mut max = 0;
        let mut node = self.first();
        while !node.is_null() {
            let mut depth = 1;
            let mut up = node;
            loop {
                // SAFETY: `up` is a node of this tree, its parent word is valid to read.
                let parent = unsafe { ((*up).__rb_parent_color & !3) as *mut bindings::rb_node };
                if parent.is_null() {
                    break;
                }
                depth += 1;
                up = parent;
            }
            max = max.max(depth);
            // SAFETY: `node` is a node of this tree.
            node = unsafe { bindings::rb_next(node) };
        }
        max
    }
}
