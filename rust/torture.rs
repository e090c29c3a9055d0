// SPDX-License-Identifier: GPL-2.0

//! The stress run: hammer the clock's update path and the acct updater
//! while interrupts, NMIs where possible, sample them on every CPU, and
//! count every torn read, backward step, stall and bad delta.
//!
//! - Sources (`nmi_source`): `perf_hw`, a per-CPU kernel counter on CPU
//!   cycles, whose overflow is an NMI on x86 (needs a PMU: where there is
//!   none the run says so and, for `auto`, falls back to `ipi`); `perf_sw`,
//!   the per-CPU cpu-clock software event, hard-IRQ context; `ipi`, real
//!   NMIs sent as NMI IPIs to every online CPU by an hrtimer every
//!   `period_us`, handled by an `NMI_LOCAL` handler that claims only NMIs
//!   this module sent (a per-CPU pending flag set before sending); `auto`,
//!   `perf_hw` where it can be created, else `ipi`.
//! - Each sample ([`sample`]) reads nmiclock and checks it against the
//!   previous sample on its CPU (backwards), against the highest time any
//!   CPU has seen, published with release and read with acquire before the
//!   clock is read (cross-CPU backwards), and against the elapsed time of
//!   the kernel's NMI-safe `ktime_get_mono_fast_ns()` since the previous
//!   sample, read on both sides of the clock (a disagreement beyond
//!   [`TORN_TOLERANCE_NS`] outside that window is a torn read);
//!   it times the read into a log2 histogram, records the first anomalies
//!   with their context, and runs one acct update for its CPU's record.
//! - Writers: a kthread per CPU moves the clock's epoch as often as
//!   `update_us` allows (0: back to back) and runs task-context acct
//!   updates, both pausing `tear_window_ns` inside their windows.
//! - The run stops by itself after `duration_s` (an hrtimer queues the
//!   stop on a workqueue), on `stop`, or at unload, and logs one
//!   `End of test: SUCCESS` or `FAILURE` line with every setting and count.
//! - Wake-up latency probe: on each CPU a sleeper kthread, woken every
//!   10 ms by a controller hrtimer through the scheduler, measures with
//!   nmiclock how long the wake-up took; one that takes a tick or more is
//!   a `late_wakeup`, the symptom of an idle loop that checked need-resched
//!   and then halted anyway (reported, not counted as an error). The
//!   sleeper sleeps 100 ms at most, so a lost wake-up shows as a late one
//!   of about 100 ms instead of silencing the probe.
//! - CPU hotplug: a CPU going offline during a run takes its perf counter
//!   and writer down with it; one coming online gets them (a dynamic
//!   `CPUHP_AP_ONLINE_DYN` state). Start and stop hold hotplug off while
//!   they set up or tear down every CPU's part.

use core::fmt::{self, Write};
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use kernel::ffi::{c_int, c_uint, c_void};
use kernel::prelude::*;

use crate::bench::LatHist;
use crate::clock::Reading;
use crate::counter::{Counter, TscOrdered};
use crate::cyc_ns::cyc_to_ns;
use crate::ffi;
use crate::fmtbuf::FmtBuf;
use crate::kacct::{self, Ctx};
use crate::kclock;
use crate::percpu::PerCpu;
use crate::settings::{self, Key};

/// Disagreement with `ktime_get_mono_fast_ns()` over one sample interval
/// beyond which a read counts as torn.
pub(crate) const TORN_TOLERANCE_NS: u64 = 100_000;

/// log2 buckets of the read-cost histogram (ns).
const HIST_BUCKETS: usize = 32;

/// Anomalies kept with their context; later ones are only counted.
const ANOMALY_SLOTS: usize = 32;

/// Run states, in `STATE`.
const IDLE: u32 = 0;
const STARTING: u32 = 1;
const RUNNING: u32 = 2;
const STOPPING: u32 = 3;
const DONE: u32 = 4;

static STATE: AtomicU32 = AtomicU32::new(IDLE);

fn state_name(s: u32) -> &'static str {
    match s {
        IDLE => "idle",
        STARTING => "starting",
        RUNNING => "running",
        STOPPING => "stopping",
        _ => "done",
    }
}

/// The source the run uses (index into `settings::SOURCES`; 0 before any).
static SOURCE_USED: AtomicU32 = AtomicU32::new(0);
/// The error of the last failed attempt to create `perf_hw` counters.
static PERF_HW_ERROR: AtomicI32 = AtomicI32::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
static END_NS: AtomicU64 = AtomicU64::new(0);
static START_REF: AtomicU64 = AtomicU64::new(0);
static PERIOD_NS: AtomicU64 = AtomicU64::new(0);
/// The clock's conversion when the run started, to time reads.
static MULT: AtomicU32 = AtomicU32::new(0);
static SHIFT: AtomicU32 = AtomicU32::new(0);
/// The highest time any CPU's sample has read.
static HIGH_WATER: AtomicU64 = AtomicU64::new(0);

