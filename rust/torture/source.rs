// SPDX-License-Identifier: GPL-2.0

//! The interrupt sources of the stress run, each sampling every
//! `period_us` on every online CPU, behind one trait ([`InterruptSource`])
//! and one name table ([`NAMES`], the values of the setting `nmi_source`):
//!
//! - `perf_hw`: a per-CPU kernel counter on CPU cycles, whose overflow is
//!   an NMI on x86 (needs a PMU);
//! - `perf_sw`: the per-CPU cpu-clock software event, hard-IRQ context;
//! - `ipi`: real NMIs sent as NMI IPIs to every online CPU by an hrtimer,
//!   handled by an `NMI_LOCAL` handler that claims only NMIs this module
//!   sent;
//! - `auto`, a choice among them rather than a source: `perf_hw` where a
//!   counter can be created, else `ipi`.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use super::{live, on_sample, CPUS};
use crate::ffi;
use crate::ffi::cpu::Context;
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::nmi::{NmiHandler, NmiIpi, PerfEvent, PerfKind};
use crate::settings::{self, Key};

/// A source the run can use.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Source {
    /// CPU-cycle counter overflows (NMI).
    PerfHw = 0,
    /// cpu-clock software event overflows (hard IRQ).
    PerfSw = 1,
    /// NMI IPIs.
    Ipi = 2,
}

/// The values of the setting `nmi_source`: `auto`, then every source.
pub(crate) const NAMES: [&str; 4] = ["auto", PerfHw::NAME, PerfSw::NAME, Ipi::NAME];

impl Source {
    const ALL: [Self; 3] = [Self::PerfHw, Self::PerfSw, Self::Ipi];

    /// Its name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::PerfHw => PerfHw::NAME,
            Self::PerfSw => PerfSw::NAME,
            Self::Ipi => Ipi::NAME,
        }
    }

    /// The run-wide part of the source (see [`InterruptSource::start`]).
    fn start(self, period_ns: u64) -> Result<RunPart> {
        match self {
            Self::PerfHw => PerfHw::start(period_ns),
            Self::PerfSw => PerfSw::start(period_ns),
            Self::Ipi => Ipi::start(period_ns),
        }
    }

    /// The part of the source on CPU `cpu` (see
    /// [`InterruptSource::attach`]).
    pub(crate) fn attach(self, cpu: u32, period_ns: u64) -> Result<Option<PerfEvent>> {
        match self {
            Self::PerfHw => PerfHw::attach(cpu, period_ns),
            Self::PerfSw => PerfSw::attach(cpu, period_ns),
            Self::Ipi => Ipi::attach(cpu, period_ns),
        }
    }
}

/// One interrupt source.
trait InterruptSource {
    /// Its name (a value of `nmi_source`).
    const NAME: &'static str;

    /// What the run holds for the source beyond its per-CPU parts; set up
    /// before any CPU is attached, taken down after all are detached.
    fn start(_period_ns: u64) -> Result<RunPart> {
        Ok(RunPart::default())
    }

    /// The source's part on CPU `cpu` (task context, CPU hotplug held):
    /// for the perf sources the CPU's counter.
    fn attach(_cpu: u32, _period_ns: u64) -> Result<Option<PerfEvent>> {
        Ok(None)
    }
}

/// `perf_hw`.
struct PerfHw;

impl InterruptSource for PerfHw {
    const NAME: &'static str = "perf_hw";

    fn attach(cpu: u32, period_ns: u64) -> Result<Option<PerfEvent>> {
        perf_attach(cpu, PerfKind::Cycles, cycles(period_ns))
    }
}

/// `perf_sw`.
struct PerfSw;

impl InterruptSource for PerfSw {
    const NAME: &'static str = "perf_sw";

    fn attach(cpu: u32, period_ns: u64) -> Result<Option<PerfEvent>> {
        perf_attach(cpu, PerfKind::CpuClock, period_ns)
    }
}

