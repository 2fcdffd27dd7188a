// SPDX-License-Identifier: GPL-2.0

//! KUnit suites written in Rust.
//!
//! C header: [`include/kunit/test.h`](srctree/include/kunit/test.h)
//!
//! A suite is a list of test functions, each `fn() -> TestResult`. [`kunit_suite!`] builds the
//! `struct kunit_case` array and the `struct kunit_suite` at compile time and places the suite in
//! the `.kunit_test_suites` section, where the KUnit executor finds it: at boot for built-in code
//! (`kunit.enable=1`, filtered by `kunit.filter_glob=`), or when a module loads.
//!
//! Checks report through KUnit and then return from the test function, so that every value the
//! test owns is dropped normally (KUnit's own assertions abort the test thread instead, which
//! would leak them):
//!
//! - [`kunit_ensure!`] fails the test and returns `Err(Failed)` when its condition is false;
//! - [`kunit_ensure_eq!`] does the same for two values that must be equal, printing both;
//! - [`kunit_expect!`] fails the test but lets it go on.
//!
//! [`kunit_suite!`]: crate::kunit_suite!
//! [`kunit_ensure!`]: crate::kunit_ensure!
//! [`kunit_ensure_eq!`]: crate::kunit_ensure_eq!
//! [`kunit_expect!`]: crate::kunit_expect!
//!
//! # Examples
//!
//! ```ignore
//! use kernel::kunit_suite::TestResult;
//! use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};
//!
//! fn adds_up() -> TestResult {
//!     kunit_ensure_eq!(1 + 1, 2);
//!     kunit_ensure!(2 > 1, "two is not greater than {}", 1);
//!     Ok(())
//! }
//!
//! kunit_suite!("example_suite", [adds_up]);
//! ```

use crate::{bindings, str::CStr};
use core::{ffi::c_void, fmt};

/// The error of a failed check; the failure itself has already been reported to KUnit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

/// What a test function returns.
pub type TestResult = core::result::Result<(), Failed>;

/// Length of `struct kunit_suite::name`, including the terminating NUL.
const SUITE_NAME_LEN: usize = 256;

/// Reports a failure of the test that runs on this thread, with the place it comes from.
///
/// Outside a KUnit test it only prints the message.
pub fn report_failure(file: &CStr, line: u32, args: fmt::Arguments<'_>) {
    // SAFETY: `file` and the format are NUL-terminated strings that outlive the call; `%pA` takes
    // a pointer to `fmt::Arguments`, which `args` is for the duration of the call.
    let reported = unsafe {
        bindings::kunit_fail_current_test(
            file.as_char_ptr(),
            line as ffi::c_int,
            crate::c_str!("%pA").as_char_ptr(),
            &args as *const fmt::Arguments<'_> as *const c_void,
        )
    };
    // Outside a test: still say it, so that a failed check is never silent.
    if !reported {
        crate::pr_err!("{}:{}: {}\n", file, line, args);
    }
}

/// Turns an error into a test failure reported where it happened: `setup().check()?`.
pub trait Check<T> {
    /// The value, or a failure of the current test naming the caller's file and line.
    fn check(self) -> core::result::Result<T, Failed>;
}

#[track_caller]
fn fail_here(what: fmt::Arguments<'_>) -> Failed {
    let loc = core::panic::Location::caller();
    // `Location::file` is not NUL-terminated: copy it into a C string (cut if very long).
    let mut buf = [0u8; 128];
    let name = loc.file().as_bytes();
    let n = name.len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&name[..n]);
    let file = CStr::from_bytes_with_nul(&buf[..=n]).unwrap_or(crate::c_str!("?"));
    report_failure(file, loc.line(), what);
    Failed
}

impl<T, E: fmt::Debug> Check<T> for core::result::Result<T, E> {
    #[track_caller]
    fn check(self) -> core::result::Result<T, Failed> {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(fail_here(format_args!("unexpected error: {:?}", e))),
        }
    }
}

impl<T> Check<T> for Option<T> {
    #[track_caller]
    fn check(self) -> core::result::Result<T, Failed> {
        self.ok_or_else(|| fail_here(format_args!("unexpected None")))
    }
}

/// Runs one test function and records its outcome (used by [`kunit_suite!`]).
///
/// [`kunit_suite!`]: crate::kunit_suite!
#[doc(hidden)]
pub fn run_case(test: fn() -> TestResult) {
    // A failing check has already reported itself; the result only ends the test early.
    let _ = test();
}

/// A `struct kunit_case` for a test function, with its name.
#[doc(hidden)]
pub const fn case(
    name: &'static CStr,
    run: unsafe extern "C" fn(*mut bindings::kunit),
) -> bindings::kunit_case {
    // SAFETY: `kunit_case` is plain data (pointers, integers, enums whose value 0 is valid), for
    // which all-zeroes is a valid value: it is how C leaves the fields it does not name.
    let mut c: bindings::kunit_case = unsafe { core::mem::zeroed() };
    c.run_case = Some(run);
    c.name = name.as_char_ptr();
    c
}

