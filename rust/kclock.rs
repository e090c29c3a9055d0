// SPDX-License-Identifier: GPL-2.0

//! The module's clock, around the kernel-independent [`crate::clock`]:
//!
//! - one static instance of each protection over each counter ([`CLOCKS`],
//!   looked up by name like locktorture's ops tables), of which the
//!   settings `clock` and `counter` select one, at load or by a `config`
//!   write while nothing runs;
//! - its epoch updater ([`Running`]), a hard-IRQ hrtimer firing every
//!   [`ClockData::update_interval_ns`] (the kernel's `wrap_kt`), with the
//!   `tear_window_ns` fault injection inside the writer's window (the
//!   stress run's writers update the epoch too, through [`update_epoch`]);
//! - [`read`], the read every reader uses, NMI context included, dispatched
//!   statically (no call through a pointer on that path);
//! - `nmiclock_sched_clock()`, exported GPL for other modules;
//! - per-CPU counters of reads (by nmiclock's own readers: the exported
//!   function counts nothing), retries, stalls, epoch updates.
//!
//! The epoch timer's period is half the time the conversion stays valid
//! over the masked counter ([`ClockData::update_interval_ns`]), clamped to
//! [`MIN_INTERVAL_NS`]..[`MAX_INTERVAL_NS`] (5 us to a second): the
//! narrower `counter_bits`, the shorter. Since a torn read is early by the
//! time since the previous epoch (see [`crate::clock`]), it shows as a
//! backward step of about one such period.
//!
//! An update that comes more than a whole wrap late (a vCPU preempted for
//! longer than a narrow counter's wrap) loses whole wraps whatever the
//! protection: it counts in `wrap_overruns` ([`overruns`]), and the stress
//! run's checks span no such update, so it is never counted as a tear.
//! What else the checks need to tell a tear from the conversion switches
//! between two reads is here too: the conversion switches' log
//! ([`switches_started`], [`switches_finished`], [`switch_record`]) and
//! the conversions published during a run ([`conversions`]).
//!
//! The conversion comes from the counter's rate in kHz (on x86 the kernel's
//! `tsc_khz`, on arm64 `CNTFRQ_EL0`), computed as the kernel's `cyc2ns`
//! does. On x86 the kernel refines its TSC calibration after boot (about
//! 1.7 s in the VM): the epoch timer, and a stress run's start and writers,
//! notice the new rate and switch to its conversion without a step in
//! time, as `sched_clock_register()` does (`recalibrations`), so the clock
//! keeps agreeing with `local_clock()`.
//!
//! A `seqcount` reader waits for the writer at most [`WAIT_BUDGET_NS`] plus
//! twice `tear_window_ns`, then gives up, returns what it read (possibly
//! torn) and counts a stall.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::activity::Guard;
use crate::arch::{Bare, Ordered};
use crate::choices::{same, Choice};
use crate::clock::{
    ClockData, ClockSource, EpochUpdate, Latch, Protection, Reading, Seqcount, Unprotected, Window,
    Writer,
};
use crate::counter::{mask_for_bits, Counter};
use crate::counters::{counters, show};
use crate::coverage::Marker;
use crate::cyc_ns::{calc_mult_shift, same_rate_pair, NSEC_PER_MSEC};
use crate::ffi;
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::time::MonoFast;
use crate::percpu::PerCpu;
use crate::read_check::SwitchLog;
use crate::settings::{self, Key};

crate::clocks!(wait MonoFast = MonoFast);

// The names the settings `clock` and `counter` take are these types'.
const _: () = {
    use crate::choices::{CounterRead, Protection as P};
    assert!(same(P::Latch.const_name(), Latch::NAME));
    assert!(same(P::Seqcount.const_name(), Seqcount::NAME));
    assert!(same(P::Unprotected.const_name(), Unprotected::NAME));
    assert!(same(CounterRead::Ordered.const_name(), Ordered::NAME));
    assert!(same(CounterRead::Bare.const_name(), Bare::NAME));
};

/// Shortest epoch update period, whatever the counter width asks for.
const MIN_INTERVAL_NS: u64 = 5_000;

