// SPDX-License-Identifier: GPL-2.0

//! Walks: what a walk asks at each node ([`Step`], and [`Prune`] and [`Visit`] for a pruning
//! walk), where it ends ([`Walk`]: an [`Occupied`] element or a [`Vacant`] place, each holding
//! the tree borrowed mutably), and [`PlaceMark`], a place kept to be taken again later.
//!
//! The entries are generic over [`Tree`], so that one implementation serves both flavours; they
//! change the tree only through its `RawTree`.

use super::{HeapPinned, LinkTree, RawTree, Tree, TreeNode};
use crate::{alloc::KBox, bindings, prelude::*};
use core::{marker::PhantomData, pin::Pin};

/// What a pruning walk does at the node it is at ([`BoxTree::walk_prune`]).
///
/// [`BoxTree::walk_prune`]: super::BoxTree::walk_prune
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prune {
    /// Goes on as a plain walk would.
    Go(Step),
    /// Takes this node out of the tree and starts again from the root.
    Remove,
}

/// What a pruning walk shows its visitor ([`BoxTree::walk_prune`]).
///
/// [`BoxTree::walk_prune`]: super::BoxTree::walk_prune
pub enum Visit<'a, T> {
    /// The node the walk is at.
    At(&'a T),
    /// A node the visitor asked to remove, now out of the tree.
    Removed(Pin<KBox<T>>),
}

/// Where a walk goes from the node it is at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// To the left subtree: what is searched is before this node.
    Left,
    /// To the right subtree: what is searched is after this node.
    Right,
    /// Nowhere: the walk ends at this node (found it, or gave up).
    Stop,
}

/// The ids of trees that have had a [`PlaceMark`] made (0 is none).
static NEXT_TREE_ID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// Where a free place of a tree was ([`Vacant::mark`]), to take it again later without walking
/// ([`BoxTree::vacant_at`], [`LinkTree::vacant_at`]) if the tree has not changed since.
///
/// [`BoxTree::vacant_at`]: super::BoxTree::vacant_at
#[derive(Clone, Copy, Debug)]
pub struct PlaceMark {
    pub(super) tree: u64,
    pub(super) changes: u64,
    parent: *mut bindings::rb_node,
    left: bool,
}

/// The end of a [`LinkTree::walk_mut`] or [`BoxTree::walk_mut`].
///
/// [`BoxTree::walk_mut`]: super::BoxTree::walk_mut
pub enum Walk<'a, T: TreeNode, R: Tree<T>> {
    /// The walk stopped at this element.
    Stopped(Occupied<'a, T, R>),
    /// The walk fell off the tree at this free place.
    Vacant(Vacant<'a, T, R>),
}

/// An element a walk stopped at, with the tree borrowed mutably.
pub struct Occupied<'a, T: TreeNode, R: Tree<T>> {
    pub(super) tree: &'a mut R,
    pub(super) node: *mut bindings::rb_node,
    pub(super) _p: PhantomData<fn() -> T>,
}

impl<'a, T: TreeNode, R: Tree<T>> Occupied<'a, T, R> {
    /// The element.
    #[inline]
    pub fn get(&self) -> &T {
        // SAFETY: `node` is a node of the tree, which is borrowed for `'a`.
        unsafe { self.tree.raw().elem(self.node) }
    }

    /// The element, pinned (elements of trees always are), for as long as the tree was borrowed.
    #[inline]
    pub fn into_pinned(self) -> Pin<&'a T> {
        // SAFETY: Every element of a tree is pinned: it entered as `Pin<&T>` or `Pin<KBox<T>>`.
        unsafe { Pin::new_unchecked(self.into_ref()) }
    }

    /// The element, for as long as the tree was borrowed.
    #[inline]
    pub fn into_ref(self) -> &'a T {
        let raw: &'a mut RawTree<T> = self.tree.raw_mut();
        // SAFETY: As in `get`.
        unsafe { raw.elem(self.node) }
    }

    /// Takes the element out of the tree.
    #[inline]
    pub fn remove(self) -> R::Out {
        let raw = self.tree.raw_mut();
        // SAFETY: `node` is a node of the tree.
        let elem: *const T = unsafe { raw.elem(self.node) };
        // SAFETY: As above.
        unsafe { raw.unlink(self.node) };
        // SAFETY: The element is alive (unlinked, still owned by whoever owned it linked).
        R::release(unsafe { &*elem })
    }

    /// Puts `new` in the place of the element, which is taken out of the tree; the handle then
    /// refers to `new`.
    ///
    /// Fails, giving `new` back, if `new` has no free links at its declared offset.
    pub fn replace<'b>(&mut self, new: R::In<'b>) -> Result<R::Out, R::In<'b>> {
        let (_, links) = R::admit(new)?;
        let raw = self.tree.raw_mut();
        // SAFETY: `node` is a node of the tree.
        let old: *const T = unsafe { raw.elem(self.node) };
        // SAFETY: `node` is in the tree, `links` were just checked free and at the right offset
        // of a pinned element (leaked into the tree's ownership for a `BoxTree`).
        unsafe { raw.replace(self.node, links) };
        self.node = links;
        // SAFETY: `old` is alive and unlinked now.
        Ok(R::release(unsafe { &*old }))
    }
}

