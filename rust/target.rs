// SPDX-License-Identifier: GPL-2.0

//! Targets: what the stress run reads (the setting `target`).
//!
//! - `nmiclock`, the default: the clock `clock=` selects, checked exactly
//!   against its counter ([`crate::torture`]);
//! - the kernel's clocks meant for NMI context or the scheduler
//!   ([`BUILTIN`] after the first), read through the glue and judged by
//!   what each promises ([`PROMISES`]); the function that updates each
//!   ([`KernelUpdate`]) is bracketed by a kretprobe during the run, so
//!   that the reads that met the kernel inside it count as window hits;
//! - clocks other modules register (`include/nmiclock.h`), up to
//!   [`MAX_REGISTERED`], judged as a `sched_clock` replacement must be: per
//!   CPU and across CPUs monotonic, at the rate of `CLOCK_MONOTONIC_RAW`.
//!   Their `update`, if any, is what the run's writers call, one at a time
//!   ([`update_step`]), each call a window for the coverage figures.
//!
//! The setting holds an index: into [`BUILTIN`], or [`BUILTIN`]`.len()`
//! plus a registry slot. A run pins its target ([`Pinned`]): a reference on
//! the provider's module, released when the run ends, and the target
//! published to the run's readers ([`TargetPin`]). Unregistering a target
//! a run uses stops the run first; unregistering the selected target sets
//! `target` back to `nmiclock`. What keeps a provider's structure valid
//! while it is used is in the types of [`crate::ffi::target`]: this module
//! only decides what to read.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use kernel::c_str;
use kernel::prelude::*;
use kernel::str::CStr;

use crate::clock::{Window, Writer};
use crate::coverage;
use crate::coverage::Marker;
use crate::ffi;
use crate::ffi::kprobe::{Bracket, Edge};
use crate::ffi::target::{Declared, Locked, Registering, TargetPin, Unregistering};
use crate::fmtbuf::kernel_display;
use crate::registry::{
    lookup, store_name, valid_name, SlotName, BUILTIN, MAX_REGISTERED, NAME_MAX, NMICLOCK, SLOTS,
};
use crate::settings::{self, Key};

/// How far the kernel's `ktime_get_*_fast_ns()` may step back across an
/// update: "a few nanoseconds", in the kernel's words (an NMI inside the
/// update, or another CPU, reads with the old slope). Checked at 1 us: a
/// whole second between updates at the mult steps the timekeeper makes
/// (about 60 ns), ten times over.
const FAST_STEP_BACK_NS: u64 = 1_000;

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
    /// Where the promise is written.
    pub(crate) source: &'static str,
}

/// The promise of each built-in target, in [`BUILTIN`] order.
pub(crate) static PROMISES: [Promise; 8] = [
    // nmiclock: what the stress run has always checked.
    Promise {
        per_cpu: Some(0),
        cross_cpu: Some(0),
        raw_rate: true,
        source: "nmiclock's own: a sched_clock replacement",
    },
    Promise {
        per_cpu: None,
        cross_cpu: None,
        raw_rate: false,
        source: "include/linux/sched/clock.h: no promise of monotonicity or bounded drift between CPUs; NMI-safe (kernel/time/sched_clock.c, arch/x86/kernel/tsc.c: a latch)",
    },
    Promise {
        per_cpu: Some(0),
        cross_cpu: None,
        raw_rate: false,
        source: "include/linux/sched/clock.h: monotonic per CPU, bounded drift between CPUs, time can go backwards across CPUs",
    },
    Promise {
        per_cpu: Some(FAST_STEP_BACK_NS),
        cross_cpu: Some(FAST_STEP_BACK_NS),
        raw_rate: true,
        source: "kernel/time/timekeeping.c: NMI-safe, not monotonic across an update (a few ns)",
    },
    Promise {
        per_cpu: Some(FAST_STEP_BACK_NS),
        cross_cpu: Some(FAST_STEP_BACK_NS),
        raw_rate: true,
        source: "kernel/time/timekeeping.c: as ktime_get_mono_fast_ns, unslewed",
    },
    Promise {
        per_cpu: Some(FAST_STEP_BACK_NS),
        cross_cpu: Some(FAST_STEP_BACK_NS),
        raw_rate: true,
        source: "kernel/time/timekeeping.c: as ktime_get_mono_fast_ns, plus the time in suspend",
    },
    Promise {
        per_cpu: None,
        cross_cpu: None,
        raw_rate: false,
        source: "kernel/time/timekeeping.c: as ktime_get_boot_fast_ns; the TAI offset moves with settime and adjtimex",
    },
    Promise {
        per_cpu: None,
        cross_cpu: None,
        raw_rate: false,
        source: "kernel/time/timekeeping.c: as ktime_get_mono_fast_ns; CLOCK_REALTIME is stepped by settimeofday and adjtimex",
    },
];

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