/// A perf counter of `kind` on `cpu` whose overflows sample.
fn perf_attach(cpu: u32, kind: PerfKind, period: u64) -> Result<Option<PerfEvent>> {
    let event = PerfEvent::new(cpu, kind, period, || on_sample(Context::now()))?;
    Ok(Some(event))
}

/// `ipi`.
struct Ipi;

impl InterruptSource for Ipi {
    const NAME: &'static str = "ipi";

    fn start(period_ns: u64) -> Result<RunPart> {
        let handler = NmiHandler::register(nmi_handler).inspect_err(|e| {
            pr_err!(
                "start: ipi: cannot register an NMI handler (error {})\n",
                e.to_errno()
            )
        })?;
        let mut ipi = NmiIpi::new()?;
        let sender = HrTimer::new(move || send(&mut ipi, period_ns))?;
        sender.start(period_ns);
        Ok(RunPart {
            sender: Some(sender),
            handler: Some(handler),
        })
    }
}

/// `period` ns in TSC cycles, the unit of a `perf_hw` sample period.
fn cycles(period: u64) -> u64 {
    (period.saturating_mul(u64::from(ffi::time::tsc_khz())) / 1_000_000).max(1)
}

/// What a source holds for a run; dropping it stops the source.
#[derive(Default)]
pub(crate) struct RunPart {
    /// `ipi`: the hrtimer that sends the NMIs.
    sender: Option<HrTimer>,
    /// `ipi`: the NMI handler.
    handler: Option<NmiHandler>,
}

/// How long the handler stays registered after the sender stopped and the
/// pending counts drained, for stragglers.
const STRAGGLER_GRACE_US: u32 = 20_000;

impl RunPart {
    /// Stops sending (before the CPUs are detached), and waits, a little,
    /// until every NMI already sent has been taken.
    pub(crate) fn stop_sending(&mut self) {
        if self.sender.take().is_none() {
            return;
        }
        for _ in 0..100 {
            let pending = CPUS.iter().any(|(cpu, c)| {
                ffi::cpu::online(cpu) && c.nmi.pending.load(Ordering::Acquire) != 0
            });
            if !pending {
                break;
            }
            ffi::cpu::sleep_us(1_000);
        }
        if self.handler.is_some() {
            ffi::cpu::sleep_us(STRAGGLER_GRACE_US);
        }
    }
}

/// The source in use (`Source as u32`), or [`NONE`] before the first run.
static IN_USE: AtomicU32 = AtomicU32::new(NONE);
const NONE: u32 = u32::MAX;
/// The error of the last failed attempt to create `perf_hw` counters.
static PERF_HW_ERROR: AtomicI32 = AtomicI32::new(0);

/// The source a run uses (or used last), if any.
pub(crate) fn in_use() -> Option<Source> {
    let v = IN_USE.load(Ordering::Relaxed);
    Source::ALL.iter().copied().find(|s| *s as u32 == v)
}

/// The error of the last failed attempt to create a `perf_hw` counter.
pub(crate) fn perf_hw_error() -> i32 {
    PERF_HW_ERROR.load(Ordering::Relaxed)
}