/// One CPU's counters and previous sample, in their own cache lines.
#[repr(align(64))]
#[derive(Default)]
struct CpuRun {
    samples: AtomicU64,
    nmi_samples: AtomicU64,
    torn: AtomicU64,
    backwards: AtomicU64,
    cross: AtomicU64,
    max_backstep: AtomicU64,
    prev_ns: AtomicU64,
    prev_ref_lo: AtomicU64,
    prev_ref_hi: AtomicU64,
    has_prev: AtomicBool,
    prev_torn: AtomicBool,
    /// NMIs sent to this CPU and not yet handled.
    nmi_pending: AtomicU32,
    /// A handler consumed more sends than its one NMI: one more NMI of
    /// ours may still be latched or in flight.
    nmi_owed: AtomicBool,
    /// Such owed NMIs claimed.
    nmi_leftovers: AtomicU64,
    /// `ktime_get_mono_fast_ns()` when this CPU last handled one of ours.
    last_ours_ns: AtomicU64,
    /// `ktime_get_mono_fast_ns()` when an NMI was last sent to this CPU.
    last_send_ns: AtomicU64,
    /// This CPU's part of a run (a `KBox<CpuRes>` turned raw), or null.
    res: AtomicPtr<CpuRes>,
    /// The wake probe's sleeper task (a `TaskHandle`), or null.
    sleeper: AtomicPtr<c_void>,
    /// The sleeper is asleep, waiting for the controller.
    sleeping: AtomicBool,
    /// nmiclock time when the controller woke the sleeper.
    woken_at: AtomicU64,
    wakeups: AtomicU64,
    late_wakeups: AtomicU64,
    max_wake_ns: AtomicU64,
    hist: [AtomicU64; HIST_BUCKETS],
}

static CPUS: PerCpu<CpuRun> = PerCpu::new();

/// What went wrong, for `anomalies`.
#[derive(Clone, Copy)]
enum Kind {
    Torn = 0,
    Backwards,
    CrossCpu,
    Stall,
    AcctBadDelta,
    AcctBackwards,
}

const KIND_NAMES: [&str; 6] = [
    "torn_read",
    "backwards",
    "cross_cpu_backwards",
    "clock_stall",
    "acct_bad_delta",
    "acct_timexpd_backwards",
];

/// One kept anomaly; `ready` is set (release) once the rest is written.
struct Anomaly {
    ready: AtomicBool,
    kind: AtomicU32,
    cpu: AtomicU32,
    ctx: AtomicU32,
    value: AtomicU64,
    against: AtomicU64,
    seq: AtomicU32,
    copy: AtomicU32,
    epoch_ns: AtomicU64,
    at_ns: AtomicU64,
}

impl Anomaly {
    const fn new() -> Self {
        Self {
            ready: AtomicBool::new(false),
            kind: AtomicU32::new(0),
            cpu: AtomicU32::new(0),
            ctx: AtomicU32::new(0),
            value: AtomicU64::new(0),
            against: AtomicU64::new(0),
            seq: AtomicU32::new(0),
            copy: AtomicU32::new(0),
            epoch_ns: AtomicU64::new(0),
            at_ns: AtomicU64::new(0),
        }
    }
}

