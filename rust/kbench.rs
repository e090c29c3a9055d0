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
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

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

/// One line of the table.
struct Row {
    name: &'static str,
    group: Group,
    block: fn(&AcctRecord, u32),
    single: fn(&AcctRecord) -> u64,
}

const fn row<O: Op>(name: &'static str, group: Group) -> Row {
    Row {
        name,
        group,
        block: block::<O>,
        single: single::<O>,
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
read_op!(NmiclockSchedClock, kclock::nmiclock_sched_clock());
read_op!(LatchOrdered, kclock::LATCH_ORDERED.read().ns);
read_op!(LatchBare, kclock::LATCH_BARE.read().ns);
read_op!(SeqcountOrdered, kclock::SEQCOUNT_ORDERED.read().ns);
read_op!(SeqcountBare, kclock::SEQCOUNT_BARE.read().ns);
read_op!(UnprotectedOrdered, kclock::UNPROTECTED_ORDERED.read().ns);
read_op!(UnprotectedBare, kclock::UNPROTECTED_BARE.read().ns);
read_op!(TargetRead, crate::target::read().0);

/// The kernel's tick (`TICK_NSEC`), read once per benchmark.
static TICK_NS: AtomicU64 = AtomicU64::new(0);

/// One acct update of the reader's record by strategy `S`: in the tick
/// mode (`TICK`: less than a tick since the last one is skipped, as most
/// system calls are) or applying every time.
struct AcctOp<S, const TICK: bool>(PhantomData<S>);

impl<S: kacct::Strategy, const TICK: bool> Op for AcctOp<S, TICK> {
    #[inline(always)]
    fn op(rec: &AcctRecord) -> u64 {
        let min_delta = if TICK {
            TICK_NS.load(Ordering::Relaxed)
        } else {
            0
        };
        kacct::bench_update::<S>(rec, min_delta);
        0
    }
}

/// Out of range of `kclock`'s table: the updaters move the running clock.
const RUNNING: usize = usize::MAX;
/// Out of range too: the updaters call the registered target's `update`.
const TARGET_UPDATE: usize = usize::MAX - 1;

/// The clock the updaters move while `row` runs: the one it reads, for the
/// rows named `protection/counter`; for the target row, the target's own
/// update; else the running clock.
fn update_target(row: &Row) -> usize {
    if row.name == TARGET_ROW_NAME {
        return TARGET_UPDATE;
    }
    row.name
        .split_once('/')
        .and_then(|(p, c)| kclock::index_of(p, c))
        .unwrap_or(RUNNING)
}

/// Row of `sched_clock()`, the reads' reference.
const SCHED_CLOCK_ROW: usize = 3;
/// First row of each acct mode (`cmpxchg`, the acct reference).
const ACCT_TICK_ROW: usize = 15;
const ACCT_APPLY_ROW: usize = 18;

const NROWS: usize = 22;

/// The last row: the registered target the setting `target` selects,
/// timed only when it selects one (the bench pins it meanwhile, as a run
/// does); shown as `target NAME`.
const TARGET_ROW: usize = NROWS - 1;
const TARGET_ROW_NAME: &str = "target";
/// The target index the last bench timed in its target row, or
/// [`NOT_BENCHED`].
static TARGET_BENCHED: AtomicUsize = AtomicUsize::new(NOT_BENCHED);
const NOT_BENCHED: usize = usize::MAX;

/// Whether row `ri` was (or is being) timed: every row but the target's,
/// which only with a registered target selected.
fn timed_row(ri: usize) -> bool {
    ri != TARGET_ROW || TARGET_BENCHED.load(Ordering::Relaxed) != NOT_BENCHED
}

/// A row's name in the table: its own, or for the target row `target
/// NAME`.
struct RowName(usize);

impl fmt::Display for RowName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = ROWS.get(self.0).map_or("?", |r| r.name);
        if self.0 != TARGET_ROW {
            return f.pad(name);
        }
        let target = crate::registry::Name(TARGET_BENCHED.load(Ordering::Relaxed));
        f.pad(FmtBuf::<48>::from_fmt(format_args!("{name} {target}")).as_str())
    }
}

/// This architecture's names of the counter and clock rows.
const B: [&str; 8] = crate::arch::BENCH_ROWS;

