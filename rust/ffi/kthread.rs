// SPDX-License-Identifier: GPL-2.0

//! Kthreads running closures: [`Worker`] (one bound to a CPU, until
//! dropped) and [`run_on_each_cpu`] (one per online CPU, to completion, or
//! ended early by a signal to the caller).
//! Their closures get a [`Kthread`], the token for what only a kthread may
//! call: `kthread_should_stop()` dereferences the kthread data of the
//! current task, which a task that is not a kthread does not have.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use kernel::error::{from_err_ptr, Result};
use kernel::ffi::{c_uint, c_void};
use kernel::prelude::*;
#[cfg(nmiclock_kernel_7)]
use kernel::sync::aref::ARef;
use kernel::task::Task;
#[cfg(not(nmiclock_kernel_7))]
use kernel::types::ARef;

use super::{bindings, closure, erase, Callback, Owned};

/// Proof that the code holding it runs in a kthread the glue started. Only
/// the glue's trampolines make one, and lend it to the closure they run;
/// it is neither `Send` nor `Sync` (a raw pointer), so it cannot reach
/// another task.
///
/// # Invariants
///
/// `stop` is null (a [`Worker`]'s thread) or points at the stop request of
/// the [`run_on_each_cpu`] call running this kthread, which outlives the
/// token.
pub(crate) struct Kthread {
    stop: *const AtomicBool,
}

impl Kthread {
    /// The token for the running kthread.
    ///
    /// # Safety
    ///
    /// The current task must be a kthread started by the glue, for as long
    /// as the token lives; `stop` is null or valid for as long.
    unsafe fn assume(stop: *const AtomicBool) -> Self {
        // INVARIANT: The caller's contract.
        Self { stop }
    }

    /// Whether this kthread has been asked to stop: by `kthread_stop()`,
    /// or, in a [`run_on_each_cpu`] thread, by a signal to its caller.
    pub(crate) fn should_stop(&self) -> bool {
        // SAFETY: By the type invariant `stop` is null or valid.
        let requested = unsafe { self.stop.as_ref() }.is_some_and(|s| s.load(Ordering::Relaxed));
        // SAFETY: By the type invariant this runs in a kthread, as
        // `kthread_should_stop()` requires.
        requested || unsafe { bindings::nmiclock_kthread_should_stop() }
    }

    /// Sleeps until woken or asked to stop, `max_ms` at most. `announce`
    /// runs after the task is marked sleeping and before it sleeps, so a
    /// wake-up by whoever sees the announcement is never lost.
    pub(crate) fn sleep_until_woken(&self, announce: impl FnOnce(), max_ms: u32) {
        // SAFETY: Marking the current task sleeping has no preconditions.
        unsafe { bindings::nmiclock_kthread_prepare_to_sleep() };
        announce();
        // SAFETY: In a kthread (type invariant), after the task was marked
        // sleeping.
        unsafe { bindings::nmiclock_kthread_sleep(max_ms) };
    }

    /// Marks the task sleeping (`set_current_state(TASK_INTERRUPTIBLE)`, a
    /// full barrier): a wake-up from now on makes it running again, so a
    /// condition checked after this cannot miss one.
    pub(crate) fn prepare_to_sleep(&self) {
        // SAFETY: Marking the current task sleeping has no preconditions.
        unsafe { bindings::nmiclock_kthread_prepare_to_sleep() };
    }

    /// Marks the task running again, without sleeping (after
    /// [`Kthread::prepare_to_sleep`], the condition held).
    pub(crate) fn set_running(&self) {
        // SAFETY: Marking the current task running has no preconditions.
        unsafe { bindings::nmiclock_kthread_set_running() };
    }

    /// After [`Kthread::prepare_to_sleep`]: sleeps until woken or asked to
    /// stop, `ns` at most (an hrtimer without slack). True if the time ran
    /// out, false if a wake-up (or a stop) ended the sleep.
    pub(crate) fn sleep_ns(&self, ns: u64) -> bool {
        // SAFETY: In a kthread (type invariant); the caller marked the task
        // sleeping, or the sleep is only as long as a wake-up allows.
        unsafe { bindings::nmiclock_kthread_sleep_ns(ns) }
    }
}

/// The glue's kthread function for a [`Worker`].
///
/// # Safety
///
/// `data` points at the closure of a live [`Worker`], and this runs in the
/// kthread the glue started for it.
unsafe extern "C" fn worker_trampoline<F: Fn(&Kthread)>(data: *const c_void) {
    // SAFETY: The caller's contract: the worker outlives its thread.
    let f = unsafe { closure::<F>(data) };
    // SAFETY: This runs in the worker's kthread; no stop request.
    f(&unsafe { Kthread::assume(core::ptr::null()) });
}