/// The timekeeper's update, which writes the fast timekeeper's latches.
/// `update_fast_timekeeper()` is inlined into it, so the bracket is wider
/// than the latch.
#[cfg(not(nmiclock_kernel_7))]
static TIMEKEEPING_UPDATE: KernelUpdate = KernelUpdate {
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
static TIMEKEEPING_UPDATE: KernelUpdate = KernelUpdate {
    symbol: c_str!("timekeeping_update_from_shadow"),
    holds: "both fast timekeeper latches (tk_fast_mono, tk_fast_raw), and around them the timekeeper's seqcount write section, its cached values, the vsyscall data and the copy from the shadow: wider than a latch",
    run_by: "the tick on the timekeeping CPU; also each clocksource switch, settimeofday and adjtimex frequency change (and the auxiliary clocks' updates, which write no fast timekeeper)",
};

/// x86's `sched_clock()`: the per-CPU cyc2ns latch.
#[cfg(target_arch = "x86_64")]
static SCHED_CLOCK_UPDATE: KernelUpdate = KernelUpdate {
    symbol: c_str!("__set_cyc2ns_scale"),
    holds: "one CPU's cyc2ns latch update (arch/x86/kernel/tsc.c)",
    run_by: "boot, the TSC's refined calibration, and cpufreq without a constant TSC: nothing a run does",
};

/// The generic `sched_clock()` (arm64): its latch.
#[cfg(target_arch = "aarch64")]
static SCHED_CLOCK_UPDATE: KernelUpdate = KernelUpdate {
    symbol: c_str!("update_sched_clock"),
    holds: "the generic sched_clock's latch update (kernel/time/sched_clock.c)",
    run_by: "its wrap timer (about hourly for a 56-bit counter) and suspend: nothing a run does",
};

/// The update of each built-in target, in [`BUILTIN`] order (`None` for
/// nmiclock's own clock, whose writers mark their windows themselves).
/// `local_clock()` is `sched_clock()` while the scheduler's clock is stable,
/// and otherwise clamps it per CPU inside the read itself.
static KERNEL_UPDATES: [Option<&KernelUpdate>; 8] = [
    None,
    Some(&SCHED_CLOCK_UPDATE),
    Some(&SCHED_CLOCK_UPDATE),
    Some(&TIMEKEEPING_UPDATE),
    Some(&TIMEKEEPING_UPDATE),
    Some(&TIMEKEEPING_UPDATE),
    Some(&TIMEKEEPING_UPDATE),
    Some(&TIMEKEEPING_UPDATE),
];

/// Whether a kernel clock's run bracketed its update: 0 if it did, else
/// the error of the last attempt (positive errno); -1 before any.
static BRACKET_ERROR: AtomicI32 = AtomicI32::new(-1);
/// Calls the kernel's bracket missed in the run (or the last), when it
/// ended.
static BRACKET_MISSED: AtomicU64 = AtomicU64::new(0);

/// Whether the reads of a kernel clock's run can have met its update.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelCoverage {
    /// Bracketed, and the kernel ran it during the run.
    Exercised,
    /// Bracketed, but the kernel did not run it during the run.
    NotExercised,
    /// It could not be bracketed (the error).
    NotBracketed(i32),
}

