// SPDX-License-Identifier: GPL-2.0

//! Wake-up designs (`wake=sleep|racy|poll`), after two of the kernel threads
//! behind nmiclock: an idle loop that checked need-resched and then halted,
//! so that a wake-up landing between the two waited for the next tick; and
//! `smp_cond_load_*_timeout()`, which lets a CPU about to idle poll for a
//! while first, so that a wake-up coming soon costs no halt and no IPI.
//!
//! A waiter waits on a [`Waitpoint`]: a flag its waker sets before waking
//! the waiter's task through the scheduler. The [`Design`]s differ in how
//! the waiter goes to sleep:
//!
//! - `sleep`, the correct protocol: mark the task sleeping, re-check the
//!   flag, sleep. A wake-up after the mark makes the task running again, so
//!   none is lost.
//! - `racy`, the idle loop's bug (check need-resched, then halt) in task
//!   form: check the flag, then (after [`RACY_GAP_NS`] of busy work, as the
//!   idle loop's path to its halt) mark the task sleeping and sleep without
//!   checking again, with a one-tick timeout as the only rescue. A wake-up landing between the check and the mark finds
//!   the task still running, does nothing, and the waiter sleeps out the
//!   tick: late by a tick.
//! - `poll`, the remedy of `smp_cond_load_*_timeout()`: spin on the flag
//!   with [`crate::spin::cond_load_acquire_timeout`] for `poll_us`, then
//!   fall back to `sleep`.
//!
//! Two users:
//!
//! - The `wake` activity (debugfs `wake`; write a duration in ms, blocking):
//!   a waiter kthread on every online CPU, woken by an hrtimer on its own
//!   CPU at a pseudo-random delay of 0 to [`SPREAD_NS`] after it armed it,
//!   so the interrupt lands anywhere in the waiter's way to sleep, the gap
//!   included. Nothing else runs: while a waiter sleeps its CPU idles. Each
//!   wake-up's latency (the timer's timestamp to the waiter running, both
//!   `ktime_get_ns()`, the clock of the rescue timeout, so that a rescued
//!   wake-up measures a tick or more) goes into a histogram; one of a tick
//!   or more is a `late_wakeup`. A late one posted before the waiter
//!   marked itself sleeping, that the timeout then woke, is a
//!   `lost_wakeup` (the design's fault); any other late one is a
//!   `slow_wakeup` (woken in time, run late: the scheduler's, or in a VM
//!   the host's). The verdict is on lost wake-ups.
//!
//!   How lost is decided: the waiter notes the time of each mark and, when
//!   the timeout ends a sleep with the flag set, keeps the mark before that
//!   sleep ([`Waited::rescued_after`]); the timer notes when it posted. A post
//!   before that mark found the task still running, did nothing, and left
//!   the sleep to the timeout: lost. A post after the mark made the task
//!   running again, so if its waiter still ran a tick or more later, it was
//!   slow, not lost. The timeout is one tick for `racy` (its only rescue)
//!   and [`MAX_SLEEP_NS`] for the others, so that a lost wake-up in a
//!   correct design would show as one that late instead of hanging the
//!   waiter.
//! - The bench's ping-pong ([`pingpong`]): two kthreads on two CPUs wake
//!   each other `trips` times, in the manner of `perf bench sched pipe`.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use crate::activity::{Activity, Guard, LastRun};
use crate::bench::LatHist;
use crate::choices::{Choice, Wake};
use crate::counters::{counters, show, write_cpu_line, write_totals};
use crate::ffi;
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::kthread::{Kthread, TaskSlot};
use crate::parse::parse_u32;
use crate::percpu::PerCpu;
use crate::settings::{self, Key};
use crate::spin::{cond_load_acquire_timeout, SpinBudget, DEFAULT_POLL_COUNT};

/// Longest `wake` run, in ms.
const MAX_MS: u32 = 60_000;

/// The longest delay of the `wake` activity's timer: the waiter's way from
/// arming it to sleeping takes a few µs, so most interrupts land after it
/// sleeps, some on the way.
pub(crate) const SPREAD_NS: u64 = 50_000;

