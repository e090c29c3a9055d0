// SPDX-License-Identifier: GPL-2.0

//! The benchmark behind debugfs `bench`: what an NMI-safe read costs next to
//! the kernel's own clocks, what each acct strategy costs, and what the NMI
//! handler costs, measured the way the kernel's `refscale` measures a read
//! primitive.
//!
//! A write of `run` (or of `loops=N nruns=N update_us=N`, see
//! [`crate::bench::parse_args`]) runs it, blocking:
//!
//! 1. Two phases, `idle` and `updaters`. In each, a reader kthread on the first 75 %
//!    of the online CPUs (refscale's default, [`timing_readers`]; the others
//!    idle) times every [`ROWS`] operation. For each of `nruns` runs, every
//!    row is timed back to back (run-major, so that a row and its ratio's
//!    reference share the run's conditions): all readers start together (a
//!    barrier), time `loops` operations in a row (interrupts off in `idle`,
//!    as refscale; preemption off with `updaters`, whose timer must fire), in a
//!    loop compiled for that one operation ([`block`]), and the run's figure
//!    is the mean over the readers of ns per operation (refscale's
//!    `result_avg`); the table's figure is the median over the runs. Then
//!    each reader times [`SINGLES`] operations one by one, between two
//!    ordered counter reads, less the cheapest empty pair of reads
//!    ([`timing_overhead`]), into a histogram: p50, p99 and max, the tail
//!    that interrupts, retries and waits make. The first row, `empty
//!    (harness)`, times the loop alone: the harness's own cost, which every
//!    other figure includes. In `updaters`, a hard-IRQ hrtimer on every CPU
//!    moves the epoch of the clock being read (for every other row, of the
//!    running clock) every `update_us`: the writers the latch exists for.
//! 2. Ping-pong ([`kwake::pingpong`]): two kthreads on two CPUs wake each
//!    other [`PINGPONG_TRIPS`] times per run, `nruns` runs, in the manner
//!    of `perf bench sched pipe`, waiting with `wake=sleep` and with
//!    `wake=poll` at a few poll windows: the round trip's cost, and the
//!    CPU time the polling took.
//! 3. A one-second stress run (`nmi_source` as set), whose NMI-context
//!    samples are timed whole (the clock read between two reference reads,
//!    the checks, an acct update): the NMI handler's cost.
//! 4. The NMI ceiling of each source the machine has (`ipi` on x86,
//!    `perf_hw` where there is a PMU; [`measure_ceilings`]): a one-second
//!    run at the shortest period with an empty handler (samples only
//!    counted), no writers and no wake-up probe, the most samples per second
//!    the machine delivers. A source that cannot start is noted with its
//!    error. Later stress runs report their NMI rate against it
//!    ([`ceiling_per_s`]).
//!
//! Reading `bench` gives the table, with a ratio column (reads against
//! `sched_clock()`, acct updates against `cmpxchg` in the same mode,
//! ping-pong against `pingpong sleep`), and then, for every row and phase,
//! refscale's own `Runs`/`Time(ns)` table, which the kernel's
//! `kvm-recheck-refscale.sh` reads. A ratio is taken within each run, where
//! both rows were timed back to back, and the table gives its median over
//! the runs and its spread, the 10th to the 90th percentile of the per-run
//! ratios by nearest rank (of 3 runs, the least and the greatest), so that
//! every ratio comes with its noise ([`summarize`]).

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use kernel::prelude::*;

use crate::acct::AcctRecord;
use core::marker::PhantomData;

use crate::acct::{Cmpxchg, Racy};
use crate::activity::{Activity, Guard};
use crate::arch::{Bare, Ordered};
use crate::bench::{median, parse_args, ratio_milli, BenchArgs, LatHist, Milli};
use crate::choices::Wake;
use crate::clock::ClockSource;
use crate::counter::Counter;
use crate::cyc_ns::cyc_to_ns;
use crate::environment::Environment;
use crate::ffi;
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::kthread::Kthread;
use crate::fmtbuf::FmtBuf;
use crate::kacct;
use crate::kacct::KernelIrqSave;
use crate::kclock;
use crate::kwake;
use crate::torture;

/// One operation to time, returning what it read (0 for the acct rows).
/// `rec` is the reader's own acct record (only the acct rows use it).
trait Op {
    fn op(rec: &AcctRecord) -> u64;
}

/// Times `loops` operations in a row (refscale's `readsection`): inlined,
/// one monomorphic loop per operation, summing what they read and handing
/// the sum to the optimiser's black box once at the end, as refscale keeps
/// its `x += ...` (a black box per read cost a store each).
fn block<O: Op>(rec: &AcctRecord, loops: u32) {
    let mut sum = 0u64;
    for _ in 0..loops {
        sum = sum.wrapping_add(O::op(rec));
    }
    core::hint::black_box(sum);
}

/// TSC cycles of one operation, between two ordered TSC reads.
fn single<O: Op>(rec: &AcctRecord) -> u64 {
    let t0 = Ordered.read();
    core::hint::black_box(O::op(rec));
    Ordered.read().wrapping_sub(t0)
}

/// What a row measures, for the ratio column.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    /// A clock read (or the bare counter): ratio against `sched_clock()`.
    Read,
    /// An acct update in the kernel's tick mode: ratio against `cmpxchg`'s.
    AcctTick,
    /// An acct update that applies every time: ratio against `cmpxchg`'s.
    AcctApply,
}

