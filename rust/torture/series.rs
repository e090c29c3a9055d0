// SPDX-License-Identifier: GPL-2.0

//! The run's per-second series, for debugfs `series`: at each whole second
//! of the run the monitor ([`super::monitor`], hard IRQ) records the
//! running totals of samples, NMI-context samples, window hits and
//! anomalies; `series` shows what each second added. The last [`SECONDS`]
//! seconds are shown (an hour); earlier ones are counted as dropped.
//!
//! The ring holds [`MARGIN`] seconds more than it shows, so that the slot
//! the monitor writes next is never one `series` shows or takes a base
//! from, however long a reader takes (up to that margin). Each slot also
//! carries the second it holds, written last, and a reader that finds
//! another second there (a reader held up past the margin) ends the
//! listing there rather than show a delta across two runs of the ring.

use core::fmt::{self, Write};
use core::sync::atomic::{fence, AtomicU64, Ordering};

/// Seconds shown.
pub(crate) const SECONDS: usize = 3600;

/// Seconds kept beyond those shown: the slots the monitor may be writing
/// while `series` is read.
const MARGIN: usize = 60;

/// Slots in the ring.
const RING: usize = SECONDS + MARGIN;

/// The totals at one second's end, and which second (plus 1; 0 while the
/// monitor writes it).
struct Point {
    second: AtomicU64,
    samples: AtomicU64,
    nmi_samples: AtomicU64,
    hits: AtomicU64,
    anomalies: AtomicU64,
}

/// The run's per-second series: a ring of points, and how many were recorded.
struct Series {
    /// The last [`RING`] seconds' points.
    points: [Point; RING],
    /// Seconds recorded in this run (the next one's number).
    recorded: AtomicU64,
}

static SERIES: Series = Series {
    points: [const {
        Point {
            second: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            nmi_samples: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            anomalies: AtomicU64::new(0),
        }
    }; RING],
    recorded: AtomicU64::new(0),
};

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
    SERIES.recorded.store(0, Ordering::Release);
}

/// Seconds recorded so far.
pub(crate) fn recorded() -> u64 {
    SERIES.recorded.load(Ordering::Acquire)
}

/// Records the totals at the end of every whole second up to
/// `elapsed_ns` since the start not recorded yet (the same totals for
/// each, should the monitor have been held up past more than one). The
/// monitor's only: one recorder.
pub(crate) fn record(elapsed_ns: u64, t: impl FnOnce() -> Totals) {
    let due = elapsed_ns / 1_000_000_000;
    let mut n = SERIES.recorded.load(Ordering::Relaxed);
    if n >= due {
        return;
    }
    let t = t();
    while n < due {
        if let Some(p) = SERIES.points.get((n % RING as u64) as usize) {
            p.second.store(0, Ordering::Relaxed);
            fence(Ordering::Release);
            p.samples.store(t.samples, Ordering::Relaxed);
            p.nmi_samples.store(t.nmi_samples, Ordering::Relaxed);
            p.hits.store(t.hits, Ordering::Relaxed);
            p.anomalies.store(t.anomalies, Ordering::Relaxed);
            p.second.store(n.wrapping_add(1), Ordering::Release);
        }
        n += 1;
    }
    SERIES.recorded.store(n, Ordering::Release);
}

/// The totals at the end of second `n`, if its slot still holds them
/// whole (not being written, not overwritten by a later second).
fn at(n: u64) -> Option<Totals> {
    let p = SERIES.points.get((n % RING as u64) as usize)?;
    let want = n.wrapping_add(1);
    if p.second.load(Ordering::Acquire) != want {
        return None;
    }
    let t = Totals {
        samples: p.samples.load(Ordering::Relaxed),
        nmi_samples: p.nmi_samples.load(Ordering::Relaxed),
        hits: p.hits.load(Ordering::Relaxed),
        anomalies: p.anomalies.load(Ordering::Relaxed),
    };
    fence(Ordering::Acquire);
    (p.second.load(Ordering::Relaxed) == want).then_some(t)
}

/// Writes `series`: `seconds:` recorded, `dropped:` (the first seconds,
/// not shown), then one line per second shown: what it added. Past the
/// first hour the base of the first line shown is the second before it,
/// [`MARGIN`] slots clear of the one the monitor writes next; a slot found
/// overwritten even so (a reader held up that long) ends the listing.
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    let n = recorded();
    let start = n.saturating_sub(SECONDS as u64);
    let base = if start == 0 {
        Some(Totals::default())
    } else {
        at(start - 1)
    };
    writeln!(w, "seconds: {n}")?;
    writeln!(w, "dropped: {start}")?;
    let Some(mut prev) = base else {
        return Ok(());
    };
    for s in start..n {
        let Some(t) = at(s) else {
            return Ok(());
        };
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
