// SPDX-License-Identifier: GPL-2.0

//! CPUs: ids and counts, CPU hotplug callbacks ([`Hotplug`]) and the
//! hotplug lock, the current context, interrupts and preemption, delays.

use core::ptr::NonNull;

use kernel::error::{from_err_ptr, Result};
use kernel::ffi::{c_int, c_uint, c_void};
use kernel::prelude::*;

use super::{bindings, closure, erase, Owned};

/// Number of CPUs online right now.
pub(crate) fn num_online_cpus() -> u32 {
    // SAFETY: No preconditions; reads a counter.
    unsafe { bindings::nmiclock_num_online_cpus() }
}

/// One more than the highest possible CPU id.
pub(crate) fn nr_cpu_ids() -> u32 {
    // SAFETY: No preconditions; reads a variable set during boot.
    unsafe { bindings::nmiclock_nr_cpu_ids() }
}

/// The CPU this runs on (may change right after, unless preemption is off).
#[inline]
pub(crate) fn this() -> u32 {
    // SAFETY: No preconditions (`raw_smp_processor_id()`).
    unsafe { bindings::nmiclock_cpu() }
}

/// Whether CPU `cpu` is online (false for ids past the possible ones).
pub(crate) fn online(cpu: u32) -> bool {
    // SAFETY: No preconditions; the glue checks the id.
    unsafe { bindings::nmiclock_cpu_online(cpu) }
}

/// Whether this runs in NMI context.
#[inline]
pub(crate) fn in_nmi() -> bool {
    // SAFETY: No preconditions.
    unsafe { bindings::nmiclock_in_nmi() }
}

/// Whether this runs in hard-IRQ context.
#[inline]
pub(crate) fn in_hardirq() -> bool {
    // SAFETY: No preconditions.
    unsafe { bindings::nmiclock_in_hardirq() }
}

/// Runs `f` with preemption disabled (interrupts still arrive).
#[inline]
pub(crate) fn with_preemption_disabled<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: Disabling preemption has no preconditions.
    unsafe { bindings::nmiclock_preempt_disable() };
    let r = f();
    // SAFETY: Matches the disable above, on this CPU (no migration while
    // preemption is off).
    unsafe { bindings::nmiclock_preempt_enable() };
    r
}

/// Runs `f` with local interrupts disabled (NMIs still arrive).
#[inline]
pub(crate) fn with_irqs_disabled<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: Saving and disabling interrupts has no preconditions.
    let flags = unsafe { bindings::nmiclock_irq_save() };
    let r = f();
    // SAFETY: `flags` came from the matching save on this CPU (interrupts
    // were off in between, so no migration).
    unsafe { bindings::nmiclock_irq_restore(flags) };
    r
}

/// Busy-waits about `ns` nanoseconds.
pub(crate) fn ndelay(ns: u32) {
    // SAFETY: No preconditions.
    unsafe { bindings::nmiclock_ndelay(ns) };
}

/// Lets the scheduler run something else if it needs to. Task context
/// only: elsewhere the kernel warns (`might_sleep()`).
pub(crate) fn cond_resched() {
    // SAFETY: No memory-safety preconditions.
    unsafe { bindings::nmiclock_cond_resched() };
}

/// Sleeps about `us` microseconds (task context).
pub(crate) fn sleep_us(us: u32) {
    // SAFETY: No memory-safety preconditions.
    unsafe { bindings::nmiclock_sleep_us(us) };
}

/// Waits for an RCU grace period (task context): every interrupt handler
/// running when it was called has returned.
pub(crate) fn synchronize_rcu() {
    // SAFETY: No memory-safety preconditions.
    unsafe { bindings::nmiclock_synchronize_rcu() };
}

/// An RCU read-side critical section, for as long as the guard lives: a
/// [`synchronize_rcu`] that begins meanwhile waits for it to end. Any
/// context but NMI; it does not sleep, and must not be held across a
/// sleep. Not `Send`: it ends on the CPU and task that began it.
pub(crate) struct RcuReadLock(core::marker::PhantomData<*const ()>);

impl RcuReadLock {
    /// Begins the section (`rcu_read_lock()`).
    pub(crate) fn new() -> Self {
        // SAFETY: No preconditions; `drop` ends the section.
        unsafe { bindings::nmiclock_rcu_read_lock() };
        Self(core::marker::PhantomData)
    }
}

impl Drop for RcuReadLock {
    fn drop(&mut self) {
        // SAFETY: `new()` began the section this ends, on this task (the
        // guard is not `Send`).
        unsafe { bindings::nmiclock_rcu_read_unlock() };
    }
}

