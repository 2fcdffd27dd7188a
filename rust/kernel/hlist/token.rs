// SPDX-License-Identifier: GPL-2.0

//! The tokens that govern lists: the [`Token`] trait, [`define_token!`], which makes token types,
//! the id check that every operation on a list or a cell makes, and [`TokenCell`], a value
//! governed by a token as a list is.
//!
//! None of it depends on lists, so it is kept apart from them; the rules a token enforces are in
//! the [parent module](super)'s documentation.
//!
//! [`define_token!`]: crate::define_token!

use core::marker::PhantomData;

/// A type of which at most one value of each id exists at any time, and which is not `Sync`.
///
/// Holding `&mut` of the value proves exclusive access to everything governed by its id; holding
/// `&` of it proves that no one takes anything away meanwhile, and that the holder is the one
/// thread that may use it.
///
/// # Safety
///
/// No two values of the implementing type with the same [`Token::id`] may exist at the same time,
/// a value's id never changes, and the type must not be `Sync`. Use [`define_token!`], which
/// checks the first at run time and ensures the others.
///
/// [`define_token!`]: crate::define_token!
pub unsafe trait Token {
    /// The id of this value.
    fn id(&self) -> usize;
}

/// Panics unless `token` has the id `id` (a list or cell governed by another token).
///
/// Inlined, with the panic out of line: every access to a list or cell makes this check, several
/// times per page on KSM's scan path.
#[inline]
#[track_caller]
pub(super) fn check_id<K: Token>(token: &K, id: u32) {
    if token.id() != id as usize {
        wrong_token(token.id(), id);
    }
}

#[cold]
#[inline(never)]
#[track_caller]
pub(super) fn wrong_token(token: usize, id: u32) -> ! {
    panic!("hlist: token {} used on a list of token {}", token, id);
}

/// Defines a [`Token`] type: `define_token!(Name)` makes `Name`, whose only constructor
/// `Name::acquire()` returns `None` while another `Name` exists; `define_token!(Name, n)` makes
/// one with ids `0..n`, whose `Name::acquire_nth(i)` returns `None` while another `Name` of id
/// `i` exists (`acquire()` is `acquire_nth(0)`).
///
/// # Examples
///
/// ```
/// use kernel::hlist::Token;
/// use kernel::prelude::*;
///
/// kernel::define_token!(ShardToken, 2);
///
/// let one = ShardToken::acquire_nth(1).ok_or(EBUSY)?;
/// assert!(ShardToken::acquire_nth(1).is_none());
/// assert!(ShardToken::acquire_nth(2).is_none());
/// let zero = ShardToken::acquire().ok_or(EBUSY)?;
/// assert_eq!((zero.id(), one.id(), ShardToken::IDS), (0, 1, 2));
/// drop(one);
/// assert!(ShardToken::acquire_nth(1).is_some());
/// # Ok::<(), Error>(())
/// ```
#[macro_export]
macro_rules! define_token {
    ($vis:vis $name:ident) => {
        $crate::define_token!($vis $name, 1);
    };
    ($vis:vis $name:ident, $n:expr) => {
        /// A token: at most one of each id exists at a time (see [`kernel::hlist::Token`]).
        $vis struct $name {
            id: u32,
            // Not `Sync`: shared references to the token stay on one thread.
            _not_sync: ::core::marker::PhantomData<::core::cell::Cell<()>>,
        }

        impl $name {
            /// How many ids there are.
            #[allow(dead_code)]
            $vis const IDS: usize = $n;

            #[inline]
            fn taken() -> &'static [::core::sync::atomic::AtomicBool; $n] {
                #[allow(clippy::declare_interior_mutable_const)]
                const FREE: ::core::sync::atomic::AtomicBool =
                    ::core::sync::atomic::AtomicBool::new(false);
                static TAKEN: [::core::sync::atomic::AtomicBool; $n] = [FREE; $n];
                &TAKEN
            }

            /// The token of id 0, unless it exists already.
            #[allow(dead_code)]
            $vis fn acquire() -> ::core::option::Option<Self> {
                Self::acquire_nth(0)
            }

            /// The token of id `id`, unless it exists already or there is no such id.
            #[allow(dead_code)]
            $vis fn acquire_nth(id: usize) -> ::core::option::Option<Self> {
                Self::taken()
                    .get(id)?
                    .compare_exchange(
                        false,
                        true,
                        ::core::sync::atomic::Ordering::Acquire,
                        ::core::sync::atomic::Ordering::Relaxed,
                    )
                    .ok()
                    .map(|_| Self {
                        id: id as u32,
                        _not_sync: ::core::marker::PhantomData,
                    })
            }
        }

        impl ::core::ops::Drop for $name {
            #[inline]
            fn drop(&mut self) {
                Self::taken()[self.id as usize]
                    .store(false, ::core::sync::atomic::Ordering::Release);
            }
        }

        // SAFETY: `acquire_nth` is the only way to make a value, and it succeeds only while no
        // other value of that id exists (its flag is set while one does, and cleared when it is
        // dropped); the id is private and never changes. The `Cell` marker keeps the type from
        // being `Sync`.
        unsafe impl $crate::hlist::Token for $name {
            #[inline]
            fn id(&self) -> usize {
                self.id as usize
            }
        }
    };
}