impl KernelCoverage {
    /// As `stats` shows it.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Exercised => "exercised",
            Self::NotExercised => "update not exercised",
            Self::NotBracketed(_) => "update not bracketed",
        }
    }

    /// As the End of test line shows it (one word).
    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::Exercised => "exercised",
            Self::NotExercised => "update_not_exercised",
            Self::NotBracketed(_) => "update_not_bracketed",
        }
    }
}

/// The update of the run's kernel clock (or the last run's), if it reads one.
fn kernel_update() -> Option<&'static KernelUpdate> {
    KERNEL_UPDATES.get(run_index()).copied().flatten()
}

/// What the run's (or the last run's) kernel clock coverage is: `None`
/// unless it reads a kernel clock.
pub(crate) fn kernel_coverage() -> Option<KernelCoverage> {
    kernel_update()?;
    Some(match BRACKET_ERROR.load(Ordering::Relaxed) {
        0 if coverage::kernel_calls() > 0 => KernelCoverage::Exercised,
        0 => KernelCoverage::NotExercised,
        e => KernelCoverage::NotBracketed(e),
    })
}

/// Calls of the bracketed kernel update in the run (or the last), and
/// calls the bracket missed; 0 unless it read a kernel clock.
pub(crate) fn kernel_update_counts() -> (u64, u64) {
    if kernel_update().is_none() {
        return (0, 0);
    }
    (
        coverage::kernel_calls(),
        BRACKET_MISSED.load(Ordering::Relaxed),
    )
}

/// Brackets `u` for a run: its entries and returns mark the kernel
/// windows. A failure is one log line; the run goes on without coverage.
fn bracket(name: &str, u: &'static KernelUpdate) -> Option<KernelBracket> {
    coverage::kernel_reset();
    BRACKET_MISSED.store(0, Ordering::Relaxed);
    match Bracket::new(u.symbol, |e| match e {
        Edge::Enter => coverage::kernel_enter(),
        Edge::Leave => coverage::kernel_leave(),
    }) {
        Ok(b) => {
            BRACKET_ERROR.store(0, Ordering::Relaxed);
            Some(KernelBracket(b))
        }
        Err(e) => {
            let errno = e.to_errno().saturating_neg();
            BRACKET_ERROR.store(errno.max(1), Ordering::Relaxed);
            pr_info!(
                "start: {}: cannot bracket {}() (error {}{}): window hits are not counted\n",
                name,
                u.symbol.to_str().unwrap_or("?"),
                -errno,
                if Bracket::unsupported(e) {
                    ", a kernel without CONFIG_KRETPROBES"
                } else {
                    ""
                }
            );
            None
        }
    }
}

/// A kernel clock's bracket, held by the run; dropping it unregisters the
/// probe and keeps what it missed.
struct KernelBracket(Bracket);

impl Drop for KernelBracket {
    fn drop(&mut self) {
        BRACKET_MISSED.store(self.0.missed(), Ordering::Relaxed);
    }
}

/// What a registered target must do unless it declares otherwise: a
/// `sched_clock` replacement's promise.
pub(crate) static REGISTERED: Promise = Promise {
    per_cpu: Some(0),
    cross_cpu: Some(0),
    raw_rate: true,
    source: "include/nmiclock.h: a clock in ns, read from NMI context",
};

/// Where a registered target's own declared promise is written.
const DECLARED_SOURCE: &str = "declared by the target (include/nmiclock.h)";

/// The promise of the run's registered target, copied when the run pinned
/// it (read from NMI context: atomics, `u64::MAX` for none).
static RUN_BACK_CPU: AtomicU64 = AtomicU64::new(0);
static RUN_BACK_CROSS: AtomicU64 = AtomicU64::new(0);
static RUN_RATE: AtomicBool = AtomicBool::new(true);

/// The target index of the run in progress (or the last run).
static RUN_INDEX: AtomicUsize = AtomicUsize::new(NMICLOCK);
/// The run's registered target has an `update` (kept past the run).
static RUN_UPDATE: AtomicBool = AtomicBool::new(false);
/// Target `update` calls made in the run in progress (or the last).
static UPDATES: AtomicU64 = AtomicU64::new(0);
/// Writer steps that found another CPU's `update` in progress.
static UPDATE_SKIPS: AtomicU64 = AtomicU64::new(0);

