// SPDX-License-Identifier: GPL-2.0

//! x86_64: the TSC, read ordered (`lfence; rdtsc`) or bare; `perf_hw`
//! periods in TSC cycles (the TSC runs near the CPU's cycle rate); NMI IPIs
//! through the local APIC.

use super::PerfPeriod;
use crate::ffi;

pub(crate) use crate::counter::{Tsc as Bare, TscOrdered as Ordered};

/// The architecture, as `uname -m` says (`stats`).
pub(crate) const NAME: &str = "x86_64";

/// What the counter is called in messages.
pub(crate) const COUNTER: &str = "TSC";

/// The bench's rows of the bare counter reads, ordered and bare (the
/// floor under every clock's read).
pub(crate) const FLOOR_ORDERED: &str = "rdtsc_ordered (floor)";
pub(crate) const FLOOR_BARE: &str = "rdtsc (floor)";

/// The setting `counter`'s help line.
pub(crate) const COUNTER_HELP: &str = "counter read: ordered (lfence; rdtsc) or bare rdtsc";

/// Whether the `ipi` NMI source exists here.
pub(crate) const NMI_IPI: bool = true;

/// The `perf_hw` sample period for a sample every `period_ns`: that many
/// ns in TSC cycles, never 0.
pub(crate) fn perf_hw_period(period_ns: u64) -> PerfPeriod {
    let khz = u64::from(ffi::time::counter_khz());
    PerfPeriod::Every((period_ns.saturating_mul(khz) / 1_000_000).max(1))
}