/// The gap of the `racy` design between its check and its mark, in ns:
/// the idle loop had work between its need-resched check and its halt. A
/// gap of a few instructions is too narrow for a timer interrupt to land
/// in often under emulation, and a run that loses none leaves the probe
/// blind; 1 µs of the timer's [`SPREAD_NS`] catches the design in every
/// run (results.rst, "virtme-ng as a runner").
const RACY_GAP_NS: u32 = 1_000;

/// The correct designs' timeout: a lost wake-up shows as one this late
/// instead of hanging the waiter.
const MAX_SLEEP_NS: u64 = 100_000_000;

/// What a waiter waits on: a flag, and the task its waker wakes.
pub(crate) struct Waitpoint {
    ready: AtomicU32,
    task: TaskSlot,
}

impl Default for Waitpoint {
    fn default() -> Self {
        Self {
            ready: AtomicU32::new(0),
            task: TaskSlot::new(),
        }
    }
}

impl Waitpoint {
    /// The waker's side: sets the flag, then wakes the waiter (a no-op if it
    /// is running). Any context but NMI.
    fn post(&self) {
        self.ready.store(1, Ordering::Release);
        self.task.wake();
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) != 0
    }

    /// Clears the flag before the next wait.
    fn rearm(&self) {
        self.ready.store(0, Ordering::Relaxed);
    }
}

/// How one wait went.
#[derive(Default)]
struct Waited {
    /// ns spent polling.
    polled_ns: u64,
    /// The flag was seen while polling.
    by_poll: bool,
    /// When the waiter last marked itself sleeping (`ktime_get_ns()`), if
    /// the timeout ended that sleep with the flag set: a wake-up posted
    /// before then found the waiter running and was lost; the timeout
    /// rescued it.
    rescued_after: Option<u64>,
}

/// Marks the task sleeping and notes when (see [`Waited::rescued_after`]).
fn mark(k: &Kthread) -> u64 {
    k.prepare_to_sleep();
    ffi::time::ktime_get_ns()
}

/// A way of waiting on a [`Waitpoint`]; returns once its flag is set, or
/// the kthread is asked to stop.
trait Design {
    fn wait(k: &Kthread, w: &Waitpoint, poll_ns: u64, tick_ns: u64) -> Waited;
}

/// The correct protocol: mark, re-check, sleep.
struct Sleep;

impl Design for Sleep {
    fn wait(k: &Kthread, w: &Waitpoint, _poll_ns: u64, _tick_ns: u64) -> Waited {
        let mut out = Waited::default();
        loop {
            let marked = mark(k);
            if w.is_ready() || k.should_stop() {
                k.set_running();
                return out;
            }
            if k.sleep_ns(MAX_SLEEP_NS) && w.is_ready() {
                out.rescued_after = Some(marked);
            }
        }
    }
}

/// The lost wake-up: check, then mark and sleep a tick without re-checking.
struct Racy;

impl Design for Racy {
    fn wait(k: &Kthread, w: &Waitpoint, _poll_ns: u64, tick_ns: u64) -> Waited {
        let mut out = Waited::default();
        while !w.is_ready() && !k.should_stop() {
            // The gap: a wake-up landing here finds the task running.
            ffi::cpu::ndelay(RACY_GAP_NS);
            let marked = mark(k);
            if k.sleep_ns(tick_ns) && w.is_ready() {
                out.rescued_after = Some(marked);
            }
        }
        out
    }
}

/// Poll for `poll_ns` (a spin-wait with a time budget), then sleep.
struct Poll;

impl Design for Poll {
    fn wait(k: &Kthread, w: &Waitpoint, poll_ns: u64, tick_ns: u64) -> Waited {
        let t0 = ffi::time::local_clock();
        let budget = SpinBudget {
            timeout_ns: poll_ns,
            poll_count: DEFAULT_POLL_COUNT,
        };
        let hit =
            cond_load_acquire_timeout(&w.ready, |v| v != 0, budget, ffi::time::local_clock).is_ok();
        let polled_ns = ffi::time::local_clock().saturating_sub(t0);
        if hit {
            return Waited {
                polled_ns,
                by_poll: true,
                rescued_after: None,
            };
        }
        Waited {
            polled_ns,
            ..Sleep::wait(k, w, poll_ns, tick_ns)
        }
    }
}

