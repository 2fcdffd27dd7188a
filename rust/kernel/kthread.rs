// SPDX-License-Identifier: GPL-2.0

//! Kernel threads, and wait queues that such threads sleep on freezably.
//!
//! [`WaitQueue`] is not [`crate::sync::CondVar`]: a kernel thread that the freezer must be able
//! to stop sleeps with `wait_event_freezable()`, which 6.12's `CondVar` has no form of, and
//! KSM's threads wait for a condition on atomics rather than under a lock.
//!
//! C headers: [`include/linux/kthread.h`](srctree/include/linux/kthread.h),
//! [`include/linux/freezer.h`](srctree/include/linux/freezer.h),
//! [`include/linux/wait.h`](srctree/include/linux/wait.h)

use crate::{
    bindings,
    error::{from_err_ptr, to_result, Result},
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
    /// Lets the thread run only on its share of the online CPUs: those whose position among
    /// them is `i` modulo `n`; on every CPU kernel threads may use when `n` is 1 (or the share is
    /// empty). Threads that work side by side so always run on different CPUs where there are
    /// enough: otherwise the scheduler may leave them on one CPU, taking turns, for a while. The
    /// share is that of the CPUs online now; a CPU that goes offline later makes the scheduler
    /// move the thread anywhere.
    pub fn set_cpu_share(&self, i: usize, n: usize) -> Result {
        let task = self.task.as_ptr();
        if n > 1 {
            let mask = KBox::<bindings::cpumask>::new_uninit(GFP_KERNEL | __GFP_ZERO)?;
            // SAFETY: `__GFP_ZERO` zeroed the allocation, and all zeroes is a valid, empty
            // `struct cpumask` (an array of bits).
            let mut mask = unsafe { mask.assume_init() };
            let mut empty = true;
            for (k, cpu) in online_cpus().enumerate() {
                if k % n == i {
                    // SAFETY: `cpu` is below `nr_cpu_ids`, and `mask` is a valid cpumask.
                    unsafe { bindings::cpumask_set_cpu(cpu, &mut *mask) };
                    empty = false;
                }
            }
            if !empty {
                // SAFETY: The thread was started by `run` and we hold a reference; the mask is
                // valid during the call, which copies it.
                return to_result(unsafe { bindings::set_cpus_allowed_ptr(task, &*mask) });
            }
        }
        // SAFETY: Always callable; the mask it returns lives as long as the kernel.
        let mask = unsafe { bindings::housekeeping_cpumask(bindings::hk_type_HK_TYPE_KTHREAD) };
        // SAFETY: The thread was started by `run` and we hold a reference; the mask is valid.
        to_result(unsafe { bindings::set_cpus_allowed_ptr(task, mask) })
    }

    /// The CPU time the thread has used, in nanoseconds.
    #[inline]
    pub fn runtime_ns(&self) -> u64 {
        // SAFETY: The thread was started by `run` and we hold a reference to its task.
        unsafe { bindings::task_sched_runtime(self.task.as_ptr()) }
    }

    /// Asks the thread to stop and waits until its function returns.
    #[inline]
    pub fn stop(self) {
        // SAFETY: The thread was started by `run` and we hold a reference.
        unsafe {
            bindings::kthread_stop(self.task.as_ptr());
            bindings::put_task_struct(self.task.as_ptr());
        }
    }
}

/// One more than the highest possible CPU id (C's `nr_cpu_ids`).
#[inline]
fn nr_cpu_ids() -> u32 {
    #[cfg(any(not(CONFIG_SMP), CONFIG_FORCE_NR_CPUS))]
    {
        bindings::NR_CPUS
    }

    #[cfg(not(any(not(CONFIG_SMP), CONFIG_FORCE_NR_CPUS)))]
    // SAFETY: `nr_cpu_ids` is set during boot, before any kernel thread runs, and not changed
    // after.
    unsafe {
        bindings::nr_cpu_ids
    }
}

/// The CPUs online now, in order (C's `for_each_online_cpu()`): as in C, CPUs may go offline or
/// come online meanwhile.
fn online_cpus() -> impl Iterator<Item = u32> {
    (0..nr_cpu_ids()).filter(|&cpu| {
        // SAFETY: `cpu_online()` may test any CPU id below `nr_cpu_ids`.
        unsafe { bindings::cpu_online(cpu) }
    })
}