/// Longest epoch update period: also how soon a new counter calibration
/// (on x86 the kernel refines `tsc_khz` after boot) is picked up when no
/// stress run is going (a run's writers pick it up at once).
const MAX_INTERVAL_NS: u64 = 1_000_000_000;

/// Range of the cycles->ns conversion: one hour, in ms (kHz-based pair).
const CONVERSION_RANGE_MS: u32 = 3_600_000;

/// How long a reader may wait for the writer, beyond the writer's pauses.
const WAIT_BUDGET_NS: u64 = 50_000;

/// What an epoch update costs the epoch timer in hard-IRQ besides its
/// pauses, as [`validate_settings`] counts it: a tenth of the shortest period,
/// so that `tear_window_ns=0` is valid at every counter width and rate.
const UPDATE_SLACK_NS: u64 = MIN_INTERVAL_NS / 10;

/// The most of its period the epoch timer may spend in hard-IRQ, as a
/// fraction `1 / MAX_IRQ_SHARE`.
const MAX_IRQ_SHARE: u64 = 10;

/// The epoch timer's period for conversion `ms` over a counter of `mask`.
fn epoch_interval_ns(ms: &crate::cyc_ns::MultShift, mask: u64) -> u64 {
    ClockData {
        mult: ms.mult,
        shift: ms.shift,
        mask,
        ..ClockData::default()
    }
    .update_interval_ns()
    .clamp(MIN_INTERVAL_NS, MAX_INTERVAL_NS)
}

/// Checks a set of settings as a whole: the epoch timer, which pauses
/// `tear_window_ns` twice per update (once per latch copy) in hard-IRQ
/// context, may spend at most a tenth of its period there, at the period
/// it will really have for `counter_bits` at this counter's rate (twice
/// `tear_window_ns` plus [`UPDATE_SLACK_NS`], against
/// `update_interval_ns`). Otherwise a valid-looking pair, such as
/// `counter_bits=16 tear_window_ns=1000000`, would keep a CPU in hard-IRQ
/// with interrupts off about half the time. `EINVAL` and one log line
/// naming the settings and what would be valid. A counter without a rate
/// passes here: starting the clock refuses it.
pub(crate) fn validate_settings(v: &settings::Values) -> Result {
    if v.number(Key::TraceOnAnomaly) != 0 && !ffi::trace::available() {
        pr_err!("trace_on_anomaly=1: this kernel has no tracing (CONFIG_TRACING)\n");
        return Err(EINVAL);
    }
    let bits = v.number(Key::CounterBits);
    let window = u64::from(v.number(Key::TearWindowNs));
    let (Some(mask), Some(ms)) = (mask_for_bits(bits), conversion(ffi::time::counter_khz())) else {
        return Ok(());
    };
    let interval = epoch_interval_ns(&ms, mask);
    let budget = interval / MAX_IRQ_SHARE;
    let irq = window.saturating_mul(2).saturating_add(UPDATE_SLACK_NS);
    if irq <= budget {
        return Ok(());
    }
    pr_err!(
        "counter_bits={} tear_window_ns={}: the epoch timer would spend up to {} ns of every {} in hard-IRQ, more than a tenth; here counter_bits={} allows tear_window_ns up to {} (or widen counter_bits)\n",
        bits,
        window,
        irq,
        interval,
        bits,
        budget.saturating_sub(UPDATE_SLACK_NS) / 2
    );
    Err(EINVAL)
}

/// The running clock: which it is, its epoch timer's period, and what its readers and writers counted.
struct Active {
    /// Index into [`CLOCKS`] of the running clock; out of range when none.
    active: AtomicUsize,
    /// Its epoch timer's period, ns.
    interval_ns: AtomicU64,
    /// Its writers' pause inside each update (`tear_window_ns`), taken
    /// when it was built.
    tear_window_ns: AtomicU32,
    /// Counter rate (kHz) the running conversion was computed from.
    counter_khz: AtomicU32,
    /// Each CPU's counts of its reads and updates.
    stats: PerCpu<CpuStats>,
    /// The running clock's conversion switches: their pivots, for the checks.
    switches: SwitchLog,
    /// The conversions published since [`reset_conversions`], [`packed`], 0
    /// for an empty slot.
    conversions: [AtomicU64; 4],
    /// Epoch updates that came more than a whole wrap late, on all CPUs: time
    /// lost across them, whatever the protection.
    overruns: AtomicU64,
    /// The conversion the running clock was started with, the base of
    /// [`switch_conversion`].
    base_conversion: AtomicU64,
}

