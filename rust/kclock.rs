// SPDX-License-Identifier: GPL-2.0

//! The module's clock, around the kernel-independent [`crate::clock`]:
//!
//! - one static instance of each protection over each counter ([`CLOCKS`],
//!   looked up by name like locktorture's ops tables), of which the
//!   settings select one (at load, or by a `config` write while idle);
//! - its epoch updater, a hard-IRQ hrtimer firing every
//!   [`ClockData::update_interval_ns`] (the kernel's `wrap_kt`), with the
//!   `tear_window_ns` fault injection between the writer's stores (the
//!   stress run's workers update the epoch too, through
//!   [`update_epoch_counted`]);
//! - `nmiclock_sched_clock()`, exported GPL for other modules;
//! - per-CPU counters of reads, retries, stalls;
//! - the task-context check: a kthread per CPU reading the clock next to
//!   `local_clock()` for a while, counting backward steps and the largest
//!   disagreement.

use core::fmt::{self, Write};
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use kernel::ffi::c_uint;
use kernel::prelude::*;

use crate::clock::{
    Clock, ClockData, ClockSource, EpochUpdate, Latch, Reading, Seqcount, Unprotected, Window,
    Writer,
};
use crate::counter::{mask_for_bits, Tsc, TscOrdered};
use crate::cyc_ns::{calc_mult_shift, NSEC_PER_MSEC};
use crate::ffi;
use crate::percpu::PerCpu;
use crate::settings::{self, Key};

pub(crate) static LATCH_TSC_ORDERED: Clock<Latch, TscOrdered> =
    Clock::new(Latch::new(), TscOrdered, ffi::mono_fast_ns);
pub(crate) static LATCH_TSC: Clock<Latch, Tsc> = Clock::new(Latch::new(), Tsc, ffi::mono_fast_ns);
pub(crate) static SEQCOUNT_TSC_ORDERED: Clock<Seqcount, TscOrdered> =
    Clock::new(Seqcount::new(), TscOrdered, ffi::mono_fast_ns);
pub(crate) static SEQCOUNT_TSC: Clock<Seqcount, Tsc> =
    Clock::new(Seqcount::new(), Tsc, ffi::mono_fast_ns);
pub(crate) static UNPROTECTED_TSC_ORDERED: Clock<Unprotected, TscOrdered> =
    Clock::new(Unprotected::new(), TscOrdered, ffi::mono_fast_ns);
pub(crate) static UNPROTECTED_TSC: Clock<Unprotected, Tsc> =
    Clock::new(Unprotected::new(), Tsc, ffi::mono_fast_ns);

/// Every protection over every counter; the first is the default.
static CLOCKS: [&dyn ClockSource; 6] = [
    &LATCH_TSC_ORDERED,
    &LATCH_TSC,
    &SEQCOUNT_TSC_ORDERED,
    &SEQCOUNT_TSC,
    &UNPROTECTED_TSC_ORDERED,
    &UNPROTECTED_TSC,
];

/// Shortest epoch update period, whatever the counter width asks for.
const MIN_INTERVAL_NS: u64 = 5_000;

/// Longest epoch update period: also how soon a new TSC calibration (the
/// kernel refines `tsc_khz` after boot) is picked up.
const MAX_INTERVAL_NS: u64 = 1_000_000_000;

/// Range of the cycles->ns conversion: one hour, in ms (kHz-based pair).
const CONVERSION_RANGE_MS: u32 = 3_600_000;

/// Longest clock check, in ms.
pub(crate) const MAX_CHECK_MS: u32 = 60_000;

/// The index into [`CLOCKS`] the settings select.
fn selected() -> Option<usize> {
    let p = settings::CLOCKS.get(settings::get(Key::Clock) as usize)?;
    let c = settings::COUNTERS.get(settings::get(Key::Counter) as usize)?;
    index_of(p, c)
}

