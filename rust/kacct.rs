// SPDX-License-Identifier: GPL-2.0

//! The acct-integrals updater in the module, around the kernel-independent
//! [`crate::acct`]:
//!
//! - the three strategies in one table (`strategies!`, names and
//!   statically dispatched updates from one list), one selected by the
//!   setting `acct` (`irqsave` disables interrupts with
//!   `local_irq_save()`);
//! - one record per CPU, updated with nmiclock's time by a task-context
//!   worker in a tight loop (the "many system calls" load) and by a pinned
//!   hard-IRQ hrtimer on the same CPU, every [`IRQ_PERIOD_NS`], while a run
//!   lasts (debugfs `acct`: write a duration in ms), and by the stress run's
//!   samples (NMI context) and writers;
//! - every update checked online ([`AcctRecord::account`]) and counted per
//!   CPU; at the end of a run the integrals are compared with the shadow
//!   sums.
//!
//! The time is nmiclock's clock ([`kclock::read`]), the minimum delta the
//! kernel's `TICK_NSEC`, and the RSS and VM inputs synthetic but changing
//! with time ([`inputs`]). The task side pauses `tear_window_ns` between
//! its read and its write of `acct_timexpd`, the racy forms' window, so
//! that the interrupt side lands there even under emulation. Against the
//! hrtimer side `irqsave` is as safe as `cmpxchg`; only the stress run's
//! NMI-context updates, which `local_irq_save()` does not mask, tell them
//! apart.
//!
//! What each strategy costs is measured by `bench` (its `acct` rows), with
//! [`bench_update`].

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use crate::acct::{
    AcctRecord, AcctStrategy, Cmpxchg, IrqExclusion, IrqSave, Outcome, Racy, Update, Verdict,
};
use crate::activity::{Activity, Guard, LastRun};
use crate::choices::{same, Acct, Choice};
use crate::counters::{counters, show, write_cpu_line, write_stats, write_totals};
use crate::ffi;
use crate::ffi::cpu::Context;
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::kthread::Kthread;
use crate::kclock;
use crate::percpu::PerCpu;
use crate::settings::{self, Key};

/// `local_irq_save()` around the update.
pub(crate) struct KernelIrqs;

impl IrqExclusion for KernelIrqs {
    #[inline]
    fn exclude<R>(&self, _rec: &AcctRecord, f: impl FnOnce() -> R) -> R {
        ffi::cpu::with_irqs_disabled(f)
    }
}

/// Declares the strategies, one per value of the setting `acct`
/// ([`Acct`]): [`update_with`], which runs one with a `match` (statically
/// dispatched: NMI context calls it), and each one's [`Strategy`] for the
/// bench's rows. The build fails if a strategy's name is not its value's.
macro_rules! strategies {
    ($($choice:ident => $value:expr, $ty:ty;)*) => {
        /// Runs strategy `acct` once on `rec`.
        #[inline(always)]
        pub(crate) fn update_with<N: FnMut() -> u64, P: FnMut()>(
            acct: Acct,
            rec: &AcctRecord,
            u: Update<N, P>,
        ) -> Outcome {
            match acct {
                $(Acct::$choice => $value.update(rec, u),)*
            }
        }

        $(
            impl Strategy for $ty {
                const ACCT: Acct = Acct::$choice;
            }
            const _: () = assert!(same(<$ty>::NAME, Acct::$choice.const_name()));
        )*
    };
}

/// A strategy type, and the value of the setting `acct` that selects it.
pub(crate) trait Strategy {
    /// The value.
    const ACCT: Acct;
}

/// `irqsave` as the kernel does it.
pub(crate) type KernelIrqSave = IrqSave<KernelIrqs>;

strategies! {
    Cmpxchg => Cmpxchg, Cmpxchg;
    IrqSave => IrqSave(KernelIrqs), KernelIrqSave;
    Racy => Racy, Racy;
}

/// Period of the interrupt-side updates during a run.
pub(crate) const IRQ_PERIOD_NS: u64 = 100_000;

/// Longest run, in ms.
pub(crate) const MAX_RUN_MS: u32 = 60_000;

counters! {
    /// One CPU's counters and record, in their own cache lines.
    #[repr(align(64))]
    struct AcctSlot, totals pub(crate) Totals, prefix "acct_" {
        /// Updates from task, hard-IRQ and NMI context.
        task_calls: "task_calls", sum, show::FILE_CPU;
        irq_calls: "irq_calls", sum, show::FILE_CPU;
        nmi_calls: "nmi_calls", sum, 0;
        /// Updates that applied an interval.
        updates: "updates", sum, show::FILE_CPU | show::STATS | show::PERCPU | show::EOT;
        /// Updates too soon after the last to apply one.
        skips: "skips", sum, 0;
        /// Updates that lost to another context and skipped.
        races: "races", sum, show::FILE_CPU | show::STATS | show::EOT;
        /// Applied deltas that were negative or covered time already
        /// applied.
        bad_deltas: "bad_deltas", sum,
            show::FILE_CPU | show::STATS | show::PERCPU | show::EOT | show::ANOMALY;
        /// Updates that moved `acct_timexpd` back.
        backwards: "timexpd_backwards", sum,
            show::FILE_CPU | show::STATS | show::PERCPU | show::EOT | show::ANOMALY;
        /// Records whose integrals did not add up.
        mismatches: "integral_mismatches", sum,
            show::FILE_CPU | show::STATS | show::EOT | show::ANOMALY;
    }
    state {
        rec: AcctRecord = AcctRecord::default();
    }
}