impl Group {
    /// The row a row of this group is compared with.
    fn reference(self) -> RowId {
        match self {
            Self::Read => RowId::sched_clock,
            Self::AcctTick => RowId::acct_cmpxchg_tick,
            Self::AcctApply => RowId::acct_cmpxchg_apply,
        }
    }
}

/// What a row reads, which names it and says what its updaters move.
#[derive(Clone, Copy)]
enum Reads {
    /// Anything but one of `kclock`'s clocks, by this name: the updaters
    /// move the running clock.
    Other(&'static str),
    /// One of `kclock`'s clocks, named `protection/counter` and then the
    /// suffix: the updaters move its epoch.
    Clock(&'static dyn ClockSource, &'static str),
    /// The registered target the setting `target` selects, timed only
    /// when it selects one (the bench pins it meanwhile, as a run does),
    /// named `target NAME`: the updaters call its `update`.
    Target,
}

/// One row's figures in one phase.
struct Summary {
    /// The median over the runs, thousandths of a ns per operation.
    median_milli: AtomicU64,
    /// The single operations' p50, p99 and max, ns.
    p50_ns: AtomicU64,
    p99_ns: AtomicU64,
    max_ns: AtomicU64,
    /// The ratio to the group's reference taken within each run: its
    /// median, 10th and 90th percentile over the runs (thousandths), if
    /// any run had one.
    ratio: AtomicU64,
    ratio_lo: AtomicU64,
    ratio_hi: AtomicU64,
    has_ratio: AtomicBool,
}

impl Summary {
    const fn new() -> Self {
        Self {
            median_milli: AtomicU64::new(0),
            p50_ns: AtomicU64::new(0),
            p99_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            ratio: AtomicU64::new(0),
            ratio_lo: AtomicU64::new(0),
            ratio_hi: AtomicU64::new(0),
            has_ratio: AtomicBool::new(false),
        }
    }

    /// The ratio column: the median ratio and its spread, if any.
    fn ratio(&self) -> Option<(u64, (u64, u64))> {
        self.has_ratio.load(Ordering::Relaxed).then(|| {
            (
                self.ratio.load(Ordering::Relaxed),
                (
                    self.ratio_lo.load(Ordering::Relaxed),
                    self.ratio_hi.load(Ordering::Relaxed),
                ),
            )
        })
    }
}

/// One line of the table: what it times, and what it measured.
struct Row {
    reads: Reads,
    group: Group,
    block: fn(&AcctRecord, u32),
    single: fn(&AcctRecord) -> u64,
    /// Per phase: each run's figure, thousandths of a ns per operation.
    runs: [[AtomicU64; MAX_NRUNS]; PHASES.len()],
    /// Per phase: its figures.
    summary: [Summary; PHASES.len()],
    /// Single-operation costs, in the phase in progress.
    hist: LatHist,
}

const fn row<O: Op>(group: Group, reads: Reads) -> Row {
    Row {
        reads,
        group,
        block: block::<O>,
        single: single::<O>,
        runs: [const { [const { AtomicU64::new(0) }; MAX_NRUNS] }; PHASES.len()],
        summary: [const { Summary::new() }; PHASES.len()],
        hist: LatHist::new(),
    }
}

/// An operation that reads a `u64`.
macro_rules! read_op {
    ($ty:ident, $read:expr) => {
        struct $ty;
        impl Op for $ty {
            #[inline(always)]
            fn op(_: &AcctRecord) -> u64 {
                $read
            }
        }
    };
}

// The harness alone: a value the optimiser cannot see through, so the loop
// stays a loop.
read_op!(Empty, core::hint::black_box(0));
read_op!(CounterOrdered, Ordered.read());
read_op!(CounterBare, Bare.read());
read_op!(SchedClock, ffi::time::sched_clock());
read_op!(LocalClock, ffi::time::local_clock());
read_op!(MonoFast, ffi::time::mono_fast_ns());
read_op!(RealFast, ffi::time::real_fast_ns());
read_op!(KtimeGetNs, ffi::time::ktime_get_ns());
// Never inlined: a direct call of the exported function, as another
// module's.
read_op!(NmiclockSchedClock, kclock::nmiclock_sched_clock());
read_op!(LatchOrderedCall, latch_ordered_call());
read_op!(LatchOrdered, kclock::LATCH_ORDERED.read().ns);
read_op!(LatchBare, kclock::LATCH_BARE.read().ns);
read_op!(SeqcountOrdered, kclock::SEQCOUNT_ORDERED.read().ns);
read_op!(SeqcountBare, kclock::SEQCOUNT_BARE.read().ns);
read_op!(UnprotectedOrdered, kclock::UNPROTECTED_ORDERED.read().ns);
read_op!(UnprotectedBare, kclock::UNPROTECTED_BARE.read().ns);
read_op!(TargetRead, crate::target::read().0);

/// The latch read over the ordered counter, called out of line: what the
/// exported `nmiclock_sched_clock()` is compared with, so that the two
/// rows differ only in what the exported path adds to the read.
#[inline(never)]
fn latch_ordered_call() -> u64 {
    kclock::LATCH_ORDERED.read().ns
}

/// One acct update of the reader's record by strategy `S`: in the tick
/// mode (`TICK`: less than a tick since the last one is skipped, as most
/// system calls are) or applying every time.
struct AcctOp<S, const TICK: bool>(PhantomData<S>);

impl<S: kacct::Strategy, const TICK: bool> Op for AcctOp<S, TICK> {
    #[inline(always)]
    fn op(rec: &AcctRecord) -> u64 {
        let min_delta = if TICK {
            BENCH.tick_ns.load(Ordering::Relaxed)
        } else {
            0
        };
        kacct::bench_update::<S>(rec, min_delta);
        0
    }
}

/// Declares the table's rows, in table order, each once: [`RowId`] names
/// each, [`ROWS`] holds each with its results.
macro_rules! bench_rows {
    ($($id:ident: $op:ty, $group:ident, $reads:expr;)*) => {
        /// A row of [`ROWS`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        enum RowId {
            $($id,)*
        }

        static ROWS: [Row; [$(RowId::$id),*].len()] = [$(row::<$op>(Group::$group, $reads),)*];
    };
}