/// Index into [`CLOCKS`] of the running clock; out of range when none.
static ACTIVE: AtomicUsize = AtomicUsize::new(usize::MAX);
/// `counter_bits` of the running clock.
static COUNTER_BITS: AtomicU32 = AtomicU32::new(0);
static INTERVAL_NS: AtomicU64 = AtomicU64::new(0);
/// `tsc_khz` the running conversion was computed from.
static TSC_KHZ: AtomicU32 = AtomicU32::new(0);

/// Counters of one CPU, in their own cache line.
#[repr(align(64))]
#[derive(Default)]
struct CpuStats {
    reads: AtomicU64,
    retries: AtomicU64,
    stalls: AtomicU64,
    epoch_updates: AtomicU64,
    wrap_overruns: AtomicU64,
    update_skips: AtomicU64,
    check_reads: AtomicU64,
    check_backwards: AtomicU64,
    check_max_backstep_ns: AtomicU64,
    check_max_dev_ns: AtomicU64,
    check_max_window_ns: AtomicU64,
    check_window_hits: AtomicU64,
    check_windows_seen: AtomicU64,
    recalibrations: AtomicU64,
    /// The [`Window`] this CPU's writer is in (`Window as u32`), 0 if none.
    window: AtomicU32,
    /// Windows entered on this CPU.
    windows: AtomicU64,
}

static STATS: PerCpu<CpuStats> = PerCpu::new();

fn active() -> Option<&'static dyn ClockSource> {
    CLOCKS.get(ACTIVE.load(Ordering::Acquire)).copied()
}