static ANOMALIES: [Anomaly; ANOMALY_SLOTS] = [const { Anomaly::new() }; ANOMALY_SLOTS];
static ANOMALY_NEXT: AtomicU64 = AtomicU64::new(0);
static ANOMALY_DROPPED: AtomicU64 = AtomicU64::new(0);

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Keeps an anomaly if a slot is left, else counts it. Any context.
fn record(kind: Kind, ctx: Ctx, value: u64, against: u64, r: &Reading, at_ref: u64) {
    let i = ANOMALY_NEXT.fetch_add(1, Ordering::Relaxed);
    let Some(a) = usize::try_from(i).ok().and_then(|i| ANOMALIES.get(i)) else {
        inc(&ANOMALY_DROPPED);
        return;
    };
    a.kind.store(kind as u32, Ordering::Relaxed);
    a.cpu.store(ffi::cpu(), Ordering::Relaxed);
    a.ctx.store(ctx as u32, Ordering::Relaxed);
    a.value.store(value, Ordering::Relaxed);
    a.against.store(against, Ordering::Relaxed);
    a.seq.store(r.seq, Ordering::Relaxed);
    a.copy.store(r.copy, Ordering::Relaxed);
    a.epoch_ns.store(r.epoch_ns, Ordering::Relaxed);
    a.at_ns.store(
        at_ref.wrapping_sub(START_REF.load(Ordering::Relaxed)),
        Ordering::Relaxed,
    );
    a.ready.store(true, Ordering::Release);
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

/// One acct update from `ctx`, with its anomalies recorded.
fn acct_update(ctx: Ctx, pause_ns: u32) {
    if let Some((o, v)) = kacct::update_here(ctx, pause_ns) {
        if v.any() {
            let (time, prev) = match o {
                crate::acct::Outcome::Applied { time, prev, .. } => (time, prev),
                _ => (0, 0),
            };
            let r = Reading::default();
            let now = ffi::mono_fast_ns();
            if v.bad_delta {
                record(Kind::AcctBadDelta, ctx, time, prev, &r, now);
            }
            if v.backwards {
                record(Kind::AcctBackwards, ctx, time, prev, &r, now);
            }
        }
    }
}

/// One sample, from a perf overflow (IRQ or NMI) or an NMI IPI. NMI-safe:
/// no locks, no allocation, no printk, nothing that panics.
fn sample(ctx: Ctx) {
    if STATE.load(Ordering::Acquire) != RUNNING {
        return;
    }
    let Some(c) = CPUS.this_cpu() else {
        return;
    };
    // Only CPUs whose part of the run is set up sample: a CPU coming
    // online gets NMIs before its hotplug callback attaches it.
    if c.res.load(Ordering::Acquire).is_null() {
        return;
    }
    inc(&c.samples);
    if ctx == Ctx::Nmi {
        inc(&c.nmi_samples);
    }
    // The highest time seen anywhere, before our own read: a read that
    // follows it must not be older.
    let high = HIGH_WATER.load(Ordering::Acquire);
    // The reference is read on both sides of the clock, so that whatever
    // comes between (in a VM: the host descheduling the vCPU) widens the
    // window instead of looking like a torn read.
    let ref_lo = ffi::mono_fast_ns();
    let t0 = TscOrdered.read();
    let r = kclock::read();
    let t1 = TscOrdered.read();
    let ref_hi = ffi::mono_fast_ns();
    let cost = cyc_to_ns(
        t1.wrapping_sub(t0),
        MULT.load(Ordering::Relaxed),
        SHIFT.load(Ordering::Relaxed),
    );
    if let Some(h) = c.hist.get(bucket(cost)) {
        inc(h);
    }
    let ns = r.ns;
    if c.has_prev.load(Ordering::Relaxed) {
        let prev = c.prev_ns.load(Ordering::Relaxed);
        if ns < prev {
            inc(&c.backwards);
            c.max_backstep.fetch_max(prev - ns, Ordering::Relaxed);
            record(Kind::Backwards, ctx, ns, prev, &r, ref_hi);
        }
        if c.prev_torn.load(Ordering::Relaxed) {
            // The previous sample was off: take this one as the new base.
            c.prev_torn.store(false, Ordering::Relaxed);
        } else {
            // Elapsed reference time lies in [lo, hi]; the clock's must
            // too, give or take the tolerance.
            let lo = ref_lo.wrapping_sub(c.prev_ref_hi.load(Ordering::Relaxed)) as i64;
            let hi = ref_hi.wrapping_sub(c.prev_ref_lo.load(Ordering::Relaxed)) as i64;
            let d = ns.wrapping_sub(prev) as i64;
            let tol = TORN_TOLERANCE_NS as i64;
            if d < lo.saturating_sub(tol) || d > hi.saturating_add(tol) {
                inc(&c.torn);
                c.prev_torn.store(true, Ordering::Relaxed);
                let expected = prev.wrapping_add((lo / 2).wrapping_add(hi / 2) as u64);
                record(Kind::Torn, ctx, ns, expected, &r, ref_hi);
            }
        }
    }
    if ns < high {
        inc(&c.cross);
        record(Kind::CrossCpu, ctx, ns, high, &r, ref_hi);
    }
    HIGH_WATER.fetch_max(ns, Ordering::Release);
    if r.stalled {
        record(Kind::Stall, ctx, ns, 0, &r, ref_hi);
    }
    c.prev_ns.store(ns, Ordering::Relaxed);
    c.prev_ref_lo.store(ref_lo, Ordering::Relaxed);
    c.prev_ref_hi.store(ref_hi, Ordering::Relaxed);
    c.has_prev.store(true, Ordering::Relaxed);
    acct_update(ctx, 0);
}

/// The cost of each NMI-context sample (the work of the NMI handler), in
/// ns: what `bench` reports as the NMI handler's cost.
pub(crate) static NMI_HANDLER_NS: LatHist = LatHist::new();

/// Takes a sample in `ctx`, timing it into [`NMI_HANDLER_NS`] when that is
/// NMI context.
#[inline]
fn sample_timed(ctx: Ctx) {
    if ctx != Ctx::Nmi {
        sample(ctx);
        return;
    }
    let t0 = TscOrdered.read();
    sample(ctx);
    let t1 = TscOrdered.read();
    NMI_HANDLER_NS.record(cyc_to_ns(
        t1.wrapping_sub(t0),
        MULT.load(Ordering::Relaxed),
        SHIFT.load(Ordering::Relaxed),
    ));
}

/// Overflow handler of the run's perf counters (called from C).
#[no_mangle]
extern "C" fn nmiclock_rs_sample() {
    sample_timed(Ctx::now());
}

/// How soon after one of ours (sent or handled) an NMI that finds no send
/// pending is taken as a leftover of ours: in the VM the host can hold a
/// vCPU off for milliseconds, and stragglers arrive that late.
const LEFTOVER_WINDOW_NS: u64 = 100_000_000;

/// How long the handler stays registered after the sender stopped and the
/// pending counts drained, for stragglers.
const STRAGGLER_GRACE_US: u32 = 20_000;

/// The `NMI_LOCAL` handler (called from C): claims and samples the NMIs
/// this module sent to this CPU; returns 1 for ours, 0 for others.
///
/// The sender counts sends per CPU before each IPI; the handler takes the
/// count. Sends and NMIs do not pair one to one: two sends can reach a CPU
/// as one NMI, or as one NMI being handled and one latched behind it, and
/// in the VM (QEMU TCG, where this module is the only NMI source) NMIs that
/// find the count already taken were seen to arrive up to tens of
/// microseconds, or with the host holding a vCPU off, milliseconds after
/// one of ours, more of them than latching explains.
/// So an NMI that finds no send pending is still claimed, as a leftover
/// (counted in `nmi_leftovers`, never sampled), when a handler here took
/// more than one send, or when one of ours was sent to or handled on this
/// CPU less than [`LEFTOVER_WINDOW_NS`] ago. The price: during an `ipi`
/// run, an unrelated unknown NMI that arrives in that window is absorbed
/// (counted as a leftover) instead of reported. Any other NMI is left to
/// the kernel.
#[no_mangle]
extern "C" fn nmiclock_rs_nmi() -> c_int {
    let Some(c) = CPUS.this_cpu() else {
        return 0;
    };
    let now = ffi::mono_fast_ns();
    let pending = c.nmi_pending.swap(0, Ordering::AcqRel);
    if pending == 0 {
        let owed = c.nmi_owed.swap(false, Ordering::Relaxed);
        let recent =
            |t: &AtomicU64| now.wrapping_sub(t.load(Ordering::Relaxed)) < LEFTOVER_WINDOW_NS;
        if !owed && !recent(&c.last_ours_ns) && !recent(&c.last_send_ns) {
            return 0;
        }
        inc(&c.nmi_leftovers);
        return 1;
    }
    c.nmi_owed.store(pending > 1, Ordering::Relaxed);
    sample_timed(Ctx::Nmi);
    c.last_ours_ns.store(ffi::mono_fast_ns(), Ordering::Relaxed);
    1
}

/// The `ipi` source: marks every online CPU pending, then sends them all an
/// NMI (hard-IRQ context, one CPU).
extern "C" fn ipi_tick() -> u64 {
    if STATE.load(Ordering::Relaxed) != RUNNING {
        return 0;
    }
    let now = ffi::mono_fast_ns();
    for (cpu, c) in CPUS.iter() {
        if ffi::cpu_online(cpu) {
            c.last_send_ns.store(now, Ordering::Relaxed);
            c.nmi_pending.fetch_add(1, Ordering::Release);
        }
    }
    ffi::nmi_send(true);
    PERIOD_NS.load(Ordering::Relaxed)
}

/// The end of `duration_s`: stop from process context.
extern "C" fn deadline() -> u64 {
    ffi::work_queue();
    0
}

/// The work item (called from C): the end of a run's duration.
#[no_mangle]
extern "C" fn nmiclock_rs_work() {
    let _ = stop("duration_s elapsed");
}

/// A writer on one CPU (a kthread bound to it), until the run stops.
extern "C" fn worker(_cpu: c_uint) {
    let update_us = settings::get(Key::UpdateUs);
    let window = settings::get(Key::TearWindowNs);
    let mut n: u64 = 0;
    while !ffi::should_stop() {
        kclock::update_epoch_counted();
        acct_update(Ctx::Task, window);
        n = n.wrapping_add(1);
        if update_us != 0 {
            ffi::sleep_us(update_us);
        } else if n % 16 == 0 {
            ffi::cond_resched();
        }
    }
}

/// One CPU's part of a run: its perf counter (perf sources), its writer
/// and the wake probe's sleeper.
struct CpuRes {
    _perf: Option<ffi::PerfEvent>,
    _worker: Option<ffi::Worker>,
    _sleeper: Option<ffi::Worker>,
}

/// Period of the wake probe's controller.
const WAKE_PERIOD_NS: u64 = 10_000_000;

/// The wake probe's sleeper on one CPU: sleeps until the controller wakes
/// it, then measures how long that took with nmiclock. A wake-up that
/// takes a tick or more is late: the symptom of an idle loop that checked
/// need-resched and then halted anyway.
extern "C" fn sleeper(_cpu: c_uint) {
    let tick = ffi::tick_nsec();
    while !ffi::should_stop() {
        let Some(c) = CPUS.this_cpu() else {
            return;
        };
        ffi::sleep_until_woken(|| c.sleeping.store(true, Ordering::Release));
        if c.sleeping.swap(false, Ordering::AcqRel) {
            // Not woken by the controller: a stop, the 100 ms timeout, or a
            // spurious wake-up. (Woken by the controller but run only at the
            // timeout is a lost wake-up: measured below, as a late one.)
            continue;
        }
        let latency = kclock::read()
            .ns
            .saturating_sub(c.woken_at.load(Ordering::Acquire));
        inc(&c.wakeups);
        if latency >= tick {
            inc(&c.late_wakeups);
        }
        c.max_wake_ns.fetch_max(latency, Ordering::Relaxed);
    }
}

/// The wake probe's controller (hard-IRQ): wakes every sleeping sleeper
/// through the scheduler, stamping the time first.
extern "C" fn wake_tick() -> u64 {
    if STATE.load(Ordering::Relaxed) != RUNNING {
        return 0;
    }
    for (_, c) in CPUS.iter() {
        let task = c.sleeper.load(Ordering::Acquire);
        if task.is_null() || !c.sleeping.load(Ordering::Acquire) {
            continue;
        }
        c.woken_at.store(kclock::read().ns, Ordering::Release);
        if c.sleeping.swap(false, Ordering::AcqRel) {
            // SAFETY: `task` was published by `attach()` and is unpublished
            // by `detach()` followed by an RCU grace period before its
            // worker stops; this hard-IRQ handler is an RCU read side.
            unsafe { ffi::TaskHandle::wake(task) };
        }
    }
    WAKE_PERIOD_NS
}

/// Sets up CPU `cpu`'s part of the run in progress (at start, or when the
/// CPU comes online during the run). Task context, CPU hotplug held off.
fn attach(cpu: u32) -> Result {
    let Some(c) = CPUS.get(cpu) else {
        return Ok(());
    };
    let period = PERIOD_NS.load(Ordering::Relaxed);
    let perf = match settings::SOURCES.get(SOURCE_USED.load(Ordering::Relaxed) as usize) {
        Some(&"perf_hw") => Some(ffi::PerfEvent::new(cpu, true, cycles(period))?),
        Some(&"perf_sw") => Some(ffi::PerfEvent::new(cpu, false, period)?),
        _ => None,
    };
    let sleeper_worker = ffi::Worker::start(cpu, sleeper)?;
    let sleeper_task = sleeper_worker.handle().as_ptr();
    let res = KBox::new(
        CpuRes {
            _perf: perf,
            _worker: Some(ffi::Worker::start(cpu, worker)?),
            _sleeper: Some(sleeper_worker),
        },
        GFP_KERNEL,
    )?;
    // The first sample once attached is a new base: nothing from before
    // the CPU went down (or from before the run) compares with it.
    c.has_prev.store(false, Ordering::Relaxed);
    c.prev_torn.store(false, Ordering::Relaxed);
    // Unpublish an old sleeper before its worker may stop.
    c.sleeper.store(ptr::null_mut(), Ordering::Release);
    let old = c.res.swap(KBox::into_raw(res), Ordering::AcqRel);
    if !old.is_null() {
        ffi::synchronize_rcu();
        // SAFETY: `old` came from `KBox::into_raw` here; the swap took it
        // out of the slot, so it is dropped once.
        drop(unsafe { KBox::from_raw(old) });
    }
    c.sleeper.store(sleeper_task, Ordering::Release);
    Ok(())
}

/// Tears down CPU `cpu`'s part of the run, if any (at stop, or when the CPU
/// goes offline), and forgets its previous sample.
fn detach(cpu: u32) {
    let Some(c) = CPUS.get(cpu) else {
        return;
    };
    c.sleeper.store(ptr::null_mut(), Ordering::Release);
    let old = c.res.swap(ptr::null_mut(), Ordering::AcqRel);
    if !old.is_null() {
        // The controller may still hold the sleeper it loaded: wait.
        ffi::synchronize_rcu();
        // SAFETY: As in `attach()`.
        drop(unsafe { KBox::from_raw(old) });
    }
    c.has_prev.store(false, Ordering::Relaxed);
    c.prev_torn.store(false, Ordering::Relaxed);
    // The pending count stays: an NMI sent just before the CPU went down
    // can be delivered when it comes back, and must still find it.
}

/// CPU hotplug: a CPU came online (called from C). During a run it gets
/// its sources and writer; a failure is logged and leaves the CPU out.
#[no_mangle]
extern "C" fn nmiclock_rs_cpu_online(cpu: c_uint) -> c_int {
    if STATE.load(Ordering::Acquire) == RUNNING {
        if let Err(e) = attach(cpu) {
            pr_err!(
                "cpu{}: online during the run, but its part failed to start (error {})\n",
                cpu,
                e.to_errno()
            );
        }
    }
    0
}

/// CPU hotplug: a CPU is going offline (called from C).
#[no_mangle]
extern "C" fn nmiclock_rs_cpu_offline(cpu: c_uint) {
    detach(cpu);
}

/// `period` ns in TSC cycles, the unit of a `perf_hw` sample period.
fn cycles(period: u64) -> u64 {
    (period.saturating_mul(u64::from(ffi::tsc_khz())) / 1_000_000).max(1)
}

/// What a run holds beyond the per-CPU parts; dropping it stops
/// everything, in order.
struct Run {
    deadline: ffi::HrTimer,
    waker: Option<ffi::HrTimer>,
    sender: Option<ffi::HrTimer>,
    nmi: Option<ffi::NmiHandler>,
}

impl Drop for Run {
    fn drop(&mut self) {
        self.deadline.cancel();
        self.waker = None;
        if let Some(sender) = self.sender.take() {
            drop(sender);
            // NMIs already sent must still find the handler: wait (a
            // little) until every online CPU has taken its pending one.
            for _ in 0..100 {
                let pending = CPUS.iter().any(|(cpu, c)| {
                    ffi::cpu_online(cpu) && c.nmi_pending.load(Ordering::Acquire) != 0
                });
                if !pending {
                    break;
                }
                ffi::sleep_us(1_000);
            }
        }
        if self.nmi.is_some() {
            ffi::sleep_us(STRAGGLER_GRACE_US);
        }
        // Releasing the counters stops their overflows; stopping the
        // writers ends the updates.
        ffi::with_cpus_held(|| {
            for (cpu, _) in CPUS.iter() {
                detach(cpu);
            }
        });
        self.nmi = None;
    }
}

static RUN: AtomicPtr<Run> = AtomicPtr::new(ptr::null_mut());

/// Index of `name` in `settings::SOURCES`.
fn source_index(name: &str) -> u32 {
    settings::SOURCES
        .iter()
        .position(|s| *s == name)
        .unwrap_or(0) as u32
}

/// Sets up the sources and writers of a run.
fn build() -> Result<KBox<Run>> {
    let period_ns = u64::from(settings::get(Key::PeriodUs)) * 1_000;
    PERIOD_NS.store(period_ns, Ordering::Relaxed);
    let mut run = KBox::new(
        Run {
            deadline: ffi::HrTimer::new(deadline)?,
            waker: None,
            sender: None,
            nmi: None,
        },
        GFP_KERNEL,
    )?;
    let requested = settings::name_of(Key::NmiSource);
    PERF_HW_ERROR.store(0, Ordering::Relaxed);
    let mut source = requested;
    if requested == "perf_hw" || requested == "auto" {
        // Probe on this CPU: a machine without a PMU fails here.
        match ffi::PerfEvent::new(ffi::cpu(), true, cycles(period_ns)) {
            Ok(probe) => {
                drop(probe);
                source = "perf_hw";
            }
            Err(e) => {
                PERF_HW_ERROR.store(e.to_errno(), Ordering::Relaxed);
                if requested == "perf_hw" {
                    pr_err!(
                        "start: perf_hw: cannot create a CPU-cycles counter (error {}); no PMU? Try nmi_source=ipi\n",
                        e.to_errno()
                    );
                    return Err(e);
                }
                pr_info!(
                    "start: perf_hw unavailable (error {}, no PMU?): nmi_source=auto uses ipi\n",
                    e.to_errno()
                );
                source = "ipi";
            }
        }
    }
    SOURCE_USED.store(source_index(source), Ordering::Relaxed);
    if source == "ipi" {
        run.nmi = Some(ffi::NmiHandler::register().inspect_err(|e| {
            pr_err!(
                "start: ipi: cannot register an NMI handler (error {})\n",
                e.to_errno()
            )
        })?);
    }
    ffi::with_cpus_held(|| -> Result {
        for (cpu, _) in CPUS.iter() {
            if ffi::cpu_online(cpu) {
                attach(cpu).inspect_err(|e| {
                    pr_err!(
                        "start: {}: cannot start on cpu{} (error {})\n",
                        source,
                        cpu,
                        e.to_errno()
                    )
                })?;
            }
        }
        Ok(())
    })?;
    let waker = ffi::HrTimer::new(wake_tick)?;
    waker.start(WAKE_PERIOD_NS);
    run.waker = Some(waker);
    if source == "ipi" {
        let sender = ffi::HrTimer::new(ipi_tick)?;
        sender.start(period_ns);
        run.sender = Some(sender);
    }
    run.deadline
        .start(u64::from(settings::get(Key::DurationS)) * 1_000_000_000);
    Ok(run)
}

/// Zeroes this module's run counters, anomalies and histogram (and the
/// clock's and acct updater's counters). Not while a run is in progress.
fn reset_counters() {
    for (_, c) in CPUS.iter() {
        for a in [
            &c.samples,
            &c.nmi_samples,
            &c.torn,
            &c.backwards,
            &c.cross,
            &c.max_backstep,
            &c.prev_ns,
            &c.prev_ref_lo,
            &c.prev_ref_hi,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        c.has_prev.store(false, Ordering::Relaxed);
        c.prev_torn.store(false, Ordering::Relaxed);
        c.nmi_leftovers.store(0, Ordering::Relaxed);
        for a in [&c.wakeups, &c.late_wakeups, &c.max_wake_ns] {
            a.store(0, Ordering::Relaxed);
        }
        for h in &c.hist {
            h.store(0, Ordering::Relaxed);
        }
    }
    for a in &ANOMALIES {
        a.ready.store(false, Ordering::Relaxed);
    }
    ANOMALY_NEXT.store(0, Ordering::Relaxed);
    ANOMALY_DROPPED.store(0, Ordering::Relaxed);
    NMI_HANDLER_NS.clear();
    HIGH_WATER.store(0, Ordering::Relaxed);
    kclock::reset_stats();
    kacct::reset();
}

/// Starts a run (from `control` or `autostart`). `EBUSY` if one is in
/// progress, or the acct updater is busy with a run or benchmark.
pub(crate) fn start() -> Result {
    let from = STATE.load(Ordering::Acquire);
    if from == STARTING
        || from == RUNNING
        || from == STOPPING
        || STATE
            .compare_exchange(from, STARTING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        pr_err!("start: a run is in progress; stop it first\n");
        return Err(EBUSY);
    }
    if !kacct::try_claim() {
        STATE.store(from, Ordering::Release);
        pr_err!("start: an acct run or benchmark is in progress\n");
        return Err(EBUSY);
    }
    reset_counters();
    let (mult, shift) = kclock::conversion_in_use();
    MULT.store(mult, Ordering::Relaxed);
    SHIFT.store(shift, Ordering::Relaxed);
    START_NS.store(ffi::local_clock(), Ordering::Relaxed);
    START_REF.store(ffi::mono_fast_ns(), Ordering::Relaxed);
    END_NS.store(0, Ordering::Relaxed);
    STATE.store(RUNNING, Ordering::Release);
    match build() {
        Ok(run) => {
            RUN.store(KBox::into_raw(run), Ordering::Release);
            let mut line = Line::new();
            let _ = settings::show(&mut line, true);
            pr_info!(
                "start: nmi_source in use: {};{}\n",
                settings::SOURCES
                    .get(SOURCE_USED.load(Ordering::Relaxed) as usize)
                    .copied()
                    .unwrap_or("?"),
                line.as_str()
            );
            Ok(())
        }
        Err(e) => {
            STATE.store(IDLE, Ordering::Release);
            kacct::release();
            Err(e)
        }
    }
}

/// Stops the run in progress, logs its End of test line. `EBUSY` if none
/// is running (or another stop is under way).
pub(crate) fn stop(why: &str) -> Result {
    if STATE
        .compare_exchange(RUNNING, STOPPING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(EBUSY);
    }
    let p = RUN.swap(ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: `p` came from `KBox::into_raw` in `start()`; the swap
        // gives it to exactly one stopper.
        drop(unsafe { KBox::from_raw(p) });
    }
    END_NS.store(ffi::local_clock(), Ordering::Relaxed);
    kacct::check_integrals();
    kacct::release();
    STATE.store(DONE, Ordering::Release);
    let t = Totals::now();
    let mut line = Line::new();
    let _ = settings::show(&mut line, true);
    let _ = t.show_inline(&mut line);
    pr_info!(
        "End of test: {} ({}):{}\n",
        if t.errors() == 0 {
            "SUCCESS"
        } else {
            "FAILURE"
        },
        why,
        line.as_str()
    );
    Ok(())
}

/// Zeroes the counters and returns to `idle`. `EBUSY` during a run.
pub(crate) fn reset() -> Result {
    let from = STATE.load(Ordering::Acquire);
    if (from != IDLE && from != DONE)
        || STATE
            .compare_exchange(from, STARTING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        pr_err!("reset: not while a run is in progress\n");
        return Err(EBUSY);
    }
    reset_counters();
    START_NS.store(0, Ordering::Relaxed);
    END_NS.store(0, Ordering::Relaxed);
    STATE.store(IDLE, Ordering::Release);
    Ok(())
}

/// Whether settings may change (no run in progress).
pub(crate) fn idle() -> bool {
    let s = STATE.load(Ordering::Acquire);
    s == IDLE || s == DONE
}

/// The current state's name.
pub(crate) fn state() -> &'static str {
    state_name(STATE.load(Ordering::Acquire))
}

/// One log line (printk takes one string).
type Line = FmtBuf<640>;

/// The run's counts, summed over CPUs.
struct Totals {
    samples: u64,
    nmi_samples: u64,
    torn: u64,
    backwards: u64,
    cross: u64,
    max_backstep: u64,
    stalls: u64,
    epoch_updates: u64,
    wrap_overruns: u64,
    acct_updates: u64,
    acct_races: u64,
    acct_bad: u64,
    acct_backwards: u64,
    acct_mismatches: u64,
}

impl Totals {
    fn now() -> Self {
        let (stalls, epoch_updates, wrap_overruns) = kclock::totals();
        let (acct_updates, acct_races, acct_bad, acct_backwards, acct_mismatches) = kacct::totals();
        Self {
            samples: CPUS.sum(|c| &c.samples),
            nmi_samples: CPUS.sum(|c| &c.nmi_samples),
            torn: CPUS.sum(|c| &c.torn),
            backwards: CPUS.sum(|c| &c.backwards),
            cross: CPUS.sum(|c| &c.cross),
            max_backstep: CPUS.max(|c| &c.max_backstep),
            stalls,
            epoch_updates,
            wrap_overruns,
            acct_updates,
            acct_races,
            acct_bad,
            acct_backwards,
            acct_mismatches,
        }
    }

    /// Every anomaly: what makes a run a FAILURE.
    fn errors(&self) -> u64 {
        [
            self.torn,
            self.backwards,
            self.cross,
            self.stalls,
            self.acct_bad,
            self.acct_backwards,
            self.acct_mismatches,
        ]
        .iter()
        .fold(0u64, |a, b| a.wrapping_add(*b))
    }

    fn pairs(&self) -> [(&'static str, u64); 15] {
        [
            ("samples", self.samples),
            ("nmi_samples", self.nmi_samples),
            ("torn_reads", self.torn),
            ("backwards", self.backwards),
            ("cross_cpu_backwards", self.cross),
            ("max_backstep_ns", self.max_backstep),
            ("clock_stalls", self.stalls),
            ("epoch_updates", self.epoch_updates),
            ("wrap_overruns", self.wrap_overruns),
            ("acct_updates", self.acct_updates),
            ("acct_races", self.acct_races),
            ("acct_bad_deltas", self.acct_bad),
            ("acct_timexpd_backwards", self.acct_backwards),
            ("acct_integral_mismatches", self.acct_mismatches),
            ("errors", self.errors()),
        ]
    }

    fn show_inline(&self, w: &mut impl Write) -> fmt::Result {
        for (k, v) in self.pairs() {
            write!(w, " {k}={v}")?;
        }
        Ok(())
    }
}

fn elapsed_ms() -> u64 {
    let start = START_NS.load(Ordering::Relaxed);
    if start == 0 {
        return 0;
    }
    let end = match END_NS.load(Ordering::Relaxed) {
        0 => ffi::local_clock(),
        e => e,
    };
    end.saturating_sub(start) / 1_000_000
}

/// Writes the run's part of `stats`. Keys the clock and acct parts already
/// give (`clock_stalls`, `epoch_updates`, `wrap_overruns`, `acct_*`) are
/// not repeated.
pub(crate) fn show_stats(w: &mut impl Write) -> fmt::Result {
    let t = Totals::now();
    writeln!(w, "state: {}", state())?;
    writeln!(w, "nmi_source: {}", source_in_use())?;
    writeln!(
        w,
        "nmi_source_requested: {}",
        settings::name_of(Key::NmiSource)
    )?;
    writeln!(
        w,
        "perf_hw_error: {}",
        PERF_HW_ERROR.load(Ordering::Relaxed)
    )?;
    for (k, v) in t.pairs() {
        if matches!(
            k,
            "clock_stalls"
                | "epoch_updates"
                | "wrap_overruns"
                | "acct_updates"
                | "acct_races"
                | "acct_bad_deltas"
                | "acct_timexpd_backwards"
                | "acct_integral_mismatches"
        ) {
            continue;
        }
        writeln!(w, "{k}: {v}")?;
    }
    writeln!(w, "nmi_leftovers: {}", CPUS.sum(|c| &c.nmi_leftovers))?;
    writeln!(w, "nmi_handler_p50_ns: {}", NMI_HANDLER_NS.quantile(500))?;
    writeln!(w, "nmi_handler_p99_ns: {}", NMI_HANDLER_NS.quantile(990))?;
    writeln!(w, "nmi_handler_max_ns: {}", NMI_HANDLER_NS.max())?;
    writeln!(w, "wakeups: {}", CPUS.sum(|c| &c.wakeups))?;
    writeln!(w, "late_wakeups: {}", CPUS.sum(|c| &c.late_wakeups))?;
    writeln!(w, "max_wake_latency_ns: {}", CPUS.max(|c| &c.max_wake_ns))?;
    writeln!(w, "elapsed_ms: {}", elapsed_ms())?;
    writeln!(
        w,
        "anomalies_kept: {}",
        ANOMALY_NEXT
            .load(Ordering::Relaxed)
            .min(ANOMALY_SLOTS as u64)
    )?;
    writeln!(
        w,
        "anomalies_dropped: {}",
        ANOMALY_DROPPED.load(Ordering::Relaxed)
    )
}

/// The source a run uses, or "none" before the first run.
pub(crate) fn source_in_use() -> &'static str {
    match SOURCE_USED.load(Ordering::Relaxed) {
        0 => "none",
        i => settings::SOURCES.get(i as usize).copied().unwrap_or("?"),
    }
}

/// Writes `histogram`: the read cost in ns, log2 buckets, bpftrace style.
pub(crate) fn show_histogram(w: &mut impl Write) -> fmt::Result {
    let mut counts = [0u64; HIST_BUCKETS];
    for (_, c) in CPUS.iter() {
        for (n, h) in counts.iter_mut().zip(c.hist.iter()) {
            *n = n.wrapping_add(h.load(Ordering::Relaxed));
        }
    }
    writeln!(w, "@read_ns:")?;
    let first = counts.iter().position(|&n| n != 0);
    let last = counts.iter().rposition(|&n| n != 0);
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(());
    };
    let max = counts.iter().copied().max().unwrap_or(1).max(1);
    for (b, &n) in counts.iter().enumerate().take(last + 1).skip(first) {
        let mut label = Line::new();
        match b {
            0 => write!(label, "[0]")?,
            1 => write!(label, "[1]")?,
            _ => write!(label, "[{}, {})", 1u64 << (b - 1), 1u64 << b)?,
        }
        let bar = (n.saturating_mul(52) / max) as usize;
        write!(w, "{:<20} {:>10} |", label.as_str(), n)?;
        for i in 0..52 {
            w.write_char(if i < bar { '@' } else { ' ' })?;
        }
        writeln!(w, "|")?;
    }
    Ok(())
}

