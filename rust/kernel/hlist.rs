// SPDX-License-Identifier: GPL-2.0

//! Intrusive lists with a small head, like C's `struct hlist_head`, on [`TreeLinks`].
//!
//! C header: [`include/linux/list.h`](srctree/include/linux/list.h)
//!
//! An [`HList`] links elements owned elsewhere through the same [`TreeLinks`] that put them into
//! a [`crate::search_tree`] tree, so that one field of an element can place it in a tree, on a
//! list, or in neither. An element on a list knows the list's head, which gives O(1) removal from
//! the element's side and lets the element find the owner of the list ([`owner_of`]).
//!
//! # Who may change a list
//!
//! Lists live inside other objects (KSM keeps one in each stable node, inside a tree that owns
//! the nodes), where `&mut` access is hard to come by. They are governed instead by a *token*: a
//! value of a type of which at most one value exists at any time ([`Token`], made by
//! [`define_token!`]), and which may move between threads but not be shared by them.
//!
//! - Taking elements off a list ([`unlink`], [`HList::clear`]) takes `&mut` of the token: it is
//!   what may let an element, or a list's owner, be freed.
//! - Reading a list and adding to one take `&` of it; the references a list hands out live no
//!   longer than that borrow, so nothing they point to can be taken off and freed meanwhile.
//!   Since the token is not `Sync`, all holders of `&` are on one thread, whose operations do not
//!   interleave.
//!
//! A token type may have several values at once, each with its own id (`define_token!(Name, n)`
//! makes ids `0..n`), so that several threads can each work on their own share of the lists (KSM
//! splits its trees into shards this way). A list and a [`TokenCell`] record the id of the token
//! that governs them when they are made ([`HList::new_for`], [`TokenCell::new_for`]), and every
//! operation checks it: a token of another id panics (`BUG()`) instead of touching the list.
//! The element side of a list ([`owner_of`], [`unlink`], [`clear_list_of`]) starts from the
//! element, whose links a holder of another id may be changing: it checks the id the element
//! says its list has ([`HListNode::list_id`]) before it follows them.
//!
//! The rules of [`crate::search_tree`] keep the raw pointers valid: elements and heads are pinned,
//! and links or a non-empty head panic (`BUG()`) when dropped.
//!
//! # Where the code is
//!
//! This file holds the list: [`HList`], the traits of its elements and owners ([`HListNode`],
//! [`HListOwner`]), and how a list uses the words of [`TreeLinks`]. Two private submodules hold
//! the rest, re-exported here:
//!
//! - `token`: the tokens that govern lists ([`Token`], [`define_token!`]), the id check every
//!   operation makes, and [`TokenCell`]; none of it depends on lists;
//! - `element`: the functions that start from an element rather than from a list ([`owner_of`],
//!   [`is_on`], [`unlink`], [`clear_list_of`], [`list_len_of`]); those that follow the element's
//!   links first check the id the element says its list has.
//!
//! # Examples
//!
//! ```
//! use kernel::hlist::{self, HList, HListNode, HListOwner};
//! use kernel::search_tree::{HeapPinned, TreeLinks, TreeNode};
//! use kernel::prelude::*;
//!
//! kernel::define_token!(DocToken);
//!
//! struct Item {
//!     links: TreeLinks,
//!     value: u32,
//! }
//! impl TreeNode for Item {
//!     const LINKS_OFFSET: usize = core::mem::offset_of!(Item, links);
//!     fn tree_links(&self) -> Option<&TreeLinks> {
//!         Some(&self.links)
//!     }
//! }
//! // SAFETY: Items are linked only from the boxes below; one token id, 0, is `list_id`'s.
//! unsafe impl HeapPinned for Item {}
//! // SAFETY: As above.
//! unsafe impl HListNode for Item {
//!     type Owner = Bag;
//!     type Token = DocToken;
//! }
//!
//! struct Bag {
//!     items: HList<Item, DocToken>,
//! }
//! impl HListOwner<Item, DocToken> for Bag {
//!     const HEAD_OFFSET: usize = core::mem::offset_of!(Bag, items);
//!     fn hlist(&self) -> &HList<Item, DocToken> {
//!         &self.items
//!     }
//! }
//!
//! let mut token = DocToken::acquire().ok_or(EBUSY)?;
//! let bag = KBox::pin(Bag { items: HList::new() }, GFP_KERNEL)?;
//! let a = KBox::pin(Item { links: TreeLinks::new(), value: 1 }, GFP_KERNEL)?;
//! let b = KBox::pin(Item { links: TreeLinks::new(), value: 2 }, GFP_KERNEL)?;
//! HList::push_front(bag.as_ref(), &token, a.as_ref())?;
//! HList::push_front(bag.as_ref(), &token, b.as_ref())?;
//! assert_eq!(bag.items.len(), 2);
//! assert!(core::ptr::eq(hlist::owner_of(&*a, &token).unwrap(), &*bag));
//! assert!(hlist::unlink(&*a, &mut token));
//! assert_eq!(bag.items.iter(&token).map(|i| i.value).sum::<u32>(), 2);
//! bag.items.clear(&mut token, |_| {});
//! # Ok::<(), Error>(())
//! ```
//!
//! With a token type of several ids, each element says which id's lists it goes on, and is
//! refused by a list of another id; a holder of another id never follows its links:
//!
//! ```
//! use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
//! use kernel::hlist::{self, HList, HListNode, HListOwner};
//! use kernel::search_tree::{HeapPinned, TreeLinks, TreeNode};
//! use kernel::prelude::*;
//!
//! kernel::define_token!(ShardToken, 2);
//!
//! struct Item {
//!     links: TreeLinks,
//!     shard: AtomicUsize,
//! }
//! impl TreeNode for Item {
//!     const LINKS_OFFSET: usize = core::mem::offset_of!(Item, links);
//!     fn tree_links(&self) -> Option<&TreeLinks> {
//!         Some(&self.links)
//!     }
//! }
//! // SAFETY: Items are linked only from the box below.
//! unsafe impl HeapPinned for Item {}
//! // SAFETY: `shard` is changed below only while the item is on no list, on this thread.
//! unsafe impl HListNode for Item {
//!     type Owner = Bag;
//!     type Token = ShardToken;
//!     fn list_id(&self) -> usize {
//!         self.shard.load(Relaxed)
//!     }
//! }
//!
//! struct Bag {
//!     items: HList<Item, ShardToken>,
//! }
//! impl HListOwner<Item, ShardToken> for Bag {
//!     const HEAD_OFFSET: usize = core::mem::offset_of!(Bag, items);
//!     fn hlist(&self) -> &HList<Item, ShardToken> {
//!         &self.items
//!     }
//! }
//!
//! let mut zero = ShardToken::acquire_nth(0).ok_or(EBUSY)?;
//! let mut one = ShardToken::acquire_nth(1).ok_or(EBUSY)?;
//! let bag = KBox::pin(Bag { items: HList::new_for(&one) }, GFP_KERNEL)?;
//! let item = KBox::pin(Item { links: TreeLinks::new(), shard: AtomicUsize::new(0) }, GFP_KERNEL)?;
//! // The item says shard 0: the list of shard 1 refuses it.
//! assert_eq!(HList::push_front(bag.as_ref(), &one, item.as_ref()), Err(EINVAL));
//! item.shard.store(1, Relaxed);
//! HList::push_front(bag.as_ref(), &one, item.as_ref())?;
//! assert!(hlist::owner_of(&*item, &one).is_some());
//! assert!(hlist::unlink(&*item, &mut one));
//! // Off every list, the holder of shard 0 finds it on none, without following its links.
//! assert!(hlist::owner_of(&*item, &zero).is_none());
//! assert!(!hlist::unlink(&*item, &mut zero));
//! # Ok::<(), Error>(())
//! ```
//!
//! [`define_token!`]: crate::define_token!

