// SPDX-License-Identifier: GPL-2.0

//! The per-sample checks of the stress run. Each sample ([`sample`]), from
//! a perf overflow (IRQ or NMI) or an NMI IPI, reads nmiclock and checks
//! it:
//!
//! - against the previous sample on its CPU (backwards);
//! - against the highest time any CPU has seen, published with release and
//!   read with acquire before the clock is read (cross-CPU backwards);
//! - against the elapsed time of the kernel's NMI-safe
//!   `ktime_get_mono_fast_ns()` since the previous sample, read on both
//!   sides of the clock (a disagreement beyond [`TORN_TOLERANCE_NS`]
//!   outside that window is a torn read);
//!
//! it times the read into a log2 histogram, records the first anomalies
//! with their context, and runs one acct update for its CPU's record.
//! NMI-safe throughout: no locks, no allocation, no printk, nothing that
//! panics, no call through a pointer.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::anomaly::{self, Kind};
use crate::acct::Outcome;
use crate::bench::LatHist;
use crate::clock::Reading;
use crate::counter::{Counter, TscOrdered};
use crate::cyc_ns::cyc_to_ns;
use crate::ffi;
use crate::ffi::cpu::Context;
use crate::kacct;
use crate::kclock;

/// Disagreement with `ktime_get_mono_fast_ns()` over one sample interval
/// beyond which a read counts as torn.
pub(crate) const TORN_TOLERANCE_NS: u64 = 100_000;

/// log2 buckets of the read-cost histogram (ns).
pub(crate) const HIST_BUCKETS: usize = 32;

/// One CPU's counters and previous sample.
#[derive(Default)]
pub(crate) struct Cpu {
    pub(crate) samples: AtomicU64,
    pub(crate) nmi_samples: AtomicU64,
    pub(crate) torn: AtomicU64,
    pub(crate) backwards: AtomicU64,
    pub(crate) cross: AtomicU64,
    pub(crate) max_backstep: AtomicU64,
    prev_ns: AtomicU64,
    prev_ref_lo: AtomicU64,
    prev_ref_hi: AtomicU64,
    has_prev: AtomicBool,
    prev_torn: AtomicBool,
    pub(crate) hist: [AtomicU64; HIST_BUCKETS],
}

impl Cpu {
    /// Zeroes everything (not while this CPU samples).
    pub(crate) fn reset(&self) {
        for a in [
            &self.samples,
            &self.nmi_samples,
            &self.torn,
            &self.backwards,
            &self.cross,
            &self.max_backstep,
            &self.prev_ns,
            &self.prev_ref_lo,
            &self.prev_ref_hi,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        for h in &self.hist {
            h.store(0, Ordering::Relaxed);
        }
        self.forget();
    }

    /// Makes the next sample a new base: nothing from before compares with
    /// it (a CPU that went offline, or a new run).
    pub(crate) fn forget(&self) {
        self.has_prev.store(false, Ordering::Relaxed);
        self.prev_torn.store(false, Ordering::Relaxed);
    }
}

/// The highest time any CPU's sample has read.
static HIGH_WATER: AtomicU64 = AtomicU64::new(0);
/// `ktime_get_mono_fast_ns()` when the run started.
static START_REF: AtomicU64 = AtomicU64::new(0);
/// The clock's conversion when the run started, to time reads.
static MULT: AtomicU32 = AtomicU32::new(0);
static SHIFT: AtomicU32 = AtomicU32::new(0);

/// The cost of each NMI-context sample (the work of the NMI handler), in
/// ns: what `bench` reports as the NMI handler's cost.
pub(crate) static NMI_HANDLER_NS: LatHist = LatHist::new();

/// Prepares the checks for a new run (not while one samples).
pub(crate) fn start_run() {
    HIGH_WATER.store(0, Ordering::Relaxed);
    NMI_HANDLER_NS.clear();
    let (mult, shift) = kclock::conversion_in_use();
    MULT.store(mult, Ordering::Relaxed);
    SHIFT.store(shift, Ordering::Relaxed);
    START_REF.store(ffi::time::mono_fast_ns(), Ordering::Relaxed);
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Time since the run started, by the reference clock.
fn since_start(reference_ns: u64) -> u64 {
    reference_ns.wrapping_sub(START_REF.load(Ordering::Relaxed))
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

/// TSC cycles to ns with the run's conversion.
fn cycles_ns(cyc: u64) -> u64 {
    cyc_to_ns(
        cyc,
        MULT.load(Ordering::Relaxed),
        SHIFT.load(Ordering::Relaxed),
    )
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
    let at = since_start(ffi::time::mono_fast_ns());
    if v.bad_delta {
        anomaly::record(Kind::AcctBadDelta, ctx, time, prev, &r, at);
    }
    if v.backwards {
        anomaly::record(Kind::AcctBackwards, ctx, time, prev, &r, at);
    }
}

/// One sample on this CPU, whose state is `c`, from context `ctx`.
pub(crate) fn sample(c: &Cpu, ctx: Context) {
    inc(&c.samples);
    if ctx == Context::Nmi {
        inc(&c.nmi_samples);
    }
    // The highest time seen anywhere, before our own read: a read that
    // follows it must not be older.
    let high = HIGH_WATER.load(Ordering::Acquire);
    // The reference is read on both sides of the clock, so that whatever
    // comes between (in a VM: the host descheduling the vCPU) widens the
    // window instead of looking like a torn read.
    let ref_lo = ffi::time::mono_fast_ns();
    let t0 = TscOrdered.read();
    let r = kclock::read();
    let t1 = TscOrdered.read();
    let ref_hi = ffi::time::mono_fast_ns();
    if let Some(h) = c.hist.get(bucket(cycles_ns(t1.wrapping_sub(t0)))) {
        inc(h);
    }
    let ns = r.ns;
    let at = since_start(ref_hi);
    if c.has_prev.load(Ordering::Relaxed) {
        let prev = c.prev_ns.load(Ordering::Relaxed);
        if ns < prev {
            inc(&c.backwards);
            c.max_backstep.fetch_max(prev - ns, Ordering::Relaxed);
            anomaly::record(Kind::Backwards, ctx, ns, prev, &r, at);
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
                anomaly::record(Kind::Torn, ctx, ns, expected, &r, at);
            }
        }
    }
    if ns < high {
        inc(&c.cross);
        anomaly::record(Kind::CrossCpu, ctx, ns, high, &r, at);
    }
    HIGH_WATER.fetch_max(ns, Ordering::Release);
    if r.stalled {
        anomaly::record(Kind::Stall, ctx, ns, 0, &r, at);
    }
    c.prev_ns.store(ns, Ordering::Relaxed);
    c.prev_ref_lo.store(ref_lo, Ordering::Relaxed);
    c.prev_ref_hi.store(ref_hi, Ordering::Relaxed);
    c.has_prev.store(true, Ordering::Relaxed);
    acct_update(ctx, 0);
}

/// [`sample`], timed into [`NMI_HANDLER_NS`] when `ctx` is NMI context.
#[inline]
pub(crate) fn sample_timed(c: &Cpu, ctx: Context) {
    if ctx != Context::Nmi {
        sample(c, ctx);
        return;
    }
    let t0 = TscOrdered.read();
    sample(c, ctx);
    let t1 = TscOrdered.read();
    NMI_HANDLER_NS.record(cycles_ns(t1.wrapping_sub(t0)));
}