/// Chooses the run's source from the setting (resolving `auto`: a probe
/// counter on this CPU tells whether there is a PMU) and starts its
/// run-wide part. Logs why when it cannot.
pub(crate) fn choose_and_start(period_ns: u64) -> Result<(Source, RunPart)> {
    PERF_HW_ERROR.store(0, Ordering::Relaxed);
    // The setting's values are `auto`, then each source in `ALL` order.
    let (source, auto) = match settings::get(Key::NmiSource) as usize {
        0 => (Source::PerfHw, true),
        i => (
            Source::ALL.get(i - 1).copied().unwrap_or(Source::PerfHw),
            false,
        ),
    };
    let source = if source == Source::PerfHw {
        match PerfHw::attach(ffi::cpu::this(), period_ns) {
            Ok(probe) => {
                drop(probe);
                Source::PerfHw
            }
            Err(e) => {
                PERF_HW_ERROR.store(e.to_errno(), Ordering::Relaxed);
                if !auto {
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
                Source::Ipi
            }
        }
    } else {
        source
    };
    IN_USE.store(source as u32, Ordering::Relaxed);
    Ok((source, source.start(period_ns)?))
}

// ---- ipi: sending and claiming --------------------------------------------------

/// One CPU's NMI accounting for the `ipi` source.
#[derive(Default)]
pub(crate) struct Cpu {
    /// NMIs sent to this CPU and not yet handled.
    pending: AtomicU32,
    /// A handler consumed more sends than its one NMI: one more NMI of
    /// ours may still be latched or in flight.
    owed: AtomicBool,
    /// Such owed NMIs claimed.
    pub(crate) leftovers: AtomicU64,
    /// `ktime_get_mono_fast_ns()` when this CPU last handled one of ours.
    last_ours_ns: AtomicU64,
    /// `ktime_get_mono_fast_ns()` when an NMI was last sent to this CPU.
    last_send_ns: AtomicU64,
}

/// How soon after one of ours (sent or handled) an NMI that finds no send
/// pending is taken as a leftover of ours: in the VM the host can hold a
/// vCPU off for milliseconds, and stragglers arrive that late.
const LEFTOVER_WINDOW_NS: u64 = 100_000_000;

/// The sender (hard-IRQ, one CPU): marks every online CPU pending, then
/// sends them all an NMI.
fn send(ipi: &mut NmiIpi, period_ns: u64) -> u64 {
    if !live() {
        return 0;
    }
    let now = ffi::time::mono_fast_ns();
    for (cpu, c) in CPUS.iter() {
        if ffi::cpu::online(cpu) {
            c.nmi.last_send_ns.store(now, Ordering::Relaxed);
            c.nmi.pending.fetch_add(1, Ordering::Release);
        }
    }
    ipi.send(true);
    period_ns
}

/// The `NMI_LOCAL` handler: claims and samples the NMIs this module sent
/// to this CPU; true for ours.
///
/// The sender counts sends per CPU before each IPI; the handler takes the
/// count. Sends and NMIs do not pair one to one: two sends can reach a CPU
/// as one NMI, or as one NMI being handled and one latched behind it, and
/// in the VM (QEMU TCG, where this module is the only NMI source) NMIs that
/// find the count already taken were seen to arrive up to tens of
/// microseconds, or with the host holding a vCPU off, milliseconds after
/// one of ours, more of them than latching explains. So an NMI that finds
/// no send pending is still claimed, as a leftover (counted in
/// `nmi_leftovers`, never sampled), when a handler here took more than one
/// send, or when one of ours was sent to or handled on this CPU less than
/// [`LEFTOVER_WINDOW_NS`] ago. The price: during an `ipi` run, an unrelated
/// unknown NMI that arrives in that window is absorbed (counted as a
/// leftover) instead of reported. Any other NMI is left to the kernel.
fn nmi_handler() -> bool {
    let Some(cpu) = CPUS.this_cpu() else {
        return false;
    };
    let c = &cpu.nmi;
    let now = ffi::time::mono_fast_ns();
    let pending = c.pending.swap(0, Ordering::AcqRel);
    if pending == 0 {
        let owed = c.owed.swap(false, Ordering::Relaxed);
        let recent =
            |t: &AtomicU64| now.wrapping_sub(t.load(Ordering::Relaxed)) < LEFTOVER_WINDOW_NS;
        if !owed && !recent(&c.last_ours_ns) && !recent(&c.last_send_ns) {
            return false;
        }
        c.leftovers.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    c.owed.store(pending > 1, Ordering::Relaxed);
    on_sample(Context::Nmi);
    c.last_ours_ns
        .store(ffi::time::mono_fast_ns(), Ordering::Relaxed);
    true
}