/// Whether `row` is `prefix` then `counter`, at compile time.
const fn named(row: &str, prefix: &str, counter: &str) -> bool {
    let (r, p, c) = (row.as_bytes(), prefix.as_bytes(), counter.as_bytes());
    if r.len() != p.len() + c.len() {
        return false;
    }
    let mut i = 0;
    while i < r.len() {
        let want = if i < p.len() { p[i] } else { c[i - p.len()] };
        if r[i] != want {
            return false;
        }
        i += 1;
    }
    true
}

// The clock rows must name the counters as the setting `counter` does, or
// `update_target()` would not find their clocks.
const _: () = {
    let [o, b] = [
        crate::choices::CounterRead::Ordered.const_name(),
        crate::choices::CounterRead::Bare.const_name(),
    ];
    assert!(named(B[2], "latch/", o) && named(B[3], "latch/", b));
    assert!(named(B[4], "seqcount/", o) && named(B[5], "seqcount/", b));
    assert!(named(B[6], "unprotected/", o) && named(B[7], "unprotected/", b));
};

static ROWS: [Row; NROWS] = [
    row::<Empty>("empty (harness)", Group::Read),
    row::<CounterOrdered>(B[0], Group::Read),
    row::<CounterBare>(B[1], Group::Read),
    row::<SchedClock>("sched_clock()", Group::Read),
    row::<LocalClock>("local_clock()", Group::Read),
    row::<MonoFast>("ktime_get_mono_fast_ns()", Group::Read),
    row::<RealFast>("ktime_get_real_fast_ns()", Group::Read),
    row::<KtimeGetNs>("ktime_get_ns()", Group::Read),
    row::<NmiclockSchedClock>("nmiclock_sched_clock()", Group::Read),
    row::<LatchOrdered>(B[2], Group::Read),
    row::<LatchBare>(B[3], Group::Read),
    row::<SeqcountOrdered>(B[4], Group::Read),
    row::<SeqcountBare>(B[5], Group::Read),
    row::<UnprotectedOrdered>(B[6], Group::Read),
    row::<UnprotectedBare>(B[7], Group::Read),
    row::<AcctOp<Cmpxchg, true>>("acct cmpxchg (tick)", Group::AcctTick),
    row::<AcctOp<KernelIrqSave, true>>("acct irqsave (tick)", Group::AcctTick),
    row::<AcctOp<Racy, true>>("acct racy (tick)", Group::AcctTick),
    row::<AcctOp<Cmpxchg, false>>("acct cmpxchg (apply)", Group::AcctApply),
    row::<AcctOp<KernelIrqSave, false>>("acct irqsave (apply)", Group::AcctApply),
    row::<AcctOp<Racy, false>>("acct racy (apply)", Group::AcctApply),
    row::<TargetRead>(TARGET_ROW_NAME, Group::Read),
];

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

static STATE: AtomicU32 = AtomicU32::new(IDLE);

// The run in progress (set by the writer before the readers start).
static LOOPS: AtomicU32 = AtomicU32::new(0);
static NRUNS: AtomicU32 = AtomicU32::new(0);
static UPDATE_NS: AtomicU64 = AtomicU64::new(0);
static PHASE: AtomicUsize = AtomicUsize::new(0);
static CPUS: AtomicU32 = AtomicU32::new(0);
static ELAPSED_MS: AtomicU64 = AtomicU64::new(0);

// The readers' rendezvous: a generation-counting barrier.
static READERS: AtomicU32 = AtomicU32::new(0);
static JOINED: AtomicU32 = AtomicU32::new(0);
static ARRIVED: AtomicU32 = AtomicU32::new(0);
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// Kthreads whose updater runs, and timing readers done, in the phase.
static STARTED: AtomicU32 = AtomicU32::new(0);
static FINISHED: AtomicU32 = AtomicU32::new(0);

/// The clock the updaters move (a `kclock` table index, or [`RUNNING`]).
static UPDATE_TARGET: AtomicUsize = AtomicUsize::new(RUNNING);

/// Sum over the readers of this run's thousandths of a ns per operation.
static RUN_SUM: AtomicU64 = AtomicU64::new(0);
/// Single-operation costs of the row in progress.
static HIST: LatHist = LatHist::new();

/// Per row and phase: each run's thousandths of a ns per operation.
static RUNS: [[[AtomicU64; MAX_NRUNS]; 2]; NROWS] =
    [const { [const { [const { AtomicU64::new(0) }; MAX_NRUNS] }; 2] }; NROWS];

