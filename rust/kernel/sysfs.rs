// SPDX-License-Identifier: GPL-2.0

//! sysfs attribute groups of kobject attributes (`/sys/kernel/mm/<name>/<attr>`).
//!
//! C header: [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h)
//!
//! An [`Attribute`] is a name, a mode, and the Rust functions that show and store it; a group of
//! them is registered once under a kobject ([`register_mm_group`] for `mm_kobj`) and stays for
//! the life of the kernel.

use crate::{alloc::KVec, bindings, error::Result, prelude::*, str::CStr};
use core::fmt;

/// The page that a `show` writes into.
pub struct ShowBuf {
    buf: *mut u8,
    len: usize,
}

impl fmt::Write for ShowBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = (crate::page::PAGE_SIZE - 1).saturating_sub(self.len);
        let n = s.len().min(room);
        // SAFETY: `buf` is sysfs's `PAGE_SIZE` buffer and `len + n < PAGE_SIZE`.
        unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.add(self.len), n) };
        self.len += n;
        if n < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// One attribute of a group.
pub struct Attribute {
    /// The file name.
    pub name: &'static CStr,
    /// The file mode (0444 or 0644, say).
    pub mode: u16,
    /// Writes the value into the page.
    pub show: fn(&mut ShowBuf) -> fmt::Result,
    /// Takes a written value (the whole write, as a string); `None` for read-only attributes.
    pub store: Option<fn(&CStr) -> Result>,
}

/// A `struct kobj_attribute` with the Rust attribute it stands for.
#[repr(C)]
struct KobjAttr {
    kattr: bindings::kobj_attribute,
    rust: &'static Attribute,
    /// The group the attribute was registered in. sysfs keeps no pointer to a group once its
    /// files exist, only to their attributes: this one keeps the group, and the array of
    /// pointers it holds, reachable from memory that is in use, so that kmemleak, which reports
    /// allocations that nothing points to, does not report them (C's groups are static).
    group: *mut bindings::attribute_group,
}

/// The `show` of every attribute registered here.
///
/// # Safety
///
/// `attr` must be the `kattr` of a live `KobjAttr` and `buf` a page-sized buffer, as sysfs
/// passes them for the attributes `register_mm_group` creates.
unsafe extern "C" fn show(
    _kobj: *mut bindings::kobject,
    attr: *mut bindings::kobj_attribute,
    buf: *mut ffi::c_char,
) -> isize {
    // SAFETY: Every attribute of our groups is the first field of a `KobjAttr` (repr(C)).
    let a = unsafe { &*attr.cast::<KobjAttr>() };
    let mut out = ShowBuf {
        buf: buf.cast(),
        len: 0,
    };
    let _ = (a.rust.show)(&mut out);
    out.len as isize
}