/// Waits with `design`.
fn wait(design: Wake, k: &Kthread, w: &Waitpoint, poll_ns: u64, tick_ns: u64) -> Waited {
    match design {
        Wake::Sleep => Sleep::wait(k, w, poll_ns, tick_ns),
        Wake::Racy => Racy::wait(k, w, poll_ns, tick_ns),
        Wake::Poll => Poll::wait(k, w, poll_ns, tick_ns),
    }
}

/// The design stored in an atomic (its [`Choice::index`]).
fn design_of(stored: u64) -> Wake {
    Wake::from_index(stored as usize).unwrap_or(Wake::FIRST)
}

// ---- the `wake` activity ------------------------------------------------------------

counters! {
    /// One CPU's waiter: its results of the last run, its waitpoint and
    /// the timer's timestamp.
    #[repr(align(64))]
    struct Cpu, totals Totals {
        /// Wake-ups measured; a tick late or more; lost (posted before
        /// the waiter slept, woken by the timeout); late for other reasons.
        wakeups: "wakeups", sum, show::FILE_CPU;
        late_wakeups: "late_wakeups", sum, show::FILE_CPU;
        lost_wakeups: "lost_wakeups", sum, show::FILE_CPU;
        slow_wakeups: "slow_wakeups", sum, show::FILE_CPU;
        /// The worst latency, ns.
        max_ns: "max_wake_latency_ns", max, show::FILE_CPU;
        /// Wake-ups the poll caught, and the time spent polling, ns.
        poll_wakeups: "poll_wakeups", sum, show::FILE_CPU;
        polled_ns: "polled_ns", sum, show::FILE_CPU;
    }
    state {
        point: Waitpoint = Waitpoint::default();
        /// `ktime_get_ns()` when the timer posted.
        posted_at: AtomicU64 = AtomicU64::new(0);
    }
}

/// The wake activity's per-CPU slots, and the run in progress (or the last).
struct ActivityState {
    /// Each CPU's waiter and timer.
    cpus: PerCpu<Cpu>,
    /// Latencies of the last run, all CPUs.
    hist: LatHist,
    /// Runs since load.
    runs: AtomicU64,
    /// The design (its [`Choice::index`]).
    design: AtomicU32,
    /// The poll window, ns.
    poll_ns: AtomicU64,
    /// The kernel's tick, ns: how late a lost wake-up is.
    tick_ns: AtomicU64,
    /// How long the run was to last, and lasted, ms.
    duration_ms: AtomicU64,
    elapsed_ms: AtomicU64,
    /// CPUs it ran on.
    ncpus: AtomicU32,
    /// How the last run ended.
    last_run: LastRun,
}

static STATE: ActivityState = ActivityState {
    cpus: PerCpu::new(),
    hist: LatHist::new(),
    runs: AtomicU64::new(0),
    design: AtomicU32::new(0),
    poll_ns: AtomicU64::new(0),
    tick_ns: AtomicU64::new(0),
    duration_ms: AtomicU64::new(0),
    elapsed_ms: AtomicU64::new(0),
    ncpus: AtomicU32::new(0),
    last_run: LastRun::new(),
};

/// The `wake` activity's per-CPU state, installed at load.
pub(crate) struct WakeSlots(());

impl WakeSlots {
    /// Installs the per-CPU state.
    pub(crate) fn new() -> Result<Self> {
        STATE.cpus.install(Cpu::default)?;
        Ok(Self(()))
    }
}

impl Drop for WakeSlots {
    fn drop(&mut self) {
        STATE.cpus.uninstall();
    }
}

/// The next pseudo-random number (xorshift64).
fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

