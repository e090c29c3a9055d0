// SPDX-License-Identifier: GPL-2.0

//! NMI context: perf counters whose overflows call a closure
//! ([`PerfEvent`]), the `NMI_LOCAL` handler ([`NmiHandler`]) and the NMI
//! IPI ([`NmiIpi`]).
//!
//! The closures given to [`PerfEvent::new`] and [`NmiHandler::register`]
//! run in NMI context (a `perf_sw` overflow in hard-IRQ context): no locks,
//! no allocation, no printk, nothing that sleeps, waits or panics, and no
//! call through a function pointer, which `scripts/check-nmi-context`
//! could not follow. Their trampolines are the roots of its walk.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use kernel::error::{from_err_ptr, to_result, Result};
use kernel::ffi::c_void;
use kernel::prelude::*;

use super::{bindings, closure, erase, Callback, Owned};

/// How a `perf_hw` counter's overflow rate is set.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PerfPeriod {
    /// An overflow every this many events.
    Every(u64),
    /// This many overflows per second, the period adjusted by perf as it
    /// goes (`perf record -F`). Only some architectures' `perf_hw` uses it.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Freq(u64),
}

/// What a [`PerfEvent`] counts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PerfKind {
    /// CPU cycles: an NMI on x86, a pseudo-NMI on arm64 with GICv3 priority
    /// masking (needs a PMU).
    Cycles,
    /// The cpu-clock software event, every `period` ns: hard-IRQ context.
    CpuClock,
}

/// The glue's overflow callback: an NMI-context entry point of the module.
///
/// # Safety
///
/// `data` points at the closure of a live [`PerfEvent`].
unsafe extern "C" fn perf_overflow_trampoline<F: Fn()>(data: *const c_void) {
    // SAFETY: The caller's contract: the event outlives its overflows.
    let f = unsafe { closure::<F>(data) };
    f();
}

/// A pinned kernel perf counter on one CPU whose overflows call a closure;
/// released on drop.
///
/// # Invariants
///
/// `ptr` was returned by `perf_event_create_kernel_counter()` with the
/// callback in `_owned` as its context, and not released.
pub(crate) struct PerfEvent {
    ptr: NonNull<bindings::perf_event>,
    _owned: Owned,
}

// SAFETY: A perf event may be released from any thread; the closure is
// `Send + Sync`.
unsafe impl Send for PerfEvent {}
// SAFETY: `PerfEvent` offers no `&self` operations.
unsafe impl Sync for PerfEvent {}

impl PerfEvent {
    /// A pinned counter on `cpu` of `kind`, overflowing at `period`,
    /// calling `f` on each overflow (NMI or hard-IRQ context, see
    /// [`PerfKind`]). Without a PMU, [`PerfKind::Cycles`] fails with
    /// `ENOENT`; a frequency above `kernel.perf_event_max_sample_rate`
    /// fails with `EINVAL`.
    pub(crate) fn new<F>(cpu: u32, kind: PerfKind, period: PerfPeriod, f: F) -> Result<Self>
    where
        F: Fn() + Send + Sync + 'static,
    {
        let cb = Callback::new(f, perf_overflow_trampoline::<F>)?;
        // SAFETY: The callback's trampoline matches its closure, and the
        // event keeps the callback until after the counter is released.
        let (period, freq) = match period {
            PerfPeriod::Every(n) => (n, false),
            PerfPeriod::Freq(hz) => (hz, true),
        };
        // SAFETY: As above.
        let ptr = unsafe {
            bindings::nmiclock_perf_create(cpu, kind == PerfKind::Cycles, period, freq, cb.raw())
        };
        let ptr = from_err_ptr(ptr)?;
        // INVARIANT: Not an error pointer: a live event calling `cb`.
        NonNull::new(ptr)
            .map(|ptr| Self {
                ptr,
                _owned: erase(cb),
            })
            .ok_or(ENOMEM)
    }
}

impl Drop for PerfEvent {
    fn drop(&mut self) {
        // SAFETY: Live (type invariant); released once, here.
        // `perf_event_release_kernel()` waits for overflows in flight.
        unsafe { bindings::nmiclock_perf_release(self.ptr.as_ptr()) };
    }
}

