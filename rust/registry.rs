// SPDX-License-Identifier: GPL-2.0

//! The targets' declarations: the built-in ones in one table
//! ([`builtin_targets!`] below: name, read, promise, the kernel's update),
//! and the registry's slots with the names other modules registered, each
//! copied at registration so that showing the setting `target` needs no
//! lock. Registering, unregistering and pinning a target for a run are
//! [`crate::target`]'s.
//!
//! Imports only the FFI layer (the reads, the registry's mutex), so that
//! the settings can use it without importing what imports them.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::c_str;
use kernel::str::CStr;

use crate::ffi;
use crate::ffi::target::{Locked, RegisteredCell};

/// What a clock promises, from the kernel's documentation and comments.
#[derive(Clone, Copy)]
pub(crate) struct Promise {
    /// Monotonic on each CPU, up to a step back of this many ns (`None`:
    /// not promised).
    pub(crate) per_cpu: Option<u64>,
    /// Monotonic across CPUs, up to this step back (`None`: not promised).
    pub(crate) cross_cpu: Option<u64>,
    /// Runs at the rate of `CLOCK_MONOTONIC_RAW`, within NTP's slew and
    /// the reference check's tolerance, and is never stepped.
    pub(crate) raw_rate: bool,
    /// Reads the kernel's clocksource, as the reference does: its rate is
    /// judged on any clocksource. Any other clock is judged only while
    /// the clocksource is nmiclock's counter ([`crate::cs_switch`]): the
    /// counter such a clock reads, as far as nmiclock can tell.
    pub(crate) on_clocksource: bool,
    /// May also step back across a clocksource switch, by up to the
    /// switch's own length ([`crate::cs_switch`]): a clock of the
    /// timekeeper, which loses the stretch the switch takes.
    pub(crate) at_switch: bool,
    /// Where the promise is written.
    pub(crate) source: &'static str,
}

/// How the kernel updates one of its clocks: the function a run brackets
/// (entering it opens a window, its return closes it), and what runs it.
pub(crate) struct KernelUpdate {
    /// The function bracketed.
    pub(crate) symbol: &'static CStr,
    /// What the bracket holds: the clock's own update, and what else.
    pub(crate) holds: &'static str,
    /// What runs the update, and so which disturbance exercises it.
    pub(crate) run_by: &'static str,
}

/// One built-in target.
pub(crate) struct Builtin {
    /// Its name, the value of the setting `target`.
    pub(crate) name: &'static str,
    /// What it promises, which the run judges it by.
    pub(crate) promise: Promise,
    /// The kernel function that updates it, bracketed during a run
    /// (`None` for nmiclock's own clock, whose writers mark their windows
    /// themselves).
    pub(crate) update: Option<&'static KernelUpdate>,
}

/// How far the kernel's `ktime_get_*_fast_ns()` may step back across an
/// update: "a few nanoseconds", in the kernel's words (an NMI inside the
/// update, or another CPU, reads with the old slope). Checked at 1 us: a
/// whole second between updates at the mult steps the timekeeper makes
/// (about 60 ns), ten times over.
const FAST_STEP_BACK_NS: u64 = 1_000;

/// The promise of the `ktime_get_*_fast_ns()` that run at the raw rate:
/// across a clocksource switch, "not monotonic across an update" is the
/// stretch the switch loses, which no fixed allowance covers.
const fn fast(source: &'static str) -> Promise {
    Promise {
        per_cpu: Some(FAST_STEP_BACK_NS),
        cross_cpu: Some(FAST_STEP_BACK_NS),
        raw_rate: true,
        on_clocksource: true,
        at_switch: true,
        source,
    }
}

/// No promise but NMI safety.
const fn none(source: &'static str) -> Promise {
    Promise {
        per_cpu: None,
        cross_cpu: None,
        raw_rate: false,
        on_clocksource: false,
        at_switch: false,
        source,
    }
}

/// The timekeeper's update, which writes the fast timekeeper's latches.
/// `update_fast_timekeeper()` is inlined into it, so the bracket is wider
/// than the latch.
#[cfg(not(nmiclock_kernel_7))]
const TIMEKEEPING_UPDATE: &KernelUpdate = &KernelUpdate {
    symbol: c_str!("timekeeping_update"),
    holds: "both fast timekeeper latches (tk_fast_mono, tk_fast_raw), and around them the timekeeper's cached values, the vsyscall data and the shadow copy: wider than a latch",
    run_by: "the tick on the timekeeping CPU; also each clocksource switch, settimeofday and adjtimex frequency change",
};

/// The timekeeper's update on 7.x: `timekeeping_update()` became
/// `timekeeping_update_from_shadow()`, which takes `tk_core.seq` itself
/// (the callers did before), so the bracket also holds the timekeeper's
/// seqcount write section; it updates the auxiliary clocks' timekeepers
/// too, which have no fast timekeeper.
#[cfg(nmiclock_kernel_7)]
const TIMEKEEPING_UPDATE: &KernelUpdate = &KernelUpdate {
    symbol: c_str!("timekeeping_update_from_shadow"),
    holds: "both fast timekeeper latches (tk_fast_mono, tk_fast_raw), and around them the timekeeper's seqcount write section, its cached values, the vsyscall data and the copy from the shadow: wider than a latch",
    run_by: "the tick on the timekeeping CPU; also each clocksource switch, settimeofday and adjtimex frequency change (and the auxiliary clocks' updates, which write no fast timekeeper)",
};

