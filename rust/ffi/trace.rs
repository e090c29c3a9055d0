// SPDX-License-Identifier: GPL-2.0

//! The kernel's tracing, for `trace_on_anomaly=1`: nmiclock's own trace
//! instance ([`Instance`], `/sys/kernel/tracing/instances/nmiclock`) to
//! write markers into, and `tracing_off()` ([`off`]), which stops the
//! top-level buffer so that it keeps what led up to a run's first anomaly.
//! On a kernel without `CONFIG_TRACING` [`available`] is false and nothing
//! here does anything.

use core::ptr::{null_mut, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};

// `CStr` from the prelude: on 7.x it is `core::ffi::CStr`, whose
// `from_char_ptr`/`as_char_ptr` come from the prelude's `CStrExt`.
use kernel::prelude::*;

use super::bindings;

/// Whether this kernel has tracing (`CONFIG_TRACING`).
pub(crate) fn available() -> bool {
    // SAFETY: No preconditions; a constant of the build.
    unsafe { bindings::nmiclock_tracing_available() }
}

/// A reference to the trace instance `nmiclock`, dropped with it (the
/// instance stays, for reading after the run).
///
/// # Invariants
///
/// `0` is a reference `nmiclock_trace_get()` returned, with its printk
/// buffers set up, held until drop.
pub(crate) struct Instance(NonNull<bindings::trace_array>);

// SAFETY: A trace instance may be written from any CPU and context; the
// reference is only dropped by its owner.
unsafe impl Send for Instance {}
// SAFETY: `Instance` has no `&self` method; the reference it holds is
// written through (by `mark`, via `CURRENT`) from several CPUs at once,
// which the lock-free ring buffer allows.
unsafe impl Sync for Instance {}

impl Instance {
    /// The instance, created if needed; `None` without tracing or memory.
    /// Task context.
    pub(crate) fn get() -> Option<Self> {
        // SAFETY: No preconditions beyond task context (the caller's).
        NonNull::new(unsafe { bindings::nmiclock_trace_get() }).map(Self)
    }
}

/// The instance a run marks ([`Instance::install`]), for [`mark`] from any
/// context; null when none.
static CURRENT: AtomicPtr<bindings::trace_array> = AtomicPtr::new(null_mut());

/// An [`Instance`] made the one [`mark`] writes to, until dropped.
pub(crate) struct InstanceInUse {
    /// Held for its drop: the reference.
    _instance: Instance,
}

impl Instance {
    /// Makes this the instance [`mark`] writes to. Drop the result only
    /// once nothing can call [`mark`] any more (a run's samples stopped):
    /// one that loaded the pointer before still writes through it, and
    /// the reference dropped then is all that keeps the instance from
    /// being removed (`rmdir` of the instance).
    pub(crate) fn install(self) -> InstanceInUse {
        CURRENT.store(self.0.as_ptr(), Ordering::Release);
        InstanceInUse { _instance: self }
    }
}

impl Drop for InstanceInUse {
    fn drop(&mut self) {
        CURRENT.store(null_mut(), Ordering::Release);
    }
}

/// Writes "`what` `a` `b`" into the installed instance, if any. Any
/// context, NMI included.
#[inline]
pub(crate) fn mark(what: &CStr, a: u64, b: u64) -> bool {
    let p = CURRENT.load(Ordering::Acquire);
    if p.is_null() {
        return false;
    }
    // SAFETY: A non-null `CURRENT` is the reference of an `InstanceInUse`,
    // whose drop comes only once nothing calls `mark` (its contract), so
    // the reference is live, its printk buffers set up; `what` is a
    // NUL-terminated string that outlives the call.
    unsafe { bindings::nmiclock_trace_mark(p, what.as_char_ptr(), a, b) };
    true
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the reference is ours, and it is
        // dropped only here.
        unsafe { bindings::nmiclock_trace_put(self.0.as_ptr()) }
    }
}

/// `tracing_off()`: stops the top-level trace buffer, which then keeps
/// what it held. Any context, NMI included (it sets a flag).
#[inline]
pub(crate) fn off() {
    // SAFETY: No preconditions; callable from any context.
    unsafe { bindings::nmiclock_tracing_off() }
}