/// Writes `percpu`: one line of counts per CPU.
pub(crate) fn show_percpu(w: &mut impl Write) -> fmt::Result {
    for (cpu, c) in CPUS.iter() {
        if !ffi::cpu_online(cpu) && c.samples.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let (reads, stalls, epochs) = kclock::cpu_counts(cpu);
        let (acct_updates, acct_bad, acct_back) = kacct::cpu_counts(cpu);
        writeln!(
            w,
            "cpu{cpu}: samples={} nmi_samples={} torn_reads={} backwards={} cross_cpu_backwards={} clock_reads={reads} clock_stalls={stalls} epoch_updates={epochs} acct_updates={acct_updates} acct_bad_deltas={acct_bad} acct_timexpd_backwards={acct_back} wakeups={} late_wakeups={} max_wake_latency_ns={}",
            c.samples.load(Ordering::Relaxed),
            c.nmi_samples.load(Ordering::Relaxed),
            c.torn.load(Ordering::Relaxed),
            c.backwards.load(Ordering::Relaxed),
            c.cross.load(Ordering::Relaxed),
            c.wakeups.load(Ordering::Relaxed),
            c.late_wakeups.load(Ordering::Relaxed),
            c.max_wake_ns.load(Ordering::Relaxed),
        )?;
    }
    Ok(())
}