/// Whether the current kernel thread has been asked to stop.
#[inline]
pub fn should_stop() -> bool {
    // SAFETY: Always callable from a kernel thread; false elsewhere.
    unsafe { bindings::kthread_should_stop() }
}

/// Makes the current kernel thread freezable (for suspend).
#[inline]
pub fn set_freezable() {
    // SAFETY: Acts on the current thread.
    unsafe { bindings::set_freezable() };
}

/// Whether the current thread should freeze now (a suspend is under way).
#[inline]
pub fn freezing() -> bool {
    // SAFETY: `get_current()` is the running task; only its state is read.
    unsafe { bindings::freezing(bindings::get_current()) }
}

/// Sets the nice value of the current thread.
#[inline]
pub fn set_current_nice(nice: i32) {
    // SAFETY: `get_current()` is the running task.
    unsafe { bindings::set_user_nice(bindings::get_current(), nice as _) };
}

/// Gives the scheduler a chance to run something else (C's `cond_resched()`).
#[inline]
pub fn cond_resched() {
    // SAFETY: Callable wherever sleeping is allowed.
    unsafe { bindings::cond_resched() };
}

/// Gives the CPU to another runnable thread of this CPU, if there is one (C's `yield()`).
///
/// Unlike [`cond_resched`], it switches even when the running thread's time slice is not used
/// up: a test can make threads take turns inside a critical section on a CPU that does not
/// preempt (User-Mode Linux, `PREEMPT_NONE`). It is no way to wait for another thread.
#[inline]
pub fn yield_now() {
    // SAFETY: Callable wherever sleeping is allowed.
    unsafe { bindings::yield_() };
}

/// The jiffies counter (`get_jiffies_64()`). 6.12's [`crate::time`] has the jiffies types and
/// conversions but no reader of the counter.
#[inline]
pub fn jiffies() -> u64 {
    // SAFETY: Always callable.
    unsafe { bindings::get_jiffies_64() }
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
    #[inline]
    pub fn new(name: &'static CStr, key: &'static LockClassKey) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid while the closure runs, and is pinned.
            wq <- Opaque::ffi_init(|slot| unsafe {
                bindings::__init_waitqueue_head(slot, name.as_char_ptr(), key.as_ptr())
            }),
        })
    }

    #[inline]
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

    /// Wakes every sleeper (C's `wake_up_all()`).
    #[inline]
    pub fn wake_up_all(&self) {
        // SAFETY: The queue is initialised (type invariant).
        unsafe { bindings::__wake_up(self.raw(), bindings::TASK_NORMAL, 0, core::ptr::null_mut()) };
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

/// A job lent to a [`Crew`]: a closure whose lifetime [`Crew::run_beside`] erased.
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn(usize) + Sync));

// SAFETY: The closure is `Sync`, so it may be called from any thread; `Crew::run_beside` keeps
// it alive while any thread may call it.
unsafe impl Send for Job {}

/// What a [`Crew`]'s lock protects.
struct CrewState {
    /// The job on offer, while [`Crew::run_beside`] runs.
    job: Option<Job>,
    /// Counts the jobs offered, so that a helper joins each at most once.
    round: u64,
    /// How many more helpers may join the job on offer.
    room: usize,
    /// How many helpers are running the job.
    busy: usize,
    /// How many helpers joined the job (the next one's number is one more).
    joined: usize,
}

/// Kernel threads that help one leading thread run a job: a fork and join in which the leader and
/// the helpers that join all call the same closure, which shares the work out itself (taking
/// items from a shared counter, say), and the leader goes on only once every helper that
/// joined has returned from it. Each call is given its thread's number in the job: 0 for the
/// leader, and 1, 2, ... for the helpers in the order they joined.
///
/// Helpers are kernel threads that call [`Crew::serve`]; a crew with no helper serving it runs
/// every job on the leader alone. Helpers that are frozen, or busy elsewhere, simply do not join:
/// the leader never waits for a helper to start, only for those that started to finish.
///
/// # Examples
///
/// With no helper serving it, a crew runs the job on the calling thread alone:
///
/// ```
/// use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
/// use kernel::kthread::Crew;
/// use kernel::prelude::*;
///
/// let crew = KBox::pin_init(Crew::new(), GFP_KERNEL)?;
/// let calls = AtomicUsize::new(0);
/// let job = |i: usize| {
///     assert_eq!(i, 0);
///     calls.fetch_add(1, Relaxed);
/// };
/// assert_eq!(crew.run_beside(1, &job, || 7), 7);
/// crew.run(0, &job);
/// assert_eq!(calls.load(Relaxed), 2);
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `state.job` is `Some` only while [`Crew::run_beside`] runs, and then points to the closure
/// it was given; `run_beside` returns only once the job is withdrawn and `state.busy` is 0.
#[pin_data]
pub struct Crew {
    #[pin]
    state: crate::sync::SpinLock<CrewState>,
    #[pin]
    start: WaitQueue,
    #[pin]
    done: WaitQueue,
}

