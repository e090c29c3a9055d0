// SPDX-License-Identifier: GPL-2.0

//! What one sample of a stress run does and finds: it reads the run's
//! clock from NMI (or hard-IRQ) context and checks the read exactly,
//! against the reference, per CPU and across CPUs ([`sample`] says how),
//! counts what it found in its CPU's table ([`Cpu`]) and keeps the first
//! anomalies. The writers' task-context reads of a target are checked the
//! same way ([`task_read`]).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::anomaly::{self, Kind};
use super::STRESS;
use crate::acct::Outcome;
use crate::arch::Ordered;
use crate::bench::LatHist;
use crate::clock::{Reading, Window};
use crate::counter::Counter;
use crate::counters::{counters, show};
use crate::coverage::{kernel_hit, Hit, KernelView, View};
use crate::cs_switch;
use crate::cyc_ns::{cyc_to_ns, mul_u64_u32_shr};
use crate::ffi;
use crate::ffi::cpu::Context;
use crate::high_water::HighWater;
use crate::kacct;
use crate::kclock;
use crate::read_check::{Around, Base};
use crate::target;

/// log2 buckets of the read-cost histogram (ns).
pub(crate) const HIST_BUCKETS: usize = 32;

/// Buckets on each side of the zero bucket of the tear-error histogram.
pub(crate) const ERR_SIDE: usize = 40;
/// Buckets of the tear-error histogram: negative, zero, positive.
pub(crate) const ERR_BUCKETS: usize = 2 * ERR_SIDE + 1;

counters! {
    /// One CPU's counters and previous sample.
    pub(crate) struct Cpu, totals pub(crate) Sums {
        /// Samples taken, any context.
        samples: "samples", sum, show::STATS | show::PERCPU | show::EOT;
        /// Samples in NMI context.
        nmi_samples: "nmi_samples", sum, show::STATS | show::PERCPU | show::EOT;
        /// Samples that interrupted their own CPU's writer inside its
        /// window, or read while another CPU's was inside one.
        hits_local: "window_hits_local", sum, show::STATS | show::PERCPU | show::EOT;
        hits_remote: "window_hits_remote", sum, show::STATS | show::PERCPU | show::EOT;
        /// Latch reads in a window, served by the copy not being written.
        stable_copy: "stable_copy_reads", sum, show::STATS | show::EOT_NMICLOCK;
        /// Reads off the exact bound.
        torn: "torn_reads", sum, show::STATS | show::PERCPU | show::EOT_NMICLOCK | show::ANOMALY;
        /// The largest allowance a check took for a late conversion
        /// switch ([`switch_bound`]), ns.
        max_skew: "max_switch_skew_ns", max, show::STATS | show::EOT_NMICLOCK;
        /// Samples whose epoch was more than a wrap old when read (see
        /// [`Reading::late_epoch`]): not checked.
        late_reads: "wrap_late_reads", sum, show::STATS | show::EOT_NMICLOCK;
        /// Elapsed times off the reference's.
        ref_mismatches: "reference_mismatches", sum, show::STATS | show::PERCPU | show::EOT | show::ANOMALY;
        /// Samples not checked against the reference because the kernel's
        /// clocksource was not the counter the clock reads
        /// ([`crate::cs_switch`]).
        ref_other_counter: "reference_unchecked_other_counter", sum, show::STATS;
        /// Steps back on this CPU, across CPUs, and the largest on this
        /// CPU, ns.
        backwards: "backwards", sum, show::STATS | show::PERCPU | show::EOT | show::ANOMALY;
        cross: "cross_cpu_backwards", sum, show::STATS | show::PERCPU | show::EOT | show::ANOMALY;
        max_backstep: "max_backstep_ns", max, show::STATS | show::EOT;
        /// Target runs: the largest step back across CPUs, ns.
        max_cross_backstep: "max_cross_backstep_ns", max, show::STATS | show::EOT_TARGET;
        /// Target runs: steps back within what the target promises; of
        /// those beyond its fixed allowance, the ones across a clocksource
        /// switch by no more than the switch's length ([`step_back`]).
        steps_back_allowed: "steps_back_allowed", sum, show::STATS | show::EOT_TARGET;
        steps_back_at_switch: "steps_back_at_clocksource_switch", sum, show::STATS;
        /// Target runs: steps back on one CPU, and across CPUs, that the
        /// target never promised not to take.
        unpromised_backwards: "unpromised_backwards", sum, show::STATS | show::EOT_TARGET;
        unpromised_cross: "unpromised_cross_cpu_backwards", sum, show::STATS | show::EOT_TARGET;
        /// Target runs: elapsed times off the reference's, on a target that
        /// does not promise its rate; the largest error, ns.
        unpromised_ref: "unpromised_reference_errors", sum, show::STATS | show::EOT_TARGET;
        max_ref_error: "max_reference_error_ns", max, show::STATS | show::EOT_TARGET;
        /// Target runs: reads by the writers, in task context.
        task_reads: "task_reads", sum, show::STATS | show::EOT_TARGET;
        /// Target runs: reads the target said stalled (gave up waiting for
        /// its writer; `NMICLOCK_READ_STALLED`), any context.
        target_stalls: "target_stalls", sum, show::STATS | show::EOT_TARGET | show::ANOMALY;
    }
    state {
        /// The last good sample, the base of the next checks, and the
        /// previous one ([`Base`]).
        base: Base = Base::new();
        /// The read cost, log2 ns, and the exact check's error.
        pub(crate) hist: [AtomicU64; HIST_BUCKETS] = [const { AtomicU64::new(0) }; HIST_BUCKETS];
        pub(crate) err_hist: [AtomicU64; ERR_BUCKETS] = [const { AtomicU64::new(0) }; ERR_BUCKETS];
    }
}