bench_rows! {
    empty: Empty, Read, Reads::Other("empty (harness)");
    floor_ordered: CounterOrdered, Read, Reads::Other(crate::arch::FLOOR_ORDERED);
    floor_bare: CounterBare, Read, Reads::Other(crate::arch::FLOOR_BARE);
    sched_clock: SchedClock, Read, Reads::Other("sched_clock()");
    local_clock: LocalClock, Read, Reads::Other("local_clock()");
    mono_fast: MonoFast, Read, Reads::Other("ktime_get_mono_fast_ns()");
    real_fast: RealFast, Read, Reads::Other("ktime_get_real_fast_ns()");
    ktime_get_ns: KtimeGetNs, Read, Reads::Other("ktime_get_ns()");
    nmiclock_sched_clock: NmiclockSchedClock, Read, Reads::Other("nmiclock_sched_clock()");
    latch_ordered_call: LatchOrderedCall, Read, Reads::Clock(&kclock::LATCH_ORDERED, " (call)");
    latch_ordered: LatchOrdered, Read, Reads::Clock(&kclock::LATCH_ORDERED, "");
    latch_bare: LatchBare, Read, Reads::Clock(&kclock::LATCH_BARE, "");
    seqcount_ordered: SeqcountOrdered, Read, Reads::Clock(&kclock::SEQCOUNT_ORDERED, "");
    seqcount_bare: SeqcountBare, Read, Reads::Clock(&kclock::SEQCOUNT_BARE, "");
    unprotected_ordered: UnprotectedOrdered, Read, Reads::Clock(&kclock::UNPROTECTED_ORDERED, "");
    unprotected_bare: UnprotectedBare, Read, Reads::Clock(&kclock::UNPROTECTED_BARE, "");
    acct_cmpxchg_tick: AcctOp<Cmpxchg, true>, AcctTick, Reads::Other("acct cmpxchg (tick)");
    acct_irqsave_tick: AcctOp<KernelIrqSave, true>, AcctTick, Reads::Other("acct irqsave (tick)");
    acct_racy_tick: AcctOp<Racy, true>, AcctTick, Reads::Other("acct racy (tick)");
    acct_cmpxchg_apply: AcctOp<Cmpxchg, false>, AcctApply, Reads::Other("acct cmpxchg (apply)");
    acct_irqsave_apply: AcctOp<KernelIrqSave, false>, AcctApply, Reads::Other("acct irqsave (apply)");
    acct_racy_apply: AcctOp<Racy, false>, AcctApply, Reads::Other("acct racy (apply)");
    target: TargetRead, Read, Reads::Target;
}

impl RowId {
    fn row(self) -> Option<&'static Row> {
        ROWS.get(self as usize)
    }
}

/// Whether `row` was (or is being) timed: every row but the target's,
/// which only with a registered target selected.
fn timed(row: &Row) -> bool {
    !matches!(row.reads, Reads::Target)
        || BENCH.target_benched.load(Ordering::Relaxed) != NOT_BENCHED
}

/// A row's name in the table.
struct RowName<'a>(&'a Row);

impl fmt::Display for RowName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0.reads {
            Reads::Other(name) => return f.pad(name),
            Reads::Clock(c, suffix) => {
                FmtBuf::<48>::from_fmt(format_args!("{}/{}{}", c.protection(), c.counter(), suffix))
            }
            Reads::Target => FmtBuf::<48>::from_fmt(format_args!(
                "target {}",
                crate::registry::Name(BENCH.target_benched.load(Ordering::Relaxed))
            )),
        };
        f.pad(name.as_str())
    }
}

/// The phases: without and with the epoch updaters.
const PHASES: [&str; 2] = ["idle", "updaters"];

/// Operations timed one by one per reader per run.
const SINGLES: u32 = 100;

/// Most runs kept (`nruns` is at most this).
const MAX_NRUNS: usize = BenchArgs::NRUNS.1 as usize;

/// Length of the stress run that times the NMI handler, in µs.
const NMI_RUN_US: u32 = 1_000_000;

const IDLE: u32 = 0;
const BUSY: u32 = 1;
const DONE: u32 = 2;

/// The bench's target index when it timed no target.
const NOT_BENCHED: usize = usize::MAX;

/// The readers' rendezvous: a generation-counting barrier.
struct Barrier {
    /// Timing readers that meet at it.
    readers: AtomicU32,
    /// Readers arrived in this generation.
    arrived: AtomicU32,
    generation: AtomicU32,
}

/// The NMI handler's cost, from a stress run.
struct NmiCost {
    /// Whether the run that measured it could start.
    measured: AtomicBool,
    /// NMI-context samples timed.
    samples: AtomicU64,
    /// Their p50, p99 and max, ns.
    p50_ns: AtomicU64,
    p99_ns: AtomicU64,
    max_ns: AtomicU64,
}