/// Registers `t` (see `include/nmiclock.h`). Task context.
pub(crate) fn register(t: &Registering<'_>) -> Result {
    let Some((buf, len)) = t.name::<{ NAME_MAX + 1 }>() else {
        pr_err!(
            "register_target: the name is missing or longer than {} bytes\n",
            NAME_MAX
        );
        return Err(EINVAL);
    };
    let name = buf.get(..len).unwrap_or(&[]);
    let shown = core::str::from_utf8(name).unwrap_or("(not text)");
    if !valid_name(name) {
        pr_err!(
            "register_target: '{}': a name is 1 to {} characters of a-z, 0-9 and _\n",
            shown,
            NAME_MAX
        );
        return Err(EINVAL);
    }
    let (read, _) = t.has_read_update();
    if !read {
        pr_err!("register_target: {}: no read function\n", shown);
        return Err(EINVAL);
    }
    let l = Locked::new();
    if BUILTIN.iter().any(|b| b.as_bytes() == name) || lookup(shown).is_some() {
        pr_err!("register_target: {}: a target of that name exists\n", shown);
        return Err(EEXIST);
    }
    if SLOTS.iter().any(|s| s.target.holds(t.id())) {
        pr_err!("register_target: {}: already registered\n", shown);
        return Err(EEXIST);
    }
    let Some(slot) = SLOTS.iter().find(|s| !s.target.is_set()) else {
        pr_err!(
            "register_target: {}: {} targets registered already, the most there can be\n",
            shown,
            MAX_REGISTERED
        );
        return Err(ENOSPC);
    };
    // The name first: a slot that holds a target shows it.
    store_name(slot, name);
    slot.going.store(false, Ordering::Relaxed);
    let d = t.declared();
    slot.back_cpu_ns
        .store(d.back_cpu_ns.unwrap_or(u64::MAX), Ordering::Relaxed);
    slot.back_cross_ns
        .store(d.back_cross_ns.unwrap_or(u64::MAX), Ordering::Relaxed);
    slot.rate.store(d.rate, Ordering::Relaxed);
    if let Err(e) = slot.target.set(&l, t) {
        store_name(slot, &[]);
        pr_err!("register_target: {}: cannot be registered now\n", shown);
        return Err(e);
    }
    if d == Declared::DEFAULT {
        pr_info!("target {} registered\n", shown);
    } else {
        pr_info!(
            "target {} registered, promising per_cpu_step_back_ns={} cross_cpu_step_back_ns={} raw_rate={}\n",
            shown,
            kernel_display!(Allowance(d.back_cpu_ns)),
            kernel_display!(Allowance(d.back_cross_ns)),
            if d.rate { "yes" } else { "no" }
        );
    }
    Ok(())
}

/// Unregisters `t`: stops a run that uses it first (`stop_run`, called
/// until no run reads it; true when it stopped one), and sets `target`
/// back to `nmiclock` if it was selected. Task context; may sleep.
pub(crate) fn unregister(t: &Unregistering<'_>, stop_run: impl Fn() -> bool) {
    // No run may pin it from now on (a run pins under the mutex, so one
    // that did is seen below); one that has stops, not under the mutex:
    // its End of test line shows the settings.
    let found = {
        let _l = Locked::new();
        let found = SLOTS.iter().position(|s| s.target.holds(t.id()));
        if let Some(s) = found.and_then(|i| SLOTS.get(i)) {
            s.going.store(true, Ordering::Release);
        }
        found
    };
    let Some(i) = found else {
        pr_err!("unregister_target: not a registered target\n");
        return;
    };
    let Some(slot) = SLOTS.get(i) else {
        return;
    };
    let index = i + BUILTIN.len();
    let mut said = false;
    while t.is_pinned() {
        if stop_run() && !said {
            pr_info!("stopped the run: its target is being unregistered\n");
            said = true;
        }
        ffi::cpu::sleep_us(1_000);
    }
    let l = Locked::new();
    let selected = settings::target_index() == index;
    if selected {
        settings::reset(Key::Target);
    }
    let name = SlotName::of(slot);
    pr_info!(
        "target {} unregistered{}\n",
        core::str::from_utf8(name.as_bytes()).unwrap_or("?"),
        if selected {
            "; target is nmiclock again"
        } else {
            ""
        }
    );
    slot.target.clear(&l);
    store_name(slot, &[]);
}

