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
//! assert_eq!((order.next(), order.next(), order.next(), order.next()), (Some(1), Some(2), Some(3), None));
//! tree.clear(|_| {});
//! # Ok::<(), Error>(())
//! ```

use crate::{alloc::KBox, bindings, prelude::*, types::Opaque};
use core::{marker::PhantomData, pin::Pin, ptr};

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
        // pointer. Panicking (a `BUG()` in the kernel) never returns, so the memory is never reused.
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

/// What a pruning walk does at the node it is at ([`BoxTree::walk_prune`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prune {
    /// Goes on as a plain walk would.
    Go(Step),
    /// Takes this node out of the tree and starts again from the root.
    Remove,
}

/// What a pruning walk shows its visitor ([`BoxTree::walk_prune`]).
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

/// The tree structure shared by [`LinkTree`] and [`BoxTree`]; not usable outside this module.
///
/// # Invariants
///
/// Every `rb_node` reachable from `root` is the [`TreeLinks`] of a pinned, live `T`, found at
/// `T::LINKS_OFFSET` from the start of that `T`; `len` is the number of those nodes.
///
/// `changes` counts every change of the tree's shape (a node linked, unlinked or replaced); `id`
/// is 0 until a [`PlaceMark`] of the tree is made, and then an id no other tree ever has.
#[doc(hidden)]
pub struct RawTree<T: TreeNode> {
    root: bindings::rb_root,
    len: usize,
    id: u64,
    changes: u64,
    _p: PhantomData<*const T>,
}

/// The ids of trees that have had a [`PlaceMark`] made (0 is none).
static NEXT_TREE_ID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// Where a free place of a tree was ([`Vacant::mark`]), to take it again later without walking
/// ([`BoxTree::vacant_at`], [`LinkTree::vacant_at`]) if the tree has not changed since.
#[derive(Clone, Copy, Debug)]
pub struct PlaceMark {
    tree: u64,
    changes: u64,
    parent: *mut bindings::rb_node,
    left: bool,
}

impl<T: TreeNode> RawTree<T> {
    const fn new() -> Self {
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
    fn holds(&self, mark: &PlaceMark) -> bool {
        self.id != 0 && mark.tree == self.id && mark.changes == self.changes
    }

    /// The element whose links are `node`.
    ///
    /// # Safety
    ///
    /// `node` is a node of this tree.
    #[inline]
    unsafe fn elem<'a>(&'a self, node: *mut bindings::rb_node) -> &'a T {
        // SAFETY: By the type invariant, `node` is the links of a live, pinned `T` that begins
        // `LINKS_OFFSET` bytes before it, and stays linked (hence alive) while `self` is borrowed.
        unsafe { &*node.cast::<u8>().sub(T::LINKS_OFFSET).cast::<T>() }
    }

    /// The links of `elem`, checked to be where `T::LINKS_OFFSET` says and to be unlinked.
    fn links_of_new(elem: &T) -> Result<*mut bindings::rb_node> {
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
    fn links_in_tree(&self, elem: &T) -> Option<*mut bindings::rb_node> {
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
    fn descend<'a>(
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
    unsafe fn link(
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
    unsafe fn unlink(&mut self, links: *mut bindings::rb_node) {
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
    unsafe fn replace(&mut self, old: *mut bindings::rb_node, new: *mut bindings::rb_node) {
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
    fn unlink_all(&mut self, mut each: impl FnMut(*mut bindings::rb_node)) {
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
    fn first(&self) -> *mut bindings::rb_node {
        // SAFETY: `self.root` is a valid root.
        unsafe { bindings::rb_first(&self.root) }
    }

    fn height(&self) -> usize {
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
    };
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
pub unsafe trait HeapPinned: TreeNode {}

/// A tree that links elements owned elsewhere, in heap allocations ([`HeapPinned`]).
///
/// Elements enter pinned and leave when removed or when the tree is cleared or dropped; an
/// element cannot be freed while linked (see the module documentation).
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

    /// Walks down from the root like [`LinkTree::walk`], and returns either the element it
    /// stopped at, which can then be removed or replaced, or the free place it reached, where a
    /// new element can be linked.
    pub fn walk_mut(&mut self, visit: impl FnMut(&T) -> Step) -> Walk<'_, T, Self> {
        self.walk_mut_with(|_| None, visit)
    }

    /// Walks like [`LinkTree::walk_mut`], but asks `pass` first at each node, and `visit` only
    /// where `pass` gives no direction (see [`BoxTree::walk_mut_with`]).
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

    /// The free place `mark` was made of ([`Vacant::mark`]), if the tree has not changed since.
    #[inline]
    pub fn vacant_at(&mut self, mark: PlaceMark) -> Option<Vacant<'_, T, Self>> {
        Vacant::at(self, mark)
    }

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

    /// Walks down from the root like [`BoxTree::walk`], and returns either the element it
    /// stopped at, which can then be taken out or replaced, or the free place it reached.
    pub fn walk_mut(&mut self, visit: impl FnMut(&T) -> Step) -> Walk<'_, T, Self> {
        self.walk_mut_with(|_| None, visit)
    }

    /// Walks like [`BoxTree::walk_mut`], but asks `pass` first at each node, and `visit` only
    /// where `pass` gives no direction.
    ///
    /// `pass` is meant to be small, so that it is compiled into the walk's loop, and to decide
    /// most steps cheaply (by a key kept in the node, say); `visit`, to be needed at few nodes.
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

    /// The free place `mark` was made of ([`Vacant::mark`]), if the tree has not changed since.
    #[inline]
    pub fn vacant_at(&mut self, mark: PlaceMark) -> Option<Vacant<'_, T, Self>> {
        Vacant::at(self, mark)
    }

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

/// The end of a [`LinkTree::walk_mut`] or [`BoxTree::walk_mut`].
pub enum Walk<'a, T: TreeNode, R: Tree<T>> {
    /// The walk stopped at this element.
    Stopped(Occupied<'a, T, R>),
    /// The walk fell off the tree at this free place.
    Vacant(Vacant<'a, T, R>),
}

/// An element a walk stopped at, with the tree borrowed mutably.
pub struct Occupied<'a, T: TreeNode, R: Tree<T>> {
    tree: &'a mut R,
    node: *mut bindings::rb_node,
    _p: PhantomData<fn() -> T>,
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
    tree: &'a mut R,
    parent: *mut bindings::rb_node,
    left: bool,
    _p: PhantomData<fn() -> T>,
}

impl<'a, T: TreeNode, R: Tree<T>> Vacant<'a, T, R> {
    /// Where this place is, to take it again later without walking, if the tree has not
    /// changed by then ([`BoxTree::vacant_at`], [`LinkTree::vacant_at`]).
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
    fn at(tree: &'a mut R, mark: PlaceMark) -> Option<Self> {
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
