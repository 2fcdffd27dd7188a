// SPDX-License-Identifier: GPL-2.0

//! Kernel threads, and wait queues that such threads sleep on freezably.
//!
//! C headers: [`include/linux/kthread.h`](srctree/include/linux/kthread.h),
//! [`include/linux/freezer.h`](srctree/include/linux/freezer.h),
//! [`include/linux/wait.h`](srctree/include/linux/wait.h)

use crate::{
    bindings,
    error::{from_err_ptr, Result},
    prelude::*,
    str::CStr,
    sync::LockClassKey,
    types::Opaque,
};
use core::{ffi::c_void, mem::MaybeUninit, ptr::NonNull};

/// A kernel thread that runs a function.
///
/// # Invariants
///
/// `task` is a kernel thread started by [`run`], which holds a reference to it.
pub struct KThread {
    task: NonNull<bindings::task_struct>,
}

// SAFETY: A task may be stopped from any thread.
unsafe impl Send for KThread {}
// SAFETY: As above; no shared access is offered.
unsafe impl Sync for KThread {}

/// The thread function given to `kthread_create_on_node()`.
///
/// # Safety
///
/// `data` must be a `fn()` cast to a pointer, as `run` passes it.
unsafe extern "C" fn trampoline(data: *mut c_void) -> core::ffi::c_int {
    // SAFETY: `run` passes a `fn()` as the data pointer; function and data pointers have the same
    // size on the kernel's targets.
    let f: fn() = unsafe { core::mem::transmute::<*mut c_void, fn()>(data) };
    f();
    0
}

/// Starts a kernel thread named `name` that runs `f` (C's `kthread_run()`).
pub fn run(f: fn(), name: &CStr) -> Result<KThread> {
    // SAFETY: `trampoline` takes the `fn()` passed as data; the name is a NUL-terminated string
    // copied by the call ("%s" keeps it from being read as a format).
    let task = from_err_ptr(unsafe {
        bindings::kthread_create_on_node(
            Some(trampoline),
            f as *mut c_void,
            bindings::NUMA_NO_NODE,
            crate::c_str!("%s").as_char_ptr(),
            name.as_char_ptr(),
        )
    })?;
    // SAFETY: `task` is the new, not yet running thread; `get_task_struct` keeps it for `stop`.
    unsafe {
        bindings::get_task_struct(task);
        bindings::wake_up_process(task);
    }
    // INVARIANT: Started above, with a reference held.
    Ok(KThread {
        task: NonNull::new(task).expect("kthread_create_on_node returned NULL"),
    })
}

impl KThread {
    /// Asks the thread to stop and waits until its function returns.
    pub fn stop(self) {
        // SAFETY: The thread was started by `run` and we hold a reference.
        unsafe {
            bindings::kthread_stop(self.task.as_ptr());
            bindings::put_task_struct(self.task.as_ptr());
        }
    }
}

/// Whether the current kernel thread has been asked to stop.
pub fn should_stop() -> bool {
    // SAFETY: Always callable from a kernel thread; false elsewhere.
    unsafe { bindings::kthread_should_stop() }
}

/// Makes the current kernel thread freezable (for suspend).
pub fn set_freezable() {
    // SAFETY: Acts on the current thread.
    unsafe { bindings::kthread_set_freezable() };
}

/// Whether the current thread should freeze now (a suspend is under way).
pub fn freezing() -> bool {
    // SAFETY: Reads the current thread's state.
    unsafe { bindings::kthread_freezing() }
}

/// Sets the nice value of the current thread.
pub fn set_current_nice(nice: i32) {
    // SAFETY: `get_current()` is the running task.
    unsafe { bindings::set_user_nice(bindings::get_current(), nice as _) };
}

/// Gives the scheduler a chance to run something else (C's `cond_resched()`).
pub fn cond_resched() {
    // SAFETY: Callable wherever sleeping is allowed.
    unsafe { bindings::cond_resched() };
}

