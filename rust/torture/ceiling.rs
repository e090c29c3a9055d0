// SPDX-License-Identifier: GPL-2.0

//! The NMI ceiling of each interrupt source: the most samples per second
//! it delivers at the shortest period with an empty handler, no writers
//! and no wake probe, in a run of [`RUN_MS`]. `bench` has it measured
//! ([`measure`], nested in its activity) and shows it ([`each`]); a stress
//! run reports its own rate against it (`nmi_ceiling_per_s`,
//! [`per_s`]).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::source::Source;
use super::Stress;
use crate::activity::Guard;

/// Period of the ceiling runs: the shortest `period_us` accepts.
pub(crate) const PERIOD_NS: u64 = 10_000;

/// Length of a ceiling run, in ms.
pub(crate) const RUN_MS: u32 = 1_000;

/// The sources a ceiling is measured for, in this order.
const SOURCES: [Source; 2] = [Source::Ipi, Source::PerfHw];

/// What the last measurement of a source gave.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measured {
    /// Not measured (no bench yet, or no such source here).
    Not,
    /// Samples per second.
    Rate(u64),
    /// The source could not start: its errno, positive.
    CouldNotStart(u64),
}

/// One source's last measurement, kept for any context to read.
struct Last {
    /// Which [`Measured`] it is: [`NOT`], [`RATE`] or [`ERRNO`].
    kind: AtomicU32,
    /// The rate, or the errno.
    value: AtomicU64,
}

const NOT: u32 = 0;
const RATE: u32 = 1;
const ERRNO: u32 = 2;

impl Last {
    fn get(&self) -> Measured {
        let v = self.value.load(Ordering::Relaxed);
        match self.kind.load(Ordering::Relaxed) {
            RATE => Measured::Rate(v),
            ERRNO => Measured::CouldNotStart(v),
            _ => Measured::Not,
        }
    }

    fn set(&self, m: Measured) {
        let (kind, v) = match m {
            Measured::Not => (NOT, 0),
            Measured::Rate(v) => (RATE, v),
            Measured::CouldNotStart(e) => (ERRNO, e),
        };
        self.value.store(v, Ordering::Relaxed);
        self.kind.store(kind, Ordering::Relaxed);
    }
}

/// Each source's last measurement, as in [`SOURCES`].
static LAST: [Last; SOURCES.len()] = [const {
    Last {
        kind: AtomicU32::new(NOT),
        value: AtomicU64::new(0),
    }
}; SOURCES.len()];

/// Each source and its last measurement.
pub(crate) fn each() -> impl Iterator<Item = (Source, Measured)> {
    SOURCES.into_iter().zip(LAST.iter().map(Last::get))
}

/// The ceiling last measured for `source`, samples per second, if any.
pub(crate) fn per_s(source: Source) -> Option<u64> {
    each().find_map(|(s, m)| match m {
        Measured::Rate(v) if s == source => Some(v),
        _ => None,
    })
}

/// Measures the ceiling of each source this machine has, each in a run
/// nested in `bench`'s activity.
pub(crate) fn measure(stress: &Stress, bench: &Guard) {
    for (slot, source) in LAST.iter().zip(SOURCES) {
        slot.set(Measured::Not);
        if source == Source::Ipi && !crate::arch::NMI_IPI {
            continue;
        }
        let m = match stress.ceiling(bench, source, PERIOD_NS, RUN_MS) {
            Ok(r) => Measured::Rate(r.samples.saturating_mul(1_000) / r.elapsed_ms.max(1)),
            Err(e) => Measured::CouldNotStart(e.to_errno().unsigned_abs().into()),
        };
        slot.set(m);
    }
}