/// The `store` of every attribute registered here.
///
/// # Safety
///
/// `attr` must be the `kattr` of a live `KobjAttr` and `buf` a NUL-terminated string of
/// `count` bytes, as sysfs passes them for the attributes `register_mm_group` creates.
unsafe extern "C" fn store(
    _kobj: *mut bindings::kobject,
    attr: *mut bindings::kobj_attribute,
    buf: *const ffi::c_char,
    count: usize,
) -> isize {
    // SAFETY: As in `show`.
    let a = unsafe { &*attr.cast::<KobjAttr>() };
    let Some(f) = a.rust.store else {
        return -(bindings::EIO as isize);
    };
    // SAFETY: sysfs hands stores a NUL-terminated copy of what was written.
    let s = unsafe { CStr::from_char_ptr(buf) };
    match f(s) {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// Registers the group `name` of `attrs` under `/sys/kernel/mm` (C's `mm_kobj`). The group stays
/// for the life of the kernel.
pub fn register_mm_group(name: &'static CStr, attrs: &'static [Attribute]) -> Result {
    let mut kattrs = KVec::with_capacity(attrs.len(), GFP_KERNEL)?;
    for a in attrs {
        // SAFETY: All-zero is a valid `kobj_attribute` (null callbacks); the fields are set next.
        let mut k: bindings::kobj_attribute = unsafe { core::mem::zeroed() };
        k.attr.name = a.name.as_char_ptr();
        k.attr.mode = a.mode;
        // Attributes not in static memory need a static lockdep key (C's `sysfs_attr_init()`).
        #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
        {
            k.attr.key = crate::static_lock_class!().as_ptr();
        }
        k.show = Some(show);
        if a.store.is_some() {
            k.store = Some(store);
        }
        kattrs.push(
            KobjAttr {
                kattr: k,
                rust: a,
                group: core::ptr::null_mut(),
            },
            GFP_KERNEL,
        )?;
    }
    // The attributes must not move once registered: leak them for the life of the kernel.
    let (kattrs, len, _) = kattrs.into_raw_parts();
    let mut ptrs: KVec<*mut bindings::attribute> = KVec::with_capacity(len + 1, GFP_KERNEL)?;
    for i in 0..len {
        // SAFETY: `kattrs` has `len` initialised elements.
        let attr = unsafe { core::ptr::addr_of_mut!((*kattrs.add(i)).kattr.attr) };
        ptrs.push(attr, GFP_KERNEL)?;
    }
    ptrs.push(core::ptr::null_mut(), GFP_KERNEL)?;
    let (ptrs, _, _) = ptrs.into_raw_parts();
    // SAFETY: All-zero is a valid `attribute_group`.
    let mut group: bindings::attribute_group = unsafe { core::mem::zeroed() };
    group.name = name.as_char_ptr();
    group.attrs = ptrs;
    let group = KBox::into_raw(KBox::new(group, GFP_KERNEL)?);
    for i in 0..len {
        // SAFETY: `kattrs` has `len` initialised elements, which nothing else uses yet.
        unsafe { (*kattrs.add(i)).group = group };
    }
    // SAFETY: `mm_kobj` is the kernel's `/sys/kernel/mm`; the group and everything it points to
    // is leaked, so it lives as long as the files.
    let r = unsafe { bindings::sysfs_create_group(bindings::mm_kobj, group) };
    crate::error::to_result(r)
}

/// Parses a base-10 `unsigned int` as C's `kstrtouint()` does (a leading `+`, a trailing
/// newline); its error: `EINVAL` if not a number, `ERANGE` if too large.
pub fn kstrtouint(s: &CStr) -> Result<u32> {
    let mut v = 0;
    // SAFETY: `s` is NUL-terminated; `v` is writable.
    crate::error::to_result(unsafe { bindings::kstrtouint(s.as_char_ptr(), 10, &mut v) })?;
    Ok(v)
}

/// Parses a base-10 `unsigned long` as C's `kstrtoul()` does.
pub fn kstrtoul(s: &CStr) -> Result<usize> {
    let mut v = 0;
    // SAFETY: As in `kstrtouint`; `unsigned long` is `unsigned long long`'s size here.
    crate::error::to_result(unsafe { bindings::kstrtoull(s.as_char_ptr(), 10, &mut v) })?;
    Ok(v as usize)
}

/// Parses a base-10 `int` as C's `kstrtoint()` does.
pub fn kstrtoint(s: &CStr) -> Result<i32> {
    let mut v = 0;
    // SAFETY: As in `kstrtouint`.
    crate::error::to_result(unsafe { bindings::kstrtoint(s.as_char_ptr(), 10, &mut v) })?;
    Ok(v)
}

/// Parses a boolean as C's `kstrtobool()` does (`y`/`n`, `1`/`0`, `on`/`off`).
pub fn kstrtobool(s: &CStr) -> Result<bool> {
    let mut v = false;
    // SAFETY: As in `kstrtouint`.
    crate::error::to_result(unsafe { bindings::kstrtobool(s.as_char_ptr(), &mut v) })?;
    Ok(v)
}

/// Whether a written value is `lit`, ignoring a trailing newline (C's `sysfs_streq()`).
pub fn streq(s: &CStr, lit: &CStr) -> bool {
    // SAFETY: Both are NUL-terminated.
    unsafe { bindings::sysfs_streq(s.as_char_ptr(), lit.as_char_ptr()) }
}