/// The glue's NMI handler: an NMI-context entry point of the module.
///
/// # Safety
///
/// `data` points at the closure of a live [`NmiHandler`].
unsafe extern "C" fn nmi_handler_trampoline<F: Fn() -> bool>(data: *const c_void) -> bool {
    // SAFETY: The caller's contract: unregistering waits for handlers.
    let f = unsafe { closure::<F>(data) };
    f()
}

/// The module's `NMI_LOCAL` handler, registered while this lives. The
/// closure returns true for an NMI it claims; an NMI no handler claims is
/// reported by the kernel as unknown. One at a time: the kernel's handler
/// gets no data pointer, so the glue keeps the one in a slot of its own,
/// which [`NmiHandler::register`] takes ([`REGISTERED`]; `EBUSY` while
/// another handler holds it).
///
/// # Invariants
///
/// This handler holds [`REGISTERED`], and the glue's slot holds the
/// closure in `_owned`, until dropped.
pub(crate) struct NmiHandler {
    _owned: Owned,
}

/// Whether an [`NmiHandler`] holds the glue's one slot.
static REGISTERED: AtomicBool = AtomicBool::new(false);

impl NmiHandler {
    /// Registers `f` as the handler. `EBUSY` while another is registered.
    pub(crate) fn register<F>(f: F) -> Result<Self>
    where
        F: Fn() -> bool + Send + Sync + 'static,
    {
        let f = KBox::new(f, GFP_KERNEL)?;
        if REGISTERED
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(EBUSY);
        }
        let data: *const F = &*f;
        // SAFETY: The trampoline matches `F`, which the handler keeps until
        // after it is unregistered; the slot is ours (taken above).
        let ret = to_result(unsafe {
            bindings::nmiclock_nmi_register(Some(nmi_handler_trampoline::<F>), data.cast())
        });
        if let Err(e) = ret {
            REGISTERED.store(false, Ordering::Release);
            return Err(e);
        }
        // INVARIANT: Registered with `f`, holding the slot.
        Ok(Self { _owned: erase(f) })
    }
}

impl Drop for NmiHandler {
    fn drop(&mut self) {
        // SAFETY: Registered in `register()` (type invariant); unregistered
        // once, here. The kernel waits for handlers in flight, so the
        // closure is unused after.
        unsafe { bindings::nmiclock_nmi_unregister() };
        REGISTERED.store(false, Ordering::Release);
    }
}

/// A CPU mask to send NMI IPIs with. Sending takes `&mut self`: one sender
/// at a time, by ownership.
///
/// # Invariants
///
/// `ptr` was returned by `nmiclock_ipi_new()` and not freed.
pub(crate) struct NmiIpi {
    ptr: NonNull<bindings::nmiclock_ipi>,
}

// SAFETY: The mask is plain memory, freed from any thread.
unsafe impl Send for NmiIpi {}

impl NmiIpi {
    /// A new, empty mask.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: No preconditions.
        let ptr = unsafe { bindings::nmiclock_ipi_new() };
        // INVARIANT: Non-null means a live mask.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// Empties the mask.
    pub(crate) fn clear(&mut self) {
        // SAFETY: Live (type invariant), and `&mut self` makes this its
        // only user.
        unsafe { bindings::nmiclock_ipi_clear(self.ptr.as_ptr()) };
    }

    /// Adds CPU `cpu` to the mask.
    pub(crate) fn add(&mut self, cpu: u32) {
        // SAFETY: As in `clear()`; the glue ignores ids out of range.
        unsafe { bindings::nmiclock_ipi_add(self.ptr.as_ptr(), cpu) };
    }

    /// Sends an NMI IPI to the CPUs of the mask that are online. Hard-IRQ
    /// or task context.
    pub(crate) fn send(&mut self) {
        // SAFETY: As in `clear()`.
        unsafe { bindings::nmiclock_ipi_send(self.ptr.as_ptr()) };
    }
}

impl Drop for NmiIpi {
    fn drop(&mut self) {
        // SAFETY: Live (type invariant); freed once, here.
        unsafe { bindings::nmiclock_ipi_free(self.ptr.as_ptr()) };
    }
}