/// The benchmark: its arguments, the readers' meeting points, and what
/// it measured besides the rows.
struct Bench {
    /// [`IDLE`], [`BUSY`] or [`DONE`].
    state: AtomicU32,
    /// The arguments of the run in progress (or the last), set before the
    /// readers start.
    loops: AtomicU32,
    nruns: AtomicU32,
    update_ns: AtomicU64,
    /// The phase in progress, in [`PHASES`].
    phase: AtomicUsize,
    /// CPUs online, and how long it took, ms.
    cpus: AtomicU32,
    elapsed_ms: AtomicU64,
    /// The kernel's tick (`TICK_NSEC`), read once per benchmark.
    tick_ns: AtomicU64,
    barrier: Barrier,
    /// Kthreads whose updater runs, and timing readers done, in the phase.
    started: AtomicU32,
    finished: AtomicU32,
    /// The row being timed ([`RowId`]): what the updaters move.
    timing: AtomicUsize,
    /// Sum over the readers of this run's thousandths of a ns per operation.
    run_sum: AtomicU64,
    /// The target index the bench timed in its target row, or
    /// [`NOT_BENCHED`].
    target_benched: AtomicUsize,
    /// The NMI handler's cost.
    nmi: NmiCost,
    /// Single round trips of the ping-pong row in progress.
    pingpong_hist: LatHist,
    /// The two CPUs of the last ping-pong.
    pingpong_cpus: [AtomicU32; 2],
}

static BENCH: Bench = Bench {
    state: AtomicU32::new(IDLE),
    loops: AtomicU32::new(0),
    nruns: AtomicU32::new(0),
    update_ns: AtomicU64::new(0),
    phase: AtomicUsize::new(0),
    cpus: AtomicU32::new(0),
    elapsed_ms: AtomicU64::new(0),
    tick_ns: AtomicU64::new(0),
    barrier: Barrier {
        readers: AtomicU32::new(0),
        arrived: AtomicU32::new(0),
        generation: AtomicU32::new(0),
    },
    started: AtomicU32::new(0),
    finished: AtomicU32::new(0),
    timing: AtomicUsize::new(RowId::empty as usize),
    run_sum: AtomicU64::new(0),
    target_benched: AtomicUsize::new(NOT_BENCHED),
    nmi: NmiCost {
        measured: AtomicBool::new(false),
        samples: AtomicU64::new(0),
        p50_ns: AtomicU64::new(0),
        p99_ns: AtomicU64::new(0),
        max_ns: AtomicU64::new(0),
    },
    pingpong_hist: LatHist::new(),
    pingpong_cpus: [const { AtomicU32::new(0) }; 2],
};

/// One ping-pong row: what it plays, and what it measured.
struct Pingpong {
    name: &'static str,
    design: Wake,
    poll_us: u32,
    /// Whether it was measured.
    measured: AtomicBool,
    /// The median over runs of ns per round trip, thousandths.
    median_milli: AtomicU64,
    /// Single round trips' p50, p99 and max, ns.
    p50_ns: AtomicU64,
    p99_ns: AtomicU64,
    max_ns: AtomicU64,
    /// Polling ns per round trip (both CPUs), thousandths.
    polled_milli: AtomicU64,
}

const fn pingpong(name: &'static str, design: Wake, poll_us: u32) -> Pingpong {
    Pingpong {
        name,
        design,
        poll_us,
        measured: AtomicBool::new(false),
        median_milli: AtomicU64::new(0),
        p50_ns: AtomicU64::new(0),
        p99_ns: AtomicU64::new(0),
        max_ns: AtomicU64::new(0),
        polled_milli: AtomicU64::new(0),
    }
}

/// The ping-pong rows. The first, `sleep`, is their ratio's reference.
static PINGPONG: [Pingpong; 4] = [
    pingpong("pingpong sleep", Wake::Sleep, 0),
    pingpong("pingpong poll 10us", Wake::Poll, 10),
    pingpong("pingpong poll 50us", Wake::Poll, 50),
    pingpong("pingpong poll 200us", Wake::Poll, 200),
];

/// Round trips per ping-pong run.
const PINGPONG_TRIPS: u32 = 200;

/// Plays every ping-pong row `nruns` times.
fn measure_pingpong(nruns: usize) -> Result {
    let hist = &BENCH.pingpong_hist;
    for row in &PINGPONG {
        let mut per_trip = [0u64; MAX_NRUNS];
        let mut polled = 0u64;
        hist.clear();
        for slot in per_trip.iter_mut().take(nruns) {
            let score = kwake::pingpong(
                row.design,
                u64::from(row.poll_us) * 1_000,
                PINGPONG_TRIPS,
                hist,
            )?;
            *slot = score.total_ns.saturating_mul(1_000) / u64::from(PINGPONG_TRIPS);
            polled = polled.saturating_add(score.polled_ns);
            let (a, b) = score.cpus;
            for (c, v) in BENCH.pingpong_cpus.iter().zip([a, b]) {
                c.store(v, Ordering::Relaxed);
            }
        }
        let trips = u64::from(PINGPONG_TRIPS) * nruns as u64;
        for (d, v) in [
            (
                &row.median_milli,
                median(per_trip.get_mut(..nruns).unwrap_or(&mut [])),
            ),
            (&row.p50_ns, hist.quantile(500)),
            (&row.p99_ns, hist.quantile(990)),
            (&row.max_ns, hist.max()),
            (
                &row.polled_milli,
                polled.saturating_mul(1_000) / trips.max(1),
            ),
        ] {
            d.store(v, Ordering::Relaxed);
        }
        row.measured.store(true, Ordering::Relaxed);
    }
    hist.clear();
    Ok(())
}