/// A kthread bound to one CPU running a closure once (the closure loops
/// until [`Kthread::should_stop`]); stopped, waiting for the closure to
/// return, on drop. If it is stopped before it first ran, the closure never
/// runs.
///
/// # Invariants
///
/// `task` is a kthread started by `nmiclock_kthread_start()`, not stopped,
/// whose callback is the one in `_owned`.
pub(crate) struct Worker {
    task: NonNull<bindings::task_struct>,
    _owned: Owned,
}

// SAFETY: Kthreads may be stopped from any thread; the closure is `Send`.
unsafe impl Send for Worker {}
// SAFETY: The only `&self` operation hands out a `TaskHandle`, a pointer.
unsafe impl Sync for Worker {}

impl Worker {
    /// Starts `f` in a kthread bound to `cpu`.
    pub(crate) fn start<F>(cpu: u32, f: F) -> Result<Self>
    where
        F: Fn(&Kthread) + Send + Sync + 'static,
    {
        let cb = Callback::new(f, worker_trampoline::<F>)?;
        // SAFETY: The callback's trampoline matches its closure, and the
        // worker keeps the callback until after the kthread is stopped.
        let task = from_err_ptr(unsafe { bindings::nmiclock_kthread_start(cpu, cb.raw()) })?;
        // INVARIANT: Not an error pointer: a live kthread running `cb`.
        NonNull::new(task)
            .map(|task| Self {
                task,
                _owned: erase(cb),
            })
            .ok_or(ENOMEM)
    }

    /// A handle to wake this worker from interrupt context; see
    /// [`TaskSlot`].
    pub(crate) fn handle(&self) -> TaskHandle<'_> {
        TaskHandle {
            task: self.task,
            _worker: PhantomData,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: Live (type invariant); stopped once, here. `kthread_stop()`
        // returns once the thread has exited, so the closure is unused after.
        unsafe { bindings::nmiclock_kthread_stop(self.task.as_ptr()) };
    }
}

/// A [`Worker`]'s task, for as long as the worker is borrowed.
#[derive(Clone, Copy)]
pub(crate) struct TaskHandle<'a> {
    task: NonNull<bindings::task_struct>,
    _worker: PhantomData<&'a Worker>,
}

/// A slot through which interrupt handlers wake a task: a worker's
/// ([`TaskSlot::publish`]) or the calling kthread ([`TaskSlot::publish_self`]),
/// until [`TaskSlot::clear`]. The slot holds a reference on the published
/// task (the `kernel` crate's [`ARef<Task>`]), dropped only one RCU grace
/// period after the task is unpublished: a waker (inside a read side)
/// never touches a freed task, and one that wakes a task that has exited
/// meanwhile does nothing.
///
/// # Invariants
///
/// A non-null pointer in the slot comes from [`ARef::into_raw`]: the slot
/// owns that reference.
pub(crate) struct TaskSlot(AtomicPtr<Task>);

