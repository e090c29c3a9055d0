// SPDX-License-Identifier: GPL-2.0

//! The run's per-second series, for debugfs `series`: at each whole second
//! of the run the monitor ([`super::monitor`], hard IRQ) records the
//! running totals of samples, NMI-context samples, window hits and
//! anomalies; `series` shows what each second added. The last [`SECONDS`]
//! seconds are kept (an hour); earlier ones are counted as dropped.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering};

/// Seconds kept.
pub(crate) const SECONDS: usize = 3600;

/// The totals at one second's end.
struct Point {
    samples: AtomicU64,
    nmi_samples: AtomicU64,
    hits: AtomicU64,
    anomalies: AtomicU64,
}

static POINTS: [Point; SECONDS] = [const {
    Point {
        samples: AtomicU64::new(0),
        nmi_samples: AtomicU64::new(0),
        hits: AtomicU64::new(0),
        anomalies: AtomicU64::new(0),
    }
}; SECONDS];
/// Seconds recorded in this run (the next one's number).
static RECORDED: AtomicU64 = AtomicU64::new(0);

/// The totals one point holds.
#[derive(Clone, Copy, Default)]
pub(crate) struct Totals {
    pub(crate) samples: u64,
    pub(crate) nmi_samples: u64,
    pub(crate) hits: u64,
    pub(crate) anomalies: u64,
}

/// Starts a run's series (not while a run records).
pub(crate) fn reset() {
    RECORDED.store(0, Ordering::Release);
}

/// Seconds recorded so far.
pub(crate) fn recorded() -> u64 {
    RECORDED.load(Ordering::Acquire)
}

/// Records the totals at the end of every whole second up to
/// `elapsed_ns` since the start not recorded yet (the same totals for
/// each, should the monitor have been held up past more than one). The
/// monitor's only: one recorder.
pub(crate) fn record(elapsed_ns: u64, t: impl FnOnce() -> Totals) {
    let due = elapsed_ns / 1_000_000_000;
    let mut n = RECORDED.load(Ordering::Relaxed);
    if n >= due {
        return;
    }
    let t = t();
    while n < due {
        if let Some(p) = POINTS.get((n % SECONDS as u64) as usize) {
            p.samples.store(t.samples, Ordering::Relaxed);
            p.nmi_samples.store(t.nmi_samples, Ordering::Relaxed);
            p.hits.store(t.hits, Ordering::Relaxed);
            p.anomalies.store(t.anomalies, Ordering::Relaxed);
        }
        n += 1;
    }
    RECORDED.store(n, Ordering::Release);
}

fn at(n: u64) -> Totals {
    POINTS
        .get((n % SECONDS as u64) as usize)
        .map(|p| Totals {
            samples: p.samples.load(Ordering::Relaxed),
            nmi_samples: p.nmi_samples.load(Ordering::Relaxed),
            hits: p.hits.load(Ordering::Relaxed),
            anomalies: p.anomalies.load(Ordering::Relaxed),
        })
        .unwrap_or_default()
}

/// Writes `series`: `seconds:` recorded, `dropped:` (the first seconds,
/// no longer kept), then one line per second kept: what it added.
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    let n = recorded();
    // With the ring full, the oldest slot is the base of the next one shown
    // (the one before it is overwritten already), and is itself the next
    // the monitor overwrites: shown from the one after it.
    let first = n.saturating_sub(SECONDS as u64);
    let (mut prev, start) = if first == 0 {
        (Totals::default(), 0)
    } else {
        (at(first), first + 1)
    };
    writeln!(w, "seconds: {n}")?;
    writeln!(w, "dropped: {start}")?;
    for s in start..n {
        let t = at(s);
        writeln!(
            w,
            "{s}: samples={} nmi_samples={} window_hits={} anomalies={}",
            t.samples.wrapping_sub(prev.samples),
            t.nmi_samples.wrapping_sub(prev.nmi_samples),
            t.hits.wrapping_sub(prev.hits),
            t.anomalies.wrapping_sub(prev.anomalies)
        )?;
        prev = t;
    }
    Ok(())
}