/// Waits until every reader has arrived. The last to arrive opens the next
/// generation; the others spin (task context, so they let the scheduler
/// in now and then).
fn barrier() {
    let b = &BENCH.barrier;
    let gen = b.generation.load(Ordering::Acquire);
    let arrived = b.arrived.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
    if arrived >= b.readers.load(Ordering::Relaxed) {
        b.arrived.store(0, Ordering::Relaxed);
        b.generation.store(gen.wrapping_add(1), Ordering::Release);
        return;
    }
    let mut spins = 0u32;
    while b.generation.load(Ordering::Acquire) == gen {
        core::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 4096 == 0 {
            ffi::cpu::cond_resched();
        }
    }
}

/// The updaters' hrtimer callback (hard-IRQ context, one per CPU): moves
/// the epoch of the clock being read, or of the running one, without the
/// `tear_window_ns` fault injection (a benchmark measures the design, not
/// the injected fault).
fn updater() -> u64 {
    let reads = ROWS
        .get(BENCH.timing.load(Ordering::Relaxed))
        .map(|r| r.reads);
    match reads {
        Some(Reads::Clock(c, _)) => {
            let _ = c.update_epoch(&mut || {});
        }
        // The target's own writer step, marked as a run's is (a target
        // without an update: nothing).
        Some(Reads::Target) => crate::target::update_step(),
        _ => {
            if let Some(c) = kclock::CLOCKS.get(kclock::running_index()) {
                let _ = c.update_epoch(&mut || {});
            }
        }
    }
    BENCH.update_ns.load(Ordering::Relaxed)
}

/// TSC cycles of the cheapest of many empty pairs of ordered reads: the
/// timing overhead taken off every single-operation figure.
fn timing_overhead() -> u64 {
    ffi::cpu::with_preemption_disabled(|| {
        (0..1000)
            .map(|_| {
                let t0 = Ordered.read();
                Ordered.read().wrapping_sub(t0)
            })
            .min()
            .unwrap_or(0)
    })
}

/// Stores `row`'s summary for a phase from its runs and its histogram:
/// the median over runs, the single operations' quantiles, and the ratio
/// to its group's reference taken within each run, as the median over
/// runs with the 10th and 90th percentiles (its noise). The reference
/// rows are summarized with every other row, after the phase.
fn summarize(row: &Row, phase: usize, nruns: usize) {
    let (Some(runs), Some(base), Some(sum)) = (
        row.runs.get(phase),
        row.group.reference().row().and_then(|r| r.runs.get(phase)),
        row.summary.get(phase),
    ) else {
        return;
    };
    let mut v = [0u64; MAX_NRUNS];
    let mut r = [0u64; MAX_NRUNS];
    let mut nr = 0;
    for ((d, s), b) in v.iter_mut().zip(runs.iter()).zip(base.iter()).take(nruns) {
        *d = s.load(Ordering::Relaxed);
        if let (Some(x), Some(slot)) = (ratio_milli(*d, b.load(Ordering::Relaxed)), r.get_mut(nr)) {
            *slot = x;
            nr += 1;
        }
    }
    let ratios = r.get_mut(..nr).unwrap_or(&mut []);
    ratios.sort_unstable();
    // Nearest rank: of 3 runs the 10th percentile is the least, the 90th
    // the greatest.
    let at = |q: usize| {
        ratios
            .get((nr * q).div_ceil(100).saturating_sub(1))
            .copied()
            .unwrap_or(0)
    };
    let (lo, hi) = (at(10), at(90));
    let hist = &row.hist;
    for (d, x) in [
        (
            &sum.median_milli,
            median(v.get_mut(..nruns).unwrap_or(&mut [])),
        ),
        (&sum.p50_ns, hist.quantile(500)),
        (&sum.p99_ns, hist.quantile(990)),
        (&sum.max_ns, hist.max()),
        (&sum.ratio, median(ratios)),
        (&sum.ratio_lo, lo),
        (&sum.ratio_hi, hi),
    ] {
        d.store(x, Ordering::Relaxed);
    }
    sum.has_ratio.store(nr > 0, Ordering::Relaxed);
}