fn inc(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Reads the running clock and counts the read on this CPU. Callable from
/// any context, NMI included: no locks, no allocation, nothing that panics.
/// Reads 0 when no clock runs.
#[inline]
pub(crate) fn read() -> Reading {
    let Some(clock) = active() else {
        return Reading::default();
    };
    let r = clock.read();
    if let Some(s) = STATS.this_cpu() {
        inc(&s.reads, 1);
        if r.retries != 0 {
            inc(&s.retries, u64::from(r.retries));
        }
        if r.stalled {
            inc(&s.stalls, 1);
        }
    }
    r
}

/// nmiclock's time in ns, for other modules (exported GPL by the glue).
/// Callable from any context, NMI included.
#[no_mangle]
pub(crate) extern "C" fn nmiclock_sched_clock() -> u64 {
    read().ns
}

/// The conversion for a `khz` TSC: kHz-based like the kernel's `cyc2ns`.
fn conversion(khz: u32) -> Option<crate::cyc_ns::MultShift> {
    calc_mult_shift(khz, NSEC_PER_MSEC, CONVERSION_RANGE_MS)
}

// ---- coverage: the writers' windows ------------------------------------------

/// Writer windows open right now, on all CPUs.
static WINDOWS_OPEN: AtomicU32 = AtomicU32::new(0);
/// Windows entered since load, on all CPUs: a reader that sees it change
/// across its read overlapped a window that opened meanwhile.
static WINDOW_SEQ: AtomicU32 = AtomicU32::new(0);

/// The module's [`Writer`]: marks the window on the writer's CPU (for the
/// readers' coverage figures) and pauses `pause_ns` inside it (the
/// `tear_window_ns` fault injection).
struct Marker {
    pause_ns: u32,
    slot: Option<&'static CpuStats>,
}

impl Marker {
    /// A marker for a writer on this CPU (it must not migrate until done:
    /// hard-IRQ context or a kthread bound to the CPU).
    fn here(pause_ns: u32) -> Self {
        Self {
            pause_ns,
            slot: STATS.this_cpu(),
        }
    }
}

impl Writer for Marker {
    fn enter(&mut self, window: Window) {
        if let Some(s) = self.slot {
            s.window.store(window as u32, Ordering::Release);
            inc(&s.windows, 1);
        }
        WINDOWS_OPEN.fetch_add(1, Ordering::AcqRel);
        WINDOW_SEQ.fetch_add(1, Ordering::AcqRel);
    }

    fn pause(&mut self) {
        if self.pause_ns != 0 {
            ffi::ndelay(self.pause_ns);
        }
    }

    fn leave(&mut self) {
        WINDOWS_OPEN.fetch_sub(1, Ordering::AcqRel);
        if let Some(s) = self.slot {
            s.window.store(0, Ordering::Release);
        }
    }
}

/// What a reader sees of the writers' windows at one instant.
#[derive(Clone, Copy)]
pub(crate) struct WindowView {
    /// The window of this CPU's writer (`Window as u32`), 0 if none.
    local: u32,
    /// Windows open on all CPUs.
    open: u32,
    /// [`WINDOW_SEQ`].
    seq: u32,
}

/// Takes a [`WindowView`]. Any context, NMI included.
#[inline]
pub(crate) fn window_view() -> WindowView {
    WindowView {
        local: STATS
            .this_cpu()
            .map_or(0, |s| s.window.load(Ordering::Acquire)),
        open: WINDOWS_OPEN.load(Ordering::Acquire),
        seq: WINDOW_SEQ.load(Ordering::Acquire),
    }
}

/// Whether a read between two views met a writer's window.
#[derive(Clone, Copy, Default)]
pub(crate) struct WindowHit {
    /// This CPU's writer was inside its window: the read interrupted it.
    pub(crate) local: Option<Window>,
    /// Another CPU's writer was inside its window during the read.
    pub(crate) remote: bool,
    /// A number for the window met (windows entered so far), to count
    /// distinct windows.
    pub(crate) seq: u32,
}

impl WindowHit {
    /// Classifies a read taken between `before` and `after` (on one CPU).
    #[inline]
    pub(crate) fn between(before: WindowView, after: WindowView) -> Self {
        let local = Window::from_u32(before.local).or_else(|| Window::from_u32(after.local));
        let mine = u32::from(local.is_some());
        Self {
            local,
            remote: before.open > mine || after.open > mine || before.seq != after.seq,
            seq: after.seq,
        }
    }

    /// Whether the read met any window.
    pub(crate) fn any(&self) -> bool {
        self.local.is_some() || self.remote
    }
}

/// Moves the running clock's epoch once, pausing `tear_window_ns` between
/// the writer's stores, and counts the outcome on this CPU. Any context but
/// NMI (the writer is what NMIs must be able to interrupt).
pub(crate) fn update_epoch_counted() {
    let Some(clock) = active() else {
        return;
    };
    let outcome = clock.update_epoch(&mut Marker::here(settings::get(Key::TearWindowNs)));
    if let Some(s) = STATS.this_cpu() {
        match outcome {
            EpochUpdate::Updated { overrun } => {
                inc(&s.epoch_updates, 1);
                if overrun {
                    inc(&s.wrap_overruns, 1);
                }
            }
            EpochUpdate::Busy | EpochUpdate::CounterBehind => inc(&s.update_skips, 1),
        }
    }
}

/// The epoch updater: the hrtimer callback, in hard-IRQ context.
///
/// When the kernel has recalibrated the TSC since the last update, the
/// clock switches to the new conversion without a step in time (as the
/// kernel re-registers `sched_clock`), so it keeps agreeing with
/// `local_clock()`; then it moves the epoch.
extern "C" fn epoch_timer() -> u64 {
    let Some(clock) = active() else {
        return 0;
    };
    let khz = ffi::tsc_khz();
    if khz != TSC_KHZ.load(Ordering::Relaxed) {
        if let Some(ms) = conversion(khz) {
            if clock.recalibrate(ms.mult, ms.shift, &mut Marker::here(0)) {
                TSC_KHZ.store(khz, Ordering::Relaxed);
                if let Some(s) = STATS.this_cpu() {
                    inc(&s.recalibrations, 1);
                }
            }
        }
    }
    update_epoch_counted();
    INTERVAL_NS.load(Ordering::Relaxed)
}

/// Starts the clock the settings select, continuing from `start_ns`, and
/// makes it the running one. Returns its epoch update interval.
fn switch_to_selected(start_ns: u64) -> Result<u64> {
    let index = selected().ok_or(EINVAL)?;
    let clock = CLOCKS.get(index).copied().ok_or(EINVAL)?;
    let bits = settings::get(Key::CounterBits);
    let mask = mask_for_bits(bits).ok_or(EINVAL)?;
    let khz = ffi::tsc_khz();
    let Some(ms) = conversion(khz) else {
        pr_err!("no TSC frequency (tsc_khz is 0): nmiclock needs a calibrated TSC\n");
        return Err(ENODEV);
    };
    // A reader may wait for the writer's two pauses and some slack.
    let window = u64::from(settings::get(Key::TearWindowNs));
    clock.set_wait_budget_ns(50_000 + 2 * window);
    if !clock.start(start_ns, ms.mult, ms.shift, mask) {
        return Err(EBUSY);
    }
    let interval = clock
        .data()
        .update_interval_ns()
        .clamp(MIN_INTERVAL_NS, MAX_INTERVAL_NS);
    TSC_KHZ.store(khz, Ordering::Relaxed);
    COUNTER_BITS.store(bits, Ordering::Relaxed);
    INTERVAL_NS.store(interval, Ordering::Relaxed);
    ACTIVE.store(index, Ordering::Release);
    Ok(interval)
}

/// The epoch timer, owned by [`Running`] (a `KBox` turned raw), reachable
/// from `config` writes through [`reconfigure`].
static TIMER: AtomicPtr<ffi::HrTimer> = AtomicPtr::new(ptr::null_mut());

/// The running clock: its epoch timer and counters. Dropping it stops both.
pub(crate) struct Running(());

impl Running {
    /// Starts the clock the settings select, at the current `local_clock()`.
    pub(crate) fn start() -> Result<Self> {
        STATS.install(CpuStats::default)?;
        let started = ffi::HrTimer::new(epoch_timer)
            .and_then(|timer| Ok(KBox::new(timer, GFP_KERNEL)?))
            .and_then(|timer| Ok((switch_to_selected(ffi::local_clock())?, timer)));
        match started {
            Ok((interval, timer)) => {
                timer.start(interval);
                TIMER.store(KBox::into_raw(timer), Ordering::Release);
                Ok(Self(()))
            }
            Err(e) => {
                ACTIVE.store(usize::MAX, Ordering::Release);
                // SAFETY: No clock is active and nothing else reads the
                // stats yet.
                unsafe { STATS.uninstall() };
                Err(e)
            }
        }
    }
}

/// Switches to the clock the settings now select (after a `config` write),
/// continuing from the current time. Not during a stress run.
pub(crate) fn reconfigure() -> Result {
    let now = read().ns;
    let interval = switch_to_selected(now)?;
    let timer = TIMER.load(Ordering::Acquire);
    if !timer.is_null() {
        // SAFETY: `TIMER` holds a live `KBox<HrTimer>` from `Running::start`
        // until `Running` is dropped, which happens after the debugfs files
        // (whose write handlers call this) are removed.
        unsafe { &*timer }.start(interval);
    }
    Ok(())
}

impl Drop for Running {
    fn drop(&mut self) {
        let timer = TIMER.swap(ptr::null_mut(), Ordering::AcqRel);
        if !timer.is_null() {
            // SAFETY: `timer` came from `KBox::into_raw` in `start()` and is
            // taken back once, here; dropping it cancels it.
            drop(unsafe { KBox::from_raw(timer) });
        }
        ACTIVE.store(usize::MAX, Ordering::Release);
        // SAFETY: The timer is stopped and the debugfs files (whose handlers
        // run checks and read stats) and the stress run are gone before this
        // is dropped; no other module can call `nmiclock_sched_clock()`
        // while we unload (it would hold a reference on us). So no slot
        // reference is alive.
        unsafe { STATS.uninstall() };
    }
}

/// For `bench`: starts every clock but the running one at the running
/// one's time and conversion, so that reading any of them reads live data
/// (none has an updater of its own: `bench` brings its own). Not while a
/// `config` write may switch clocks (`bench` refuses those meanwhile).
pub(crate) fn bench_prepare() {
    let running = ACTIVE.load(Ordering::Acquire);
    let Some(cur) = active() else {
        return;
    };
    let d = cur.data();
    let now = read().ns;
    for (i, c) in CLOCKS.iter().enumerate() {
        if i != running {
            c.set_wait_budget_ns(50_000);
            // Nothing else writes a clock that is not running.
            let _ = c.start(now, d.mult, d.shift, d.mask);
        }
    }
}

/// For `bench`'s updaters: moves the epoch of clock `index` of the table,
/// or of the running one when `index` is out of range, without the
/// `tear_window_ns` fault injection (a benchmark measures the design, not
/// the injected fault). Any context but NMI.
pub(crate) fn bench_update_epoch(index: usize) {
    if let Some(c) = CLOCKS.get(index).copied().or_else(active) {
        let _ = c.update_epoch(&mut || {});
    }
}

/// Index in the table of the clock with this protection and counter.
pub(crate) fn index_of(protection: &str, counter: &str) -> Option<usize> {
    CLOCKS
        .iter()
        .position(|c| c.protection() == protection && c.counter() == counter)
}

/// Zeroes the read and update counters (at the start of a stress run).
pub(crate) fn reset_stats() {
    for (_, s) in STATS.iter() {
        for c in [
            &s.reads,
            &s.retries,
            &s.stalls,
            &s.epoch_updates,
            &s.wrap_overruns,
            &s.update_skips,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Per-CPU `(reads, stalls, epoch_updates)`, for the `percpu` file.
pub(crate) fn cpu_counts(cpu: u32) -> (u64, u64, u64) {
    STATS.get(cpu).map_or((0, 0, 0), |s| {
        (
            s.reads.load(Ordering::Relaxed),
            s.stalls.load(Ordering::Relaxed),
            s.epoch_updates.load(Ordering::Relaxed),
        )
    })
}

/// Totals of `(clock_stalls, epoch_updates, wrap_overruns)`.
pub(crate) fn totals() -> (u64, u64, u64) {
    (
        STATS.sum(|s| &s.stalls),
        STATS.sum(|s| &s.epoch_updates),
        STATS.sum(|s| &s.wrap_overruns),
    )
}

/// The running clock's `(mult, shift)`, to convert TSC deltas.
pub(crate) fn conversion_in_use() -> (u32, u32) {
    active().map_or((0, 0), |c| {
        let d = c.data();
        (d.mult, d.shift)
    })
}

/// Writes the clock's part of `stats`.
pub(crate) fn show_stats(w: &mut impl Write) -> fmt::Result {
    let (prot, ctr) = active().map_or(("none", "none"), |c| (c.protection(), c.counter()));
    let d: ClockData = active().map(|c| c.data()).unwrap_or_default();
    let now = read().ns;
    writeln!(w, "clock: {prot}")?;
    writeln!(w, "counter: {ctr}")?;
    writeln!(w, "counter_bits: {}", COUNTER_BITS.load(Ordering::Relaxed))?;
    writeln!(w, "tear_window_ns: {}", settings::get(Key::TearWindowNs))?;
    writeln!(w, "mult: {}", d.mult)?;
    writeln!(w, "shift: {}", d.shift)?;
    writeln!(
        w,
        "update_interval_ns: {}",
        INTERVAL_NS.load(Ordering::Relaxed)
    )?;
    writeln!(w, "now_ns: {now}")?;
    writeln!(w, "clock_reads: {}", STATS.sum(|s| &s.reads))?;
    writeln!(w, "clock_retries: {}", STATS.sum(|s| &s.retries))?;
    writeln!(w, "clock_stalls: {}", STATS.sum(|s| &s.stalls))?;
    writeln!(w, "epoch_updates: {}", STATS.sum(|s| &s.epoch_updates))?;
    writeln!(w, "wrap_overruns: {}", STATS.sum(|s| &s.wrap_overruns))?;
    writeln!(w, "epoch_update_skips: {}", STATS.sum(|s| &s.update_skips))?;
    writeln!(w, "recalibrations: {}", STATS.sum(|s| &s.recalibrations))
}

// ---- the task-context check ---------------------------------------------------

static CHECK_RUNNING: AtomicBool = AtomicBool::new(false);
static CHECK_DURATION_NS: AtomicU64 = AtomicU64::new(0);
static CHECK_RUNS: AtomicU64 = AtomicU64::new(0);
static CHECK_CPUS: AtomicU32 = AtomicU32::new(0);
/// Distinct writer windows the check must see before it may end (0: run
/// for the whole duration).
static CHECK_WANT_WINDOWS: AtomicU64 = AtomicU64::new(0);
/// Distinct windows the readers have seen so far, summed over readers.
static CHECK_WINDOWS: AtomicU64 = AtomicU64::new(0);
/// Set when a reader saw time go backwards.
static CHECK_CAUGHT: AtomicBool = AtomicBool::new(false);
/// [`CHECK_WINDOWS`] when the first backward step was seen, plus one (0:
/// none seen).
static CHECK_FIRST_CATCH: AtomicU64 = AtomicU64::new(0);
/// Why the last check ended.
static CHECK_STOPPED: AtomicU32 = AtomicU32::new(STOP_DURATION);

const STOP_DURATION: u32 = 0;
const STOP_WINDOWS: u32 = 1;
const STOP_CAUGHT: u32 = 2;

/// What a write to `check` asks for.
#[derive(Clone, Copy)]
pub(crate) struct CheckArgs {
    /// How long to read, at most, in ms.
    pub(crate) ms: u32,
    /// End as soon as the readers have seen this many distinct writer
    /// windows, or time went backwards (0: read for the whole `ms`).
    pub(crate) windows: u32,
}

/// The keys a `check` write takes, with their ranges.
pub(crate) const CHECK_KEYS: [crate::parse::Key; 2] = [
    crate::parse::Key {
        name: "ms",
        min: 1,
        max: MAX_CHECK_MS,
    },
    crate::parse::Key {
        name: "windows",
        min: 0,
        max: 1_000_000,
    },
];

/// Parses a `check` write: a duration in ms, or `ms=N windows=N`.
pub(crate) fn parse_check(input: &[u8]) -> Option<CheckArgs> {
    if let Some(ms) = crate::parse::parse_u32(input) {
        return (1..=MAX_CHECK_MS)
            .contains(&ms)
            .then_some(CheckArgs { ms, windows: 0 });
    }
    let mut v = [0, 0];
    crate::parse::parse_kv(input, &CHECK_KEYS, &mut v).ok()?;
    let [ms, windows] = v;
    (ms != 0).then_some(CheckArgs { ms, windows })
}

/// One sample of the check: nmiclock read between two `local_clock()`
/// reads, interrupts off so only an NMI (or, in a VM, the host) can come
/// between them. The window `[before, after]` bounds when the read happened;
/// `hit` says whether a writer's window was open meanwhile.
struct Sample {
    before: u64,
    ns: u64,
    after: u64,
    hit: WindowHit,
}

fn sample() -> Sample {
    ffi::with_irqs_disabled(|| {
        let v0 = window_view();
        let before = ffi::local_clock();
        let ns = read().ns;
        let after = ffi::local_clock();
        let v1 = window_view();
        Sample {
            before,
            ns,
            after,
            hit: WindowHit::between(v0, v1),
        }
    })
}

/// How far nmiclock's elapsed time since `base` falls outside what
/// `local_clock()` allows: elapsed local time is at least
/// `s.before - base.after` and at most `s.after - base.before`.
fn deviation(base: &Sample, s: &Sample) -> u64 {
    let elapsed = s.ns.wrapping_sub(base.ns) as i64;
    let lo = s.before.wrapping_sub(base.after) as i64;
    let hi = s.after.wrapping_sub(base.before) as i64;
    if elapsed < lo {
        lo.wrapping_sub(elapsed) as u64
    } else if elapsed > hi {
        elapsed.wrapping_sub(hi) as u64
    } else {
        0
    }
}

/// Samples taken to pick the base of the check: the one with the narrowest
/// window, since its window is slack for every later comparison.
const BASE_SAMPLES: u32 = 100;

/// One CPU's share of the check (in a kthread bound to `cpu`).
extern "C" fn check_cpu(cpu: c_uint) {
    let Some(slot) = STATS.get(cpu) else {
        return;
    };
    let duration = CHECK_DURATION_NS.load(Ordering::Relaxed);
    let want = CHECK_WANT_WINDOWS.load(Ordering::Relaxed);
    let mut base = sample();
    for _ in 1..BASE_SAMPLES {
        let s = sample();
        if s.after.wrapping_sub(s.before) < base.after.wrapping_sub(base.before) {
            base = s;
        }
    }
    let end = base.after.wrapping_add(duration);
    let mut prev = base.ns;
    let (mut reads, mut backwards, mut backstep, mut dev, mut window) = (0u64, 0u64, 0, 0, 0);
    let (mut hits, mut seen, mut last_seq) = (0u64, 0u64, None);
    loop {
        let s = sample();
        reads = reads.wrapping_add(1);
        if s.hit.any() {
            hits = hits.wrapping_add(1);
            if last_seq != Some(s.hit.seq) {
                last_seq = Some(s.hit.seq);
                seen = seen.wrapping_add(1);
                CHECK_WINDOWS.fetch_add(1, Ordering::Relaxed);
            }
        }
        if s.ns < prev {
            backwards = backwards.wrapping_add(1);
            backstep = backstep.max(prev - s.ns);
            if !CHECK_CAUGHT.swap(true, Ordering::Relaxed) {
                let at = CHECK_WINDOWS.load(Ordering::Relaxed);
                CHECK_FIRST_CATCH.store(at.wrapping_add(1), Ordering::Relaxed);
            }
        }
        prev = s.ns;
        dev = dev.max(deviation(&base, &s));
        window = window.max(s.after.wrapping_sub(s.before));
        if s.after.wrapping_sub(end) as i64 >= 0 {
            break;
        }
        if want != 0 {
            // A verdict either way: a catch, or enough windows survived.
            if CHECK_CAUGHT.load(Ordering::Relaxed) {
                CHECK_STOPPED.store(STOP_CAUGHT, Ordering::Relaxed);
                break;
            }
            if CHECK_WINDOWS.load(Ordering::Relaxed) >= want {
                CHECK_STOPPED.store(STOP_WINDOWS, Ordering::Relaxed);
                break;
            }
        }
        if reads % 64 == 0 {
            ffi::cond_resched();
        }
    }
    slot.check_reads.store(reads, Ordering::Relaxed);
    slot.check_backwards.store(backwards, Ordering::Relaxed);
    slot.check_max_backstep_ns
        .store(backstep, Ordering::Relaxed);
    slot.check_max_dev_ns.store(dev, Ordering::Relaxed);
    slot.check_max_window_ns.store(window, Ordering::Relaxed);
    slot.check_window_hits.store(hits, Ordering::Relaxed);
    slot.check_windows_seen.store(seen, Ordering::Relaxed);
}

/// Runs the check on every online CPU, blocking: for `args.ms`, or until
/// the readers have seen `args.windows` writer windows or a backward step.
/// `EBUSY` if one is already running.
pub(crate) fn run_check(args: CheckArgs) -> Result {
    if CHECK_RUNNING.swap(true, Ordering::Acquire) {
        pr_err!("check: a check is already running\n");
        return Err(EBUSY);
    }
    for (_, s) in STATS.iter() {
        for c in [
            &s.check_reads,
            &s.check_backwards,
            &s.check_max_backstep_ns,
            &s.check_max_dev_ns,
            &s.check_max_window_ns,
            &s.check_window_hits,
            &s.check_windows_seen,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
    CHECK_DURATION_NS.store(u64::from(args.ms) * 1_000_000, Ordering::Relaxed);
    CHECK_WANT_WINDOWS.store(u64::from(args.windows), Ordering::Relaxed);
    CHECK_WINDOWS.store(0, Ordering::Relaxed);
    CHECK_CAUGHT.store(false, Ordering::Relaxed);
    CHECK_FIRST_CATCH.store(0, Ordering::Relaxed);
    CHECK_STOPPED.store(STOP_DURATION, Ordering::Relaxed);
    CHECK_CPUS.store(ffi::num_online_cpus(), Ordering::Relaxed);
    let t0 = ffi::local_clock();
    let ret = ffi::run_on_each_cpu(check_cpu);
    CHECK_ELAPSED_MS.store(
        ffi::local_clock().wrapping_sub(t0) / 1_000_000,
        Ordering::Relaxed,
    );
    CHECK_RUNS.fetch_add(1, Ordering::Relaxed);
    CHECK_RUNNING.store(false, Ordering::Release);
    ret
}

/// How long the last check took, in ms.
static CHECK_ELAPSED_MS: AtomicU64 = AtomicU64::new(0);

/// Writes the `check` file: the last check's results, totals then per CPU.
pub(crate) fn show_check(w: &mut impl Write) -> fmt::Result {
    let running = CHECK_RUNNING.load(Ordering::Relaxed);
    writeln!(w, "state: {}", if running { "running" } else { "idle" })?;
    writeln!(w, "runs: {}", CHECK_RUNS.load(Ordering::Relaxed))?;
    writeln!(
        w,
        "duration_ms: {}",
        CHECK_DURATION_NS.load(Ordering::Relaxed) / 1_000_000
    )?;
    writeln!(
        w,
        "elapsed_ms: {}",
        CHECK_ELAPSED_MS.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "windows_wanted: {}",
        CHECK_WANT_WINDOWS.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "stopped: {}",
        match CHECK_STOPPED.load(Ordering::Relaxed) {
            STOP_WINDOWS => "windows",
            STOP_CAUGHT => "caught",
            _ => "duration",
        }
    )?;
    writeln!(w, "cpus: {}", CHECK_CPUS.load(Ordering::Relaxed))?;
    writeln!(w, "reads: {}", STATS.sum(|s| &s.check_reads))?;
    writeln!(w, "window_hits: {}", STATS.sum(|s| &s.check_window_hits))?;
    writeln!(w, "windows_seen: {}", STATS.sum(|s| &s.check_windows_seen))?;
    writeln!(
        w,
        "first_catch_windows: {}",
        match CHECK_FIRST_CATCH.load(Ordering::Relaxed) {
            0 => -1,
            n => n.wrapping_sub(1) as i64,
        }
    )?;
    writeln!(w, "backwards: {}", STATS.sum(|s| &s.check_backwards))?;
    writeln!(
        w,
        "max_backstep_ns: {}",
        STATS.max(|s| &s.check_max_backstep_ns)
    )?;
    writeln!(w, "max_dev_ns: {}", STATS.max(|s| &s.check_max_dev_ns))?;
    writeln!(
        w,
        "max_window_ns: {}",
        STATS.max(|s| &s.check_max_window_ns)
    )?;
    for (cpu, s) in STATS.iter() {
        let reads = s.check_reads.load(Ordering::Relaxed);
        if reads == 0 {
            continue;
        }
        writeln!(
            w,
            "cpu{cpu}: reads={reads} backwards={} max_backstep_ns={} max_dev_ns={} max_window_ns={} window_hits={} windows_seen={}",
            s.check_backwards.load(Ordering::Relaxed),
            s.check_max_backstep_ns.load(Ordering::Relaxed),
            s.check_max_dev_ns.load(Ordering::Relaxed),
            s.check_max_window_ns.load(Ordering::Relaxed),
            s.check_window_hits.load(Ordering::Relaxed),
            s.check_windows_seen.load(Ordering::Relaxed)
        )?;
    }
    Ok(())
}