impl Cpu {
    /// Zeroes everything (not while this CPU samples).
    pub(crate) fn reset(&self) {
        self.reset_counts();
        for h in self.hist.iter().chain(self.err_hist.iter()) {
            h.store(0, Ordering::Relaxed);
        }
        self.forget();
    }

    /// Makes the next sample a new base: nothing from before compares with
    /// it (a CPU that went offline, or a new run).
    pub(crate) fn forget(&self) {
        self.base.forget();
    }
}

/// What the per-sample checks keep across CPUs for the run in progress (or the last).
struct RunChecks {
    /// The highest time any CPU's sample of nmiclock's clock has read, per
    /// overrun count ([`kclock::overruns`]): an overrun loses whole wraps, so
    /// no read after one compares with a value from before. Its values are
    /// times since `high_water_base`.
    high_water: HighWater,
    /// What `high_water`'s values count from: the clock at the start of the
    /// run, less [`HIGH_WATER_SLACK_NS`], so that a read a little older than
    /// the start still has a value (one older still counts as 0, and so as a
    /// step back from any other CPU's).
    high_water_base: AtomicU64,
    /// The highest time any CPU's sample of another target has read.
    target_high: AtomicU64,
    /// `ktime_get_raw_fast_ns()` when the run started.
    start_ref: AtomicU64,
    /// The clock's conversion when the run started, to time reads.
    mult: AtomicU32,
    shift: AtomicU32,
    /// When the first anomaly came: the samples and window hits up to it, on
    /// all CPUs, and the time since the start (ns), each plus one (0: none
    /// yet).
    first_samples: AtomicU64,
    first_hits: AtomicU64,
    first_ns: AtomicU64,
    /// A clock read and its counter value at the start of the run, for the
    /// rate check.
    start_ns: AtomicU64,
    start_cyc: AtomicU64,
}