impl Crew {
    /// A crew with no job on offer.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state <- crate::new_spinlock!(
                CrewState {
                    job: None,
                    round: 0,
                    room: 0,
                    busy: 0,
                    joined: 0,
                },
                "crew_state"
            ),
            start <- WaitQueue::new(crate::c_str!("crew_start"), crate::static_lock_class!()),
            done <- WaitQueue::new(crate::c_str!("crew_done"), crate::static_lock_class!()),
        })
    }

    /// Runs `job` on the calling thread and on up to `helpers` helpers at once; returns once
    /// every call has returned.
    #[inline]
    pub fn run(&self, helpers: usize, job: &(dyn Fn(usize) + Sync)) {
        self.run_beside(helpers, job, || ())
    }

    /// Offers `job` to up to `helpers` helpers, runs `own` on the calling thread meanwhile, and
    /// then `job` too; returns `own`'s result once every call of `job` has returned.
    pub fn run_beside<R>(
        &self,
        helpers: usize,
        job: &(dyn Fn(usize) + Sync),
        own: impl FnOnce() -> R,
    ) -> R {
        if helpers == 0 {
            let r = own();
            job(0);
            return r;
        }
        // SAFETY: Only the lifetime changes (the pointer types have the same layout). The
        // pointer is called only by helpers that join while the job is on offer; it is withdrawn
        // below before this function waits for every helper that joined to return, so no call
        // outlives the borrow of `job`.
        let raw: *const (dyn Fn(usize) + Sync + 'static) = unsafe {
            core::mem::transmute::<
                *const (dyn Fn(usize) + Sync + '_),
                *const (dyn Fn(usize) + Sync + 'static),
            >(job)
        };
        {
            let mut st = self.state.lock();
            // INVARIANT: `run_beside` is running and waits below for every helper that joins.
            st.job = Some(Job(raw));
            st.round = st.round.wrapping_add(1);
            st.room = helpers;
            st.joined = 0;
        }
        self.start.wake_up_all();
        let r = own();
        job(0);
        self.state.lock().job = None;
        self.done
            .wait_freezable(|| self.state.lock().busy == 0, None);
        r
    }

    /// Serves the crew as a helper until the thread is asked to stop: sleeps (freezably) until a
    /// job is on offer that has room, and joins it.
    pub fn serve(&self) {
        let mut seen = 0u64;
        let open = |seen: u64| {
            let st = self.state.lock();
            st.job.is_some() && st.round != seen && st.room > 0
        };
        while !should_stop() {
            self.start
                .wait_freezable(|| should_stop() || open(seen), None);
            let (job, number) = {
                let mut st = self.state.lock();
                match st.job {
                    Some(job) if st.round != seen && st.room > 0 => {
                        st.room -= 1;
                        st.busy += 1;
                        st.joined += 1;
                        seen = st.round;
                        (job, st.joined)
                    }
                    _ => continue,
                }
            };
            // SAFETY: The job was on offer when this helper joined (counted in `busy`);
            // `run_beside` keeps the closure alive until `busy` drops back to 0 (type invariant).
            unsafe { (*job.0)(number) };
            let idle = {
                let mut st = self.state.lock();
                st.busy -= 1;
                st.busy == 0
            };
            if idle {
                self.done.wake_up_all();
            }
        }
    }
}

/// The elements of a slice shared out among the threads of a [`Crew`] job: each element goes,
/// to change, to exactly one of the threads that call [`WorkList::take`],
/// [`WorkList::take_back`] or their several-at-once forms. Threads that take from opposite ends
/// work on elements far apart until they meet (pages of different page tables, say, whose locks
/// they then do not share).
///
/// # Examples
///
/// ```
/// use kernel::kthread::WorkList;
///
/// let mut v = [1, 2, 3];
/// {
///     let work = WorkList::new(&mut v);
///     let mut n = 0;
///     if let Some(x) = work.take_back() {
///         assert_eq!(*x, 3);
///         *x *= 10;
///         n += 1;
///     }
///     while let Some(x) = work.take() {
///         *x *= 10;
///         n += 1;
///     }
///     assert_eq!(n, 3);
///     assert!(work.take().is_none());
///     assert!(work.take_back().is_none());
/// }
/// assert_eq!(v, [10, 20, 30]);
///
/// let mut v = [1, 2, 3, 4, 5];
/// let work = WorkList::new(&mut v);
/// assert_eq!(work.take_some(2), &[1, 2]);
/// assert_eq!(work.take_some_back(2), &[4, 5]);
/// assert_eq!(work.take_some_back(2), &[3]);
/// assert!(work.take_some(2).is_empty());
/// ```
///
/// # Invariants
///
/// `ptr` is that of a slice borrowed mutably for `'a`; `ends` holds the index of the first
/// element not handed out from the front (low 32 bits) and one past the last element not handed
/// out from the back (high 32 bits), both within the slice: the elements before the first and
/// from the second on were handed out, each once.
pub struct WorkList<'a, T> {
    ptr: *mut T,
    ends: core::sync::atomic::AtomicU64,
    _slice: core::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: Every element goes to one thread only (`take`, `take_back`), so sharing the list only
// moves exclusive access to elements between threads, which `T: Send` allows.
unsafe impl<T: Send> Sync for WorkList<'_, T> {}

impl<'a, T> WorkList<'a, T> {
    /// A list of the elements of `slice`, in order (at most `u32::MAX` of them are handed out).
    #[inline]
    pub fn new(slice: &'a mut [T]) -> Self {
        let len = slice.len().min(u32::MAX as usize);
        // INVARIANT: The slice is borrowed mutably for `'a`; nothing was handed out.
        Self {
            ptr: slice.as_mut_ptr(),
            ends: core::sync::atomic::AtomicU64::new((len as u64) << 32),
            _slice: core::marker::PhantomData,
        }
    }

    /// Moves one of the ends inwards by up to `n` elements, if the two have not met; the range of
    /// the indices of the elements passed.
    #[inline]
    fn advance(&self, back: bool, n: usize) -> Option<core::ops::Range<usize>> {
        use core::sync::atomic::Ordering::Relaxed;
        let n = n.clamp(1, u32::MAX as usize) as u64;
        let mut ends = self.ends.load(Relaxed);
        loop {
            let (front, end) = (ends & u64::from(u32::MAX), ends >> 32);
            if front >= end {
                return None;
            }
            let k = n.min(end - front);
            let (next, range) = if back {
                (ends - (k << 32), end - k..end)
            } else {
                (ends + k, front..front + k)
            };
            match self
                .ends
                .compare_exchange_weak(ends, next, Relaxed, Relaxed)
            {
                Ok(_) => return Some(range.start as usize..range.end as usize),
                Err(now) => ends = now,
            }
        }
    }

    /// Up to `n` elements no thread took yet, from the back end or the front, in order (empty if
    /// there are none).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    fn take_from(&self, back: bool, n: usize) -> &mut [T] {
        let Some(range) = self.advance(back, n) else {
            return &mut [];
        };
        // SAFETY: `range` is within the slice (the ends only move inwards from its bounds), which
        // is borrowed mutably for `'a`, which outlives `&self`; `advance` just handed it to this
        // caller, and the ends hand out each index once, so no other reference to these
        // elements exists.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }

    /// The first element no thread took yet, if any.
    // `&mut` from `&self` is the point: the ends hand each element out once, so the shared list
    // gives each thread exclusive access to different elements.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub fn take(&self) -> Option<&mut T> {
        self.take_some(1).first_mut()
    }

    /// Up to `n` of the first elements no thread took yet, in order (empty if there are none):
    /// one atomic operation on the shared ends for all of them.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub fn take_some(&self, n: usize) -> &mut [T] {
        self.take_from(false, n)
    }

    /// The last element no thread took yet, if any.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub fn take_back(&self) -> Option<&mut T> {
        self.take_some_back(1).last_mut()
    }

    /// Up to `n` of the last elements no thread took yet, in order (empty if there are none).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub fn take_some_back(&self, n: usize) -> &mut [T] {
        self.take_from(true, n)
    }
}
