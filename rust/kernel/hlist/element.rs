// SPDX-License-Identifier: GPL-2.0

//! The functions that start from an element rather than from a list: [`owner_of`], [`is_on`],
//! [`unlink`], [`clear_list_of`] and [`list_len_of`].
//!
//! They are kept apart because they share a hazard that the list's own methods do not have: the
//! element's links may be those of a list of another token id, which that id's holder may be
//! changing. The functions that follow the links under a token therefore first check the id the
//! element says its list has ([`HListNode::list_id`]); [`is_on`] only compares addresses.

use super::{
    token::{check_id, wrong_token},
    words_of, HList, HListNode, HListOwner, ListWords, Token,
};
use crate::{
    bindings,
    search_tree::{Linked, TreeLinks},
};
use core::{ptr, sync::atomic::Ordering};

/// The list `elem` is on, if it is on one.
#[inline]
fn list_of<T: HListNode>(elem: &T) -> Option<(*mut ListWords, *const HList<T, T::Token>)> {
    let (words, links) = words_of(elem)?;
    if links.linked() != Linked::OnList {
        return None;
    }
    Some((words, (links.word(2) & !1) as *const HList<T, T::Token>))
}

/// The list `elem` is on, if it is on one, for a holder of the token of id `id`. The element's
/// [`HListNode::list_id`] is checked before its links are followed: an element whose list is of
/// another id may be changing under that id's holder. An element on a list of another id panics,
/// as a list of another id does.
#[inline]
fn list_of_for<T: HListNode>(
    elem: &T,
    id: usize,
) -> Option<(*mut ListWords, *const HList<T, T::Token>)> {
    let theirs = elem.list_id();
    if theirs != id {
        // Whether it is on a list at all is one volatile read of its links.
        if words_of(elem).is_some_and(|(_, links)| links.linked() == Linked::OnList) {
            wrong_token(id, theirs as u32);
        }
        return None;
    }
    // By the `HListNode` contract, a list the element is on is of the caller's id, whose token
    // the caller holds: nobody else changes the element's links meanwhile.
    list_of(elem)
}

/// The owner of the list `elem` is on, for as long as the token is borrowed.
#[inline]
pub fn owner_of<'t, T: HListNode>(elem: &T, token: &'t T::Token) -> Option<&'t T::Owner> {
    let (_, list) = list_of_for(elem, token.id())?;
    // SAFETY: A list with an element on it is alive (see below).
    check_id(token, unsafe { (*list).id });
    // SAFETY: A list with an element on it is alive (a non-empty list panics when dropped) and
    // lies at `HEAD_OFFSET` inside a pinned owner (checked when the element was linked); it cannot
    // be emptied, so its owner cannot be freed, while the token is borrowed.
    Some(unsafe {
        &*list
            .cast::<u8>()
            .sub(<T::Owner as HListOwner<T, T::Token>>::HEAD_OFFSET)
            .cast::<T::Owner>()
    })
}

/// Whether `elem` is on the list of `owner`.
#[inline]
pub fn is_on<T: HListNode>(elem: &T, owner: &T::Owner) -> bool {
    match (list_of(elem), HList::of_owner(owner)) {
        (Some((_, list)), Ok(theirs)) => ptr::eq(list, theirs),
        _ => false,
    }
}

/// Takes `elem` off the list it is on; `false` if it is on none. O(1).
pub fn unlink<T: HListNode>(elem: &T, token: &mut T::Token) -> bool {
    let Some((words, list)) = list_of_for(elem, token.id()) else {
        return false;
    };
    // SAFETY: A list with an element on it is alive.
    check_id(token, unsafe { (*list).id });
    // SAFETY: `words` are on `list`, which is alive (it has an element); the exclusive token
    // excludes every other reader and writer. Unlinking repoints the neighbours.
    unsafe {
        let next = (*words).next;
        let pprev = (*words).pprev;
        *pprev = next;
        if !next.is_null() {
            (*next).pprev = pprev;
        }
        TreeLinks::clear_raw(words.cast::<bindings::rb_node>());
        (*list).len.fetch_sub(1, Ordering::Relaxed);
    }
    true
}

/// Takes every element off the list `elem` is on (`elem` too), calling `each` for each; returns
/// how many there were (0 if `elem` is on no list).
#[inline]
pub fn clear_list_of<T: HListNode>(elem: &T, token: &mut T::Token, each: impl FnMut(&T)) -> usize {
    let Some((_, list)) = list_of_for(elem, token.id()) else {
        return 0;
    };
    // SAFETY: A list with an element on it is alive.
    check_id(token, unsafe { (*list).id });
    // SAFETY: `list` has an element, so it is alive; the exclusive token is held.
    unsafe { (*list).clear_raw(each) }
}

/// The length of the list `elem` is on (0 if none).
pub fn list_len_of<T: HListNode>(elem: &T, token: &T::Token) -> usize {
    match list_of_for(elem, token.id()) {
        Some((_, list)) => {
            // SAFETY: `list` has an element, so it is alive; the shared token keeps it so.
            let list = unsafe { &*list };
            check_id(token, list.id);
            list.len()
        }
        None => 0,
    }
}