static ACTIVE: Active = Active {
    active: AtomicUsize::new(usize::MAX),
    interval_ns: AtomicU64::new(0),
    tear_window_ns: AtomicU32::new(0),
    counter_khz: AtomicU32::new(0),
    stats: PerCpu::new(),
    switches: SwitchLog::new(),
    conversions: [const { AtomicU64::new(0) }; 4],
    overruns: AtomicU64::new(0),
    base_conversion: AtomicU64::new(0),
};

counters! {
    /// One CPU's counts of the running clock's reads and updates, in
    /// their own cache line.
    #[repr(align(64))]
    struct CpuStats, totals pub(crate) Totals {
        /// nmiclock's own reads (the exported function counts nothing).
        reads: "clock_reads", sum, show::STATS | show::PERCPU;
        /// Retries because a writer moved.
        retries: "clock_retries", sum, show::STATS;
        /// Reads that gave up waiting for the writer.
        stalls: "clock_stalls", sum,
            show::STATS | show::PERCPU | show::EOT_NMICLOCK | show::ANOMALY;
        /// Epoch moves by the timer.
        epoch_updates: "epoch_updates", sum,
            show::STATS | show::PERCPU | show::EOT_NMICLOCK;
        /// Moves more than a wrap late, or whose window closed past the
        /// wrap.
        wrap_overruns: "wrap_overruns", sum, show::STATS | show::EOT_NMICLOCK;
        /// Timer runs that found the writer busy.
        update_skips: "epoch_update_skips", sum, show::STATS;
        /// `disturb=conversion` switches.
        conversion_switches: "conversion_switches", sum, show::STATS;
    }
    state {
        /// Switches to the refined counter rate, since load (a run does
        /// not reset them).
        recalibrations: AtomicU64 = AtomicU64::new(0);
    }
}

fn active() -> Option<&'static dyn ClockSource> {
    CLOCKS.get(ACTIVE.active.load(Ordering::Acquire)).copied()
}