/// The all-zero `struct kunit_case` that ends a case array.
#[doc(hidden)]
pub const fn end_of_cases() -> bindings::kunit_case {
    // SAFETY: As in [`case`], all-zeroes is a valid `kunit_case`; KUnit stops at a null `run_case`.
    unsafe { core::mem::zeroed() }
}

/// A `struct kunit_suite` named `name` whose cases are `cases`, terminated by [`end_of_cases`].
///
/// Fails to compile when the name does not fit KUnit's 255 characters.
#[doc(hidden)]
pub const fn suite(name: &str, cases: *mut bindings::kunit_case) -> bindings::kunit_suite {
    let bytes = name.as_bytes();
    assert!(bytes.len() < SUITE_NAME_LEN, "KUnit suite name too long");
    // SAFETY: `kunit_suite` is plain data for which all-zeroes is valid, as C's designated
    // initialisers leave it.
    let mut s: bindings::kunit_suite = unsafe { core::mem::zeroed() };
    let mut i = 0;
    while i < bytes.len() {
        s.name[i] = bytes[i] as ffi::c_char;
        i += 1;
    }
    s.test_cases = cases;
    s
}

/// Declares a KUnit suite of Rust test functions and registers it with KUnit.
///
/// `kunit_suite!("suite_name", [test_a, test_b])` takes functions of type
/// `fn() -> TestResult` that are in scope; each becomes a case named after the function. One
/// suite per module: the macro defines a private module `__kunit_suite` next to the tests.
#[macro_export]
macro_rules! kunit_suite {
    ($name:literal, [$($case:ident),+ $(,)?] $(,)?) => {
        #[allow(non_snake_case, unused_imports)]
        mod __kunit_suite {
            use $crate::bindings::{kunit, kunit_case, kunit_suite};

            $(
                pub(super) mod $case {
                    /// The C entry point of the case.
                    ///
                    /// # Safety
                    ///
                    /// Only KUnit calls it, on the test's own thread.
                    pub(crate) unsafe extern "C" fn run(_test: *mut $crate::bindings::kunit) {
                        $crate::kunit_suite::run_case(super::super::$case);
                    }
                }
            )+

            const N: usize = [$(stringify!($case)),+].len();

            // KUnit writes each case's status and log into the array, hence `static mut`; only
            // KUnit touches it, through the pointer in `SUITE`.
            static mut CASES: [kunit_case; N + 1] = [
                $($crate::kunit_suite::case($crate::c_str!(stringify!($case)), $case::run),)+
                $crate::kunit_suite::end_of_cases(),
            ];

            static mut SUITE: kunit_suite =
                $crate::kunit_suite::suite($name, ::core::ptr::addr_of_mut!(CASES).cast());

            // The executor runs every suite whose pointer is in this section.
            #[used]
            #[link_section = ".kunit_test_suites"]
            static mut ENTRY: *mut kunit_suite = ::core::ptr::addr_of_mut!(SUITE);
        }
    };
}

/// Fails the current test and returns `Err(Failed)` from the enclosing function unless `cond`
/// holds. An optional format string and arguments say what went wrong.
#[macro_export]
macro_rules! kunit_ensure {
    ($cond:expr $(,)?) => {
        $crate::kunit_ensure!($cond, "{}", ::core::stringify!($cond))
    };
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            $crate::kunit_suite::report_failure(
                $crate::c_str!(::core::file!()),
                ::core::line!(),
                ::core::format_args!($($arg)+),
            );
            return ::core::result::Result::Err($crate::kunit_suite::Failed.into());
        }
    };
}

/// Fails the current test and returns `Err(Failed)` unless `left == right`, printing both.
#[macro_export]
macro_rules! kunit_ensure_eq {
    ($left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (l, r) => $crate::kunit_ensure!(
                *l == *r,
                "{} == {}: left is {:?}, right is {:?}",
                ::core::stringify!($left),
                ::core::stringify!($right),
                l,
                r
            ),
        }
    };
}

/// Fails the current test unless `cond` holds, and goes on; evaluates to `cond`.
#[macro_export]
macro_rules! kunit_expect {
    ($cond:expr $(,)?) => {
        $crate::kunit_expect!($cond, "{}", ::core::stringify!($cond))
    };
    ($cond:expr, $($arg:tt)+) => {{
        let ok: bool = $cond;
        if !ok {
            $crate::kunit_suite::report_failure(
                $crate::c_str!(::core::file!()),
                ::core::line!(),
                ::core::format_args!($($arg)+),
            );
        }
        ok
    }};
}