/// Per row and phase: median (thousandths of a ns), p50, p99, max (ns),
/// the ratio to the reference within each run, median, 10th and 90th
/// percentile (thousandths), and whether there is a ratio (1).
static SUMMARY: [[[AtomicU64; 8]; 2]; NROWS] =
    [const { [const { [const { AtomicU64::new(0) }; 8] }; 2] }; NROWS];

/// Single-operation costs of each row, for the phase in progress.
static HISTS: [LatHist; NROWS] = [const { LatHist::new() }; NROWS];

/// The NMI handler's cost: samples, p50, p99, max (ns); and whether the run
/// that measured it could start (0: no, 1: yes).
static NMI: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// The ping-pong rows: name, design, poll window in µs. The first,
/// `sleep`, is their ratio's reference.
const PINGPONG: [(&str, Wake, u32); 4] = [
    ("pingpong sleep", Wake::Sleep, 0),
    ("pingpong poll 10us", Wake::Poll, 10),
    ("pingpong poll 50us", Wake::Poll, 50),
    ("pingpong poll 200us", Wake::Poll, 200),
];

/// Round trips per ping-pong run.
const PINGPONG_TRIPS: u32 = 200;

/// Per ping-pong row: median over runs of ns per round trip (thousandths),
/// p50, p99, max of single round trips (ns), polling ns per round trip
/// (both CPUs, thousandths), and whether it was measured (1).
static PINGPONG_SUMMARY: [[AtomicU64; 6]; PINGPONG.len()] =
    [const { [const { AtomicU64::new(0) }; 6] }; PINGPONG.len()];

/// The two CPUs of the last ping-pong.
static PINGPONG_CPUS: [AtomicU32; 2] = [const { AtomicU32::new(0) }; 2];

/// Plays every ping-pong row `nruns` times.
fn measure_pingpong(nruns: usize) -> Result {
    for (row, (_, design, poll_us)) in PINGPONG_SUMMARY.iter().zip(PINGPONG) {
        let mut per_trip = [0u64; MAX_NRUNS];
        let mut polled = 0u64;
        HIST.clear();
        for slot in per_trip.iter_mut().take(nruns) {
            let score = kwake::pingpong(design, u64::from(poll_us) * 1_000, PINGPONG_TRIPS, &HIST)?;
            *slot = score.total_ns.saturating_mul(1_000) / u64::from(PINGPONG_TRIPS);
            polled = polled.saturating_add(score.polled_ns);
            let (a, b) = score.cpus;
            PINGPONG_CPUS[0].store(a, Ordering::Relaxed);
            PINGPONG_CPUS[1].store(b, Ordering::Relaxed);
        }
        let trips = u64::from(PINGPONG_TRIPS) * nruns as u64;
        let values = [
            median(per_trip.get_mut(..nruns).unwrap_or(&mut [])),
            HIST.quantile(500),
            HIST.quantile(990),
            HIST.max(),
            polled.saturating_mul(1_000) / trips.max(1),
            1,
        ];
        for (d, v) in row.iter().zip(values) {
            d.store(v, Ordering::Relaxed);
        }
    }
    HIST.clear();
    Ok(())
}

