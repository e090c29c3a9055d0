// SPDX-License-Identifier: GPL-2.0

//! The acct-integrals updater in the module, around the kernel-independent
//! [`crate::acct`]:
//!
//! - the three strategies in one table, one selected by `acct=` at load
//!   (`irqsave` disables interrupts with `local_irq_save()`);
//! - one record per CPU, updated with nmiclock's time by a task-context
//!   worker in a tight loop (the "many system calls" load) and by a pinned
//!   hard-IRQ hrtimer on the same CPU, every [`IRQ_PERIOD_NS`], while a run
//!   lasts (debugfs `acct`: write a duration in ms);
//! - every update checked online ([`AcctRecord::account`]) and counted per
//!   CPU; at the end of a run the integrals are compared with the shadow
//!   sums;
//! - the cost benchmark (debugfs `acct_bench`: write a number of rounds):
//!   ns per task-context update for each strategy, median of the rounds, in
//!   one run, with the `irqsave / cmpxchg` ratio.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::ffi::c_uint;
use kernel::prelude::*;

use crate::acct::{
    AcctRecord, AcctStrategy, Cmpxchg, IrqExclusion, IrqSave, Outcome, Racy, Update, Verdict,
};
use crate::ffi;
use crate::kclock;
use crate::percpu::PerCpu;
use crate::settings::{self, Key};

/// `local_irq_save()` around the update.
struct KernelIrqs;

impl IrqExclusion for KernelIrqs {
    #[inline]
    fn exclude<R>(&self, _rec: &AcctRecord, f: impl FnOnce() -> R) -> R {
        ffi::with_irqs_disabled(f)
    }
}

static IRQSAVE: IrqSave<KernelIrqs> = IrqSave(KernelIrqs);

/// Every strategy, in the order of `settings::ACCTS`.
static STRATEGIES: [&dyn AcctStrategy; 3] = [&Cmpxchg, &IRQSAVE, &Racy];

/// Period of the interrupt-side updates during a run.
pub(crate) const IRQ_PERIOD_NS: u64 = 100_000;

/// Longest run, in ms.
pub(crate) const MAX_RUN_MS: u32 = 60_000;

/// Most benchmark rounds.
pub(crate) const MAX_BENCH_ROUNDS: u32 = 31;

/// Updates per strategy per benchmark round.
const BENCH_LOOPS: u64 = 20_000;

/// The strategy the settings select (`settings::ACCTS` is in the order of
/// [`STRATEGIES`]).
fn strategy() -> &'static dyn AcctStrategy {
    STRATEGIES
        .get(settings::get(Key::Acct) as usize)
        .copied()
        .unwrap_or(&Cmpxchg)
}

/// The context an update runs in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ctx {
    /// Task context.
    Task = 0,
    /// Hard-IRQ context.
    Irq = 1,
    /// NMI context.
    Nmi = 2,
}

impl Ctx {
    /// The context this runs in.
    pub(crate) fn now() -> Self {
        if ffi::in_nmi() {
            Ctx::Nmi
        } else if ffi::in_hardirq() {
            Ctx::Irq
        } else {
            Ctx::Task
        }
    }
}

/// One CPU's record and counters, in their own cache lines.
#[repr(align(64))]
#[derive(Default)]
struct AcctSlot {
    rec: AcctRecord,
    task_calls: AtomicU64,
    irq_calls: AtomicU64,
    nmi_calls: AtomicU64,
    updates: AtomicU64,
    races: AtomicU64,
    skips: AtomicU64,
    bad_deltas: AtomicU64,
    backwards: AtomicU64,
    mismatches: AtomicU64,
}

impl AcctSlot {
    fn counters(&self) -> [&AtomicU64; 9] {
        [
            &self.task_calls,
            &self.irq_calls,
            &self.nmi_calls,
            &self.updates,
            &self.races,
            &self.skips,
            &self.bad_deltas,
            &self.backwards,
            &self.mismatches,
        ]
    }
}