/// The acct activity's state: its per-CPU slots, and what its runs found.
struct ActivityState {
    slots: PerCpu<AcctSlot>,
    /// Runs since load.
    runs: AtomicU64,
    /// The last run's length, ns.
    run_ns: AtomicU64,
    /// CPUs the last run ran on.
    run_cpus: AtomicU32,
    /// How the last run ended.
    last_run: LastRun,
    /// The kernel's tick (`TICK_NSEC`), the smallest delta applied: read once.
    min_delta_ns: AtomicU64,
    /// The strategy of the run in progress (or the last: this activity's
    /// or a stress run's), its [`Choice::index`], set when it starts.
    strategy: AtomicU32,
    /// The task side's pause inside its update, ns, set when a run of
    /// this activity starts.
    pause_ns: AtomicU32,
}

static STATE: ActivityState = ActivityState {
    slots: PerCpu::new(),
    runs: AtomicU64::new(0),
    run_ns: AtomicU64::new(0),
    run_cpus: AtomicU32::new(0),
    last_run: LastRun::new(),
    min_delta_ns: AtomicU64::new(0),
    strategy: AtomicU32::new(0),
    pause_ns: AtomicU32::new(0),
};

/// Makes `acct` the strategy of the updates from now on (a run starting,
/// before its updates).
pub(crate) fn use_strategy(acct: Acct) {
    STATE.strategy.store(acct.index() as u32, Ordering::Relaxed);
}

