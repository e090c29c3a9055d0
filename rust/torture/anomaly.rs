// SPDX-License-Identifier: GPL-2.0

//! The anomaly log: the first [`SLOTS`] anomalies of a run, kept with their
//! context (which CPU, which context, the values, the clock data the read
//! used), for `anomalies`; later ones are only counted. Recording is
//! NMI-safe: a slot is claimed with one atomic add and published with a
//! release store.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::clock::Reading;
use crate::ffi;
use crate::ffi::cpu::Context;

/// Anomalies kept with their context.
pub(crate) const SLOTS: usize = 32;

/// What went wrong.
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum Kind {
    /// The clock's elapsed time disagreed with the counter's.
    Torn = 0,
    /// The clock stepped back on one CPU.
    Backwards,
    /// The clock read older than what another CPU had already read.
    CrossCpu,
    /// A read gave up waiting for the writer.
    Stall,
    /// An acct update applied a bad delta.
    AcctBadDelta,
    /// An acct update moved `acct_timexpd` back.
    AcctBackwards,
    /// The clock's elapsed time disagreed with the reference clock's.
    Reference,
}

impl Kind {
    const NAMES: [&'static str; 7] = [
        "torn_read",
        "backwards",
        "cross_cpu_backwards",
        "clock_stall",
        "acct_bad_delta",
        "acct_timexpd_backwards",
        "reference_mismatch",
    ];

    fn name_of(v: u32) -> &'static str {
        Self::NAMES.get(v as usize).copied().unwrap_or("?")
    }
}

/// One kept anomaly; `ready` is set (release) once the rest is written.
struct Slot {
    ready: AtomicBool,
    kind: AtomicU32,
    cpu: AtomicU32,
    ctx: AtomicU32,
    value: AtomicU64,
    against: AtomicU64,
    seq: AtomicU32,
    copy: AtomicU32,
    epoch_ns: AtomicU64,
    now_cyc: AtomicU64,
    epoch_cyc: AtomicU64,
    base_cyc: AtomicU64,
    mult: AtomicU32,
    shift: AtomicU32,
    at_ns: AtomicU64,
}

impl Slot {
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
            now_cyc: AtomicU64::new(0),
            epoch_cyc: AtomicU64::new(0),
            base_cyc: AtomicU64::new(0),
            mult: AtomicU32::new(0),
            shift: AtomicU32::new(0),
            at_ns: AtomicU64::new(0),
        }
    }
}

/// The anomalies kept: a slot each for the first, the next to take, and those without one.
struct Kept {
    /// One slot per anomaly kept, in the order they came.
    slots: [Slot; SLOTS],
    /// The next slot to take.
    next: AtomicU64,
    /// Anomalies that found no slot left.
    dropped: AtomicU64,
}

static KEPT: Kept = Kept {
    slots: [const { Slot::new() }; SLOTS],
    next: AtomicU64::new(0),
    dropped: AtomicU64::new(0),
};

/// Keeps an anomaly if a slot is left, else counts it. `at_ns` is its time
/// since the run started; `base_cyc` the counter value of the read it was
/// checked against, where that was a read (0 where not). Any context, NMI
/// included.
pub(crate) fn record(
    kind: Kind,
    ctx: Context,
    value: u64,
    against: u64,
    base_cyc: u64,
    r: &Reading,
    at_ns: u64,
) {
    let i = KEPT.next.fetch_add(1, Ordering::Relaxed);
    let Some(a) = usize::try_from(i).ok().and_then(|i| KEPT.slots.get(i)) else {
        KEPT.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    };
    a.kind.store(kind as u32, Ordering::Relaxed);
    a.cpu.store(ffi::cpu::this(), Ordering::Relaxed);
    a.ctx.store(ctx as u32, Ordering::Relaxed);
    a.value.store(value, Ordering::Relaxed);
    a.against.store(against, Ordering::Relaxed);
    a.seq.store(r.seq, Ordering::Relaxed);
    a.copy.store(r.copy, Ordering::Relaxed);
    a.epoch_ns.store(r.epoch_ns, Ordering::Relaxed);
    a.now_cyc.store(r.now_cyc, Ordering::Relaxed);
    a.epoch_cyc.store(r.epoch_cyc, Ordering::Relaxed);
    a.base_cyc.store(base_cyc, Ordering::Relaxed);
    a.mult.store(r.mult, Ordering::Relaxed);
    a.shift.store(r.shift, Ordering::Relaxed);
    a.at_ns.store(at_ns, Ordering::Relaxed);
    a.ready.store(true, Ordering::Release);
}

/// Empties the log. Not while a run records.
pub(crate) fn clear() {
    for a in &KEPT.slots {
        a.ready.store(false, Ordering::Relaxed);
    }
    KEPT.next.store(0, Ordering::Relaxed);
    KEPT.dropped.store(0, Ordering::Relaxed);
}

/// Anomalies kept.
pub(crate) fn kept() -> u64 {
    KEPT.next.load(Ordering::Relaxed).min(SLOTS as u64)
}

/// Anomalies counted but not kept.
pub(crate) fn dropped() -> u64 {
    KEPT.dropped.load(Ordering::Relaxed)
}

/// Writes `anomalies`: the ones kept, with their context.
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    writeln!(w, "kept: {}", kept())?;
    writeln!(w, "dropped: {}", dropped())?;
    for (i, a) in KEPT.slots.iter().enumerate() {
        if !a.ready.load(Ordering::Acquire) {
            continue;
        }
        writeln!(
            w,
            "{i}: kind={} cpu={} ctx={} value_ns={} against_ns={} seq={} copy={} epoch_ns={} mult={} shift={} at_us={} cyc={} epoch_cyc={} base_cyc={}",
            Kind::name_of(a.kind.load(Ordering::Relaxed)),
            a.cpu.load(Ordering::Relaxed),
            Context::from_u32(a.ctx.load(Ordering::Relaxed)).name(),
            a.value.load(Ordering::Relaxed),
            a.against.load(Ordering::Relaxed),
            a.seq.load(Ordering::Relaxed),
            a.copy.load(Ordering::Relaxed),
            a.epoch_ns.load(Ordering::Relaxed),
            a.mult.load(Ordering::Relaxed),
            a.shift.load(Ordering::Relaxed),
            a.at_ns.load(Ordering::Relaxed) / 1_000,
            a.now_cyc.load(Ordering::Relaxed),
            a.epoch_cyc.load(Ordering::Relaxed),
            a.base_cyc.load(Ordering::Relaxed),
        )?;
    }
    Ok(())
}