/// One CPU's reader, for one phase (a kthread bound to the CPU).
fn reader(_k: &Kthread, cpu: u32) {
    // CPU hotplug waits while the readers run: the count is stable.
    let online = ffi::cpu::num_online_cpus();
    let n = timing_readers(online);
    BENCH.barrier.readers.store(n, Ordering::Relaxed);
    // The timing readers are the first n online CPUs, as refscale's
    // (reader i on CPU i): the same CPUs in every run and boot, so that
    // its figure and ours are taken on the same CPU.
    let me = (0..cpu).filter(|&c| ffi::cpu::online(c)).count() as u32;
    let leader = me == 0;
    let phase = BENCH.phase.load(Ordering::Relaxed);
    let loops = BENCH.loops.load(Ordering::Relaxed).max(1);
    let nruns = (BENCH.nruns.load(Ordering::Relaxed) as usize).min(MAX_NRUNS);
    let (mult, shift) = kclock::conversion_in_use();
    let overhead = timing_overhead();
    // The updater of this CPU: started here, so it fires here.
    let timer = if phase == 1 {
        HrTimer::new(updater)
            .inspect_err(|_| pr_err!("bench: no updater on this CPU: out of memory\n"))
            .ok()
    } else {
        None
    };
    if let Some(t) = &timer {
        t.start(BENCH.update_ns.load(Ordering::Relaxed));
    }
    // Every CPU's updater runs before the first row is timed.
    BENCH.started.fetch_add(1, Ordering::AcqRel);
    while BENCH.started.load(Ordering::Acquire) < online {
        core::hint::spin_loop();
        ffi::cpu::cond_resched();
    }
    if me >= n {
        // Not a timing reader: idle (but for the updater) until they are
        // done, as refscale leaves the CPUs without a reader. Waking every
        // 1 ms cost the reader's vCPU 10 % under single-threaded TCG.
        while BENCH.finished.load(Ordering::Acquire) < n {
            ffi::cpu::sleep_us(20_000);
        }
        return;
    }
    let rec = AcctRecord::new();
    // Run-major: each run times every row back to back, so that a row and
    // its ratio's reference share the run's conditions.
    for run in 0..nruns {
        for (id, row) in ROWS.iter().enumerate() {
            if !timed(row) {
                continue;
            }
            if leader {
                BENCH.timing.store(id, Ordering::Relaxed);
            }
            barrier();
            rec.reset(kclock::read().ns);
            if run == 0 {
                // Warm caches and branch predictors, as refscale does.
                (row.block)(&rec, loops.min(1_000));
            }
            let timed = || {
                let t0 = ffi::time::mono_fast_ns();
                (row.block)(&rec, loops);
                ffi::time::mono_fast_ns().wrapping_sub(t0)
            };
            // Idle: interrupts off, as refscale times (no tick inside a
            // run). With updaters, preemption off only: this CPU's
            // updater must be able to interrupt the reads it disturbs.
            let ns = if phase == 0 {
                ffi::cpu::with_irqs_disabled(timed)
            } else {
                ffi::cpu::with_preemption_disabled(timed)
            };
            BENCH.run_sum.fetch_add(
                ns.saturating_mul(1_000) / u64::from(loops),
                Ordering::Relaxed,
            );
            ffi::cpu::with_preemption_disabled(|| {
                for _ in 0..SINGLES {
                    let cyc = (row.single)(&rec).saturating_sub(overhead);
                    row.hist.record(cyc_to_ns(cyc, mult, shift));
                }
            });
            barrier();
            if leader {
                let avg = BENCH.run_sum.swap(0, Ordering::Relaxed) / u64::from(n.max(1));
                if let Some(slot) = row.runs.get(phase).and_then(|r| r.get(run)) {
                    slot.store(avg, Ordering::Relaxed);
                }
            }
        }
        ffi::cpu::cond_resched();
    }
    if leader {
        for row in &ROWS {
            summarize(row, phase, nruns);
            row.hist.clear();
        }
    }
    BENCH.finished.fetch_add(1, Ordering::Release);
    // Dropping the timer cancels it.
    drop(timer);
}

/// How many CPUs time the operations, of `online`: refscale's default
/// (`nreaders=-1`), 75 % of them, at least one. Timing on every CPU at
/// once measures the emulator's contention between vCPUs, not the read
/// (under QEMU TCG a read then costs several times refscale's).
fn timing_readers(online: u32) -> u32 {
    ((online >> 1) + (online >> 2)).max(1)
}

/// Times the NMI handler: a one-second stress run with the settings in
/// force, nested in the benchmark's activity, whose NMI-context samples
/// `torture` times.
fn measure_nmi_handler(stress: &torture::Stress, bench: &Guard) {
    let cost = &BENCH.nmi;
    cost.measured.store(false, Ordering::Relaxed);
    let Ok(guard) = bench.nest(Activity::Stress) else {
        return;
    };
    if stress.start_with(guard).is_err() {
        return;
    }
    ffi::cpu::sleep_us(NMI_RUN_US);
    // A target unregistered meanwhile may have stopped it already: then
    // wait for that stop, which hands the activity back last.
    let _ = torture::stop("bench: NMI handler timed");
    stress.wait_stopped();
    bench.wait_handed_back();
    let h = &torture::NMI_HANDLER_NS;
    for (d, v) in [
        (&cost.samples, h.count()),
        (&cost.p50_ns, h.quantile(500)),
        (&cost.p99_ns, h.quantile(990)),
        (&cost.max_ns, h.max()),
    ] {
        d.store(v, Ordering::Relaxed);
    }
    cost.measured.store(true, Ordering::Relaxed);
}