use crate::{
    bindings,
    error::code::*,
    prelude::*,
    search_tree::{HeapPinned, LinkTree, Occupied, TreeLinks, TreeNode},
    types::Opaque,
};
use core::{
    marker::{PhantomData, PhantomPinned},
    pin::Pin,
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};

mod element;
mod token;

pub use element::{clear_list_of, is_on, list_len_of, owner_of, unlink};
use token::check_id;
pub use token::{Token, TokenCell};

/// The words of [`TreeLinks`] as a list uses them.
#[repr(C)]
struct ListWords {
    /// The next element's links, or null.
    next: *mut ListWords,
    /// The `next` field of the previous element, or the head's `first`.
    pprev: *mut *mut ListWords,
    /// The address of the head, with bit 0 set.
    head: usize,
}

/// An element of an [`HList`]; its links are those of its [`TreeNode`] implementation.
///
/// # Safety
///
/// The values are [`HeapPinned`] (never linked from a stack). While an element is on a list,
/// [`HListNode::list_id`] returns the id of that list's token, from any thread; it returns
/// something else only while the element is on no list, and changes only when no other thread
/// can be calling this module's functions on the element (no other thread can reach it: it is in
/// no list or tree that another thread walks).
pub unsafe trait HListNode: HeapPinned {
    /// The type of the objects whose lists the element goes on.
    type Owner: HListOwner<Self, Self::Token>;
    /// The token that governs those lists.
    type Token: Token;

