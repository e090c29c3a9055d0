// SPDX-License-Identifier: GPL-2.0

//! Targets: what the stress run reads (the setting `target`).
//!
//! - `nmiclock`, the default: the clock `clock=` selects, checked exactly
//!   against its counter ([`crate::torture`]);
//! - the kernel's clocks meant for NMI context or the scheduler
//!   ([`BUILTIN`] after the first, each declared once in
//!   [`crate::registry`]), read through the glue and judged by what each
//!   promises; the function that updates each ([`KernelUpdate`]) is
//!   bracketed by a kretprobe during the run, so that the reads that met
//!   the kernel inside it count as window hits;
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

use kernel::prelude::*;

use crate::clock::{Window, Writer};
use crate::coverage;
use crate::coverage::Marker;
use crate::ffi;
use crate::ffi::kprobe::{Bracket, Edge};
use crate::ffi::target::{Declared, Locked, Registering, TargetPin, Unregistering};
use crate::fmtbuf::kernel_display;
use crate::registry::{
    lookup, read_builtin, store_name, valid_name, SlotName, BUILTIN, MAX_REGISTERED, NAME_MAX,
    NMICLOCK, SLOTS,
};
use crate::settings::{self, Key};

pub(crate) use crate::registry::{KernelUpdate, Promise};

/// What the run in progress (or the last run) reads, and what it found
/// of its target's updates. Written by the task that starts the run while
/// no reader runs; read from any context, NMI included.
struct RunTarget {
    /// The target's index (into [`BUILTIN`], or past it a registry slot).
    index: AtomicUsize,
    /// A registered target's promise, copied when the run pinned it: the
    /// step back allowed on one CPU and across CPUs (`u64::MAX`: any),
    /// and whether its rate is promised.
    back_cpu: AtomicU64,
    back_cross: AtomicU64,
    rate: AtomicBool,
    /// The registered target has an `update`.
    has_update: AtomicBool,
    /// Target `update` calls made.
    updates: AtomicU64,
    /// Writer steps that found another CPU's `update` in progress.
    update_skips: AtomicU64,
    /// Whether a kernel clock's update was bracketed: 0 if it was, else
    /// the error of the last attempt (positive errno); -1 before any.
    bracket_error: AtomicI32,
    /// Calls of the kernel's update the bracket missed, when it ended.
    bracket_missed: AtomicU64,
}

static RUN: RunTarget = RunTarget {
    index: AtomicUsize::new(NMICLOCK),
    back_cpu: AtomicU64::new(0),
    back_cross: AtomicU64::new(0),
    rate: AtomicBool::new(true),
    has_update: AtomicBool::new(false),
    updates: AtomicU64::new(0),
    update_skips: AtomicU64::new(0),
    bracket_error: AtomicI32::new(-1),
    bracket_missed: AtomicU64::new(0),
};

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
    BUILTIN.get(run_index()).and_then(|b| b.update)
}