/// Handles a write to `bench`: parses it, runs the benchmark (blocking).
/// `EINVAL` for a bad write, `EBUSY` while anything else runs; nothing
/// runs then. A signal ends it at the end of the phase or ping-pong row in
/// progress (the readers do not poll), with `EINTR` and no results; one
/// that comes during the NMI runs at its end lets it finish.
pub(crate) fn write(stress: &torture::Stress, input: &[u8]) -> Result {
    let args = parse_args(input).map_err(|e| {
        pr_err!(
            "bench: bad argument '{}'; want {}\n",
            kernel::str::BStr::from_bytes(e.token),
            e.want
        );
        EINVAL
    })?;
    let guard = Guard::try_begin(Activity::Bench, "bench")?;
    BENCH.state.store(BUSY, Ordering::Release);
    let t0 = ffi::time::local_clock();
    BENCH.loops.store(args.loops, Ordering::Relaxed);
    BENCH.nruns.store(args.nruns, Ordering::Relaxed);
    BENCH
        .update_ns
        .store(u64::from(args.update_us) * 1_000, Ordering::Relaxed);
    BENCH
        .tick_ns
        .store(kacct::min_delta_ns(), Ordering::Relaxed);
    BENCH
        .cpus
        .store(ffi::cpu::num_online_cpus(), Ordering::Relaxed);
    kclock::start_idle_clocks(&guard);
    BENCH.pingpong_hist.clear();
    for row in &ROWS {
        row.hist.clear();
    }
    BENCH.run_sum.store(0, Ordering::Relaxed);
    // A registered target selected: pinned for the read phases, timed in
    // the last row (a built-in one has its own row already).
    let index = crate::settings::target_index();
    let pin = (index >= crate::registry::BUILTIN.len())
        .then(crate::target::Pinned::selected)
        .and_then(|p| p.ok());
    BENCH.target_benched.store(
        if pin.is_some() { index } else { NOT_BENCHED },
        Ordering::Relaxed,
    );
    let mut ret = Ok(());
    for phase in 0..PHASES.len() {
        BENCH.phase.store(phase, Ordering::Relaxed);
        BENCH.barrier.arrived.store(0, Ordering::Relaxed);
        BENCH.started.store(0, Ordering::Relaxed);
        BENCH.finished.store(0, Ordering::Relaxed);
        ret = ffi::kthread::run_on_each_cpu(&reader);
        if ret.is_err() {
            break;
        }
    }
    BENCH.timing.store(RowId::empty as usize, Ordering::Relaxed);
    for row in &PINGPONG {
        row.measured.store(false, Ordering::Relaxed);
    }
    // The NMI runs pin the target themselves.
    drop(pin);
    if ret.is_ok() && ffi::cpu::num_online_cpus() >= 2 {
        ret = measure_pingpong(args.nruns as usize);
    }
    if ret.is_ok() {
        measure_nmi_handler(stress, &guard);
        torture::ceiling::measure(stress, &guard);
    }
    BENCH.elapsed_ms.store(
        ffi::time::local_clock().wrapping_sub(t0) / 1_000_000,
        Ordering::Relaxed,
    );
    match ret {
        Ok(()) => {
            BENCH.state.store(DONE, Ordering::Release);
            pr_info!(
                "bench: done in {} ms: loops={} nruns={} update_us={} on {} CPUs; see /sys/kernel/debug/nmiclock/bench\n",
                BENCH.elapsed_ms.load(Ordering::Relaxed),
                args.loops,
                args.nruns,
                args.update_us,
                BENCH.cpus.load(Ordering::Relaxed)
            );
        }
        Err(e) if e == EINTR => {
            BENCH.state.store(IDLE, Ordering::Release);
            pr_info!(
                "bench: interrupted by a signal after {} ms (at the end of a phase or ping-pong row); no results\n",
                BENCH.elapsed_ms.load(Ordering::Relaxed)
            );
        }
        Err(e) => {
            BENCH.state.store(IDLE, Ordering::Release);
            pr_err!("bench: cannot start the readers (error {})\n", e.to_errno());
        }
    }
    ret
}

/// A ratio's spread: `lo-hi`, two decimals each.
struct Spread(Option<(u64, u64)>);

impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((lo, hi)) => Cell::from_fmt(format_args!(
                "{}.{:02}-{}.{:02}",
                lo / 1000,
                (lo % 1000) / 10,
                hi / 1000,
                (hi % 1000) / 10
            ))
            .fmt(f),
            None => f.pad("-"),
        }
    }
}

/// A ratio (two decimals), or `-` when its reference read as 0.
struct Ratio(Option<u64>);

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(m) => Cell::from_fmt(format_args!("{}.{:02}", m / 1000, (m % 1000) / 10)).fmt(f),
            None => f.pad("-"),
        }
    }
}

/// Writes the ping-pong rows: the table's columns, the ratio against
/// `pingpong sleep`, and the polling CPU time per round trip.
fn show_pingpong(w: &mut impl Write) -> fmt::Result {
    let Some(reference) = PINGPONG
        .first()
        .filter(|r| r.measured.load(Ordering::Relaxed))
    else {
        return writeln!(
            w,
            "pingpong  pingpong: not measured (fewer than two CPUs online)"
        );
    };
    let base = reference.median_milli.load(Ordering::Relaxed);
    for row in &PINGPONG {
        let [median, p50, p99, max, polled] = [
            &row.median_milli,
            &row.p50_ns,
            &row.p99_ns,
            &row.max_ns,
            &row.polled_milli,
        ]
        .map(|a| a.load(Ordering::Relaxed));
        writeln!(
            w,
            "{:<9} {:<26} {:>10} {:>8} {:>8} {:>9} {:>7}  poll_ns={} speedup={}x",
            "pingpong",
            row.name,
            Cell::from_fmt(format_args!("{}", Milli(median))),
            p50,
            p99,
            max,
            Ratio(ratio_milli(median, base)),
            Milli(polled),
            Ratio(ratio_milli(base, median))
        )?;
    }
    let [a, b] = BENCH
        .pingpong_cpus
        .each_ref()
        .map(|c| c.load(Ordering::Relaxed));
    writeln!(
        w,
        "# pingpong: {} round trips per run between kthreads on cpu{} and cpu{}, as perf bench sched pipe; median: ns per round trip; ratio: over pingpong sleep's (speedup: its inverse); poll_ns: CPU time both spent polling, per round trip",
        PINGPONG_TRIPS, a, b
    )
}

/// A table cell, so that `{:>10}` pads what writes in pieces.
type Cell = FmtBuf<32>;

/// Where the bench ran, and what that says of its times (the header's
/// `# environment:` line).
struct EnvironmentNote(Environment);