/// The strategy of the run in progress.
fn strategy() -> Acct {
    Acct::from_index(STATE.strategy.load(Ordering::Relaxed) as usize).unwrap_or(Acct::FIRST)
}

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
pub(crate) fn update_here(ctx: Context, pause_ns: u32) -> Option<(Outcome, Verdict)> {
    STATE.slots.with_this_cpu(|slot| {
        inc(match ctx {
            Context::Task => &slot.task_calls,
            Context::Irq => &slot.irq_calls,
            Context::Nmi => &slot.nmi_calls,
        });
        let (rss, vm) = inputs(&slot.rec);
        let o = update_with(
            strategy(),
            &slot.rec,
            Update {
                now: || kclock::read().ns,
                rss,
                vm,
                min_delta: STATE.min_delta_ns.load(Ordering::Relaxed),
                pause: || {
                    if pause_ns != 0 {
                        ffi::cpu::ndelay(pause_ns);
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
        (o, v)
    })
}

/// Restarts every record at the current time and zeroes the counters. Not
/// while updates run.
pub(crate) fn reset() {
    let start = kclock::read().ns;
    let slots = STATE.slots.pin();
    for (_, s) in slots.iter().flat_map(|s| s.iter()) {
        s.rec.reset(start);
        s.reset_counts();
    }
}

/// Compares every record's integrals with its shadow sums, once all
/// updates have finished, and counts the records that disagree.
pub(crate) fn check_integrals() {
    let slots = STATE.slots.pin();
    for (_, s) in slots.iter().flat_map(|s| s.iter()) {
        if !s.rec.integrals_match() {
            inc(&s.mismatches);
        }
    }
}

/// The totals over every CPU now. Any context.
pub(crate) fn totals() -> Totals {
    STATE
        .slots
        .with(|s| Totals::of(|| s.iter().map(|(_, c)| c)))
        .unwrap_or_else(|| Totals::of(core::iter::empty))
}

/// Writes CPU `cpu`'s counts shown in `percpu`.
pub(crate) fn write_percpu(w: &mut impl Write, cpu: u32) -> fmt::Result {
    STATE
        .slots
        .with_cpu(cpu, |s| crate::counters::write_percpu(w, &s.entries()))
        .unwrap_or(Ok(()))
}

/// The interrupt side: a pinned hrtimer on each CPU, in hard-IRQ context,
/// for as long as its worker keeps it.
fn irq_tick() -> u64 {
    update_here(Context::Irq, 0);
    IRQ_PERIOD_NS
}

/// The task side of a run on one CPU: starts this CPU's interrupt side,
/// updates in a tight loop until the run ends.
fn worker(k: &Kthread, _cpu: u32) {
    let duration = STATE.run_ns.load(Ordering::Relaxed);
    // Started from this CPU, the pinned timer fires here.
    let timer = HrTimer::new(irq_tick)
        .inspect_err(|_| pr_err!("acct: no interrupt side on this CPU: out of memory\n"));
    if let Ok(t) = &timer {
        t.start(IRQ_PERIOD_NS);
    }
    let end = ffi::time::local_clock().wrapping_add(duration);
    let mut n: u64 = 0;
    while (ffi::time::local_clock().wrapping_sub(end) as i64) < 0 {
        update_here(Context::Task, STATE.pause_ns.load(Ordering::Relaxed));
        n = n.wrapping_add(1);
        if n % 64 == 0 {
            if k.should_stop() {
                break;
            }
            ffi::cpu::cond_resched();
        }
    }
    drop(timer);
}

/// The updater's per-CPU state, installed at load. Dropping it frees it.
pub(crate) struct AcctSlots(());

impl AcctSlots {
    /// Installs the records; until a run starts, the updates' strategy
    /// is the one the module loaded with.
    pub(crate) fn new() -> Result<Self> {
        STATE
            .min_delta_ns
            .store(ffi::time::tick_nsec(), Ordering::Relaxed);
        use_strategy(settings::choice::<Acct>());
        STATE.slots.install(AcctSlot::default)?;
        Ok(Self(()))
    }
}

impl Drop for AcctSlots {
    fn drop(&mut self) {
        STATE.slots.uninstall();
    }
}

/// Handles a write to `acct`: a duration in ms runs the task and interrupt
/// sides on every online CPU, blocking. `EINVAL` for a bad write, `EBUSY`
/// while anything else runs; nothing runs then. A signal ends the run
/// early (`stopped: interrupted`; the integrals are still checked) with
/// `EINTR`.
pub(crate) fn write(input: &[u8]) -> Result {
    let ms = match crate::parse::parse_u32(input) {
        Some(ms) if (1..=MAX_RUN_MS).contains(&ms) => ms,
        _ => {
            pr_err!("acct: want a duration in ms, 1..{}\n", MAX_RUN_MS);
            return Err(EINVAL);
        }
    };
    let _guard = Guard::try_begin(Activity::Acct, "acct")?;
    reset();
    use_strategy(settings::choice::<Acct>());
    STATE
        .pause_ns
        .store(settings::number(Key::TearWindowNs), Ordering::Relaxed);
    STATE
        .run_ns
        .store(u64::from(ms) * 1_000_000, Ordering::Relaxed);
    STATE
        .run_cpus
        .store(ffi::cpu::num_online_cpus(), Ordering::Relaxed);
    let t0 = ffi::time::local_clock();
    let ret = ffi::kthread::run_on_each_cpu(&worker);
    // Every update has finished: the integrals must match their shadows.
    check_integrals();
    STATE.last_run.record(
        "acct",
        &ret,
        ffi::time::local_clock().wrapping_sub(t0) / 1_000_000,
    );
    STATE.runs.fetch_add(1, Ordering::Relaxed);
    ret
}

/// Writes the updater's part of `stats`.
pub(crate) fn show_stats(w: &mut impl Write) -> fmt::Result {
    write_stats(w, &totals().entries())
}

/// Writes the `acct` file: the last run's results, totals then per CPU.
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    let running = crate::activity::current() == Some(Activity::Acct);
    writeln!(w, "acct: {}", strategy().name())?;
    writeln!(w, "state: {}", if running { "running" } else { "idle" })?;
    writeln!(w, "runs: {}", STATE.runs.load(Ordering::Relaxed))?;
    writeln!(
        w,
        "duration_ms: {}",
        STATE.run_ns.load(Ordering::Relaxed) / 1_000_000
    )?;
    writeln!(w, "stopped: {}", STATE.last_run.stopped())?;
    writeln!(w, "cpus: {}", STATE.run_cpus.load(Ordering::Relaxed))?;
    writeln!(w, "irq_period_ns: {IRQ_PERIOD_NS}")?;
    writeln!(
        w,
        "min_delta_ns: {}",
        STATE.min_delta_ns.load(Ordering::Relaxed)
    )?;
    let slots = STATE.slots.pin();
    let cpus = || slots.iter().flat_map(|s| s.iter()).map(|(_, c)| c);
    write_totals(w, &Totals::of(cpus).entries())?;
    for (cpu, s) in slots.iter().flat_map(|s| s.iter()) {
        if s.task_calls.load(Ordering::Relaxed) != 0 {
            write_cpu_line(w, cpu, &s.entries())?;
        }
    }
    Ok(())
}

/// One task-context update of a private `rec` by strategy `index`, at the
/// running clock's time, skipped when less than `min_delta` ns passed:
/// what `bench`'s acct rows time.
#[inline(always)]
pub(crate) fn bench_update<S: Strategy>(rec: &AcctRecord, min_delta: u64) {
    let o = update_with(
        S::ACCT,
        rec,
        Update {
            now: || kclock::read().ns,
            rss: 1_000,
            vm: 4_096,
            min_delta,
            pause: || {},
        },
    );
    core::hint::black_box(o);
}

/// The kernel's tick, as the acct updates use it.
pub(crate) fn min_delta_ns() -> u64 {
    STATE.min_delta_ns.load(Ordering::Relaxed)
}