static RUN: RunChecks = RunChecks {
    high_water: HighWater::new(),
    high_water_base: AtomicU64::new(0),
    target_high: AtomicU64::new(0),
    start_ref: AtomicU64::new(0),
    mult: AtomicU32::new(0),
    shift: AtomicU32::new(0),
    first_samples: AtomicU64::new(0),
    first_hits: AtomicU64::new(0),
    first_ns: AtomicU64::new(0),
    start_ns: AtomicU64::new(0),
    start_cyc: AtomicU64::new(0),
};
/// How far before the run's start `high_water_base` lies: about 18 min.
const HIGH_WATER_SLACK_NS: u64 = 1 << 40;

/// The cost of each NMI-context sample (the work of the NMI handler), in
/// ns: what `bench` reports as the NMI handler's cost.
pub(crate) static NMI_HANDLER_NS: LatHist = LatHist::new();

/// Prepares the checks for a new run (not while one samples).
pub(crate) fn start_run() {
    RUN.target_high.store(0, Ordering::SeqCst);
    NMI_HANDLER_NS.clear();
    // Start on the counter's latest calibration, not on one the kernel has
    // refined since the epoch timer's last tick.
    kclock::follow_calibration();
    kclock::reset_conversions();
    let (mult, shift) = kclock::conversion_in_use();
    RUN.mult.store(mult, Ordering::Relaxed);
    RUN.shift.store(shift, Ordering::Relaxed);
    RUN.start_ref
        .store(ffi::time::raw_fast_ns(), Ordering::Relaxed);
    for a in [&RUN.first_samples, &RUN.first_hits, &RUN.first_ns] {
        a.store(0, Ordering::Relaxed);
    }
    let r = kclock::read();
    RUN.start_ns.store(r.ns, Ordering::Relaxed);
    RUN.start_cyc.store(r.now_cyc, Ordering::Relaxed);
    RUN.high_water_base
        .store(r.ns.saturating_sub(HIGH_WATER_SLACK_NS), Ordering::Relaxed);
    RUN.high_water.reset(kclock::overruns());
}

/// `ns` as `high_water` holds it: the time since its base (0 if older).
fn since_base(ns: u64) -> u64 {
    ns.saturating_sub(RUN.high_water_base.load(Ordering::Relaxed))
}

/// When the first anomaly came: samples and window hits up to it (the
/// sample that found it included), and ns since the start; `None` if none
/// came.
pub(crate) fn first_anomaly() -> Option<(u64, u64, u64)> {
    let s = RUN.first_samples.load(Ordering::Relaxed);
    (s != 0).then(|| {
        (
            s - 1,
            RUN.first_hits.load(Ordering::Relaxed).saturating_sub(1),
            RUN.first_ns.load(Ordering::Relaxed).saturating_sub(1),
        )
    })
}