impl fmt::Display for EnvironmentNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env = self.0;
        match env {
            Environment::QemuTcg => write!(
                f,
                "{env}: time is emulated; compare ratios within this run only"
            ),
            Environment::Kvm => write!(
                f,
                "{env}: a virtual machine with hardware virtualization; times are close to the host's, NMIs are virtualized"
            ),
            Environment::OtherHypervisor(_) => write!(
                f,
                "{env}: a virtual machine under a hypervisor known by its CPUID signature only; compare ratios within this run"
            ),
            Environment::BareMetal => write!(f, "{env}"),
        }
    }
}

/// Writes the `bench` file: the table, then refscale's tables.
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    let state = BENCH.state.load(Ordering::Acquire);
    let nruns = BENCH.nruns.load(Ordering::Relaxed) as usize;
    let cpus = BENCH.cpus.load(Ordering::Relaxed);
    match state {
        BUSY => return writeln!(w, "state: running"),
        IDLE => {
            return writeln!(
                w,
                "state: idle (write run, or loops=N nruns=N update_us=N, to run the benchmark)"
            )
        }
        _ => {}
    }
    writeln!(
        w,
        "# nmiclock bench: {} CPUs ({} timing, as refscale), loops={} nruns={} update_us={}, {} ms",
        cpus,
        timing_readers(cpus),
        BENCH.loops.load(Ordering::Relaxed),
        nruns,
        BENCH.update_ns.load(Ordering::Relaxed) / 1_000,
        BENCH.elapsed_ms.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "# environment: {}",
        EnvironmentNote(ffi::hypervisor::environment())
    )?;
    writeln!(w, "# median: ns per operation, median over runs of the mean over timing CPUs of loops operations in a row")?;
    writeln!(w, "# p50 p99 max: ns of single operations timed one by one ({SINGLES} per CPU per run), timing overhead taken off")?;
    writeln!(w, "# ratio: over sched_clock() (reads) or cmpxchg in the same mode (acct), taken within each run (every row is timed in every run, back to back); median over runs, and spread: its 10th-90th percentile")?;
    writeln!(
        w,
        "{:<9} {:<26} {:>10} {:>8} {:>8} {:>9} {:>7} {:>11}",
        "phase", "operation", "median", "p50", "p99", "max", "ratio", "spread"
    )?;
    for (phase, pname) in PHASES.iter().enumerate() {
        for row in ROWS.iter().filter(|r| timed(r)) {
            let Some(sum) = row.summary.get(phase) else {
                continue;
            };
            let ratio = sum.ratio();
            writeln!(
                w,
                "{:<9} {:<26} {:>10} {:>8} {:>8} {:>9} {:>7} {:>11}",
                pname,
                RowName(row),
                Cell::from_fmt(format_args!(
                    "{}",
                    Milli(sum.median_milli.load(Ordering::Relaxed))
                )),
                sum.p50_ns.load(Ordering::Relaxed),
                sum.p99_ns.load(Ordering::Relaxed),
                sum.max_ns.load(Ordering::Relaxed),
                Ratio(ratio.map(|r| r.0)),
                Spread(ratio.map(|r| r.1))
            )?;
        }
    }
    show_pingpong(w)?;
    let cost = &BENCH.nmi;
    let [samples, p50, p99, max] = [&cost.samples, &cost.p50_ns, &cost.p99_ns, &cost.max_ns]
        .map(|a| a.load(Ordering::Relaxed));
    if !cost.measured.load(Ordering::Relaxed) {
        writeln!(
            w,
            "nmi       nmi handler: not measured (a stress run could not start)"
        )?;
    } else if samples == 0 {
        writeln!(
            w,
            "nmi       nmi handler: no NMI-context samples (nmi_source={})",
            torture::show::source_used()
        )?;
    } else {
        writeln!(
            w,
            "{:<9} {:<26} {:>10} {:>8} {:>8} {:>9} {:>7}",
            "nmi", "nmi handler (sample)", "-", p50, p99, max, "-"
        )?;
        writeln!(
            w,
            "# nmi handler: {} NMIs (nmi_source={}) in a 1 s stress run, each timed whole",
            samples,
            torture::show::source_used()
        )?;
    }
    for (source, measured) in torture::ceiling::each() {
        match measured {
            torture::ceiling::Measured::Rate(v) => writeln!(
                w,
                "nmi       nmi ceiling ({}): {} samples/s, empty handler, period_us={}, {} CPUs, {} ms",
                source.name(),
                v,
                torture::ceiling::PERIOD_NS / 1_000,
                cpus,
                torture::ceiling::RUN_MS
            )?,
            torture::ceiling::Measured::CouldNotStart(errno) => writeln!(
                w,
                "nmi       nmi ceiling ({}): not measured: the source could not start (error -{})",
                source.name(),
                errno
            )?,
            torture::ceiling::Measured::Not => {}
        }
    }
    // refscale's format, one table per row and phase, for
    // kvm-recheck-refscale.sh (split per table first).
    for (phase, pname) in PHASES.iter().enumerate() {
        for row in ROWS.iter().filter(|r| timed(r)) {
            writeln!(w, "ref-scale: {} {}", pname, RowName(row))?;
            writeln!(w, "Runs\tTime(ns)")?;
            let runs = row.runs.get(phase);
            for (i, v) in runs.into_iter().flatten().take(nruns).enumerate() {
                writeln!(w, "{}\t{}", i + 1, Milli(v.load(Ordering::Relaxed)))?;
            }
        }
    }
    Ok(())
}