/// What the run's (or the last run's) kernel clock coverage is: `None`
/// unless it reads a kernel clock.
pub(crate) fn kernel_coverage() -> Option<KernelCoverage> {
    kernel_update()?;
    Some(match RUN.bracket_error.load(Ordering::Relaxed) {
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
        RUN.bracket_missed.load(Ordering::Relaxed),
    )
}

/// Brackets `u` for a run: its entries and returns mark the kernel
/// windows. A failure is one log line; the run goes on without coverage.
fn bracket(name: &str, u: &'static KernelUpdate) -> Option<KernelBracket> {
    coverage::kernel_reset();
    RUN.bracket_missed.store(0, Ordering::Relaxed);
    match Bracket::new(u.symbol, |e| match e {
        Edge::Enter => coverage::kernel_enter(),
        Edge::Leave => coverage::kernel_leave(),
    }) {
        Ok(b) => {
            RUN.bracket_error.store(0, Ordering::Relaxed);
            Some(KernelBracket(b))
        }
        Err(e) => {
            let errno = e.to_errno().saturating_neg();
            RUN.bracket_error.store(errno.max(1), Ordering::Relaxed);
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
        RUN.bracket_missed.store(self.0.missed(), Ordering::Relaxed);
    }
}

/// What a registered target must do unless it declares otherwise: a
/// `sched_clock` replacement's promise.
pub(crate) const REGISTERED: Promise = Promise {
    per_cpu: Some(0),
    cross_cpu: Some(0),
    raw_rate: true,
    on_clocksource: false,
    at_switch: false,
    source: "include/nmiclock.h: a clock in ns, read from NMI context",
};

/// Where a registered target's own declared promise is written.
const DECLARED_SOURCE: &str = "declared by the target (include/nmiclock.h)";

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
    if BUILTIN.iter().any(|b| b.name.as_bytes() == name) || lookup(shown).is_some() {
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
        Self::of(settings::target_index())
    }

    /// Pins target `index` (a run's, as its settings hold it), as
    /// [`Pinned::selected`] does.
    pub(crate) fn of(index: usize) -> Result<Self> {
        let l = Locked::new();
        RUN.updates.store(0, Ordering::Relaxed);
        RUN.update_skips.store(0, Ordering::Relaxed);
        RUN.has_update.store(false, Ordering::Relaxed);
        if let Some(b) = BUILTIN.get(index) {
            RUN.index.store(index, Ordering::Release);
            let bracket = b.update.and_then(|u| bracket(b.name, u));
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
            (&RUN.back_cpu, &slot.back_cpu_ns),
            (&RUN.back_cross, &slot.back_cross_ns),
        ] {
            run.store(declared.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        RUN.rate
            .store(slot.rate.load(Ordering::Relaxed), Ordering::Relaxed);
        RUN.has_update.store(t.has_update(), Ordering::Relaxed);
        RUN.index.store(index, Ordering::Release);
        Ok(Self {
            _pin: Some(pin),
            _bracket: None,
        })
    }
}

/// The target index of the run in progress (or the last).
#[inline]
pub(crate) fn run_index() -> usize {
    RUN.index.load(Ordering::Acquire)
}

/// What the run in progress (or the last) reads.
pub(crate) fn run_kind() -> Kind {
    match run_index() {
        NMICLOCK => Kind::Nmiclock,
        i if i < BUILTIN.len() => Kind::Kernel,
        _ => Kind::Registered {
            update: RUN.has_update.load(Ordering::Relaxed),
        },
    }
}

/// The promise the run's target is judged by. Any context.
#[inline]
pub(crate) fn promise() -> Promise {
    match BUILTIN.get(run_index()) {
        Some(b) => b.promise,
        None => declared_promise(
            RUN.back_cpu.load(Ordering::Relaxed),
            RUN.back_cross.load(Ordering::Relaxed),
            RUN.rate.load(Ordering::Relaxed),
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
        on_clocksource: false,
        at_switch: false,
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
    match read_builtin(run_index()) {
        Some(ns) => (ns, false),
        None => ffi::target::with_pinned(|t| t.map_or((0, false), |t| t.read())),
    }
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
            RUN.update_skips.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut m = Marker::here(0);
        m.enter(Window::Target);
        u.call();
        m.leave();
        drop(u);
        RUN.updates.fetch_add(1, Ordering::Relaxed);
    });
}

/// Target `update` calls of the run in progress (or the last), and writer
/// steps skipped because another CPU's was in progress.
pub(crate) fn update_counts() -> (u64, u64) {
    (
        RUN.updates.load(Ordering::Relaxed),
        RUN.update_skips.load(Ordering::Relaxed),
    )
}

/// The promise target `index` is judged by (a registered one's as it
/// declared it).
fn promise_of(index: usize) -> Promise {
    if let Some(b) = BUILTIN.get(index) {
        return b.promise;
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
    match BUILTIN.get(index).and_then(|b| b.update) {
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
        "target_promise: per_cpu_step_back_ns={} cross_cpu_step_back_ns={} raw_rate={}{} ({})",
        Allowance(p.per_cpu),
        Allowance(p.cross_cpu),
        if p.raw_rate { "yes" } else { "no" },
        if p.at_switch {
            " at_clocksource_switch=its_length"
        } else {
            ""
        },
        p.source
    )
}