/// Writes `anomalies`: the first ones kept, with their context.
pub(crate) fn show_anomalies(w: &mut impl Write) -> fmt::Result {
    let seen = ANOMALY_NEXT.load(Ordering::Relaxed);
    writeln!(w, "kept: {}", seen.min(ANOMALY_SLOTS as u64))?;
    writeln!(w, "dropped: {}", ANOMALY_DROPPED.load(Ordering::Relaxed))?;
    for (i, a) in ANOMALIES.iter().enumerate() {
        if !a.ready.load(Ordering::Acquire) {
            continue;
        }
        let kind = KIND_NAMES
            .get(a.kind.load(Ordering::Relaxed) as usize)
            .copied()
            .unwrap_or("?");
        let ctx = match a.ctx.load(Ordering::Relaxed) {
            0 => "task",
            1 => "irq",
            _ => "nmi",
        };
        writeln!(
            w,
            "{i}: kind={kind} cpu={} ctx={ctx} value_ns={} against_ns={} seq={} copy={} epoch_ns={} at_us={}",
            a.cpu.load(Ordering::Relaxed),
            a.value.load(Ordering::Relaxed),
            a.against.load(Ordering::Relaxed),
            a.seq.load(Ordering::Relaxed),
            a.copy.load(Ordering::Relaxed),
            a.epoch_ns.load(Ordering::Relaxed),
            a.at_ns.load(Ordering::Relaxed) / 1_000
        )?;
    }
    Ok(())
}

/// The run's per-CPU state and CPU hotplug callbacks, installed at load.
/// Dropping it stops a run in progress and frees the state.
pub(crate) struct Installed {
    hotplug: Option<ffi::CpuHotplug>,
}

impl Installed {
    /// Installs the per-CPU state and the hotplug callbacks.
    pub(crate) fn new() -> Result<Self> {
        CPUS.install(CpuRun::default)?;
        match ffi::CpuHotplug::setup() {
            Ok(hotplug) => Ok(Self {
                hotplug: Some(hotplug),
            }),
            Err(e) => {
                // SAFETY: Nothing uses the slots yet.
                unsafe { CPUS.uninstall() };
                Err(e)
            }
        }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if stop("module unloaded").is_ok() {
            pr_info!("stopped the run in progress at unload\n");
        }
        // A stop from the deadline work may be under way: wait for it.
        ffi::work_cancel();
        self.hotplug = None;
        // SAFETY: No run is left (stopped above or by the work we waited
        // for), so no source, worker or handler uses the slots, and the
        // debugfs files are gone.
        unsafe { CPUS.uninstall() };
    }
}