fn inc(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Reads the running clock and counts the read on this CPU. Callable from
/// any context, NMI included: no locks, no allocation, nothing that panics,
/// no call through a pointer. Reads 0 when no clock runs.
#[inline]
pub(crate) fn read() -> Reading {
    let Some(r) = read_index(ACTIVE.active.load(Ordering::Acquire)) else {
        return Reading::default();
    };
    ACTIVE.stats.with_this_cpu(|s| {
        inc(&s.reads, 1);
        if r.retries != 0 {
            inc(&s.retries, u64::from(r.retries));
        }
        if r.stalled {
            inc(&s.stalls, 1);
        }
    });
    r
}

/// nmiclock's time in ns, for other modules (exported GPL by the glue).
/// Callable from any context, NMI included. Its hot path is the read and
/// the conversion, nothing else: unlike [`read`], it counts nothing (a
/// per-CPU count made it cost twice `sched_clock()`).
// The exported symbol's name is the header's. Never inlined: the bench
// calls it as another module does.
#[allow(unsafe_code)]
#[no_mangle]
#[inline(never)]
pub(crate) extern "C" fn nmiclock_sched_clock() -> u64 {
    now_ns()
}

/// What [`nmiclock_sched_clock`] reads: the running clock's time, counting
/// nothing. Any context. The default clock is read inline, any other out
/// of line ([`read_index_ns`]): the exported function costs the default's
/// read and one comparison.
#[inline(always)]
fn now_ns() -> u64 {
    read_index_ns(ACTIVE.active.load(Ordering::Acquire))
}

// The glue's declaration (generated from its header) and this definition
// have one type.
const _: () = {
    let _: unsafe extern "C" fn() -> u64 = ffi::bindings::nmiclock_sched_clock;
    let _: unsafe extern "C" fn() -> u64 = nmiclock_sched_clock;
};

/// The conversion for a `khz` counter: kHz-based like the kernel's `cyc2ns`.
fn conversion(khz: u32) -> Option<crate::cyc_ns::MultShift> {
    calc_mult_shift(khz, NSEC_PER_MSEC, CONVERSION_RANGE_MS)
}

// ---- what readers need to know about the writers ---------------------------

// ---- conversion switches, for the checks' bound ----------------------------

/// Conversion switches recorded so far. Any context.
#[inline]
pub(crate) fn switches_started() -> u64 {
    ACTIVE.switches.started()
}

/// Conversion switches whose publish has finished. Any context.
#[inline]
pub(crate) fn switches_finished() -> u64 {
    ACTIVE.switches.finished()
}

/// Switch number `i` (from 0): its pivot and new `(mult, shift)`, or
/// `None` if it is not recorded (yet, or any more). Any context.
#[inline]
pub(crate) fn switch_record(i: u64) -> Option<(u64, u32, u32)> {
    ACTIVE.switches.get(i)
}

/// Switches the running clock to `(mult, shift)` ([`ClockSource::recalibrate`]),
/// pausing `pause_ns` inside, counted as a switch.
fn switch_to(clock: &dyn ClockSource, mult: u32, shift: u32, pause_ns: u32) -> bool {
    let mut w = Announcing {
        marker: Marker::here(pause_ns),
        announced: false,
    };
    clock.recalibrate(mult, shift, &mut w)
}

/// A conversion `(mult, shift)` as one word, `mult << 32 | shift` (what
/// `ACTIVE.conversions` and `ACTIVE.base_conversion` hold).
fn packed(mult: u32, shift: u32) -> u64 {
    (u64::from(mult) << 32) | u64::from(shift)
}

/// The conversion [`packed`] into `v`.
fn unpacked(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

/// Notes a conversion published (if there is a free slot).
fn note_conversion(mult: u32, shift: u32) {
    let v = packed(mult, shift);
    for slot in &ACTIVE.conversions {
        match slot.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(seen) if seen == v => return,
            Err(_) => {}
        }
    }
}

/// Forgets the conversions noted, but the running clock's (at the start of
/// a stress run).
pub(crate) fn reset_conversions() {
    for slot in &ACTIVE.conversions {
        slot.store(0, Ordering::Relaxed);
    }
    let (mult, shift) = conversion_in_use();
    note_conversion(mult, shift);
}

/// The conversions published since the stress run started. Any context.
#[inline]
pub(crate) fn conversions() -> impl Iterator<Item = (u32, u32)> {
    ACTIVE
        .conversions
        .iter()
        .filter_map(|slot| match slot.load(Ordering::Acquire) {
            0 => None,
            v => Some(unpacked(v)),
        })
}

/// Moves the running clock's epoch once, marking the writer's window and
/// pausing `tear_window_ns` inside it, and counts the outcome on this CPU.
/// Hard-IRQ context or a kthread bound to its CPU; never NMI (the writer is
/// what NMIs must be able to interrupt).
pub(crate) fn update_epoch() {
    let Some(clock) = active() else {
        return;
    };
    let pause = ACTIVE.tear_window_ns.load(Ordering::Relaxed);
    let mut w = Announcing {
        marker: Marker::here(pause),
        announced: false,
    };
    let outcome = clock.update_epoch(&mut w);
    if let EpochUpdate::Updated { overrun: true } = outcome {
        // Late by a wrap only once its window had closed: readers of the
        // old epoch in it were told by their own reading (`late_epoch`).
        if !w.announced {
            ACTIVE.overruns.fetch_add(1, Ordering::SeqCst);
        }
    }
    ACTIVE.stats.with_this_cpu(|s| match outcome {
        EpochUpdate::Updated { overrun } => {
            inc(&s.epoch_updates, 1);
            if overrun {
                inc(&s.wrap_overruns, 1);
            }
        }
        EpochUpdate::Busy | EpochUpdate::CounterBehind => inc(&s.update_skips, 1),
    });
}

/// The writer of an epoch update or a conversion switch: the coverage
/// marks and pauses of [`Marker`]; an overrun counted in `ACTIVE.overruns`
/// before the update that loses the wraps is published, so that a reader
/// who sees the new epoch sees the count moved too (the stress run's
/// checks then span no such update); and a switch's pivot recorded in
/// `ACTIVE.switches` before its publish, so that a check spanning it knows
/// where the new conversion applies from, and its end counted there
/// before the writer exclusion is let go.
struct Announcing {
    marker: Marker,
    announced: bool,
}

impl Writer for Announcing {
    fn enter(&mut self, window: Window) {
        self.marker.enter(window);
    }

    fn pause(&mut self) {
        self.marker.pause();
    }

    fn leave(&mut self) {
        self.marker.leave();
    }

    fn overrun(&mut self) {
        ACTIVE.overruns.fetch_add(1, Ordering::SeqCst);
        self.announced = true;
    }

    fn switching(&mut self, new: &ClockData) {
        ACTIVE.switches.record(new);
    }

    fn switched(&mut self) {
        ACTIVE.switches.finish();
    }
}

/// `ACTIVE.overruns` now (sequentially consistent with its announcement before
/// the publish, and with the checks' high-water mark). Any context.
#[inline]
pub(crate) fn overruns() -> u64 {
    ACTIVE.overruns.load(Ordering::SeqCst)
}

/// `disturb=conversion`: switches the running clock between its base
/// conversion and [`same_rate_pair`] of it, carrying the epoch across as
/// `sched_clock_register()` and a counter recalibration do, marking the window
/// and pausing `tear_window_ns` inside it. The rate stays the same, so the
/// clock stays right; a reader that mixes the two pairs' fields reads half
/// or twice the time since the epoch. Same contexts as [`update_epoch`].
pub(crate) fn switch_conversion() {
    let Some(clock) = active() else {
        return;
    };
    let (bm, bs) = unpacked(ACTIVE.base_conversion.load(Ordering::Relaxed));
    let d = clock.data();
    let (mult, shift) = if (d.mult, d.shift) == (bm, bs) {
        same_rate_pair(bm, bs)
    } else {
        (bm, bs)
    };
    note_conversion(mult, shift);
    let pause = ACTIVE.tear_window_ns.load(Ordering::Relaxed);
    let done = switch_to(clock, mult, shift, pause);
    if done {
        ACTIVE
            .stats
            .with_this_cpu(|s| inc(&s.conversion_switches, 1));
    }
}

/// The epoch updater's hrtimer callback, in hard-IRQ context: follows a
/// recalibration of the counter ([`follow_calibration`]), then moves the
/// epoch.
fn epoch_tick() -> u64 {
    follow_calibration();
    update_epoch();
    ACTIVE.interval_ns.load(Ordering::Relaxed)
}

/// When the kernel has recalibrated the counter since the running
/// conversion was computed (on x86 it refines `tsc_khz` after boot),
/// switches the running clock to the new rate's conversion without a step
/// in time, as the kernel re-registers `sched_clock`, so that it keeps
/// agreeing with `local_clock()`. One caller takes a recalibration on; one
/// that finds the writer busy leaves it to the next. Task or hard-IRQ
/// context: the epoch timer, a stress run's start and its writers, so
/// that a run picks a recalibration up at once rather than at the epoch
/// timer's next tick (up to [`MAX_INTERVAL_NS`] away, while the kernel's
/// own clocks already run at the new rate).
pub(crate) fn follow_calibration() {
    let Some(clock) = active() else {
        return;
    };
    let khz = ffi::time::counter_khz();
    let seen = ACTIVE.counter_khz.load(Ordering::Relaxed);
    if khz == seen {
        return;
    }
    let Some(ms) = conversion(khz) else {
        return;
    };
    if ACTIVE
        .counter_khz
        .compare_exchange(seen, khz, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    note_conversion(ms.mult, ms.shift);
    // With interrupts off, as `sched_clock_register()` publishes: a writer
    // preempted inside would hold `seqcount` readers up.
    if ffi::cpu::with_irqs_disabled(|| switch_to(clock, ms.mult, ms.shift, 0)) {
        ACTIVE
            .base_conversion
            .store(packed(ms.mult, ms.shift), Ordering::Relaxed);
        ACTIVE.stats.with_this_cpu(|s| inc(&s.recalibrations, 1));
    } else {
        // The writer was busy: hand the recalibration back, unless a
        // rebuild has taken the new rate meanwhile.
        let _ = ACTIVE
            .counter_khz
            .compare_exchange(khz, seen, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Where the clock [`switch_to_selected`] starts takes its time from.
#[derive(Clone, Copy)]
enum Origin {
    /// `local_clock()` once the new epoch's counter value is read (see
    /// [`ClockSource::start_from`]): the first start.
    LocalClock,
    /// The running clock's line (see [`ClockSource::continue_from`]): a
    /// rebuild, which no reader may see step, not even one still reading
    /// the clock it replaces.
    Running,
}

/// Starts the clock the settings select, taking its time `from` there,
/// and makes it the running one. Returns its epoch update interval.
fn switch_to_selected(from: Origin) -> Result<u64> {
    let index = index_of(
        settings::choice::<crate::choices::Protection>().name(),
        settings::choice::<crate::choices::CounterRead>().name(),
    )
    .ok_or(EINVAL)?;
    let clock = CLOCKS.get(index).copied().ok_or(EINVAL)?;
    let bits = settings::number(Key::CounterBits);
    let mask = mask_for_bits(bits).ok_or(EINVAL)?;
    let khz = ffi::time::counter_khz();
    let Some(ms) = conversion(khz) else {
        pr_err!(
            "no {} rate (0 kHz): nmiclock needs a calibrated counter\n",
            crate::arch::COUNTER
        );
        return Err(ENODEV);
    };
    // A reader may wait for the writer's two pauses and some slack.
    let pause = settings::number(Key::TearWindowNs);
    let window = u64::from(pause);
    clock.set_wait_budget_ns(WAIT_BUDGET_NS + 2 * window);
    // The publish runs with interrupts off, as `sched_clock_register()`'s
    // does: a writer preempted, or held up by an interrupt, inside it
    // makes `seqcount` readers on other CPUs wait, past their budget if
    // long enough, and read the tear. The epoch timer may be updating this
    // very clock, or the running one: let it finish.
    let running = active();
    let publish = || {
        ffi::cpu::with_irqs_disabled(|| match (from, running) {
            (Origin::Running, Some(r)) => clock.continue_from(r, ms.mult, ms.shift, mask),
            _ => clock.start_from(&ffi::time::local_clock, ms.mult, ms.shift, mask),
        })
    };
    let mut tries = 0;
    while !publish() {
        tries += 1;
        if tries == 100 {
            pr_err!("cannot restart the clock: its writer stays busy\n");
            return Err(EBUSY);
        }
        ffi::cpu::sleep_us(100);
    }
    let interval = epoch_interval_ns(&ms, mask);
    ACTIVE.counter_khz.store(khz, Ordering::Relaxed);
    ACTIVE.interval_ns.store(interval, Ordering::Relaxed);
    ACTIVE.tear_window_ns.store(pause, Ordering::Relaxed);
    ACTIVE
        .base_conversion
        .store(packed(ms.mult, ms.shift), Ordering::Relaxed);
    ACTIVE.active.store(index, Ordering::Release);
    Ok(interval)
}

/// The running clock: its epoch timer and counters. Dropping it stops both.
pub(crate) struct Running {
    timer: Arc<HrTimer>,
}

impl Running {
    /// Starts the clock the settings select, at the current `local_clock()`.
    pub(crate) fn start() -> Result<Self> {
        ACTIVE.stats.install(CpuStats::default)?;
        let started = HrTimer::new(epoch_tick)
            .and_then(|timer| Ok(Arc::new(timer, GFP_KERNEL)?))
            .and_then(|timer| Ok((switch_to_selected(Origin::LocalClock)?, timer)));
        match started {
            Ok((interval, timer)) => {
                timer.start(interval);
                Ok(Self { timer })
            }
            Err(e) => {
                ACTIVE.active.store(usize::MAX, Ordering::Release);
                ACTIVE.stats.uninstall();
                Err(e)
            }
        }
    }

    /// A handle for `config` writes to rebuild the clock with.
    pub(crate) fn rebuilder(&self) -> Rebuilder {
        Rebuilder(self.timer.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The debugfs files (and with them every `Rebuilder`) are gone
        // before this, so nothing restarts the timer.
        self.timer.cancel();
        ACTIVE.active.store(usize::MAX, Ordering::Release);
        ACTIVE.stats.uninstall();
    }
}

/// Switches the clock to what the settings now select.
pub(crate) struct Rebuilder(Arc<HrTimer>);

impl Rebuilder {
    /// Switches to the clock the settings now select, on the running one's
    /// line (so that no reader, another module's included, sees it step
    /// back), and restarts the epoch timer at its interval. The guard
    /// proves nothing else runs.
    pub(crate) fn rebuild(&self, _nothing_else_runs: &Guard) -> Result {
        let interval = switch_to_selected(Origin::Running)?;
        self.0.start(interval);
        Ok(())
    }
}

/// Every clock of [`CLOCKS`] but the running one, started at the running
/// one's time and conversion, so that reading any of them reads live data
/// (none has an updater of its own). For `bench`, under its guard.
pub(crate) fn start_idle_clocks(_bench: &Guard) {
    let running = ACTIVE.active.load(Ordering::Acquire);
    let Some(cur) = active() else {
        return;
    };
    let d = cur.data();
    for (i, c) in CLOCKS.iter().enumerate() {
        if i != running {
            c.set_wait_budget_ns(WAIT_BUDGET_NS);
            // Nothing else writes a clock that is not running.
            let _ = ffi::cpu::with_irqs_disabled(|| c.start_from(&now_ns, d.mult, d.shift, d.mask));
        }
    }
}

/// The running clock, for `bench`'s updaters.
pub(crate) fn running_index() -> usize {
    ACTIVE.active.load(Ordering::Acquire)
}

/// Zeroes the read and update counters (at the start of a stress run).
pub(crate) fn reset_stats() {
    let slots = ACTIVE.stats.pin();
    for (_, s) in slots.iter().flat_map(|s| s.iter()) {
        s.reset_counts();
    }
}

/// Writes CPU `cpu`'s counts shown in `percpu`.
pub(crate) fn write_percpu(w: &mut impl Write, cpu: u32) -> fmt::Result {
    ACTIVE
        .stats
        .with_cpu(cpu, |s| crate::counters::write_percpu(w, &s.entries()))
        .unwrap_or(Ok(()))
}

/// The totals now.
pub(crate) fn totals() -> Totals {
    ACTIVE
        .stats
        .with(|s| Totals::of(|| s.iter().map(|(_, c)| c)))
        .unwrap_or_else(|| Totals::of(core::iter::empty))
}

/// The running clock's conversion, to convert counter deltas with.
pub(crate) fn conversion_in_use() -> (u32, u32) {
    active().map_or((0, 0), |c| {
        let d = c.data();
        (d.mult, d.shift)
    })
}

/// Writes the clock's part of `stats` (the settings that select it are
/// in `stats` already: a `config` write that cannot rebuild the clock
/// leaves them as they were).
pub(crate) fn show_stats(w: &mut impl Write) -> fmt::Result {
    let d: ClockData = active().map(|c| c.data()).unwrap_or_default();
    let now = read().ns;
    writeln!(w, "mult: {}", d.mult)?;
    writeln!(w, "shift: {}", d.shift)?;
    writeln!(
        w,
        "clock_khz: {}",
        ACTIVE.counter_khz.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "update_interval_ns: {}",
        ACTIVE.interval_ns.load(Ordering::Relaxed)
    )?;
    writeln!(w, "now_ns: {now}")?;
    crate::counters::write_stats(w, &totals().entries())?;
    writeln!(
        w,
        "recalibrations: {}",
        ACTIVE.stats.sum(|s| &s.recalibrations)
    )?;
    writeln!(w, "windows_entered: {}", crate::coverage::windows_entered())
}
