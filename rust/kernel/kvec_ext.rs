// SPDX-License-Identifier: GPL-2.0

//! Methods of [`Vec`] that 6.12's `kernel::alloc::kvec` does not have yet.

use crate::alloc::{Allocator, Vec};

impl<T, A: Allocator> Vec<T, A> {
    /// Removes the last element and returns it, or `None` if the vector is empty.
    pub fn pop(&mut self) -> Option<T> {
        let len = self.len().checked_sub(1)?;
        // SAFETY: Element `len` is initialised. Shrinking the length first takes it out of the
        // vector, so that it is read out exactly once and never dropped by the vector.
        unsafe {
            self.set_len(len);
            Some(self.as_ptr().add(len).read())
        }
    }

    /// Appends `v` if there is room for it without allocating; gives it back otherwise.
    ///
    /// For values that must not be dropped on failure: make room first with `reserve`.
    pub fn push_within_capacity(&mut self, v: T) -> Result<(), T> {
        let Some(slot) = self.spare_capacity_mut().first_mut() else {
            return Err(v);
        };
        slot.write(v);
        let len = self.len() + 1;
        // SAFETY: The element at the old length was just initialised, within the capacity.
        unsafe { self.set_len(len) };
        Ok(())
    }

    /// Removes the element at `index` and returns it, moving the last element into its place.
    ///
    /// # Panics
    ///
    /// Panics if `index` is out of bounds.
    pub fn swap_remove(&mut self, index: usize) -> T {
        let last = self.len() - 1;
        assert!(index <= last, "swap_remove index out of bounds");
        self.as_mut_slice().swap(index, last);
        // The vector is not empty: `index` is in it.
        match self.pop() {
            Some(v) => v,
            None => unreachable!(),
        }
    }
}