/// One CPU's waiter (a kthread bound to it) for the run in progress.
fn waiter(k: &Kthread, cpu: u32) {
    let Some(slots) = STATE.cpus.pin() else {
        return;
    };
    let Some(c) = slots.get(cpu) else {
        return;
    };
    let design = design_of(STATE.design.load(Ordering::Relaxed).into());
    let (poll_ns, tick) = (
        STATE.poll_ns.load(Ordering::Relaxed),
        STATE.tick_ns.load(Ordering::Relaxed),
    );
    let Ok(timer) = HrTimer::new(move || {
        STATE.cpus.with_cpu(cpu, |c| {
            c.posted_at
                .store(ffi::time::ktime_get_ns(), Ordering::Relaxed);
            c.point.post();
        });
        0
    }) else {
        pr_err!("wake: cpu{}: no timer: out of memory\n", cpu);
        return;
    };
    // Cleared below, after the timer (the only waker) is dropped.
    c.point.task.publish_self(k);
    let end = ffi::time::local_clock().wrapping_add(
        STATE
            .duration_ms
            .load(Ordering::Relaxed)
            .saturating_mul(1_000_000),
    );
    let mut rng = ffi::time::local_clock() | 1;
    let mut r = [0u64; 7];
    while !k.should_stop() && (ffi::time::local_clock().wrapping_sub(end) as i64) < 0 {
        c.point.rearm();
        timer.start(next(&mut rng) % SPREAD_NS);
        let w = wait(design, k, &c.point, poll_ns, tick);
        if !c.point.is_ready() {
            break;
        }
        let posted = c.posted_at.load(Ordering::Relaxed);
        let lat = ffi::time::ktime_get_ns().saturating_sub(posted);
        STATE.hist.record(lat);
        let [wakeups, late, lost, slow, max, by_poll, polled] = &mut r;
        // Posted before the waiter marked itself sleeping, yet the timeout
        // woke it: the wake-up was lost. (One posted after the mark woke
        // it; if it still ran a tick later, it was slow, not lost.)
        let was_lost = w.rescued_after.is_some_and(|m| posted < m);
        *wakeups += 1;
        *late += u64::from(lat >= tick);
        *lost += u64::from(was_lost);
        *slow += u64::from(lat >= tick && !was_lost);
        *max = (*max).max(lat);
        *by_poll += u64::from(w.by_poll);
        *polled = polled.saturating_add(w.polled_ns);
    }
    drop(timer);
    c.point.task.clear();
    for (a, v) in c.counts().into_iter().zip(r) {
        a.store(v, Ordering::Relaxed);
    }
}

/// Handles a write to `wake`: a duration in ms; runs the design `wake`
/// names on every online CPU for that long, blocking. `EINVAL` for a bad
/// write, `EBUSY` while anything else runs; nothing runs then. A signal
/// ends the run early (`stopped: interrupted`, its results so far kept)
/// with `EINTR`.
pub(crate) fn write(input: &[u8]) -> Result {
    let Some(ms) = parse_u32(input).filter(|ms| (1..=MAX_MS).contains(ms)) else {
        pr_err!("wake: want a duration in ms, 1..{}\n", MAX_MS);
        return Err(EINVAL);
    };
    let _guard = Guard::try_begin(Activity::Wake, "wake")?;
    let slots = STATE.cpus.pin();
    for (_, c) in slots.iter().flat_map(|s| s.iter()) {
        c.reset_counts();
    }
    STATE.hist.clear();
    STATE
        .design
        .store(settings::choice::<Wake>().index() as u32, Ordering::Relaxed);
    STATE.poll_ns.store(poll_ns(), Ordering::Relaxed);
    STATE
        .tick_ns
        .store(ffi::time::tick_nsec(), Ordering::Relaxed);
    STATE.duration_ms.store(u64::from(ms), Ordering::Relaxed);
    STATE
        .ncpus
        .store(ffi::cpu::num_online_cpus(), Ordering::Relaxed);
    let t0 = ffi::time::local_clock();
    let ret = ffi::kthread::run_on_each_cpu(&waiter);
    let elapsed = ffi::time::local_clock().wrapping_sub(t0) / 1_000_000;
    STATE.elapsed_ms.store(elapsed, Ordering::Relaxed);
    STATE.last_run.record("wake", &ret, elapsed);
    STATE.runs.fetch_add(1, Ordering::Relaxed);
    ret
}