    /// The id of the token of the list the element is on, or may go on next. With a token type
    /// of one id, the default, 0, is right. An element is only linked onto a list of this id.
    #[inline]
    fn list_id(&self) -> usize {
        0
    }
}

/// An object that holds an [`HList`]. Safe to implement: the offset is checked when linking.
pub trait HListOwner<T: HListNode, K: Token>: Sized {
    /// The offset in bytes of the [`HList`] from the start of the owner.
    const HEAD_OFFSET: usize;

    /// The list.
    fn hlist(&self) -> &HList<T, K>;
}

/// A list of `T`s, newest first, governed by the token type `K`.
///
/// # Invariants
///
/// `first` and the `next` words from it reach exactly `len` links, each the [`TreeLinks`] of a
/// pinned, live `T` at `T::LINKS_OFFSET`, in list mode, whose head word is this list's address
/// with bit 0 set; the first element's `pprev` points at `first`, every other's at its
/// predecessor's `next`. If non-empty, the list lies at `Owner::HEAD_OFFSET` inside a pinned
/// owner. The list is only changed with the token of id `id` held exclusively.
pub struct HList<T: HListNode, K: Token> {
    first: Opaque<*mut ListWords>,
    len: AtomicU32,
    id: u32,
    _p: PhantomData<(*const T, *const K)>,
    _pin: PhantomPinned,
}

// SAFETY: The list hands out `&T` and is changed only with the token held exclusively.
unsafe impl<T: HListNode + Sync, K: Token> Send for HList<T, K> {}
// SAFETY: As above.
unsafe impl<T: HListNode + Sync, K: Token> Sync for HList<T, K> {}

impl<T: HListNode, K: Token> Default for HList<T, K> {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn words_of<T: TreeNode>(elem: &T) -> Option<(*mut ListWords, &TreeLinks)> {
    const {
        assert!(T::LINKS_OFFSET + core::mem::size_of::<TreeLinks>() <= core::mem::size_of::<T>());
    };
    let links = elem.tree_links()?;
    let offset = (links as *const TreeLinks as usize).wrapping_sub(elem as *const T as usize);
    (offset == T::LINKS_OFFSET).then_some((links.raw().cast::<ListWords>(), links))
}

/// The element whose links are at `words`.
///
/// # Safety
///
/// `words` are the links, at `T::LINKS_OFFSET`, of a live `T`.
#[inline]
unsafe fn elem_of<'a, T: TreeNode>(words: *mut ListWords) -> &'a T {
    // SAFETY: By the safety requirements.
    unsafe { &*words.cast::<u8>().sub(T::LINKS_OFFSET).cast::<T>() }
}

impl<T: HListNode, K: Token> HList<T, K> {
    /// An empty list governed by the token of id 0.
    #[inline]
    pub const fn new() -> Self {
        Self::with_id(0)
    }