/// Runs `f` inside an RCU read side, from any context: a hard-IRQ or NMI
/// handler (`in_hardirq()` holds in both: `nmi_enter()` adds a hard-IRQ
/// count too) is one already, for as long as it runs
/// (`Documentation/RCU/NMI-RCU.rst`), so `f` runs as it is; elsewhere `f`
/// runs under an [`RcuReadLock`].
/// Either way a [`synchronize_rcu`] that begins during `f` returns only
/// after `f` has. `f` must not sleep.
#[inline]
pub(crate) fn read_side<R>(f: impl FnOnce() -> R) -> R {
    if in_hardirq() {
        f()
    } else {
        let _rcu = RcuReadLock::new();
        f()
    }
}

/// Runs `f` with CPU hotplug held off (`cpus_read_lock()`); `f` may sleep
/// but must not wait for a hotplug operation.
pub(crate) fn with_cpus_held<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: Task context; paired with the unlock below.
    unsafe { bindings::nmiclock_cpus_read_lock() };
    let r = f();
    // SAFETY: Paired with the lock above.
    unsafe { bindings::nmiclock_cpus_read_unlock() };
    r
}

/// CPU hotplug callbacks: `online(cpu)` for each CPU that comes online
/// (an error is returned to the hotplug core), `offline(cpu)` for each
/// that goes offline, from [`Hotplug::new`] until the `Hotplug` is
/// dropped; never for CPUs that were online before. Both run in task
/// context with the hotplug lock held for writing.
///
/// # Invariants
///
/// `ptr` is the registration `nmiclock_cpuhp_add()` returned, not removed;
/// its data points at the closures in `_owned`.
pub(crate) struct Hotplug {
    ptr: NonNull<bindings::nmiclock_cpuhp>,
    _owned: Owned,
}

// SAFETY: The registration may be removed from any thread; the closures it
// calls are `Send + Sync`.
unsafe impl Send for Hotplug {}
// SAFETY: `Hotplug` offers no `&self` operations.
unsafe impl Sync for Hotplug {}

/// The two closures of a [`Hotplug`].
struct Pair<On, Off> {
    online: On,
    offline: Off,
}

/// The glue's online callback.
///
/// # Safety
///
/// `data` points at the `Pair<On, Off>` of a live [`Hotplug`].
unsafe extern "C" fn online_trampoline<On: Fn(u32) -> Result, Off>(
    data: *const c_void,
    cpu: c_uint,
) -> c_int {
    // SAFETY: The caller's contract; the registration owns the pair.
    let pair = unsafe { closure::<Pair<On, Off>>(data) };
    match (pair.online)(cpu) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The glue's offline callback.
///
/// # Safety
///
/// As for [`online_trampoline`].
unsafe extern "C" fn offline_trampoline<On, Off: Fn(u32)>(data: *const c_void, cpu: c_uint) {
    // SAFETY: The caller's contract; the registration owns the pair.
    let pair = unsafe { closure::<Pair<On, Off>>(data) };
    (pair.offline)(cpu);
}

impl Hotplug {
    /// Registers the callbacks.
    pub(crate) fn new<On, Off>(online: On, offline: Off) -> Result<Self>
    where
        On: Fn(u32) -> Result + Send + Sync + 'static,
        Off: Fn(u32) + Send + Sync + 'static,
    {
        let pair = KBox::new(Pair { online, offline }, GFP_KERNEL)?;
        let data: *const Pair<On, Off> = &*pair;
        // SAFETY: The trampolines match the pair's type, and the pair is
        // owned by the `Hotplug` until after the registration is removed.
        let ptr = unsafe {
            bindings::nmiclock_cpuhp_add(
                Some(online_trampoline::<On, Off>),
                Some(offline_trampoline::<On, Off>),
                data.cast(),
            )
        };
        let ptr = from_err_ptr(ptr)?;
        // INVARIANT: Not an error pointer: a live registration with `data`.
        NonNull::new(ptr)
            .map(|ptr| Self {
                ptr,
                _owned: erase(pair),
            })
            .ok_or(ENOMEM)
    }
}

impl Drop for Hotplug {
    fn drop(&mut self) {
        // SAFETY: Live (type invariant); removed once, here. The hotplug
        // core waits for callbacks in flight, so the closures can go after.
        unsafe { bindings::nmiclock_cpuhp_remove(self.ptr.as_ptr()) };
    }
}

/// The context code runs in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum Context {
    /// Task context.
    Task = 0,
    /// Hard-IRQ context.
    Irq = 1,
    /// NMI context.
    Nmi = 2,
}

impl Context {
    /// The context this runs in.
    #[inline]
    pub(crate) fn now() -> Self {
        if in_nmi() {
            Self::Nmi
        } else if in_hardirq() {
            Self::Irq
        } else {
            Self::Task
        }
    }

    /// Its name in `anomalies`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Irq => "irq",
            Self::Nmi => "nmi",
        }
    }

    /// The context a stored `Context as u32` stands for.
    pub(crate) fn from_u32(v: u32) -> Self {
        match v {
            0 => Self::Task,
            1 => Self::Irq,
            _ => Self::Nmi,
        }
    }
}