/// The setting `poll_us`, in ns.
fn poll_ns() -> u64 {
    u64::from(settings::number(Key::PollUs)).saturating_mul(1_000)
}

/// The verdict of the last run, on lost wake-ups: `racy` must lose some
/// (`caught`), or the probe could not see the gap (`blind`); the others
/// must lose none (`clean`, else `lost`). Slow wake-ups are the
/// scheduler's (or, in a VM, the host's), not the design's: reported, not
/// judged.
fn verdict(design: Wake, lost: u64) -> &'static str {
    match (design, lost) {
        (Wake::Racy, 0) => "blind",
        (Wake::Racy, _) => "caught",
        (_, 0) => "clean",
        _ => "lost",
    }
}

/// Writes the `wake` file: the last run, totals then per CPU.
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    let running = crate::activity::current() == Some(Activity::Wake);
    let runs = STATE.runs.load(Ordering::Relaxed);
    let design = design_of(STATE.design.load(Ordering::Relaxed).into());
    writeln!(w, "state: {}", if running { "running" } else { "idle" })?;
    writeln!(w, "runs: {runs}")?;
    if runs == 0 {
        return writeln!(w, "# write a duration in ms to run the design wake= names");
    }
    writeln!(w, "wake: {}", design.name())?;
    writeln!(
        w,
        "poll_us: {}",
        STATE.poll_ns.load(Ordering::Relaxed) / 1_000
    )?;
    writeln!(
        w,
        "duration_ms: {}",
        STATE.duration_ms.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "elapsed_ms: {}",
        STATE.elapsed_ms.load(Ordering::Relaxed)
    )?;
    writeln!(w, "stopped: {}", STATE.last_run.stopped())?;
    writeln!(w, "cpus: {}", STATE.ncpus.load(Ordering::Relaxed))?;
    writeln!(w, "tick_ns: {}", STATE.tick_ns.load(Ordering::Relaxed))?;
    writeln!(w, "spread_ns: {SPREAD_NS}")?;
    let slots = STATE.cpus.pin();
    let cpus = || slots.iter().flat_map(|s| s.iter()).map(|(_, c)| c);
    let totals = Totals::of(cpus);
    write_totals(w, &totals.entries())?;
    writeln!(w, "p50_wake_latency_ns: {}", STATE.hist.quantile(500))?;
    writeln!(w, "p99_wake_latency_ns: {}", STATE.hist.quantile(990))?;
    writeln!(w, "verdict: {}", verdict(design, totals.lost_wakeups))?;
    for (cpu, c) in slots.iter().flat_map(|s| s.iter()) {
        if c.wakeups.load(Ordering::Relaxed) != 0 {
            write_cpu_line(w, cpu, &c.entries())?;
        }
    }
    Ok(())
}

// ---- ping-pong ------------------------------------------------------------------------

/// The ping-pong game in progress (or the last): what it plays, its
/// players, and what it measured.
struct Game {
    /// The two players' waitpoints.
    players: [Waitpoint; 2],
    /// The design (its [`Choice::index`]).
    design: AtomicU64,
    /// The poll window, ns.
    poll_ns: AtomicU64,
    /// Round trips to play.
    trips: AtomicU64,
    /// Kthreads arrived.
    arrived: AtomicU32,
    /// Players ready to play.
    seated: AtomicU32,
    /// Wall time of all the round trips (player 0's clock), ns.
    total_ns: AtomicU64,
    /// CPU time both players spent polling, ns.
    polled_ns: AtomicU64,
    /// The two players' CPUs.
    cpus: [AtomicU32; 2],
}

static GAME: Game = Game {
    players: [const {
        Waitpoint {
            ready: AtomicU32::new(0),
            task: TaskSlot::new(),
        }
    }; 2],
    design: AtomicU64::new(0),
    poll_ns: AtomicU64::new(0),
    trips: AtomicU64::new(0),
    arrived: AtomicU32::new(0),
    seated: AtomicU32::new(0),
    total_ns: AtomicU64::new(0),
    polled_ns: AtomicU64::new(0),
    cpus: [const { AtomicU32::new(0) }; 2],
};