/// Whether a signal is pending for the current task.
pub fn signal_pending() -> bool {
    // SAFETY: Reads the current task's state.
    unsafe { bindings::signal_pending_current() }
}

/// The CPU time the current task has used, in nanoseconds.
pub fn current_runtime_ns() -> u64 {
    // SAFETY: `get_current()` is the running task.
    unsafe { bindings::task_sched_runtime(bindings::get_current()) }
}

/// The monotonic clock, in nanoseconds (C's `ktime_get()`).
pub fn ktime_ns() -> i64 {
    // SAFETY: Always callable.
    unsafe { bindings::ktime_get() }
}

/// The jiffies counter.
pub fn jiffies() -> u64 {
    // SAFETY: Always callable.
    unsafe { bindings::get_jiffies_64() }
}

/// Milliseconds in jiffies.
pub fn msecs_to_jiffies(ms: u32) -> usize {
    // SAFETY: Pure conversion.
    unsafe { bindings::__msecs_to_jiffies(ms) as usize }
}

/// A wait queue (C's `wait_queue_head_t`).
///
/// # Invariants
///
/// `wq` is an initialised wait queue head, pinned.
#[pin_data]
pub struct WaitQueue {
    #[pin]
    wq: Opaque<bindings::wait_queue_head>,
}

// SAFETY: Wait queues are used from any thread; they have their own lock.
unsafe impl Send for WaitQueue {}
// SAFETY: As above.
unsafe impl Sync for WaitQueue {}

impl WaitQueue {
    /// A new wait queue.
    pub fn new(name: &'static CStr, key: &'static LockClassKey) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid while the closure runs, and is pinned.
            wq <- Opaque::ffi_init(|slot| unsafe {
                bindings::__init_waitqueue_head(slot, name.as_char_ptr(), key.as_ptr())
            }),
        })
    }

    fn raw(&self) -> *mut bindings::wait_queue_head {
        self.wq.get()
    }

    /// Wakes one interruptible sleeper (C's `wake_up_interruptible()`).
    pub fn wake_up_interruptible(&self) {
        // SAFETY: The queue is initialised (type invariant).
        unsafe {
            bindings::__wake_up(
                self.raw(),
                bindings::TASK_INTERRUPTIBLE,
                1,
                core::ptr::null_mut(),
            )
        };
    }

    /// Sleeps freezably until `cond()` holds, or `timeout` jiffies passed (C's
    /// `wait_event_freezable(_timeout)`): a suspend may freeze the sleeper. Returns the jiffies
    /// left (at least 1 if the condition came true, 0 if the time ran out). As in C, a timeout
    /// of 0 does not sleep at all.
    pub fn wait_freezable(&self, mut cond: impl FnMut() -> bool, timeout: Option<usize>) -> usize {
        let mut left = timeout.map_or(bindings::MAX_SCHEDULE_TIMEOUT, |t| t as _);
        if cond() {
            return (left as usize).max(1);
        }
        if left == 0 {
            return 0;
        }
        let mut entry = MaybeUninit::<bindings::wait_queue_entry>::zeroed();
        // SAFETY: `entry` is a writable entry that lives until `finish_wait` below.
        unsafe { bindings::init_wait_entry(entry.as_mut_ptr(), 0) };
        let state = (bindings::TASK_INTERRUPTIBLE | bindings::TASK_FREEZABLE) as _;
        loop {
            // SAFETY: The queue and the entry are valid; a kernel thread has no signals to report.
            unsafe { bindings::prepare_to_wait_event(self.raw(), entry.as_mut_ptr(), state) };
            if cond() {
                left = left.max(1);
                break;
            }
            // SAFETY: The task is queued and in a sleeping state.
            left = unsafe { bindings::schedule_timeout(left) };
            if left == 0 {
                break;
            }
        }
        // SAFETY: The entry was queued by `prepare_to_wait_event`.
        unsafe { bindings::finish_wait(self.raw(), entry.as_mut_ptr()) };
        left as usize
    }
}