    /// An empty list governed by `token`'s id.
    #[inline]
    pub fn new_for(token: &K) -> Self {
        Self::with_id(token.id() as u32)
    }

    #[inline]
    const fn with_id(id: u32) -> Self {
        Self {
            first: Opaque::new(ptr::null_mut()),
            len: AtomicU32::new(0),
            id,
            _p: PhantomData,
            _pin: PhantomPinned,
        }
    }

    /// The id of the token that governs the list.
    #[inline]
    pub fn token_id(&self) -> usize {
        self.id as usize
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn tag(&self) -> usize {
        self as *const Self as usize | 1
    }

    /// The list of `owner`, checked to lie at `HEAD_OFFSET` inside it.
    fn of_owner<O: HListOwner<T, K>>(owner: &O) -> Result<&Self> {
        const {
            assert!(O::HEAD_OFFSET + core::mem::size_of::<Self>() <= core::mem::size_of::<O>());
        };
        let list = owner.hlist();
        let offset = (list as *const Self as usize).wrapping_sub(owner as *const O as usize);
        if offset == O::HEAD_OFFSET {
            Ok(list)
        } else {
            Err(EINVAL)
        }
    }

    /// Links free `words` at the front of this list.
    ///
    /// # Safety
    ///
    /// `words` are free links of a pinned `T` at `T::LINKS_OFFSET`; the list is pinned inside
    /// its owner at `HEAD_OFFSET`; the caller holds the token (so this thread is the only one
    /// that touches lists of this token type now).
    unsafe fn link_front(&self, words: *mut ListWords) {
        let first = crate::mm::opaque_ptr(&self.first);
        // SAFETY: `first` is this list's head pointer and `words` are free links; the token
        // keeps every other thread away from these pointers, and this thread does nothing else
        // with them meanwhile.
        unsafe {
            let old = *first;
            (*words).next = old;
            if !old.is_null() {
                (*old).pprev = ptr::addr_of_mut!((*words).next);
            }
            *first = words;
            (*words).pprev = first;
            (*words).head = self.tag();
        }
        // INVARIANT: `words` are reachable from `first`, in list mode with this list's tag.
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `elem` at the front of the list of `owner`.
    ///
    /// Fails with `EINVAL` if `elem` has no links at its declared offset or the list is not at
    /// the owner's declared offset, and with `EBUSY` if `elem` is already in a tree or on a list.
    pub fn push_front<O: HListOwner<T, K>>(owner: Pin<&O>, token: &K, elem: Pin<&T>) -> Result {
        let list = Self::of_owner(owner.get_ref())?;
        check_id(token, list.id);
        if elem.list_id() != list.id as usize {
            return Err(EINVAL);
        }
        let (words, links) = words_of(elem.get_ref()).ok_or(EINVAL)?;
        if links.is_linked() {
            return Err(EBUSY);
        }
        // SAFETY: `words` are free links at the element's checked offset; `owner` is pinned, so
        // is its list, at its checked offset; `token`, of the list's id, is held, on this thread
        // only.
        unsafe { list.link_front(words) };
        Ok(())
    }

    /// Takes the element a walk of `tree` stopped at out of the tree and adds it at the front of
    /// the list of `owner`, without ever leaving it unlinked.
    ///
    /// Fails, leaving the element in the tree, if the list is not at the owner's declared offset.
    pub fn move_from_tree<O: HListOwner<T, K>>(
        owner: Pin<&O>,
        token: &K,
        stopped: Occupied<'_, T, LinkTree<T>>,
    ) -> Result {
        let list = Self::of_owner(owner.get_ref())?;
        check_id(token, list.id);
        if stopped.get().list_id() != list.id as usize {
            return Err(EINVAL);
        }
        let elem = stopped.unlink_linked();
        // `elem` was in the tree, so its links are at its checked offset, and it is pinned.
        let (words, _) = words_of(elem).ok_or(EINVAL)?;
        // SAFETY: The links were just unlinked from the tree (free now) and belong to a pinned
        // element at its offset; `owner` is pinned; `token`, of the list's id, is held, on this
        // thread only.
        unsafe { list.link_front(words) };
        Ok(())
    }

    /// The elements, newest first, for as long as the token is borrowed.
    pub fn iter<'t>(&'t self, token: &'t K) -> impl Iterator<Item = Pin<&'t T>> + 't {
        check_id(token, self.id);
        // SAFETY: `first` is valid for reads; the shared token excludes writers.
        let mut cur = unsafe { *crate::mm::opaque_ptr(&self.first) };
        core::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            // SAFETY: `cur` are links on this list (type invariant), of a live, pinned `T`, which
            // cannot be unlinked (hence freed) while the token is borrowed.
            let elem = unsafe {
                let elem = elem_of::<T>(cur);
                cur = (*cur).next;
                elem
            };
            // SAFETY: Elements on a list are pinned.
            Some(unsafe { Pin::new_unchecked(elem) })
        })
    }