/// A value that a holder of `&K` may read and a holder of `&mut K` may change, for data that
/// lives next to token-governed lists (KSM's chains of stable nodes).
///
/// It is not [`crate::sync::LockedBy`], which proves access by a borrow of the data a given lock
/// protects: the lists here are governed by tokens, values that are not locks (a shard's token
/// lives under the shard's lock, but a single-threaded user, such as a KUnit suite, holds one
/// with no lock at all), and a cell must check the same token as the lists next to it.
///
/// `T: Unpin`: handing out `&mut T` must not let pinned data move.
pub struct TokenCell<T: Unpin, K: Token> {
    value: core::cell::UnsafeCell<T>,
    id: u32,
    _k: PhantomData<*const K>,
}

// SAFETY: Access follows the token: shared with `&K`, exclusive with `&mut K`, from any thread.
unsafe impl<T: Unpin + Send, K: Token> Send for TokenCell<T, K> {}
// SAFETY: As above; `&mut T` is only handed out under the exclusive token.
unsafe impl<T: Unpin + Send + Sync, K: Token> Sync for TokenCell<T, K> {}

impl<T: Unpin, K: Token> TokenCell<T, K> {
    /// A cell holding `value`, governed by the token of id 0.
    #[inline]
    pub const fn new(value: T) -> Self {
        Self {
            value: core::cell::UnsafeCell::new(value),
            id: 0,
            _k: PhantomData,
        }
    }

    /// A cell holding `value`, governed by `token`'s id.
    #[inline]
    pub fn new_for(value: T, token: &K) -> Self {
        Self {
            value: core::cell::UnsafeCell::new(value),
            id: token.id() as u32,
            _k: PhantomData,
        }
    }

    /// The value, for as long as the token is borrowed.
    #[inline]
    pub fn get<'t>(&'t self, token: &'t K) -> &'t T {
        check_id(token, self.id);
        // SAFETY: Only a holder of `&mut K` of the cell's id writes the value, and there is one
        // `K` of that id: while it is borrowed, nobody can.
        unsafe { &*self.value.get() }
    }

    /// The value, to change, for as long as the token is borrowed exclusively.
    #[inline]
    pub fn get_mut<'t>(&'t self, token: &'t mut K) -> &'t mut T {
        check_id(token, self.id);
        // SAFETY: The one `K` of the cell's id is borrowed exclusively: no other reference to the
        // value exists.
        unsafe { &mut *self.value.get() }
    }

    /// The value, when the cell itself is owned.
    #[inline]
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}