static SLOTS: PerCpu<AcctSlot> = PerCpu::new();

static BUSY: AtomicBool = AtomicBool::new(false);
static RUNNING: AtomicBool = AtomicBool::new(false);
static RUNS: AtomicU64 = AtomicU64::new(0);
static RUN_NS: AtomicU64 = AtomicU64::new(0);
static RUN_CPUS: AtomicU32 = AtomicU32::new(0);

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Synthetic RSS and VM sizes (pages) that change over time, derived from
/// the record's own `acct_timexpd` so they cost no extra clock read.
fn inputs(rec: &AcctRecord) -> (u64, u64) {
    let t = rec.timexpd();
    (1_000 + (t >> 20) % 512, 4_096 + (t >> 22) % 256)
}

/// One update of this CPU's record from context `ctx`, counted and
/// checked. Callable from task, IRQ and NMI context. `pause_ns` widens the
/// window between the update's read and write of `acct_timexpd`. Returns
/// the outcome and what was wrong with it, if anything.
pub(crate) fn update_here(ctx: Ctx, pause_ns: u32) -> Option<(Outcome, Verdict)> {
    let slot = SLOTS.this_cpu()?;
    inc(match ctx {
        Ctx::Task => &slot.task_calls,
        Ctx::Irq => &slot.irq_calls,
        Ctx::Nmi => &slot.nmi_calls,
    });
    let (rss, vm) = inputs(&slot.rec);
    let o = strategy().update(
        &slot.rec,
        Update {
            now: &mut || kclock::read().ns,
            rss,
            vm,
            min_delta: ffi::tick_nsec(),
            pause: &mut || {
                if pause_ns != 0 {
                    ffi::ndelay(pause_ns);
                }
            },
        },
    );
    match o {
        Outcome::Applied { .. } => inc(&slot.updates),
        Outcome::Negative | Outcome::Lost => inc(&slot.races),
        Outcome::TooSoon => inc(&slot.skips),
    }
    let v = slot.rec.account(&o);
    if v.bad_delta {
        inc(&slot.bad_deltas);
    }
    if v.backwards {
        inc(&slot.backwards);
    }
    Some((o, v))
}

