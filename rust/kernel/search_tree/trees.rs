// SPDX-License-Identifier: GPL-2.0

//! The two flavours of tree: [`LinkTree`], whose elements are owned elsewhere, and [`BoxTree`],
//! which owns its elements; their iterator [`Iter`]; and the sealed [`Tree`] trait through which
//! the walks' entries take elements in and give them back, each flavour in its own way.
//!
//! Both wrap a `RawTree` and add only what ownership decides: what goes in, what comes out, and
//! what becomes of the elements when the tree is cleared or dropped.

use super::{
    HeapPinned, Occupied, PlaceMark, Prune, RawTree, Step, TreeLinks, TreeNode, Vacant, Visit, Walk,
};
use crate::{alloc::KBox, bindings, prelude::*};
use core::{marker::PhantomData, pin::Pin, ptr};

/// An iterator over the elements of a tree, in the tree's order.
pub struct Iter<'a, T: TreeNode> {
    tree: &'a RawTree<T>,
    next: *mut bindings::rb_node,
}

impl<'a, T: TreeNode> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        if self.next.is_null() {
            return None;
        }
        let node = self.next;
        // SAFETY: `node` is a node of the tree, which is borrowed for `'a`.
        self.next = unsafe { bindings::rb_next(node) };
        // SAFETY: As above.
        Some(unsafe { self.tree.elem(node) })
    }
}

macro_rules! common_tree_methods {
    () => {
        /// The number of elements in the tree.
        #[inline]
        pub fn len(&self) -> usize {
            self.raw.len
        }

        /// Whether the tree is empty.
        #[inline]
        pub fn is_empty(&self) -> bool {
            self.raw.len == 0
        }

        /// The height of the tree: the number of nodes on its longest path from the root.
        ///
        /// It walks the whole tree: meant for checks and tests.
        #[inline]
        pub fn height(&self) -> usize {
            self.raw.height()
        }

        /// Walks down from the root, asking `visit` where to go at each node.
        ///
        /// Returns the element the walk stopped at, or `None` if it fell off the tree.
        #[inline]
        pub fn walk<'a>(&'a self, visit: impl FnMut(&'a T) -> Step) -> Option<&'a T> {
            match self.raw.descend(|_| None, visit) {
                // SAFETY: `descend` stopped at a node of this tree.
                Ok(node) => Some(unsafe { self.raw.elem(node) }),
                Err(_) => None,
            }
        }

        /// Whether `mark` ([`Vacant::mark`]) is a free place of this tree, which has not
        /// changed since it was made (`vacant_at` then gives it).
        #[inline]
        pub fn holds_place(&self, mark: &PlaceMark) -> bool {
            self.raw.holds(mark)
        }

        /// The elements in the tree's order.
        #[inline]
        pub fn iter(&self) -> Iter<'_, T> {
            Iter {
                next: self.raw.first(),
                tree: &self.raw,
            }
        }

        /// Whether `elem` is linked in this tree.
        #[inline]
        pub fn contains(&self, elem: &T) -> bool {
            self.raw.links_in_tree(elem).is_some()
        }

        /// Walks down from the root like `walk`, and returns either the element it stopped at,
        /// which can then be taken out or replaced, or the free place it reached, where a new
        /// element can be linked.
        pub fn walk_mut(&mut self, visit: impl FnMut(&T) -> Step) -> Walk<'_, T, Self> {
            self.walk_mut_with(|_| None, visit)
        }

        /// Walks like `walk_mut`, but asks `pass` first at each node, and `visit` only where
        /// `pass` gives no direction.
        ///
        /// `pass` is meant to be small, so that it is compiled into the walk's loop, and to
        /// decide most steps cheaply (by a key kept in the node, say); `visit`, to be needed at
        /// few nodes.
        #[inline]
        pub fn walk_mut_with(
            &mut self,
            pass: impl FnMut(&T) -> Option<Step>,
            visit: impl FnMut(&T) -> Step,
        ) -> Walk<'_, T, Self> {
            match self.raw.descend(pass, visit) {
                Ok(node) => Walk::Stopped(Occupied {
                    tree: self,
                    node,
                    _p: PhantomData,
                }),
                Err((parent, left)) => Walk::Vacant(Vacant {
                    tree: self,
                    parent,
                    left,
                    _p: PhantomData,
                }),
            }
        }

        /// The free place `mark` was made of ([`Vacant::mark`]), if the tree has not changed
        /// since.
        #[inline]
        pub fn vacant_at(&mut self, mark: PlaceMark) -> Option<Vacant<'_, T, Self>> {
            Vacant::at(self, mark)
        }
    };
}