/// x86's `sched_clock()`: the per-CPU cyc2ns latch. `local_clock()` is
/// `sched_clock()` while the scheduler's clock is stable, and otherwise
/// clamps it per CPU inside the read itself.
#[cfg(target_arch = "x86_64")]
const SCHED_CLOCK_UPDATE: &KernelUpdate = &KernelUpdate {
    symbol: c_str!("__set_cyc2ns_scale"),
    holds: "one CPU's cyc2ns latch update (arch/x86/kernel/tsc.c)",
    run_by: "boot, the TSC's refined calibration, and cpufreq without a constant TSC: nothing a run does",
};

/// The generic `sched_clock()` (arm64): its latch.
#[cfg(target_arch = "aarch64")]
const SCHED_CLOCK_UPDATE: &KernelUpdate = &KernelUpdate {
    symbol: c_str!("update_sched_clock"),
    holds: "the generic sched_clock's latch update (kernel/time/sched_clock.c)",
    run_by: "its wrap timer (about hourly for a 56-bit counter) and suspend: nothing a run does",
};

/// Declares the built-in targets, each once: [`BUILTIN`] (in setting
/// order, the first the default), their names for the setting
/// ([`BUILTIN_NAMES`]), and [`read_builtin`], the NMI side's dispatch on
/// them. A target's entry: its name, the function that reads it (`-` for
/// nmiclock's own clock, which the checks read with its details), its
/// promise and the kernel update it brackets.
macro_rules! builtin_targets {
    ($($name:ident: read $read:tt, $promise:expr, update $update:expr;)*) => {
        /// The built-in targets, in setting order; the first is the default.
        pub(crate) static BUILTIN: [Builtin; [$(stringify!($name)),*].len()] = [$(Builtin {
            name: stringify!($name),
            promise: $promise,
            update: $update,
        },)*];

        /// The built-in targets' names, in [`BUILTIN`] order.
        pub(crate) const BUILTIN_NAMES: [&str; [$(stringify!($name)),*].len()] =
            [$(stringify!($name),)*];

        /// Each built-in target's index.
        #[allow(non_camel_case_types)]
        #[repr(usize)]
        enum Index {
            $($name,)*
        }

        /// Reads built-in target `index`: any context, NMI included,
        /// statically dispatched. `None` for nmiclock's own clock and for
        /// an index past the built-in ones.
        #[inline]
        pub(crate) fn read_builtin(index: usize) -> Option<u64> {
            $(if index == Index::$name as usize {
                return builtin_targets!(@read $read);
            })*
            None
        }
    };
    (@read -) => { None };
    (@read ($f:path)) => { Some($f()) };
}

builtin_targets! {
    nmiclock: read -, Promise {
        per_cpu: Some(0),
        cross_cpu: Some(0),
        raw_rate: true,
        on_clocksource: false,
        at_switch: false,
        source: "nmiclock's own: a sched_clock replacement",
    }, update None;
    sched_clock: read (ffi::time::sched_clock), none(
        "include/linux/sched/clock.h: no promise of monotonicity or bounded drift between CPUs; NMI-safe (kernel/time/sched_clock.c, arch/x86/kernel/tsc.c: a latch)",
    ), update Some(SCHED_CLOCK_UPDATE);
    local_clock: read (ffi::time::local_clock), Promise {
        per_cpu: Some(0),
        cross_cpu: None,
        raw_rate: false,
        on_clocksource: false,
        at_switch: false,
        source: "include/linux/sched/clock.h: monotonic per CPU, bounded drift between CPUs, time can go backwards across CPUs",
    }, update Some(SCHED_CLOCK_UPDATE);
    ktime_get_mono_fast_ns: read (ffi::time::mono_fast_ns), fast(
        "kernel/time/timekeeping.c: NMI-safe, not monotonic across an update (a few ns)",
    ), update Some(TIMEKEEPING_UPDATE);
    ktime_get_raw_fast_ns: read (ffi::time::raw_fast_ns), fast(
        "kernel/time/timekeeping.c: as ktime_get_mono_fast_ns, unslewed",
    ), update Some(TIMEKEEPING_UPDATE);
    ktime_get_boot_fast_ns: read (ffi::time::boot_fast_ns), fast(
        "kernel/time/timekeeping.c: as ktime_get_mono_fast_ns, plus the time in suspend",
    ), update Some(TIMEKEEPING_UPDATE);
    ktime_get_tai_fast_ns: read (ffi::time::tai_fast_ns), none(
        "kernel/time/timekeeping.c: as ktime_get_boot_fast_ns; the TAI offset moves with settime and adjtimex",
    ), update Some(TIMEKEEPING_UPDATE);
    ktime_get_real_fast_ns: read (ffi::time::real_fast_ns), none(
        "kernel/time/timekeeping.c: as ktime_get_mono_fast_ns; CLOCK_REALTIME is stepped by settimeofday and adjtimex",
    ), update Some(TIMEKEEPING_UPDATE);
}