/// Restarts every record at the current time and zeroes the counters. Not
/// while updates run.
pub(crate) fn reset() {
    let start = kclock::read().ns;
    for (_, s) in SLOTS.iter() {
        s.rec.reset(start);
        for c in s.counters() {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Compares every record's integrals with its shadow sums, once all
/// updates have finished, and counts the records that disagree.
pub(crate) fn check_integrals() {
    for (_, s) in SLOTS.iter() {
        if !s.rec.integrals_match() {
            inc(&s.mismatches);
        }
    }
}

/// Totals of `(updates, races, bad_deltas, timexpd_backwards,
/// integral_mismatches)`.
pub(crate) fn totals() -> (u64, u64, u64, u64, u64) {
    (
        SLOTS.sum(|s| &s.updates),
        SLOTS.sum(|s| &s.races),
        SLOTS.sum(|s| &s.bad_deltas),
        SLOTS.sum(|s| &s.backwards),
        SLOTS.sum(|s| &s.mismatches),
    )
}

/// Per-CPU `(updates, bad_deltas, timexpd_backwards)`, for `percpu`.
pub(crate) fn cpu_counts(cpu: u32) -> (u64, u64, u64) {
    SLOTS.get(cpu).map_or((0, 0, 0), |s| {
        (
            s.updates.load(Ordering::Relaxed),
            s.bad_deltas.load(Ordering::Relaxed),
            s.backwards.load(Ordering::Relaxed),
        )
    })
}

/// The interrupt side: a pinned hrtimer on each CPU, in hard-IRQ context.
extern "C" fn acct_irq_tick() -> u64 {
    if !RUNNING.load(Ordering::Relaxed) {
        return 0;
    }
    update_here(Ctx::Irq, 0);
    IRQ_PERIOD_NS
}

/// The task side of a run on one CPU (a kthread bound to `cpu`): starts
/// this CPU's interrupt side, updates in a tight loop until the run ends.
extern "C" fn acct_worker(_cpu: c_uint) {
    let duration = RUN_NS.load(Ordering::Relaxed);
    // Started from this CPU, the pinned timer fires here.
    let timer = ffi::HrTimer::new(acct_irq_tick);
    if let Ok(t) = &timer {
        t.start(IRQ_PERIOD_NS);
    }
    let end = ffi::local_clock().wrapping_add(duration);
    let mut n: u64 = 0;
    while (ffi::local_clock().wrapping_sub(end) as i64) < 0 {
        update_here(Ctx::Task, settings::get(Key::TearWindowNs));
        n = n.wrapping_add(1);
        if n % 64 == 0 {
            ffi::cond_resched();
        }
    }
    drop(timer);
}

/// The updater's per-CPU state, installed at load. Dropping it frees it.
pub(crate) struct Running;

impl Running {
    /// Installs the records.
    pub(crate) fn start() -> Result<Self> {
        SLOTS.install(AcctSlot::default)?;
        Ok(Self)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: Only debugfs handlers (a run, a benchmark, a read) use the
        // slots, and they are gone before this is dropped; a run's timers
        // are cancelled before the run returns.
        unsafe { SLOTS.uninstall() };
    }
}

/// Claims the records for a stress run (as `run` and `bench` do); false if
/// a run, benchmark or stress run has them.
pub(crate) fn try_claim() -> bool {
    !BUSY.swap(true, Ordering::Acquire)
}

/// Gives back what [`try_claim`] took.
pub(crate) fn release() {
    BUSY.store(false, Ordering::Release);
}

/// Runs task and interrupt side on every online CPU for `ms` ms, blocking.
pub(crate) fn run(ms: u32) -> Result {
    if BUSY.swap(true, Ordering::Acquire) {
        pr_err!("acct: a run or benchmark is already in progress\n");
        return Err(EBUSY);
    }
    reset();
    RUN_NS.store(u64::from(ms) * 1_000_000, Ordering::Relaxed);
    RUN_CPUS.store(ffi::num_online_cpus(), Ordering::Relaxed);
    RUNNING.store(true, Ordering::Relaxed);
    let ret = ffi::run_on_each_cpu(acct_worker);
    RUNNING.store(false, Ordering::Relaxed);
    // Every update has finished: the integrals must match their shadows.
    check_integrals();
    RUNS.fetch_add(1, Ordering::Relaxed);
    BUSY.store(false, Ordering::Release);
    ret
}

/// Writes the updater's part of `stats`.
pub(crate) fn show_stats(w: &mut impl Write) -> fmt::Result {
    writeln!(w, "acct: {}", strategy().name())?;
    writeln!(w, "acct_updates: {}", SLOTS.sum(|s| &s.updates))?;
    writeln!(w, "acct_races: {}", SLOTS.sum(|s| &s.races))?;
    writeln!(w, "acct_bad_deltas: {}", SLOTS.sum(|s| &s.bad_deltas))?;
    writeln!(w, "acct_timexpd_backwards: {}", SLOTS.sum(|s| &s.backwards))?;
    writeln!(
        w,
        "acct_integral_mismatches: {}",
        SLOTS.sum(|s| &s.mismatches)
    )
}

/// Writes the `acct` file: the last run's results, totals then per CPU.
pub(crate) fn show_run(w: &mut impl Write) -> fmt::Result {
    let running = RUNNING.load(Ordering::Relaxed);
    writeln!(w, "acct: {}", strategy().name())?;
    writeln!(w, "state: {}", if running { "running" } else { "idle" })?;
    writeln!(w, "runs: {}", RUNS.load(Ordering::Relaxed))?;
    writeln!(
        w,
        "duration_ms: {}",
        RUN_NS.load(Ordering::Relaxed) / 1_000_000
    )?;
    writeln!(w, "cpus: {}", RUN_CPUS.load(Ordering::Relaxed))?;
    writeln!(w, "irq_period_ns: {IRQ_PERIOD_NS}")?;
    writeln!(w, "min_delta_ns: {}", ffi::tick_nsec())?;
    writeln!(w, "task_calls: {}", SLOTS.sum(|s| &s.task_calls))?;
    writeln!(w, "irq_calls: {}", SLOTS.sum(|s| &s.irq_calls))?;
    writeln!(w, "nmi_calls: {}", SLOTS.sum(|s| &s.nmi_calls))?;
    writeln!(w, "updates: {}", SLOTS.sum(|s| &s.updates))?;
    writeln!(w, "skips: {}", SLOTS.sum(|s| &s.skips))?;
    writeln!(w, "races: {}", SLOTS.sum(|s| &s.races))?;
    writeln!(w, "bad_deltas: {}", SLOTS.sum(|s| &s.bad_deltas))?;
    writeln!(w, "timexpd_backwards: {}", SLOTS.sum(|s| &s.backwards))?;
    writeln!(w, "integral_mismatches: {}", SLOTS.sum(|s| &s.mismatches))?;
    for (cpu, s) in SLOTS.iter() {
        let calls = s.task_calls.load(Ordering::Relaxed);
        if calls == 0 {
            continue;
        }
        writeln!(
            w,
            "cpu{cpu}: task_calls={calls} irq_calls={} updates={} races={} bad_deltas={} timexpd_backwards={} integral_mismatches={}",
            s.irq_calls.load(Ordering::Relaxed),
            s.updates.load(Ordering::Relaxed),
            s.races.load(Ordering::Relaxed),
            s.bad_deltas.load(Ordering::Relaxed),
            s.backwards.load(Ordering::Relaxed),
            s.mismatches.load(Ordering::Relaxed)
        )?;
    }
    Ok(())
}

// ---- the cost benchmark ------------------------------------------------------------

/// The two loads: the kernel's tick as the minimum delta (most calls skip,
/// as most system calls do) and 0 (every call applies an interval).
const BENCH_MODES: [&str; 2] = ["tick", "apply"];

/// Medians in hundredths of a ns, per strategy and mode.
static BENCH_CENTI_NS: [[AtomicU64; 2]; 3] = [
    [AtomicU64::new(0), AtomicU64::new(0)],
    [AtomicU64::new(0), AtomicU64::new(0)],
    [AtomicU64::new(0), AtomicU64::new(0)],
];
static BENCH_ROUNDS: AtomicU32 = AtomicU32::new(0);

/// A value in hundredths, printed with two decimals.
struct Centi(u64);

impl fmt::Display for Centi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// `a / b` in hundredths (0 when `b` is 0).
fn ratio(a: u64, b: u64) -> u64 {
    a.saturating_mul(100).checked_div(b).unwrap_or(0)
}

/// One task-context update of a private `rec` by strategy `s`, at the
/// running clock's time, skipped when less than `min_delta` ns passed: what
/// the benchmarks (`acct_bench`, and `bench`'s acct rows) time.
#[inline]
pub(crate) fn bench_update(s: &dyn AcctStrategy, rec: &AcctRecord, min_delta: u64) {
    let o = s.update(
        rec,
        Update {
            now: &mut || kclock::read().ns,
            rss: 1_000,
            vm: 4_096,
            min_delta,
            pause: &mut || {},
        },
    );
    core::hint::black_box(o);
}

/// The strategies, in the order of `settings::ACCTS`, for `bench`.
pub(crate) fn strategies() -> &'static [&'static dyn AcctStrategy] {
    &STRATEGIES
}

/// Times `BENCH_LOOPS` task-context updates of a private record; returns
/// hundredths of a ns per update.
fn time_updates(s: &dyn AcctStrategy, min_delta: u64) -> u64 {
    let rec = AcctRecord::new();
    rec.reset(kclock::read().ns);
    let t0 = ffi::local_clock();
    for _ in 0..BENCH_LOOPS {
        bench_update(s, &rec, min_delta);
    }
    let t1 = ffi::local_clock();
    t1.wrapping_sub(t0).saturating_mul(100) / BENCH_LOOPS
}

/// Runs `rounds` rounds of every strategy in both modes, interleaved so
/// drift hits all alike, and keeps the medians. Blocking.
pub(crate) fn bench(rounds: u32) -> Result {
    if BUSY.swap(true, Ordering::Acquire) {
        pr_err!("acct_bench: a run or benchmark is already in progress\n");
        return Err(EBUSY);
    }
    let n = (rounds as usize).min(MAX_BENCH_ROUNDS as usize);
    let mut samples = [[[0u64; MAX_BENCH_ROUNDS as usize]; 2]; 3];
    let tick = ffi::tick_nsec();
    for r in 0..n {
        for (si, s) in STRATEGIES.iter().enumerate() {
            for (mi, min_delta) in [tick, 0].into_iter().enumerate() {
                samples[si][mi][r] = time_updates(*s, min_delta);
            }
            ffi::cond_resched();
        }
    }
    for (si, per_mode) in samples.iter_mut().enumerate() {
        for (mi, v) in per_mode.iter_mut().enumerate() {
            let v = &mut v[..n];
            v.sort_unstable();
            BENCH_CENTI_NS[si][mi].store(v[n / 2], Ordering::Relaxed);
        }
    }
    BENCH_ROUNDS.store(n as u32, Ordering::Relaxed);
    let m = |si: usize, mi: usize| BENCH_CENTI_NS[si][mi].load(Ordering::Relaxed);
    pr_info!(
        "acct_bench: ns per update, median of {} rounds of {}: tick: cmpxchg {} irqsave {} racy {}, irqsave/cmpxchg {}; apply: cmpxchg {} irqsave {} racy {}, irqsave/cmpxchg {}{}\n",
        n,
        BENCH_LOOPS,
        Centi(m(0, 0)),
        Centi(m(1, 0)),
        Centi(m(2, 0)),
        Centi(ratio(m(1, 0), m(0, 0))),
        Centi(m(0, 1)),
        Centi(m(1, 1)),
        Centi(m(2, 1)),
        Centi(ratio(m(1, 1), m(0, 1))),
        if ffi::in_vm() {
            " (in a VM: times may be emulated, compare ratios only)"
        } else {
            ""
        }
    );
    BUSY.store(false, Ordering::Release);
    Ok(())
}

/// Writes the `acct_bench` file.
pub(crate) fn show_bench(w: &mut impl Write) -> fmt::Result {
    let rounds = BENCH_ROUNDS.load(Ordering::Relaxed);
    writeln!(w, "rounds: {rounds}")?;
    writeln!(w, "loops_per_round: {BENCH_LOOPS}")?;
    writeln!(w, "in_vm: {}", if ffi::in_vm() { "yes" } else { "no" })?;
    if rounds == 0 {
        return Ok(());
    }
    let m = |si: usize, mi: usize| BENCH_CENTI_NS[si][mi].load(Ordering::Relaxed);
    for (mi, mode) in BENCH_MODES.iter().enumerate() {
        for (si, s) in STRATEGIES.iter().enumerate() {
            writeln!(w, "{}_{}_ns: {}", s.name(), mode, Centi(m(si, mi)))?;
        }
        writeln!(
            w,
            "irqsave_over_cmpxchg_{}: {}",
            mode,
            Centi(ratio(m(1, mi), m(0, mi)))
        )?;
    }
    Ok(())
}