/// A tree that links elements owned elsewhere, in heap allocations ([`HeapPinned`]).
///
/// Elements enter pinned and leave when removed or when the tree is cleared or dropped; an
/// element cannot be freed while linked (see the [module documentation](super)).
pub struct LinkTree<T: HeapPinned> {
    raw: RawTree<T>,
}

// SAFETY: The tree only hands out `&T` (to any thread that has `&LinkTree`) and unlinks elements
// it was given; it may be used from any thread if `T` may be shared between threads.
unsafe impl<T: HeapPinned + Sync> Send for LinkTree<T> {}
// SAFETY: As above.
unsafe impl<T: HeapPinned + Sync> Sync for LinkTree<T> {}

impl<T: HeapPinned> Default for LinkTree<T> {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

impl<T: HeapPinned> LinkTree<T> {
    /// An empty tree.
    #[inline]
    pub const fn new() -> Self {
        Self {
            raw: RawTree::new(),
        }
    }

    common_tree_methods!();

    /// Removes `elem` from the tree. Returns `false`, and does nothing, if it is not in this tree.
    pub fn remove(&mut self, elem: &T) -> bool {
        match self.raw.links_in_tree(elem) {
            Some(links) => {
                // SAFETY: `links_in_tree` checked that `links` is a node of this tree.
                unsafe { self.raw.unlink(links) };
                true
            }
            None => false,
        }
    }

    /// Unlinks every element, calling `each` for each (children before parents).
    #[inline]
    pub fn clear(&mut self, mut each: impl FnMut(&T)) {
        let offset = T::LINKS_OFFSET;
        self.raw.unlink_all(|node| {
            // SAFETY: `node` was a node of this tree, the links of a live `T` at `offset`; it is
            // unlinked but the element is alive (it is owned elsewhere, and was linked until now).
            each(unsafe { &*node.cast::<u8>().sub(offset).cast::<T>() })
        });
    }
}

impl<T: HeapPinned> Drop for LinkTree<T> {
    #[inline]
    fn drop(&mut self) {
        // The elements outlive the tree: unlink them so that they may be dropped later.
        self.raw.unlink_all(|_| {});
    }
}

/// A tree that owns its elements.
pub struct BoxTree<T: TreeNode> {
    raw: RawTree<T>,
}

// SAFETY: The tree owns its elements (like a `KBox<T>`) and hands out `&T`.
unsafe impl<T: TreeNode + Send> Send for BoxTree<T> {}
// SAFETY: Shared access only hands out `&T`.
unsafe impl<T: TreeNode + Sync> Sync for BoxTree<T> {}

impl<T: TreeNode> Default for BoxTree<T> {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

impl<T: TreeNode> BoxTree<T> {
    /// An empty tree.
    #[inline]
    pub const fn new() -> Self {
        Self {
            raw: RawTree::new(),
        }
    }

    common_tree_methods!();