impl TaskSlot {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self(AtomicPtr::new(core::ptr::null_mut()))
    }

    /// Publishes `task` (in place of any task published before). Task
    /// context; may sleep.
    pub(crate) fn publish(&self, task: TaskHandle<'_>) {
        // SAFETY: `task` is a live worker's `task_struct` (the handle
        // borrows the worker), the C type `Task` wraps.
        let task = unsafe { &*task.task.as_ptr().cast::<Task>() };
        self.set(ARef::from(task));
    }

    /// Publishes the calling kthread (in place of any task published
    /// before). Task context; may sleep.
    pub(crate) fn publish_self(&self, _k: &Kthread) {
        // `current!()` gives a `&Task` on 6.12, a `&CurrentTask` (which
        // dereferences to `Task`) on 7.x: the annotation takes both.
        let task: &Task = kernel::current!();
        self.set(ARef::from(task));
    }

    /// Puts `task` in the slot.
    fn set(&self, task: ARef<Task>) {
        // INVARIANT: The slot takes over the reference.
        let old = self.0.swap(ARef::into_raw(task).as_ptr(), Ordering::AcqRel);
        Self::put_after_grace_period(old);
    }

    /// Unpublishes the task, waits for an RCU grace period, so that no
    /// waker (each inside a read side) still holds it, and drops the
    /// slot's reference on it. Task context; may sleep.
    pub(crate) fn clear(&self) {
        Self::put_after_grace_period(self.0.swap(core::ptr::null_mut(), Ordering::AcqRel));
    }

    /// Drops the reference `old` (a task taken out of the slot, or null)
    /// once no waker can still be using it.
    fn put_after_grace_period(old: *mut Task) {
        let Some(old) = NonNull::new(old) else {
            return;
        };
        super::cpu::synchronize_rcu();
        // SAFETY: By the type invariant `old` is a reference the slot
        // owned; the swap that returned it took it out, so it is dropped
        // once, after every read side that could have loaded it has ended.
        drop(unsafe { ARef::from_raw(old) });
    }

    /// Wakes the published task, if any and if `f()` (called only when one
    /// is published) returns true: so a waker that takes a condition
    /// (`f()`) always wakes someone. Hard-IRQ context (see
    /// [`TaskSlot::wake`]).
    pub(crate) fn wake_if(&self, f: impl FnOnce() -> bool) {
        let _rcu = super::cpu::RcuReadLock::new();
        let task = self.0.load(Ordering::Acquire);
        if !task.is_null() && f() {
            // SAFETY: As in `wake()`.
            unsafe { &*task }.wake_up();
        }
    }

    /// Wakes the published task, if any, through the scheduler, from any
    /// context but NMI (whose wake-ups the scheduler does not allow).
    pub(crate) fn wake(&self) {
        // The load and the wake are one RCU read side, from any context
        // (task context too, where a preempted waker is no RCU reader by
        // itself): the grace period before the slot's reference is dropped
        // waits for it.
        let _rcu = super::cpu::RcuReadLock::new();
        let task = self.0.load(Ordering::Acquire);
        if !task.is_null() {
            // SAFETY: The slot owned a reference on `task` when it was
            // loaded (type invariant), and drops it only after a grace
            // period that waits for this read side: the task is alive;
            // waking a task that has exited does nothing.
            unsafe { &*task }.wake_up();
        }
    }
}

impl Drop for TaskSlot {
    fn drop(&mut self) {
        self.clear();
    }
}

/// What a [`run_on_each_cpu`] call lends its kthreads: the closure, and
/// the stop request it makes when a signal interrupts the caller.
struct EachCpu<'a, F> {
    f: &'a F,
    stop: AtomicBool,
}

/// The glue's per-CPU function for [`run_on_each_cpu`].
///
/// # Safety
///
/// `data` points at the [`EachCpu`] of a [`run_on_each_cpu`] call in
/// progress, and this runs in a kthread the glue started for it.
unsafe extern "C" fn each_cpu_trampoline<F: Fn(&Kthread, u32) + Sync>(
    data: *const c_void,
    cpu: c_uint,
) {
    // SAFETY: The caller's contract: `run_on_each_cpu` waits for us.
    let each = unsafe { &*data.cast::<EachCpu<'_, F>>() };
    // SAFETY: This runs in a kthread the glue started; `each.stop` lives
    // until the call returns, after this function.
    let k = unsafe { Kthread::assume(&each.stop) };
    (each.f)(&k, cpu);
}

/// Runs `f(kthread, cpu)` in a kthread bound to each online CPU, all at
/// once, and returns when all have finished. CPU hotplug waits meanwhile.
///
/// A signal to the caller (Ctrl-C on a blocking debugfs write) makes
/// [`Kthread::should_stop`] true in every one of them; the call still
/// waits for them all, then returns `EINTR` (not a restart: a restarted
/// write would run the whole activity again). Closures that poll
/// `should_stop` end early; the others run to their end.
pub(crate) fn run_on_each_cpu<F: Fn(&Kthread, u32) + Sync>(f: &F) -> Result {
    let each = EachCpu {
        f,
        stop: AtomicBool::new(false),
    };
    let data: *const EachCpu<'_, F> = &each;
    // SAFETY: The trampoline matches `EachCpu<F>`, and `each` outlives the
    // threads' use of it: `nmiclock_cpu_threads_end()` below returns only
    // once every thread's function has returned.
    let threads = from_err_ptr(unsafe {
        bindings::nmiclock_cpu_threads_start(Some(each_cpu_trampoline::<F>), data.cast())
    })?;
    // SAFETY: `threads` was started above and is ended only below.
    let interrupted = unsafe { bindings::nmiclock_cpu_threads_wait_interruptible(threads) } != 0;
    if interrupted {
        each.stop.store(true, Ordering::Relaxed);
    }
    // SAFETY: `threads` was started above; it is ended once, here.
    unsafe { bindings::nmiclock_cpu_threads_end(threads) };
    if interrupted {
        Err(EINTR)
    } else {
        Ok(())
    }
}