/// What a run reads: a built-in target, or a registered one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// nmiclock's own clock.
    Nmiclock,
    /// One of the kernel's clocks.
    Kernel,
    /// A registered target, with an `update` or without.
    Registered {
        /// It has an `update` for the writers to call.
        update: bool,
    },
}

/// The target a run uses, pinned until the run ends (a registered
/// target's [`TargetPin`]; nothing for a built-in one).
pub(crate) struct Pinned {
    _pin: Option<TargetPin>,
    /// A kernel clock's update, bracketed for the run.
    _bracket: Option<KernelBracket>,
}

impl Pinned {
    /// Pins the target the settings select, for a run. `EINVAL` if the
    /// registered target is gone, `EBUSY` if its module is going away (one
    /// log line each).
    pub(crate) fn selected() -> Result<Self> {
        let l = Locked::new();
        let index = settings::target_index();
        UPDATES.store(0, Ordering::Relaxed);
        UPDATE_SKIPS.store(0, Ordering::Relaxed);
        RUN_UPDATE.store(false, Ordering::Relaxed);
        if index < BUILTIN.len() {
            RUN_INDEX.store(index, Ordering::Release);
            let name = BUILTIN.get(index).copied().unwrap_or("?");
            let bracket = KERNEL_UPDATES
                .get(index)
                .copied()
                .flatten()
                .and_then(|u| bracket(name, u));
            return Ok(Self {
                _pin: None,
                _bracket: bracket,
            });
        }
        let slot = SLOTS.get(index - BUILTIN.len()).ok_or(EINVAL)?;
        let t = match slot.target.load(&l) {
            Some(t) if !slot.going.load(Ordering::Acquire) => t,
            _ => {
                pr_err!("start: the target is being unregistered\n");
                return Err(EINVAL);
            }
        };
        let pin = TargetPin::new(&l, t).inspect_err(|_| {
            pr_err!("start: the target's module is going away\n");
        })?;
        for (run, declared) in [
            (&RUN_BACK_CPU, &slot.back_cpu_ns),
            (&RUN_BACK_CROSS, &slot.back_cross_ns),
        ] {
            run.store(declared.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        RUN_RATE.store(slot.rate.load(Ordering::Relaxed), Ordering::Relaxed);
        RUN_UPDATE.store(t.has_update(), Ordering::Relaxed);
        RUN_INDEX.store(index, Ordering::Release);
        Ok(Self {
            _pin: Some(pin),
            _bracket: None,
        })
    }
}

/// The target index of the run in progress (or the last).
#[inline]
pub(crate) fn run_index() -> usize {
    RUN_INDEX.load(Ordering::Acquire)
}

/// What the run in progress (or the last) reads.
pub(crate) fn run_kind() -> Kind {
    match run_index() {
        NMICLOCK => Kind::Nmiclock,
        i if i < BUILTIN.len() => Kind::Kernel,
        _ => Kind::Registered {
            update: RUN_UPDATE.load(Ordering::Relaxed),
        },
    }
}

/// The promise the run's target is judged by. Any context.
#[inline]
pub(crate) fn promise() -> Promise {
    match PROMISES.get(run_index()) {
        Some(p) => *p,
        None => declared_promise(
            RUN_BACK_CPU.load(Ordering::Relaxed),
            RUN_BACK_CROSS.load(Ordering::Relaxed),
            RUN_RATE.load(Ordering::Relaxed),
        ),
    }
}

/// A registered target's promise from what it declared (`u64::MAX`: any
/// step back).
fn declared_promise(back_cpu: u64, back_cross: u64, rate: bool) -> Promise {
    let p = Promise {
        per_cpu: (back_cpu != u64::MAX).then_some(back_cpu),
        cross_cpu: (back_cross != u64::MAX).then_some(back_cross),
        raw_rate: rate,
        source: DECLARED_SOURCE,
    };
    if (p.per_cpu, p.cross_cpu, p.raw_rate)
        == (
            REGISTERED.per_cpu,
            REGISTERED.cross_cpu,
            REGISTERED.raw_rate,
        )
    {
        REGISTERED
    } else {
        p
    }
}

/// Reads the run's target (not `nmiclock`, which the checks read with its
/// details): any context, NMI included; statically dispatched but for a
/// registered target's read. The time (0 when there is no target), and
/// whether the read said it stalled (a registered target's
/// `read_status`; the kernel's clocks never wait).
#[inline]
pub(crate) fn read() -> (u64, bool) {
    let ns = match run_index() {
        1 => ffi::time::sched_clock(),
        2 => ffi::time::local_clock(),
        3 => ffi::time::mono_fast_ns(),
        4 => ffi::time::raw_fast_ns(),
        5 => ffi::time::boot_fast_ns(),
        6 => ffi::time::tai_fast_ns(),
        7 => ffi::time::real_fast_ns(),
        _ => return ffi::target::with_pinned(|t| t.map_or((0, false), |t| t.read())),
    };
    (ns, false)
}

/// One writer step of the run's registered target: its `update`, marked
/// as a window for the coverage figures, unless another CPU's is in
/// progress. Task or hard-IRQ context, on a CPU the caller does not leave.
pub(crate) fn update_step() {
    ffi::target::with_pinned(|t| {
        let Some(t) = t else {
            return;
        };
        let Some(u) = t.begin_update() else {
            UPDATE_SKIPS.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut m = Marker::here(0);
        m.enter(Window::Target);
        u.call();
        m.leave();
        drop(u);
        UPDATES.fetch_add(1, Ordering::Relaxed);
    });
}

/// Target `update` calls of the run in progress (or the last), and writer
/// steps skipped because another CPU's was in progress.
pub(crate) fn update_counts() -> (u64, u64) {
    (
        UPDATES.load(Ordering::Relaxed),
        UPDATE_SKIPS.load(Ordering::Relaxed),
    )
}

/// The promise target `index` is judged by (a registered one's as it
/// declared it).
fn promise_of(index: usize) -> Promise {
    if let Some(p) = PROMISES.get(index) {
        return *p;
    }
    match index.checked_sub(BUILTIN.len()).and_then(|i| SLOTS.get(i)) {
        Some(s) => declared_promise(
            s.back_cpu_ns.load(Ordering::Relaxed),
            s.back_cross_ns.load(Ordering::Relaxed),
            s.rate.load(Ordering::Relaxed),
        ),
        None => REGISTERED,
    }
}

/// A step-back allowance: its ns, or `any` when nothing is promised (as
/// the documentation's tables say; 0 is no step allowed).
struct Allowance(Option<u64>);

impl core::fmt::Display for Allowance {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Some(ns) => write!(f, "{ns}"),
            None => f.write_str("any"),
        }
    }
}

/// Writes the `stats` lines of the targets: how many are registered, and
/// the promise of the one selected.
pub(crate) fn show(w: &mut impl core::fmt::Write) -> core::fmt::Result {
    let index = settings::target_index();
    let p = promise_of(index);
    writeln!(w, "registered_targets: {}", crate::registry::registered())?;
    match KERNEL_UPDATES.get(index).copied().flatten() {
        Some(u) => writeln!(
            w,
            "kernel_update: {}() (holds {}; run by {})",
            u.symbol.to_str().unwrap_or("?"),
            u.holds,
            u.run_by
        )?,
        None => writeln!(w, "kernel_update: -")?,
    }
    writeln!(
        w,
        "target_promise: per_cpu_step_back_ns={} cross_cpu_step_back_ns={} raw_rate={} ({})",
        Allowance(p.per_cpu),
        Allowance(p.cross_cpu),
        if p.raw_rate { "yes" } else { "no" },
        p.source
    )
}