impl<'a, T: HeapPinned> Occupied<'a, T, LinkTree<T>> {
    /// Unlinks the element and returns it for as long as the tree was borrowed.
    ///
    /// Crate-internal: an element out of every tree may be freed by its owner, so the caller
    /// links it elsewhere at once (see [`crate::hlist::HList::move_from_tree`]).
    pub(crate) fn unlink_linked(self) -> &'a T {
        let raw: &'a mut RawTree<T> = self.tree.raw_mut();
        // SAFETY: `node` is a node of the tree.
        let elem: *const T = unsafe { raw.elem(self.node) };
        // SAFETY: As above.
        unsafe { raw.unlink(self.node) };
        // SAFETY: The element is alive: its owner cannot free it while the caller holds this
        // reference and before the caller has linked it elsewhere (crate-internal use only).
        unsafe { &*elem }
    }
}

/// A free place a walk reached, with the tree borrowed mutably.
pub struct Vacant<'a, T: TreeNode, R: Tree<T>> {
    pub(super) tree: &'a mut R,
    pub(super) parent: *mut bindings::rb_node,
    pub(super) left: bool,
    pub(super) _p: PhantomData<fn() -> T>,
}

impl<'a, T: TreeNode, R: Tree<T>> Vacant<'a, T, R> {
    /// Where this place is, to take it again later without walking, if the tree has not
    /// changed by then ([`BoxTree::vacant_at`], [`LinkTree::vacant_at`]).
    ///
    /// [`BoxTree::vacant_at`]: super::BoxTree::vacant_at
    #[inline]
    pub fn mark(&mut self) -> PlaceMark {
        let raw = self.tree.raw_mut();
        if raw.id == 0 {
            // INVARIANT: Ids are handed out once each (64 bits never wrap).
            raw.id = NEXT_TREE_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        }
        PlaceMark {
            tree: raw.id,
            changes: raw.changes,
            parent: self.parent,
            left: self.left,
        }
    }

    /// The place `mark` was made of, if it is one of `tree`, unchanged since.
    #[inline]
    pub(super) fn at(tree: &'a mut R, mark: PlaceMark) -> Option<Self> {
        // A tree is changed only by linking, unlinking or replacing nodes (the links of a node
        // in a tree are written only by the tree), each of which counts a change: unchanged, the
        // parent is still a node of the tree and its child slot still free.
        if !tree.raw().holds(&mark) {
            return None;
        }
        Some(Self {
            tree,
            parent: mark.parent,
            left: mark.left,
            _p: PhantomData,
        })
    }

    /// Links `elem` here.
    ///
    /// Fails with `EINVAL` if `elem` has no free links at its declared offset (none, or already
    /// in a tree); `elem` is then dropped (for a [`BoxTree`]) or left as it was.
    ///
    /// [`BoxTree`]: super::BoxTree
    #[inline]
    pub fn insert(self, elem: R::In<'a>) -> Result<Pin<&'a T>> {
        self.try_insert(elem).map_err(|_| EINVAL)
    }

    /// Links `elem` here, or gives it back if it has no free links at its declared offset.
    pub fn try_insert(self, elem: R::In<'a>) -> core::result::Result<Pin<&'a T>, R::In<'a>> {
        let (r, links) = R::admit(elem)?;
        let raw = self.tree.raw_mut();
        // SAFETY: `parent` and `left` come from a walk of this tree that ended at a null child
        // (or an empty tree) and the tree has been mutably borrowed since, so the slot is still
        // free; `links` are unlinked links of a pinned element at its declared offset.
        unsafe { raw.link(links, self.parent, self.left) };
        // SAFETY: The element entered pinned.
        Ok(unsafe { Pin::new_unchecked(r) })
    }
}