/// `target=nmiclock`.
pub(crate) const NMICLOCK: usize = Index::nmiclock as usize;

/// Targets registered at once, at most.
pub(crate) use crate::ffi::target::MAX_REGISTERED;

/// Longest name of a registered target, in bytes.
pub(crate) const NAME_MAX: usize = 31;

/// One registry slot.
pub(crate) struct Slot {
    /// The target, empty when the slot is free.
    pub(crate) target: RegisteredCell,
    /// Its name, copied at registration ([a-z0-9_], NUL-padded), so that
    /// showing the setting needs no lock.
    pub(crate) name: [AtomicU64; 4],
    /// Being unregistered: no run may pin it.
    pub(crate) going: AtomicBool,
    /// What its target promises, copied at registration: the step back
    /// it allows on one CPU and across CPUs (`u64::MAX`: any), and whether
    /// its rate is promised.
    pub(crate) back_cpu_ns: AtomicU64,
    pub(crate) back_cross_ns: AtomicU64,
    pub(crate) rate: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    target: RegisteredCell::new(),
    name: [const { AtomicU64::new(0) }; 4],
    going: AtomicBool::new(false),
    back_cpu_ns: AtomicU64::new(0),
    back_cross_ns: AtomicU64::new(0),
    rate: AtomicBool::new(true),
};

pub(crate) static SLOTS: [Slot; MAX_REGISTERED] = [FREE; MAX_REGISTERED];

/// A name copied into a slot.
pub(crate) fn store_name(slot: &Slot, name: &[u8]) {
    for (i, word) in slot.name.iter().enumerate() {
        let mut b = [0u8; 8];
        for (j, x) in b.iter_mut().enumerate() {
            *x = name.get(i * 8 + j).copied().unwrap_or(0);
        }
        word.store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
}

/// A slot's name, as stored.
pub(crate) struct SlotName([u8; 32]);

impl SlotName {
    pub(crate) fn of(slot: &Slot) -> Self {
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_mut(8).zip(slot.name.iter()) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        Self(out)
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        let n = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        self.0.get(..n).unwrap_or(&[])
    }
}

/// Writes the name of target `index` (a built-in one, or a registered
/// one's; `?` for an empty slot).
pub(crate) fn write_name(f: &mut core::fmt::Formatter<'_>, index: usize) -> core::fmt::Result {
    if let Some(b) = BUILTIN.get(index) {
        return f.write_str(b.name);
    }
    let Some(slot) = index.checked_sub(BUILTIN.len()).and_then(|i| SLOTS.get(i)) else {
        return f.write_str("?");
    };
    let name = SlotName::of(slot);
    match core::str::from_utf8(name.as_bytes()) {
        Ok(s) if !s.is_empty() => f.write_str(s),
        _ => f.write_str("?"),
    }
}

/// The index of the target named `name`, if any. The caller holds the
/// registry's mutex (see [`crate::settings::set_all`]) when it keeps the index.
pub(crate) fn lookup(name: &str) -> Option<usize> {
    if let Some(i) = BUILTIN.iter().position(|b| b.name == name) {
        return Some(i);
    }
    SLOTS
        .iter()
        .position(|s| s.target.is_set() && SlotName::of(s).as_bytes() == name.as_bytes())
        .map(|i| i + BUILTIN.len())
}

/// Runs `f` with the registry's mutex held. Task context.
pub(crate) fn locked<R>(f: impl FnOnce() -> R) -> R {
    let _l = Locked::new();
    f()
}

/// Whether `name` may name a registered target: 1 to [`NAME_MAX`] bytes
/// of `[a-z0-9_]`.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    (1..=NAME_MAX).contains(&name.len())
        && name
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// Registered targets now.
pub(crate) fn registered() -> usize {
    SLOTS.iter().filter(|s| s.target.is_set()).count()
}

/// The registered targets' names, comma-separated (`none registered` when
/// there is none), for a message that names what may be chosen. Reads the
/// slots without the registry's mutex: a name being registered or
/// unregistered meanwhile may be shown or not.
pub(crate) struct RegisteredNames;

impl core::fmt::Display for RegisteredNames {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut any = false;
        for (i, slot) in SLOTS.iter().enumerate() {
            if !slot.target.is_set() {
                continue;
            }
            if any {
                f.write_str(", ")?;
            }
            any = true;
            write_name(f, i + BUILTIN.len())?;
        }
        if !any {
            f.write_str("none registered")?;
        }
        Ok(())
    }
}

/// Target `index`'s name, as [`write_name`] writes it.
pub(crate) struct Name(pub(crate) usize);

impl core::fmt::Display for Name {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write_name(f, self.0)
    }
}
