// SPDX-License-Identifier: GPL-2.0

//! The kernel's clocks and what the module needs to know about time:
//! the clock counter's rate, `TICK_NSEC`.

use super::bindings;

/// Rate in kHz of the counter the clocks are built on (0 when there is
/// none): the TSC's as the kernel calibrated it (`tsc_khz`) on x86, the
/// arch timer's (`CNTFRQ_EL0`) on arm64.
pub(crate) fn counter_khz() -> u32 {
    // SAFETY: No preconditions; reads a variable set during boot or a
    // register.
    unsafe { bindings::nmiclock_counter_khz() }
}

/// The kernel's tick, in ns (`TICK_NSEC`).
pub(crate) fn tick_nsec() -> u64 {
    // SAFETY: No preconditions; a constant.
    unsafe { bindings::nmiclock_tick_nsec() }
}

/// The kernel's `local_clock()`, in ns.
#[inline]
pub(crate) fn local_clock() -> u64 {
    // SAFETY: No preconditions; callable from any context.
    unsafe { bindings::nmiclock_local_clock() }
}

/// The kernel's `sched_clock()`, in ns.
#[inline]
pub(crate) fn sched_clock() -> u64 {
    // SAFETY: No preconditions; callable from any context. Called
    // directly (declared in the glue's header), as refscale calls it.
    unsafe { bindings::sched_clock() }
}

/// The kernel's NMI-safe `ktime_get_mono_fast_ns()` (NTP-slewed).
#[inline]
pub(crate) fn mono_fast_ns() -> u64 {
    // SAFETY: No preconditions; callable from any context, NMI included.
    unsafe { kernel::bindings::ktime_get_mono_fast_ns() }
}

/// The kernel's NMI-safe `ktime_get_raw_fast_ns()`: `CLOCK_MONOTONIC_RAW`,
/// which NTP does not slew.
#[inline]
pub(crate) fn raw_fast_ns() -> u64 {
    // SAFETY: No preconditions; callable from any context, NMI included.
    unsafe { kernel::bindings::ktime_get_raw_fast_ns() }
}

/// The kernel's NMI-safe `ktime_get_real_fast_ns()` (what refscale's
/// `scale_type=clock` reads).
#[inline]
pub(crate) fn real_fast_ns() -> u64 {
    // SAFETY: No preconditions; callable from any context, NMI included.
    unsafe { kernel::bindings::ktime_get_real_fast_ns() }
}

/// The kernel's NMI-safe `ktime_get_boot_fast_ns()`: monotonic plus the
/// time spent in suspend.
#[inline]
pub(crate) fn boot_fast_ns() -> u64 {
    // SAFETY: No preconditions; callable from any context, NMI included.
    unsafe { bindings::nmiclock_boot_fast_ns() }
}

/// The kernel's NMI-safe `ktime_get_tai_fast_ns()`: monotonic plus the TAI
/// offset.
#[inline]
pub(crate) fn tai_fast_ns() -> u64 {
    // SAFETY: No preconditions; callable from any context, NMI included.
    unsafe { bindings::nmiclock_tai_fast_ns() }
}

/// The kernel's `ktime_get_ns()` (`CLOCK_MONOTONIC`, seqcount-protected:
/// in NMI context it could spin forever on a writer it interrupted, which
/// is no memory-safety matter, but keep it to task and hard-IRQ context,
/// which the writer, updating with interrupts off, cannot be interrupted
/// by).
#[inline]
pub(crate) fn ktime_get_ns() -> u64 {
    // SAFETY: No memory-safety preconditions.
    unsafe { bindings::nmiclock_ktime_get_ns() }
}

/// The id of the kernel's clocksource now (`enum clocksource_ids`), `None`
/// if the timekeeper could not say. Task or hard-IRQ context, as
/// [`ktime_get_ns`] (never a probe's handler: it may run inside the
/// timekeeper's update).
fn clocksource_id() -> Option<kernel::bindings::clocksource_ids> {
    let mut snap = core::mem::MaybeUninit::<kernel::bindings::system_time_snapshot>::zeroed();
    let p = snap.as_mut_ptr();
    // SAFETY: `p` points at a valid, writable snapshot for the call to
    // fill; the call has no other memory-safety preconditions.
    #[cfg(not(nmiclock_kernel_7))]
    unsafe {
        kernel::bindings::ktime_get_snapshot(p)
    };
    // 7.x has only the snapshot of a given clock, marked invalid (and
    // otherwise left as it was) when it cannot be taken.
    // SAFETY: As above; `CLOCK_MONOTONIC` is a clock id the call takes.
    #[cfg(nmiclock_kernel_7)]
    unsafe {
        kernel::bindings::ktime_get_snapshot_id(kernel::bindings::CLOCK_MONOTONIC as _, p)
    };
    // SAFETY: Zeroed, then filled in by the call: every field is a plain
    // integer, valid at any value.
    let snap = unsafe { snap.assume_init() };
    #[cfg(nmiclock_kernel_7)]
    if snap.valid == 0 {
        return None;
    }
    Some(snap.cs_id)
}

/// Whether the kernel's timekeeping still runs on `tsc-early`, the x86
/// clocksource whose calibration the kernel refines about a second after
/// the TSC is set up (then switches to `tsc`, at the refined rate). Never
/// on arm64. Task or hard-IRQ context, as [`ktime_get_ns`].
pub(crate) fn on_early_tsc() -> bool {
    clocksource_id() == Some(kernel::bindings::clocksource_ids_CSID_X86_TSC_EARLY)
}

/// Whether the kernel's clocksource reads the counter nmiclock's clock
/// reads ([`crate::counter`]): the TSC (`tsc`, `tsc-early`) on x86, the
/// architected timer's (`arch_sys_counter`) on arm64. Contexts as
/// [`clocksource_id`].
pub(crate) fn on_own_counter() -> bool {
    use kernel::bindings as b;
    let own: &[b::clocksource_ids] = if cfg!(target_arch = "x86_64") {
        &[
            b::clocksource_ids_CSID_X86_TSC,
            b::clocksource_ids_CSID_X86_TSC_EARLY,
        ]
    } else {
        &[b::clocksource_ids_CSID_ARM_ARCH_COUNTER]
    };
    clocksource_id().is_some_and(|id| own.contains(&id))
}

/// [`mono_fast_ns`] as a [`crate::clock::TimeSource`]: what a reader that
/// waits for a writer measures its budget with, NMI context included.
#[derive(Clone, Copy, Default)]
pub(crate) struct MonoFast;

impl crate::clock::TimeSource for MonoFast {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        mono_fast_ns()
    }
}
