// SPDX-License-Identifier: GPL-2.0

//! Owning, intrusive singly-linked lists with a cursor that stays where it was left.
//!
//! An [`SList`] owns its elements (`Pin<KBox<T>>`), linked through an [`SListLinks`] in each, in
//! the order they were placed. Its cursor is part of the list: it sits before an element (or at
//! the end), survives between calls, and is what insertions and removals act at. This is the
//! shape of a scan that is resumed later where it stopped (KSM's per-mm list of rmap_items,
//! walked a batch at a time).
//!
//! The list only ever removes the element at the cursor (or everything from it on), so the
//! cursor, which points at the element before it, never dangles. Dropping the list frees the
//! elements one by one (no recursion).

use crate::{alloc::KBox, prelude::*, types::Opaque};
use core::{pin::Pin, ptr};

/// The link of an [`SList`] element: the next element's links.
///
/// # Invariants
///
/// Written only by the list that owns the element.
#[repr(transparent)]
pub struct SListLinks {
    next: Opaque<*mut SListLinks>,
}

// SAFETY: A plain pointer, written only by the owning list through `&mut` of it.
unsafe impl Send for SListLinks {}
// SAFETY: As above; shared references only read it.
unsafe impl Sync for SListLinks {}

impl Default for SListLinks {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

impl SListLinks {
    /// Links of an element on no list.
    #[inline]
    pub const fn new() -> Self {
        Self {
            next: Opaque::new(ptr::null_mut()),
        }
    }

    #[inline]
    fn raw(&self) -> *mut SListLinks {
        self as *const Self as *mut Self
    }

    #[inline]
    fn next(links: *mut SListLinks) -> *mut SListLinks {
        // SAFETY: Callers pass links of elements of a list, valid while the list lives.
        unsafe { *crate::mm::opaque_ptr(&(*links).next) }
    }

    #[inline]
    fn set_next(links: *mut SListLinks, next: *mut SListLinks) {
        // SAFETY: As in `next`; the owning list writes its elements' links.
        unsafe { *crate::mm::opaque_ptr(&(*links).next) = next };
    }
}

/// An element of an [`SList`]. Safe to implement: the offset is checked when an element enters.
pub trait SListNode: Sized {
    /// The offset in bytes of the [`SListLinks`] from the start of the element.
    const LINKS_OFFSET: usize;

    /// The element's links.
    fn slist_links(&self) -> &SListLinks;
}

/// An owning singly-linked list with a resumable cursor.
///
/// # Invariants
///
/// `first` and the links from it reach exactly `len` elements, each a leaked `Pin<KBox<T>>`
/// whose links are at `T::LINKS_OFFSET`; `prev` is null (cursor at the start) or the links of
/// one of them, the one before the cursor.
pub struct SList<T: SListNode> {
    first: *mut SListLinks,
    prev: *mut SListLinks,
    len: usize,
    _p: core::marker::PhantomData<Pin<KBox<T>>>,
}

// SAFETY: The list owns its elements like a vector of boxes.
unsafe impl<T: SListNode + Send> Send for SList<T> {}
// SAFETY: Shared access only hands out `&T`.
unsafe impl<T: SListNode + Sync> Sync for SList<T> {}

impl<T: SListNode> Default for SList<T> {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

impl<T: SListNode> SList<T> {
    /// An empty list, its cursor at the start.
    #[inline]
    pub const fn new() -> Self {
        Self {
            first: ptr::null_mut(),
            prev: ptr::null_mut(),
            len: 0,
            _p: core::marker::PhantomData,
        }
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn elem<'a>(links: *mut SListLinks) -> Pin<&'a T> {
        // SAFETY: Links of an element of the list, at `LINKS_OFFSET` in a pinned `T` (type
        // invariant); the caller bounds the lifetime by a borrow of the list.
        unsafe { Pin::new_unchecked(&*links.cast::<u8>().sub(T::LINKS_OFFSET).cast::<T>()) }
    }

    /// The links the cursor is at (null at the end).
    #[inline]
    fn at(&self) -> *mut SListLinks {
        if self.prev.is_null() {
            self.first
        } else {
            SListLinks::next(self.prev)
        }
    }

    /// Puts the cursor back at the start.
    #[inline]
    pub fn rewind(&mut self) {
        self.prev = ptr::null_mut();
    }

    /// The element at the cursor, if the cursor is not at the end.
    #[inline]
    pub fn current(&self) -> Option<Pin<&T>> {
        let at = self.at();
        (!at.is_null()).then(|| Self::elem(at))
    }

    /// Moves the cursor past the element it is at (does nothing at the end).
    #[inline]
    pub fn advance(&mut self) {
        let at = self.at();
        if !at.is_null() {
            self.prev = at;
        }
    }

    /// Takes the element at the cursor out of the list; the cursor is then at the next one.
    pub fn remove_current(&mut self) -> Option<Pin<KBox<T>>> {
        let at = self.at();
        if at.is_null() {
            return None;
        }
        let next = SListLinks::next(at);
        if self.prev.is_null() {
            self.first = next;
        } else {
            SListLinks::set_next(self.prev, next);
        }
        SListLinks::set_next(at, ptr::null_mut());
        self.len -= 1;
        // SAFETY: `at` belongs to an element that was leaked from a `Pin<KBox<T>>` (type
        // invariant) and is not reachable from the list any more.
        Some(unsafe {
            Pin::new_unchecked(KBox::from_raw(
                at.cast::<u8>().sub(T::LINKS_OFFSET).cast::<T>(),
            ))
        })
    }

    /// Puts `elem` at the cursor (before the element the cursor was at), and leaves the cursor
    /// at it. Fails with `EINVAL`, dropping `elem`, if its links are not at its declared offset.
    pub fn insert(&mut self, elem: Pin<KBox<T>>) -> Result<Pin<&T>> {
        const {
            assert!(
                T::LINKS_OFFSET + core::mem::size_of::<SListLinks>() <= core::mem::size_of::<T>()
            )
        };
        let links = elem.slist_links().raw();
        let offset = (links as usize).wrapping_sub(&*elem as *const T as usize);
        if offset != T::LINKS_OFFSET {
            return Err(EINVAL);
        }
        // SAFETY: The element stays pinned: it is leaked now and only ever turned back into a
        // `Pin<KBox<T>>` by `remove_current`/`Drop`.
        let _leaked = KBox::into_raw(unsafe { Pin::into_inner_unchecked(elem) });
        SListLinks::set_next(links, self.at());
        if self.prev.is_null() {
            self.first = links;
        } else {
            SListLinks::set_next(self.prev, links);
        }
        // INVARIANT: The element is reachable, at its checked offset; the cursor is at it.
        self.len += 1;
        Ok(Self::elem(links))
    }

    /// Takes out every element from the cursor on, handing each to `each`; the cursor is then
    /// at the end.
    #[inline]
    pub fn remove_rest(&mut self, mut each: impl FnMut(Pin<KBox<T>>)) {
        while let Some(e) = self.remove_current() {
            each(e);
        }
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl Iterator<Item = Pin<&T>> + '_ {
        let mut cur = self.first;
        core::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            let e = Self::elem(cur);
            cur = SListLinks::next(cur);
            Some(e)
        })
    }
}

impl<T: SListNode> Drop for SList<T> {
    #[inline]
    fn drop(&mut self) {
        self.rewind();
        self.remove_rest(drop);
    }
}