    /// Unlinks every element, calling `each` for each; returns how many there were.
    #[inline]
    pub fn clear(&self, token: &mut K, each: impl FnMut(&T)) -> usize {
        check_id(token, self.id);
        // SAFETY: The exclusive token excludes every other reader and writer.
        unsafe { self.clear_raw(each) }
    }

    /// Unlinks every element.
    ///
    /// # Safety
    ///
    /// The caller holds the token exclusively.
    unsafe fn clear_raw(&self, mut each: impl FnMut(&T)) -> usize {
        let n = self.len();
        // SAFETY: `first` is valid; the caller excludes every other reader and writer.
        let mut cur = unsafe { *crate::mm::opaque_ptr(&self.first) };
        while !cur.is_null() {
            // SAFETY: `cur` are links on this list, of a live `T` (type invariant).
            let next = unsafe { (*cur).next };
            // SAFETY: Nothing refers to `cur` once the head is reset below.
            unsafe { TreeLinks::clear_raw(cur.cast::<bindings::rb_node>()) };
            // SAFETY: The element is alive: it was linked until now, and is owned elsewhere.
            each(unsafe { elem_of::<T>(cur) });
            cur = next;
        }
        // SAFETY: As above.
        unsafe { *crate::mm::opaque_ptr(&self.first) = ptr::null_mut() };
        // INVARIANT: Nothing is reachable.
        self.len.store(0, Ordering::Relaxed);
        n
    }

    /// The elements, newest first, read without the token.
    ///
    /// # Safety
    ///
    /// Nobody changes the list while the iterator and the references it yields are in use: the
    /// caller holds a lock that every writer of this list holds while writing it.
    pub unsafe fn iter_unchecked(&self) -> impl Iterator<Item = Pin<&T>> + '_ {
        // SAFETY: `first` is valid for reads; the caller excludes writers.
        let mut cur = unsafe { *crate::mm::opaque_ptr(&self.first) };
        core::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            // SAFETY: `cur` are links on this list, of a live, pinned `T`, which no writer can
            // unlink (hence nobody free) while the caller's lock is held.
            unsafe {
                let elem = elem_of::<T>(cur);
                cur = (*cur).next;
                Some(Pin::new_unchecked(elem))
            }
        })
    }
}

impl<T: HListNode, K: Token> Drop for HList<T, K> {
    #[inline]
    fn drop(&mut self) {
        // Elements point back at the head: it must not go while they are linked.
        if !self.is_empty() {
            panic!("hlist: list dropped while elements are still on it");
        }
    }
}