/// How far the clock's rate over the run so far is from the counter's by
/// the run's starting conversion, in parts per billion (negative: slow).
/// Task context.
///
/// The epoch keeps the conversion's remainder (see
/// [`crate::clock::elapsed_bound`]), so
/// moving it loses nothing, however often the writers move it: 0 but for
/// what a conversion switch's carried remainder loses (a fraction of a
/// nanosecond each) or a recalibration's real change of rate. Reported,
/// never judged.
pub(crate) fn rate_error_ppb() -> i64 {
    let r = kclock::read();
    let elapsed = r.ns.wrapping_sub(RUN.start_ns.load(Ordering::Relaxed));
    let cycles = r
        .now_cyc
        .wrapping_sub(RUN.start_cyc.load(Ordering::Relaxed));
    let by_counter = mul_u64_u32_shr(
        cycles,
        RUN.mult.load(Ordering::Relaxed),
        RUN.shift.load(Ordering::Relaxed),
    );
    if by_counter == 0 {
        return 0;
    }
    let off = elapsed.wrapping_sub(by_counter) as i64;
    off.checked_mul(1_000_000_000)
        .map_or(i64::MAX, |v| v / (by_counter as i64).max(1))
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Time since the run started, by the reference clock.
fn since_start(reference_ns: u64) -> u64 {
    reference_ns.wrapping_sub(RUN.start_ref.load(Ordering::Relaxed))
}

/// Bucket of the read-cost histogram for `ns`: 0 for 0, else
/// `floor(log2(ns)) + 1`, capped.
fn bucket(ns: u64) -> usize {
    let b = (64 - ns.leading_zeros()) as usize;
    if b < HIST_BUCKETS {
        b
    } else {
        HIST_BUCKETS - 1
    }
}

/// Bucket of the tear-error histogram for `err`: [`ERR_SIDE`] for 0, above
/// it `floor(log2(err)) + 1` for a positive error, below it the same for a
/// negative one, capped.
pub(crate) fn err_bucket(err: i64) -> usize {
    let side = ((64 - err.unsigned_abs().leading_zeros()) as usize).min(ERR_SIDE);
    if err < 0 {
        ERR_SIDE - side
    } else {
        ERR_SIDE + side
    }
}

/// TSC cycles to ns with the run's conversion.
fn cycles_ns(cyc: u64) -> u64 {
    cyc_to_ns(
        cyc,
        RUN.mult.load(Ordering::Relaxed),
        RUN.shift.load(Ordering::Relaxed),
    )
}

/// Notes that the run has an anomaly that no sample recorded (a stall of a
/// read outside the samples: the acct updates', the wake-up probe's),
/// found by the run's monitor: it counts as the first, if none came
/// before, as of now (within the monitor's period).
pub(crate) fn note_anomaly() {
    first(since_start(ffi::time::raw_fast_ns()));
}

/// Counts the first anomaly of the run's, if it is. The totals are summed
/// only then, once a run: the samples do not keep global counts.
fn first(at_ns: u64) {
    if RUN.first_samples.load(Ordering::Relaxed) != 0 {
        return;
    }
    let samples = STRESS.cpus.sum(|c| &c.checks.samples).wrapping_add(1);
    if RUN
        .first_samples
        .compare_exchange(0, samples, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        let hits = STRESS
            .cpus
            .sum(|c| &c.checks.hits_local)
            .wrapping_add(STRESS.cpus.sum(|c| &c.checks.hits_remote));
        RUN.first_hits
            .store(hits.wrapping_add(1), Ordering::Relaxed);
        RUN.first_ns.store(at_ns.wrapping_add(1), Ordering::Relaxed);
        // trace_on_anomaly=1: a marker, then the kernel's tracing stopped,
        // so that its buffer ends with what led up to this.
        if ffi::trace::mark(
            kernel::c_str!("nmiclock: first anomaly, samples, at_ns:"),
            samples,
            at_ns,
        ) {
            ffi::trace::off();
        }
    }
}

/// Records an anomaly, noting it if it is the first.
fn anomaly(kind: Kind, ctx: Context, value: u64, against: u64, r: &Reading, at_ns: u64) {
    first(at_ns);
    anomaly::record(kind, ctx, value, against, 0, r, at_ns);
}

/// One acct update from `ctx`, with its anomalies recorded.
pub(crate) fn acct_update(ctx: Context, pause_ns: u32) {
    let Some((o, v)) = kacct::update_here(ctx, pause_ns) else {
        return;
    };
    if !v.any() {
        return;
    }
    let (time, prev) = match o {
        Outcome::Applied { time, prev, .. } => (time, prev),
        _ => (0, 0),
    };
    let r = Reading::default();
    let at = since_start(ffi::time::raw_fast_ns());
    if v.bad_delta {
        anomaly(Kind::AcctBadDelta, ctx, time, prev, &r, at);
    }
    if v.backwards {
        anomaly(Kind::AcctBackwards, ctx, time, prev, &r, at);
    }
}

/// Notes what window the read met, if any.
fn cover(c: &Cpu, hit: &Hit, r: &Reading) {
    if !hit.any() {
        return;
    }
    if hit.local.is_some() {
        inc(&c.hits_local);
    } else {
        inc(&c.hits_remote);
    }
    // A latch read that met a copy being written, and read the other.
    if let Some(w @ (Window::FirstCopy | Window::SecondCopy)) = hit.window {
        if r.copy != w.copy_written() {
            inc(&c.stable_copy);
        }
    }
}

/// What one sample read, and around it.
struct Timed<B, R, A> {
    /// The writers' windows before and after.
    hit: Hit,
    /// What `before` read, after the first look at the windows.
    before: B,
    /// The reference, on both sides of the read, and the clocksource
    /// switch count around it ([`Around::cs_seq`]).
    ref_lo: u64,
    ref_hi: u64,
    cs_seq: u64,
    /// The read, and the counter just after it.
    value: R,
    cyc: u64,
    /// What `after` read, before the last look at the windows.
    after: A,
    /// When, ns since the run started.
    at: u64,
}

/// One sample on this CPU (state `c`): counts it, reads `read()` between
/// two reads of the reference and two looks at the writers' windows (with
/// `before()` and `after()` just inside the looks), and adds the read's
/// cost to the histogram. The reference is read on both sides, so that
/// whatever comes between (in a VM: the host descheduling the vCPU)
/// widens the window instead of looking like an error.
#[inline(always)]
fn timed<B, R, A>(
    c: &Cpu,
    ctx: Context,
    before: impl FnOnce() -> B,
    read: impl FnOnce() -> R,
    after: impl FnOnce() -> A,
) -> Timed<B, R, A> {
    inc(&c.samples);
    if ctx == Context::Nmi {
        inc(&c.nmi_samples);
    }
    let v0 = View::now();
    let before = before();
    let cs0 = cs_switch::seq();
    let ref_lo = ffi::time::raw_fast_ns();
    let t0 = Ordered.read();
    let value = read();
    let t1 = Ordered.read();
    let ref_hi = ffi::time::raw_fast_ns();
    let cs_seq = cs_switch::since(cs0);
    let after = after();
    let v1 = View::now();
    if let Some(h) = c.hist.get(bucket(cycles_ns(t1.wrapping_sub(t0)))) {
        inc(h);
    }
    Timed {
        hit: Hit::between(v0, v1),
        before,
        ref_lo,
        ref_hi,
        cs_seq,
        value,
        cyc: t1,
        after,
        at: since_start(ref_hi),
    }
}

/// One sample on this CPU, whose state is `c`, from context `ctx`: from
/// a perf overflow (IRQ or NMI) or an NMI IPI, reads nmiclock between two
/// reads of the reference clock and of the writers' window marks, and
/// checks the read with its CPU's [`Base`] (`crate::read_check`, the core's
/// checks, which the host torture runs too):
///
/// - **exactly**, against the counter: each reading carries the counter
///   value it was converted from, so the clock's elapsed time since this
///   CPU's base (its last good sample) must be the conversion of the cycles
///   between the two reads: `[conv, conv + 1]`, however many epoch updates
///   came in between (the epoch keeps the conversion's remainder), derived
///   in [`crate::clock::elapsed_bound`]. When the conversion changed
///   in between (a recalibration, `disturb=conversion`) the bound spans
///   every conversion the run published, and allows 1 ns for each of the
///   `k` conversion switches that may have taken effect in between (an
///   epoch update costs nothing): `k` is the switches recorded by the end
///   of this read less those finished before the base's read began
///   ([`kclock::switches_started`], [`kclock::switches_finished`]; a
///   switch counts as finished before its writer lets the exclusion go,
///   so no later switch can be recorded while an earlier one is still
///   unfinished).
///   A switch is not instant: a base read after the switch's pivot but
///   before its publish is on the old line, which the new one meets only
///   at the pivot, so the first switch that finished after the base
///   widens the bound by the two conversions' difference over the base's
///   cycles past its pivot ([`crate::clock::switch_skewed_bound`]; the kernel's refined
///   TSC calibration, published by a writer NMIs held up, showed it). A
///   base more than the switches kept ([`kclock::switch_record`]) behind
///   gets no exact check.
///   A read outside it is torn; every check's
///   error (0 inside, else how far outside, negative below) goes into a
///   signed log2 histogram (`@tear_error_ns`). A torn read is no base: the
///   next read is checked against the last good one, so consecutive torn
///   reads each count. No check spans an epoch update that came a wrap late
///   ([`kclock::overruns`]), which loses whole wraps whatever the
///   protection;
/// - against an independent reference, the unslewed NMI-safe
///   `ktime_get_raw_fast_ns()`, read on both sides of the clock so that a
///   vCPU descheduled in between widens the reference's window instead of
///   looking like a tear: the clock's elapsed time since the base must lie
///   in that window, give or take [`crate::read_check::REF_TOLERANCE_NS`]
///   plus [`crate::read_check::REF_TOLERANCE_PPM`] of the gap, since our conversion and the
///   clocksource's are computed apart. This catches a wrong conversion,
///   which the exact check takes as given;
/// - against the previous sample on its CPU (backwards), and against the
///   highest time any CPU has seen, loaded with acquire before the clock is
///   read and raised with release after (cross-CPU backwards). With a bare
///   counter read the CPU may read the counter before it loads that mark,
///   the vDSO bug; QEMU TCG executes in order and cannot show it;
/// - a read that gave up waiting for the writer (`seqcount`) is a stall;
///
/// and notes whether the read met a writer's window ([`crate::coverage`]):
/// the run's coverage. It times the read into a log2 histogram, records
/// the first anomalies with their context and when the first came, and runs
/// one acct update for its CPU's record. NMI-safe throughout: no locks, no
/// allocation, no printk, nothing that panics, no call through a pointer
/// but one: a registered target's read.
///
/// With another target than `nmiclock` ([`crate::target`]), a sample
/// ([`sample_target`]) and the writers' task-context reads ([`task_read`])
/// make the same checks but the exact one, each finding judged by what the
/// target promises ([`step_back`]).
pub(crate) fn sample(c: &Cpu, ctx: Context) {
    if target::run_index() != crate::registry::NMICLOCK {
        sample_target(c, ctx);
        return;
    }
    let Timed {
        hit,
        before: (overruns, switches),
        ref_lo,
        ref_hi,
        cs_seq,
        value: (high, r),
        after: switched,
        at,
        ..
    } = timed(
        c,
        ctx,
        || (kclock::overruns(), kclock::switches_finished()),
        // The highest time seen anywhere, loaded at once before our own
        // read, nothing ordering the two (the timing's and the reference's
        // ordered counter reads come before): a read that follows it must
        // not be older (if no overrun came in between), and a bare counter
        // read that the CPU takes before the load can be, the rdtsc-ordering thread's bug (x86/vdso: use non-serializing rdtsc),
        // which a real CPU shows (scripts/run-host) and QEMU TCG cannot.
        || (RUN.high_water.load(), kclock::read()),
        || kclock::switches_started(),
    );
    cover(c, &hit, &r);
    let ns = r.ns;
    // A wrap lost (an epoch update more than a wrap late) moves time back
    // whole wraps whatever the protection: a read of an epoch already a
    // wrap old has lost them itself, and is not checked; no check spans
    // an overrun either: each re-bases after one.
    if r.late_epoch {
        inc(&c.late_reads);
        c.forget();
        acct_update(ctx, 0);
        return;
    }
    let same = kclock::overruns() == overruns;
    let a = Around {
        switches,
        switched,
        overruns,
        same,
        ref_lo,
        ref_hi,
        cs_seq,
    };
    if cs_seq & cs_switch::OTHER_COUNTER != 0 {
        inc(&c.ref_other_counter);
    }
    let f = c
        .base
        .check(&r, &a, kclock::conversions(), kclock::switch_record);
    c.max_skew.fetch_max(f.skew, Ordering::Relaxed);
    if let Some(prev) = f.backwards {
        inc(&c.backwards);
        c.max_backstep
            .fetch_max(prev.wrapping_sub(ns), Ordering::Relaxed);
        anomaly(Kind::Backwards, ctx, ns, prev, &r, at);
    }
    if let Some((err, against)) = f.exact {
        if let Some(h) = c.err_hist.get(err_bucket(err)) {
            inc(h);
        }
        if err != 0 {
            inc(&c.torn);
            first(at);
            anomaly::record(Kind::Torn, ctx, ns, against, c.base.cyc(), &r, at);
        }
    }
    if let Some((_, against)) = f.reference {
        inc(&c.ref_mismatches);
        anomaly(Kind::Reference, ctx, ns, against, &r, at);
    }
    // Only a mark gathered under this read's overrun count compares.
    if let (true, Some(h)) = (same, high.under(overruns)) {
        if since_base(ns) < h {
            inc(&c.cross);
            let against = h.wrapping_add(RUN.high_water_base.load(Ordering::Relaxed));
            anomaly(Kind::CrossCpu, ctx, ns, against, &r, at);
        }
    }
    // Only a good read raises the mark: one off the exact bound or the
    // reference (2^42 ns ahead, for one) would make every later read on
    // every CPU look behind it.
    if same && f.good() {
        RUN.high_water
            .raise(overruns, since_base(ns), || kclock::overruns() == overruns);
    }
    if r.stalled {
        first(at);
        anomaly::record(Kind::Stall, ctx, ns, 0, 0, &r, at);
    }
    // A torn read is no base: the next read is checked against the last
    // good one, so consecutive torn reads each count.
    c.base.settle(&r, &a, f.good());
    acct_update(ctx, 0);
}

/// A step back of a target's read against `against` (the previous read on
/// this CPU, or with `cross` the highest any CPU had read), judged by what
/// the target promises: within it, counted as allowed; beyond a promise,
/// an anomaly; where it promises nothing, counted and measured only. A
/// clock that may step back across a clocksource switch
/// ([`target::Promise::at_switch`]) is allowed the switch's length too if
/// read (counter `cyc`) during one or within that length after it.
fn step_back(c: &Cpu, ctx: Context, cross: bool, ns: u64, against: u64, at: u64, cyc: u64) {
    let size = against.wrapping_sub(ns);
    let p = target::promise();
    let (promised, max, unpromised, broken, kind) = if cross {
        (
            p.cross_cpu,
            &c.max_cross_backstep,
            &c.unpromised_cross,
            &c.cross,
            Kind::CrossCpu,
        )
    } else {
        (
            p.per_cpu,
            &c.max_backstep,
            &c.unpromised_backwards,
            &c.backwards,
            Kind::Backwards,
        )
    };
    max.fetch_max(size, Ordering::Relaxed);
    let at_switch = || {
        p.at_switch
            && cs_switch::allowance(cyc)
                .is_some_and(|len| size.saturating_sub(cycles_ns(len)) <= promised.unwrap_or(0))
    };
    match promised {
        Some(allowed) if size <= allowed => inc(&c.steps_back_allowed),
        Some(_) if at_switch() => inc(&c.steps_back_at_switch),
        Some(_) => {
            inc(broken);
            let r = Reading {
                ns,
                ..Reading::default()
            };
            anomaly(kind, ctx, ns, against, &r, at);
        }
        None => inc(unpromised),
    }
}

/// A read of the target that said it stalled: an anomaly, as a stall of
/// nmiclock's own clock is; its value is judged as any other.
fn stall(c: &Cpu, ctx: Context, ns: u64, at: u64) {
    inc(&c.target_stalls);
    let r = Reading {
        ns,
        stalled: true,
        ..Reading::default()
    };
    anomaly(Kind::Stall, ctx, ns, ns, &r, at);
}

/// One sample of a target other than `nmiclock` ([`crate::target`]): read
/// between two reads of the reference, checked for steps back on this CPU
/// and across CPUs, and against the reference's elapsed time, each judged
/// by the target's promise; and the coverage of a registered target's
/// updates.
fn sample_target(c: &Cpu, ctx: Context) {
    let Timed {
        hit,
        before,
        ref_lo,
        ref_hi,
        cs_seq,
        value: (high, (ns, stalled)),
        cyc,
        after,
        at,
    } = timed(
        c,
        ctx,
        KernelView::now,
        // The mark at once before the read, as for nmiclock's clock.
        || (RUN.target_high.load(Ordering::Acquire), target::read()),
        KernelView::now,
    );
    if stalled {
        stall(c, ctx, ns, at);
    }
    // Only the target's own updates are its windows (nmiclock's own clock
    // keeps updating beside it): a registered target's `update`, or the
    // kernel's bracketed update of its clock.
    let met = if target::run_kind() == target::Kind::Kernel {
        kernel_hit(before, after)
    } else {
        (hit.window == Some(Window::Target)).then_some(hit.local.is_some())
    };
    if let Some(local) = met {
        inc(if local { &c.hits_local } else { &c.hits_remote });
    }
    // A clock of the timekeeper reads the clocksource as the reference
    // does, whichever it is.
    let cs_seq = if target::promise().on_clocksource {
        cs_seq & !cs_switch::OTHER_COUNTER
    } else {
        cs_seq
    };
    if cs_seq & cs_switch::OTHER_COUNTER != 0 {
        inc(&c.ref_other_counter);
    }
    let f = c.base.check_time(ns, ref_lo, ref_hi, cs_seq);
    if let Some(prev) = f.backwards {
        step_back(c, ctx, false, ns, prev, at, cyc);
    }
    let mut good = true;
    if let Some((err, against)) = f.reference {
        if target::promise().raw_rate {
            good = false;
            inc(&c.ref_mismatches);
            let r = Reading {
                ns,
                ..Reading::default()
            };
            anomaly(Kind::Reference, ctx, ns, against, &r, at);
        } else {
            inc(&c.unpromised_ref);
        }
        c.max_ref_error.fetch_max(err, Ordering::Relaxed);
    }
    if ns < high {
        step_back(c, ctx, true, ns, high, at, cyc);
    }
    RUN.target_high.fetch_max(ns, Ordering::Release);
    c.base.settle_time(ns, ref_lo, ref_hi, cs_seq, good);
    acct_update(ctx, 0);
}

/// A writer's read of the run's target in task context, on its CPU (state
/// `c`), against its own previous read `prev` (the samples on its CPU keep
/// theirs apart, since they interrupt it) and the highest any CPU had read.
pub(crate) fn task_read(c: &Cpu, prev: &mut Option<u64>) {
    let high = RUN.target_high.load(Ordering::Acquire);
    let (ns, stalled) = target::read();
    let cyc = Ordered.read();
    inc(&c.task_reads);
    let at = since_start(ffi::time::raw_fast_ns());
    if stalled {
        stall(c, Context::Task, ns, at);
    }
    if let Some(p) = *prev {
        if ns < p {
            step_back(c, Context::Task, false, ns, p, at, cyc);
        }
    }
    if ns < high {
        step_back(c, Context::Task, true, ns, high, at, cyc);
    }
    RUN.target_high.fetch_max(ns, Ordering::Release);
    *prev = Some(ns);
}

/// [`sample`], timed into [`NMI_HANDLER_NS`] when `ctx` is NMI context.
#[inline]
pub(crate) fn sample_timed(c: &Cpu, ctx: Context) {
    if ctx != Context::Nmi {
        sample(c, ctx);
        return;
    }
    let t0 = Ordered.read();
    sample(c, ctx);
    let t1 = Ordered.read();
    NMI_HANDLER_NS.record(cycles_ns(t1.wrapping_sub(t0)));
}
