// SPDX-License-Identifier: GPL-2.0

//! arm64: the arch timer's virtual counter `CNTVCT_EL0`, read ordered (`isb;
//! mrs`, as `arch_timer_read_cntvct_el0()`) or bare, at the rate of
//! `CNTFRQ_EL0`; `perf_hw` overflows are pseudo-NMIs when the kernel runs
//! with GICv3 priority masking (`irqchip.gicv3_pseudo_nmi=1`), plain IRQs
//! otherwise, which the run counts apart (`nmi_samples`).

use super::PerfPeriod;

pub(crate) use crate::counter::{Cntvct as Bare, CntvctOrdered as Ordered};

/// The architecture, as `uname -m` says (`stats`).
pub(crate) const NAME: &str = "aarch64";

/// What the counter is called in messages.
pub(crate) const COUNTER: &str = "arch timer counter (CNTVCT_EL0)";

/// The bench's rows of the bare counter reads, ordered and bare (the
/// floor under every clock's read).
pub(crate) const FLOOR_ORDERED: &str = "cntvct_ordered (floor)";
pub(crate) const FLOOR_BARE: &str = "cntvct (floor)";

/// The setting `counter`'s help line.
pub(crate) const COUNTER_HELP: &str =
    "counter read: ordered (isb; mrs cntvct_el0) or bare mrs cntvct_el0";

/// Whether the `ipi` NMI source exists here: arm64 sends its pseudo-NMI
/// IPIs (backtrace, KGDB) only from the kernel's own code.
pub(crate) const NMI_IPI: bool = false;

/// The `perf_hw` sample rate for a sample every `period_ns`: perf turns it
/// into a cycle period and adjusts that at each overflow, since nothing in
/// the kernel says how fast the PMU's cycle counter runs (1 GHz of virtual
/// time under QEMU, the core clock on hardware).
pub(crate) fn perf_hw_period(period_ns: u64) -> PerfPeriod {
    PerfPeriod::Freq((1_000_000_000 / period_ns.max(1)).max(1))
}