    /// Walks like [`BoxTree::walk_mut`], but `visit` may also ask for the node it is at to be
    /// taken out (a node found stale, say): the node is then handed back to `visit` as
    /// [`Visit::Removed`] (what it returns then does not matter), and the walk starts again from
    /// the root.
    pub fn walk_prune(&mut self, visit: impl FnMut(Visit<'_, T>) -> Prune) -> Walk<'_, T, Self> {
        self.walk_prune_with(|_| None, visit)
    }

    /// Walks like [`BoxTree::walk_prune`], but asks `pass` first at each node, and `visit` only
    /// where `pass` gives no direction (see [`BoxTree::walk_mut_with`]).
    // `pass` is called through a closure of its own: through `&mut pass`, the compiler left the
    // call out of line (the `FnMut` impl for `&mut F` is not marked inline), which cost a call per
    // node.
    #[allow(clippy::redundant_closure)]
    #[inline]
    pub fn walk_prune_with(
        &mut self,
        mut pass: impl FnMut(&T) -> Option<Step>,
        mut visit: impl FnMut(Visit<'_, T>) -> Prune,
    ) -> Walk<'_, T, Self> {
        loop {
            let mut remove = false;
            let end = self.raw.descend(
                |elem| pass(elem),
                |elem| match visit(Visit::At(elem)) {
                    Prune::Go(step) => step,
                    Prune::Remove => {
                        remove = true;
                        Step::Stop
                    }
                },
            );
            match end {
                Ok(node) if remove => {
                    // SAFETY: `descend` stopped at a node of this tree.
                    let elem: *const T = unsafe { self.raw.elem(node) };
                    // SAFETY: As above.
                    unsafe { self.raw.unlink(node) };
                    // SAFETY: The element came from `leak` and is in no tree now.
                    visit(Visit::Removed(unsafe { Self::reclaim(&*elem) }));
                }
                Ok(node) => {
                    return Walk::Stopped(Occupied {
                        tree: self,
                        node,
                        _p: PhantomData,
                    })
                }
                Err((parent, left)) => {
                    return Walk::Vacant(Vacant {
                        tree: self,
                        parent,
                        left,
                        _p: PhantomData,
                    })
                }
            }
        }
    }

    /// Takes `elem` out of the tree and gives back its ownership; `None` if it is not in this tree.
    #[inline]
    pub fn remove(&mut self, elem: &T) -> Option<Pin<KBox<T>>> {
        let links = self.raw.links_in_tree(elem)?;
        // SAFETY: `links` is a node of this tree.
        unsafe { self.raw.unlink(links) };
        // SAFETY: Every element of a `BoxTree` came from `Pin<KBox<T>>::into_raw` (see
        // `Vacant::insert` and `Occupied::replace`), and it is in no tree now.
        Some(unsafe { Self::reclaim(elem) })
    }

    /// Takes out the first element, in the tree's order, for which `pred` holds, and gives back
    /// its ownership; `None` if there is none. A walk from the first element: taking out `k` of
    /// `n` elements so costs `k` walks, for rare clean-ups, not for lookups.
    pub fn take_first(&mut self, pred: impl FnMut(&&T) -> bool) -> Option<Pin<KBox<T>>> {
        let found: *const T = self.iter().find(pred)?;
        // SAFETY: `found` is an element of this tree, found just above: the tree has not changed
        // since, and the walk's shared borrow of it has ended.
        self.remove(unsafe { &*found })
    }

    /// Takes every element out of the tree (children before parents) and hands it to `each`.
    pub fn drain(&mut self, mut each: impl FnMut(Pin<KBox<T>>)) {
        let offset = T::LINKS_OFFSET;
        self.raw.unlink_all(|node| {
            // SAFETY: `node` was a node of this tree, the links of a `T` at `offset` that came
            // from `Pin<KBox<T>>::into_raw`; it is unlinked now and nothing else refers to it.
            let elem = unsafe { &*node.cast::<u8>().sub(offset).cast::<T>() };
            // SAFETY: As above.
            each(unsafe { Self::reclaim(elem) })
        });
    }

    /// Turns a pointer given away by [`Self::leak`] back into its box.
    ///
    /// # Safety
    ///
    /// `elem` came from [`Self::leak`] and is in no tree.
    #[inline]
    unsafe fn reclaim(elem: &T) -> Pin<KBox<T>> {
        // SAFETY: By the safety requirements, `elem` is the allocation of a `Pin<KBox<T>>` that
        // was turned into a raw pointer; nothing else owns it.
        unsafe { Pin::new_unchecked(KBox::from_raw(elem as *const T as *mut T)) }
    }

    /// Gives up the ownership of `elem`, to a tree that will [`Self::reclaim`] it.
    #[inline]
    fn leak<'a>(elem: Pin<KBox<T>>) -> &'a T {
        // SAFETY: The element stays pinned: it is only turned back into a `Pin<KBox<T>>`.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(elem) });
        // SAFETY: `raw` is a valid, leaked allocation: it lives until reclaimed.
        unsafe { &*raw }
    }
}

impl<T: TreeNode> Drop for BoxTree<T> {
    #[inline]
    fn drop(&mut self) {
        self.drain(drop);
    }
}

/// The trees a walk can be made on; implemented by [`LinkTree`] and [`BoxTree`].
pub trait Tree<T: TreeNode>: private::Sealed {
    /// What the tree takes in: `Pin<&T>` for a [`LinkTree`], `Pin<KBox<T>>` for a [`BoxTree`].
    type In<'a>
    where
        T: 'a;
    /// What removing an element gives back: nothing, or the element's box.
    type Out;

    #[doc(hidden)]
    fn raw(&self) -> &RawTree<T>;
    #[doc(hidden)]
    fn raw_mut(&mut self) -> &mut RawTree<T>;
    #[doc(hidden)]
    fn admit<'a>(elem: Self::In<'a>) -> Result<(&'a T, *mut bindings::rb_node), Self::In<'a>>
    where
        T: 'a;
    #[doc(hidden)]
    fn release(elem: &T) -> Self::Out;
}

mod private {
    pub trait Sealed {}
    impl<T: super::HeapPinned> Sealed for super::LinkTree<T> {}
    impl<T: super::TreeNode> Sealed for super::BoxTree<T> {}
}

impl<T: HeapPinned> Tree<T> for LinkTree<T> {
    type In<'a>
        = Pin<&'a T>
    where
        T: 'a;
    type Out = ();

    #[inline]
    fn raw(&self) -> &RawTree<T> {
        &self.raw
    }

    #[inline]
    fn raw_mut(&mut self) -> &mut RawTree<T> {
        &mut self.raw
    }

    fn admit<'a>(elem: Pin<&'a T>) -> Result<(&'a T, *mut bindings::rb_node), Pin<&'a T>>
    where
        T: 'a,
    {
        let r = elem.get_ref();
        match RawTree::links_of_new(r) {
            Ok(links) => Ok((r, links)),
            Err(_) => Err(elem),
        }
    }

    #[inline]
    fn release(_elem: &T) {}
}

impl<T: TreeNode> Tree<T> for BoxTree<T> {
    type In<'a>
        = Pin<KBox<T>>
    where
        T: 'a;
    type Out = Pin<KBox<T>>;

    #[inline]
    fn raw(&self) -> &RawTree<T> {
        &self.raw
    }

    #[inline]
    fn raw_mut(&mut self) -> &mut RawTree<T> {
        &mut self.raw
    }

    fn admit<'a>(elem: Pin<KBox<T>>) -> Result<(&'a T, *mut bindings::rb_node), Pin<KBox<T>>>
    where
        T: 'a,
    {
        match RawTree::links_of_new(&*elem) {
            Ok(_) => {
                let r = Self::leak(elem);
                // The links moved with nothing: the box's contents stayed where they were.
                let links = r.tree_links().map_or(ptr::null_mut(), TreeLinks::raw);
                Ok((r, links))
            }
            Err(_) => Err(elem),
        }
    }

    #[inline]
    fn release(elem: &T) -> Pin<KBox<T>> {
        // SAFETY: `release` is only called on an element just unlinked from a `BoxTree`, and all
        // elements of a `BoxTree` come from `leak` (in `admit`).
        unsafe { Self::reclaim(elem) }
    }
}