/// What one game measured.
pub(crate) struct Score {
    /// Wall time of all the round trips, ns.
    pub(crate) total_ns: u64,
    /// CPU time both players spent polling, ns.
    pub(crate) polled_ns: u64,
    /// The two players' CPUs.
    pub(crate) cpus: (u32, u32),
}

/// One kthread of the game: the first two to arrive play (0 serves, 1
/// returns), the others leave.
fn player(k: &Kthread, cpu: u32, hist: &LatHist) {
    let me = GAME.arrived.fetch_add(1, Ordering::AcqRel);
    let (Some(mine), Some(theirs)) = (
        GAME.players.get(me as usize),
        GAME.players.get(1usize.wrapping_sub(me as usize)),
    ) else {
        return;
    };
    let design = design_of(GAME.design.load(Ordering::Relaxed));
    let poll_ns = GAME.poll_ns.load(Ordering::Relaxed);
    let trips = GAME.trips.load(Ordering::Relaxed);
    if let Some(c) = GAME.cpus.get(me as usize) {
        c.store(cpu, Ordering::Relaxed);
    }
    mine.rearm();
    // Cleared by the writer after `run_on_each_cpu()` returns; the only
    // waker is the other player, of the same call.
    mine.task.publish_self(k);
    GAME.seated.fetch_add(1, Ordering::AcqRel);
    while GAME.seated.load(Ordering::Acquire) < 2 {
        core::hint::spin_loop();
        ffi::cpu::cond_resched();
    }
    let mut polled = 0u64;
    let t0 = ffi::time::local_clock();
    for _ in 0..trips {
        if me == 0 {
            let t = ffi::time::local_clock();
            theirs.post();
            polled = polled.saturating_add(wait(design, k, mine, poll_ns, 0).polled_ns);
            mine.rearm();
            hist.record(ffi::time::local_clock().saturating_sub(t));
        } else {
            polled = polled.saturating_add(wait(design, k, mine, poll_ns, 0).polled_ns);
            mine.rearm();
            theirs.post();
        }
    }
    if me == 0 {
        GAME.total_ns.store(
            ffi::time::local_clock().saturating_sub(t0),
            Ordering::Relaxed,
        );
    }
    GAME.polled_ns.fetch_add(polled, Ordering::Relaxed);
}

/// Plays `trips` round trips between two kthreads on two CPUs, waiting
/// with `design` (not `racy`) and a poll window of
/// `poll_ns`; each round trip's time goes into `hist`. `ENODEV` with fewer
/// than two CPUs online. The caller holds the activity.
pub(crate) fn pingpong(design: Wake, poll_ns: u64, trips: u32, hist: &LatHist) -> Result<Score> {
    if ffi::cpu::num_online_cpus() < 2 {
        return Err(ENODEV);
    }
    GAME.design.store(design.index() as u64, Ordering::Relaxed);
    GAME.poll_ns.store(poll_ns, Ordering::Relaxed);
    GAME.trips.store(u64::from(trips), Ordering::Relaxed);
    for a in [&GAME.total_ns, &GAME.polled_ns] {
        a.store(0, Ordering::Relaxed);
    }
    for c in &GAME.cpus {
        c.store(0, Ordering::Relaxed);
    }
    GAME.arrived.store(0, Ordering::Relaxed);
    GAME.seated.store(0, Ordering::Relaxed);
    // CPU hotplug waits during the call: two CPUs stay online.
    let ret = ffi::kthread::run_on_each_cpu(&|k: &Kthread, cpu| player(k, cpu, hist));
    for p in &GAME.players {
        p.task.clear();
    }
    ret?;
    let [a, b] = GAME.cpus.each_ref().map(|c| c.load(Ordering::Relaxed));
    Ok(Score {
        total_ns: GAME.total_ns.load(Ordering::Relaxed),
        polled_ns: GAME.polled_ns.load(Ordering::Relaxed),
        cpus: (a, b),
    })
}