/// Waits until every reader has arrived. The last to arrive opens the next
/// generation; the others spin (task context, so they let the scheduler
/// in now and then).
fn barrier() {
    let gen = GENERATION.load(Ordering::Acquire);
    let arrived = ARRIVED.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
    if arrived >= READERS.load(Ordering::Relaxed) {
        ARRIVED.store(0, Ordering::Relaxed);
        GENERATION.store(gen.wrapping_add(1), Ordering::Release);
        return;
    }
    let mut spins = 0u32;
    while GENERATION.load(Ordering::Acquire) == gen {
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
    let target = match UPDATE_TARGET.load(Ordering::Relaxed) {
        RUNNING => kclock::running_index(),
        TARGET_UPDATE => {
            // The target's own writer step, marked as a run's is (a
            // target without an update: nothing).
            crate::target::update_step();
            return UPDATE_NS.load(Ordering::Relaxed);
        }
        i => i,
    };
    if let Some(c) = kclock::CLOCKS.get(target) {
        let _ = c.update_epoch(&mut || {});
    }
    UPDATE_NS.load(Ordering::Relaxed)
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

/// The reference row of a group, for the ratio column.
fn reference(group: Group) -> usize {
    match group {
        Group::Read => SCHED_CLOCK_ROW,
        Group::AcctTick => ACCT_TICK_ROW,
        Group::AcctApply => ACCT_APPLY_ROW,
    }
}

/// Stores a row's summary for a phase from its runs and its histogram:
/// the median over runs, the single operations' quantiles, and the ratio
/// to its reference row taken within each run, as the median over runs
/// with the 10th and 90th percentiles (its noise). The reference rows are
/// summarized with every other row, after the phase.
fn summarize(ri: usize, group: Group, phase: usize, nruns: usize) {
    let (Some(runs), Some(base), Some(sum), Some(hist)) = (
        RUNS.get(ri).and_then(|r| r.get(phase)),
        RUNS.get(reference(group)).and_then(|r| r.get(phase)),
        SUMMARY.get(ri).and_then(|r| r.get(phase)),
        HISTS.get(ri),
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
    let values = [
        median(v.get_mut(..nruns).unwrap_or(&mut [])),
        hist.quantile(500),
        hist.quantile(990),
        hist.max(),
        median(ratios),
        lo,
        hi,
        u64::from(nr > 0),
    ];
    for (d, s) in sum.iter().zip(values) {
        d.store(s, Ordering::Relaxed);
    }
}

/// One CPU's reader, for one phase (a kthread bound to the CPU).
fn reader(_k: &Kthread, cpu: u32) {
    // CPU hotplug waits while the readers run: the count is stable.
    let online = ffi::cpu::num_online_cpus();
    let n = timing_readers(online);
    READERS.store(n, Ordering::Relaxed);
    JOINED.fetch_add(1, Ordering::Relaxed);
    // The timing readers are the first n online CPUs, as refscale's
    // (reader i on CPU i): the same CPUs in every run and boot, so that
    // its figure and ours are taken on the same CPU. Which reader joined
    // first, which used to decide, put ours on CPU 0 in one boot and CPU
    // 1 in the next (0.71 to 1.48 of refscale's figure, three runs).
    let me = (0..cpu).filter(|&c| ffi::cpu::online(c)).count() as u32;
    let leader = me == 0;
    let phase = PHASE.load(Ordering::Relaxed);
    let loops = LOOPS.load(Ordering::Relaxed).max(1);
    let nruns = (NRUNS.load(Ordering::Relaxed) as usize).min(MAX_NRUNS);
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
        t.start(UPDATE_NS.load(Ordering::Relaxed));
    }
    // Every CPU's updater runs before the first row is timed.
    STARTED.fetch_add(1, Ordering::AcqRel);
    while STARTED.load(Ordering::Acquire) < online {
        core::hint::spin_loop();
        ffi::cpu::cond_resched();
    }
    if me >= n {
        // Not a timing reader: idle (but for the updater) until they are
        // done, as refscale leaves the CPUs without a reader. Waking every
        // 1 ms cost the reader's vCPU 10 % under single-threaded TCG.
        while FINISHED.load(Ordering::Acquire) < n {
            ffi::cpu::sleep_us(20_000);
        }
        return;
    }
    let rec = AcctRecord::new();
    // Run-major: each run times every row back to back, so that a row and
    // its ratio's reference share the run's conditions.
    for run in 0..nruns {
        for (ri, row) in ROWS.iter().enumerate() {
            if !timed_row(ri) {
                continue;
            }
            if leader {
                UPDATE_TARGET.store(update_target(row), Ordering::Relaxed);
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
            RUN_SUM.fetch_add(
                ns.saturating_mul(1_000) / u64::from(loops),
                Ordering::Relaxed,
            );
            if let Some(hist) = HISTS.get(ri) {
                ffi::cpu::with_preemption_disabled(|| {
                    for _ in 0..SINGLES {
                        let cyc = (row.single)(&rec).saturating_sub(overhead);
                        hist.record(cyc_to_ns(cyc, mult, shift));
                    }
                });
            }
            barrier();
            if leader {
                let avg = RUN_SUM.swap(0, Ordering::Relaxed) / u64::from(n.max(1));
                if let Some(slot) = RUNS
                    .get(ri)
                    .and_then(|r| r.get(phase))
                    .and_then(|r| r.get(run))
                {
                    slot.store(avg, Ordering::Relaxed);
                }
            }
        }
        ffi::cpu::cond_resched();
    }
    if leader {
        for (ri, row) in ROWS.iter().enumerate() {
            summarize(ri, row.group, phase, nruns);
            if let Some(h) = HISTS.get(ri) {
                h.clear();
            }
        }
    }
    FINISHED.fetch_add(1, Ordering::Release);
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
fn measure_nmi_handler(stress: &torture::Installed, bench: &Guard) {
    for a in &NMI {
        a.store(0, Ordering::Relaxed);
    }
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
    for (a, v) in NMI
        .iter()
        .zip([h.count(), h.quantile(500), h.quantile(990), h.max(), 1])
    {
        a.store(v, Ordering::Relaxed);
    }
}

/// Handles a write to `bench`: parses it, runs the benchmark (blocking).
/// `EINVAL` for a bad write, `EBUSY` while anything else runs; nothing
/// runs then. A signal ends it at the end of the phase or ping-pong row in
/// progress (the readers do not poll), with `EINTR` and no results; one
/// that comes during the NMI runs at its end lets it finish.
pub(crate) fn write(stress: &torture::Installed, input: &[u8]) -> Result {
    let args = parse_args(input).map_err(|e| {
        pr_err!(
            "bench: bad argument '{}'; want {}\n",
            kernel::str::BStr::from_bytes(e.token),
            e.want
        );
        EINVAL
    })?;
    let guard = Guard::try_begin(Activity::Bench, "bench")?;
    STATE.store(BUSY, Ordering::Release);
    let t0 = ffi::time::local_clock();
    LOOPS.store(args.loops, Ordering::Relaxed);
    NRUNS.store(args.nruns, Ordering::Relaxed);
    UPDATE_NS.store(u64::from(args.update_us) * 1_000, Ordering::Relaxed);
    TICK_NS.store(kacct::min_delta_ns(), Ordering::Relaxed);
    CPUS.store(ffi::cpu::num_online_cpus(), Ordering::Relaxed);
    kclock::start_idle_clocks(&guard);
    HIST.clear();
    for h in &HISTS {
        h.clear();
    }
    RUN_SUM.store(0, Ordering::Relaxed);
    // A registered target selected: pinned for the read phases, timed in
    // the last row (a built-in one has its own row already).
    let index = crate::settings::target_index();
    let pin = (index >= crate::registry::BUILTIN.len())
        .then(crate::target::Pinned::selected)
        .and_then(|p| p.ok());
    TARGET_BENCHED.store(
        if pin.is_some() { index } else { NOT_BENCHED },
        Ordering::Relaxed,
    );
    let mut ret = Ok(());
    for phase in 0..PHASES.len() {
        PHASE.store(phase, Ordering::Relaxed);
        JOINED.store(0, Ordering::Relaxed);
        ARRIVED.store(0, Ordering::Relaxed);
        STARTED.store(0, Ordering::Relaxed);
        FINISHED.store(0, Ordering::Relaxed);
        ret = ffi::kthread::run_on_each_cpu(&reader);
        if ret.is_err() {
            break;
        }
    }
    UPDATE_TARGET.store(RUNNING, Ordering::Relaxed);
    for row in &PINGPONG_SUMMARY {
        row[5].store(0, Ordering::Relaxed);
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
    ELAPSED_MS.store(
        ffi::time::local_clock().wrapping_sub(t0) / 1_000_000,
        Ordering::Relaxed,
    );
    match ret {
        Ok(()) => {
            STATE.store(DONE, Ordering::Release);
            pr_info!(
                "bench: done in {} ms: loops={} nruns={} update_us={} on {} CPUs; see /sys/kernel/debug/nmiclock/bench\n",
                ELAPSED_MS.load(Ordering::Relaxed),
                args.loops,
                args.nruns,
                args.update_us,
                CPUS.load(Ordering::Relaxed)
            );
        }
        Err(e) if e == EINTR => {
            STATE.store(IDLE, Ordering::Release);
            pr_info!(
                "bench: interrupted by a signal after {} ms (at the end of a phase or ping-pong row); no results\n",
                ELAPSED_MS.load(Ordering::Relaxed)
            );
        }
        Err(e) => {
            STATE.store(IDLE, Ordering::Release);
            pr_err!("bench: cannot start the readers (error {})\n", e.to_errno());
        }
    }
    ret
}

fn summary(ri: usize, phase: usize, i: usize) -> u64 {
    SUMMARY
        .get(ri)
        .and_then(|r| r.get(phase))
        .and_then(|r| r.get(i))
        .map_or(0, |a| a.load(Ordering::Relaxed))
}

/// The ratio column of a row: against `sched_clock()` for reads, against
/// `cmpxchg` in the same mode for acct updates; the median of the ratios
/// taken within each run, with their 10th and 90th percentiles.
fn ratio(ri: usize, phase: usize) -> (Option<u64>, Option<(u64, u64)>) {
    if summary(ri, phase, 7) == 0 {
        return (None, None);
    }
    (
        Some(summary(ri, phase, 4)),
        Some((summary(ri, phase, 5), summary(ri, phase, 6))),
    )
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
    let get = |r: usize, i: usize| {
        PINGPONG_SUMMARY
            .get(r)
            .and_then(|x| x.get(i))
            .map_or(0, |a| a.load(Ordering::Relaxed))
    };
    if get(0, 5) == 0 {
        return writeln!(
            w,
            "pingpong  pingpong: not measured (fewer than two CPUs online)"
        );
    }
    for (r, (name, _, _)) in PINGPONG.iter().enumerate() {
        writeln!(
            w,
            "{:<9} {:<26} {:>10} {:>8} {:>8} {:>9} {:>7}  poll_ns={} speedup={}x",
            "pingpong",
            name,
            Cell::from_fmt(format_args!("{}", Milli(get(r, 0)))),
            get(r, 1),
            get(r, 2),
            get(r, 3),
            Ratio(ratio_milli(get(r, 0), get(0, 0))),
            Milli(get(r, 4)),
            Ratio(ratio_milli(get(0, 0), get(r, 0)))
        )?;
    }
    writeln!(
        w,
        "# pingpong: {} round trips per run between kthreads on cpu{} and cpu{}, as perf bench sched pipe; median: ns per round trip; ratio: over pingpong sleep's (speedup: its inverse); poll_ns: CPU time both spent polling, per round trip",
        PINGPONG_TRIPS,
        PINGPONG_CPUS[0].load(Ordering::Relaxed),
        PINGPONG_CPUS[1].load(Ordering::Relaxed)
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
    let state = STATE.load(Ordering::Acquire);
    let nruns = NRUNS.load(Ordering::Relaxed) as usize;
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
        CPUS.load(Ordering::Relaxed),
        timing_readers(CPUS.load(Ordering::Relaxed)),
        LOOPS.load(Ordering::Relaxed),
        nruns,
        UPDATE_NS.load(Ordering::Relaxed) / 1_000,
        ELAPSED_MS.load(Ordering::Relaxed)
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
        for ri in (0..ROWS.len()).filter(|&ri| timed_row(ri)) {
            let (ratio, spread) = ratio(ri, phase);
            writeln!(
                w,
                "{:<9} {:<26} {:>10} {:>8} {:>8} {:>9} {:>7} {:>11}",
                pname,
                RowName(ri),
                Cell::from_fmt(format_args!("{}", Milli(summary(ri, phase, 0)))),
                summary(ri, phase, 1),
                summary(ri, phase, 2),
                summary(ri, phase, 3),
                Ratio(ratio),
                Spread(spread)
            )?;
        }
    }
    show_pingpong(w)?;
    let nmi = |i: usize| NMI.get(i).map_or(0, |a| a.load(Ordering::Relaxed));
    if nmi(4) == 0 {
        writeln!(
            w,
            "nmi       nmi handler: not measured (a stress run could not start)"
        )?;
    } else if nmi(0) == 0 {
        writeln!(
            w,
            "nmi       nmi handler: no NMI-context samples (nmi_source={})",
            torture::show::source_used()
        )?;
    } else {
        writeln!(
            w,
            "{:<9} {:<26} {:>10} {:>8} {:>8} {:>9} {:>7}",
            "nmi",
            "nmi handler (sample)",
            "-",
            nmi(1),
            nmi(2),
            nmi(3),
            "-"
        )?;
        writeln!(
            w,
            "# nmi handler: {} NMIs (nmi_source={}) in a 1 s stress run, each timed whole",
            nmi(0),
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
                CPUS.load(Ordering::Relaxed),
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
        for ri in (0..ROWS.len()).filter(|&ri| timed_row(ri)) {
            writeln!(w, "ref-scale: {} {}", pname, RowName(ri))?;
            writeln!(w, "Runs\tTime(ns)")?;
            let runs = RUNS.get(ri).and_then(|x| x.get(phase));
            for (i, v) in runs.into_iter().flatten().take(nruns).enumerate() {
                writeln!(w, "{}\t{}", i + 1, Milli(v.load(Ordering::Relaxed)))?;
            }
        }
    }
    Ok(())
}
