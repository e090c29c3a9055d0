// SPDX-License-Identifier: GPL-2.0

//! The interrupt sources of the stress run, each sampling every
//! `period_us` on every online CPU, behind one trait ([`InterruptSource`])
//! and one name table ([`NAMES`], the values of the setting `nmi_source`):
//!
//! - `perf_hw`: a per-CPU kernel counter on CPU cycles, whose overflow is
//!   an NMI on x86 and a pseudo-NMI on arm64 with GICv3 priority masking
//!   (needs a PMU; its period is per architecture, see [`crate::arch`]);
//! - `perf_sw`: the per-CPU cpu-clock software event, hard-IRQ context;
//! - `ipi`: real NMIs sent as NMI IPIs to every online CPU by an hrtimer,
//!   handled by an `NMI_LOCAL` handler that claims only NMIs this module
//!   sent (x86 only);
//! - `auto`, a choice among them rather than a source: `perf_hw` where a
//!   counter can be created, else `ipi` where there is one (x86).

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use super::{live, on_sample, STRESS};
use crate::arch::{self, PerfPeriod};
use crate::choices::NmiSource;
use crate::ffi;
use crate::ffi::cpu::Context;
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::nmi::{NmiHandler, NmiIpi, PerfEvent, PerfKind};

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

// The names the setting `nmi_source` takes are the sources' own.
const _: () = {
    use crate::choices::{same, NmiSource};
    assert!(same(NmiSource::PerfHw.const_name(), PerfHw::NAME));
    assert!(same(NmiSource::PerfSw.const_name(), PerfSw::NAME));
    assert!(same(NmiSource::Ipi.const_name(), Ipi::NAME));
};

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
        perf_attach(cpu, PerfKind::Cycles, arch::perf_hw_period(period_ns))
    }
}

/// `perf_sw`.
struct PerfSw;

impl InterruptSource for PerfSw {
    const NAME: &'static str = "perf_sw";

    fn attach(cpu: u32, period_ns: u64) -> Result<Option<PerfEvent>> {
        perf_attach(cpu, PerfKind::CpuClock, PerfPeriod::Every(period_ns))
    }
}

/// A perf counter of `kind` on `cpu` whose overflows sample.
fn perf_attach(cpu: u32, kind: PerfKind, period: PerfPeriod) -> Result<Option<PerfEvent>> {
    let event = PerfEvent::new(cpu, kind, period, || on_sample(Context::now()))?;
    Ok(Some(event))
}

/// `ipi`.
struct Ipi;

impl InterruptSource for Ipi {
    const NAME: &'static str = "ipi";

    fn start(period_ns: u64) -> Result<RunPart> {
        if !arch::NMI_IPI {
            pr_err!("start: ipi: NMI IPIs are x86-only; here use nmi_source=perf_hw (or perf_sw, hard IRQ)\n");
            return Err(EINVAL);
        }
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
            _handler: Some(handler),
        })
    }
}

/// What a source holds for a run; dropping it stops the source.
#[derive(Default)]
pub(crate) struct RunPart {
    /// `ipi`: the hrtimer that sends the NMIs.
    sender: Option<HrTimer>,
    /// `ipi`: the NMI handler, unregistered when this is dropped.
    _handler: Option<NmiHandler>,
}

impl RunPart {
    /// Stops sending (before the CPUs are detached), and waits, a little
    /// (up to [`DRAIN_MS`]), until every online CPU has taken the NMI sent
    /// to it, so that none arrives after the handler is gone.
    pub(crate) fn stop_sending(&mut self) {
        if self.sender.take().is_none() {
            return;
        }
        for _ in 0..DRAIN_MS {
            let pending = STRESS
                .cpus
                .with(|cpus| {
                    cpus.iter()
                        .any(|(cpu, c)| ffi::cpu::online(cpu) && c.nmi.pending())
                })
                .unwrap_or(false);
            if !pending {
                break;
            }
            ffi::cpu::sleep_us(1_000);
        }
    }
}

/// How long [`RunPart::stop_sending`] waits for NMIs in flight, in ms.
const DRAIN_MS: u32 = 200;

/// The interrupt sources: which one the run uses, and what the last runs of each found.
struct Sources {
    /// The source in use (`Source as u32`), or [`NONE`] before the first run.
    in_use: AtomicU32,
    /// The error of the last failed attempt to create `perf_hw` counters.
    perf_hw_error: AtomicI32,
    /// NMIs sent, sends skipped because the CPU had not taken the previous one
    /// yet, and NMIs sent again because the previous one had not arrived in
    /// [`LOST_NS`]: since the last [`start`](Source::start).
    sent: AtomicU64,
    skipped: AtomicU64,
    resent: AtomicU64,
}

static SOURCES: Sources = Sources {
    in_use: AtomicU32::new(NONE),
    perf_hw_error: AtomicI32::new(0),
    sent: AtomicU64::new(0),
    skipped: AtomicU64::new(0),
    resent: AtomicU64::new(0),
};
const NONE: u32 = u32::MAX;

/// The source a run uses (or used last), if any.
pub(crate) fn in_use() -> Option<Source> {
    from_u32(SOURCES.in_use.load(Ordering::Relaxed))
}

/// The source of a stored `Source as u32`.
pub(crate) fn from_u32(v: u32) -> Option<Source> {
    Source::ALL.iter().copied().find(|s| *s as u32 == v)
}

/// Starts the run-wide part of exactly `source` (a ceiling run: no
/// `auto`, no fallback).
pub(crate) fn start_exactly(source: Source, period_ns: u64) -> Result<(Source, RunPart)> {
    SOURCES.in_use.store(source as u32, Ordering::Relaxed);
    reset_counts();
    Ok((source, source.start(period_ns)?))
}

/// Whether a perf counter failed to be created because there is no PMU (or
/// none for that event): `ENOENT`, `ENODEV`, `EOPNOTSUPP`.
fn no_pmu(e: Error) -> bool {
    /// `EOPNOTSUPP`, which the 6.12 `kernel` crate does not name.
    const EOPNOTSUPP: i32 = 95;
    [ENOENT.to_errno(), ENODEV.to_errno(), -EOPNOTSUPP].contains(&e.to_errno())
}

/// The error of the last failed attempt to create a `perf_hw` counter.
pub(crate) fn perf_hw_error() -> i32 {
    SOURCES.perf_hw_error.load(Ordering::Relaxed)
}

/// Chooses the run's source from its setting (resolving `auto`: a probe
/// counter on this CPU tells whether there is a PMU) and starts its
/// run-wide part. Logs why when it cannot.
pub(crate) fn choose_and_start(setting: NmiSource, period_ns: u64) -> Result<(Source, RunPart)> {
    SOURCES.perf_hw_error.store(0, Ordering::Relaxed);
    let (source, auto) = match setting {
        NmiSource::Auto => (Source::PerfHw, true),
        NmiSource::PerfHw => (Source::PerfHw, false),
        NmiSource::PerfSw => (Source::PerfSw, false),
        NmiSource::Ipi => (Source::Ipi, false),
    };
    let source = if source == Source::PerfHw {
        match PerfHw::attach(ffi::cpu::this(), period_ns) {
            Ok(probe) => {
                drop(probe);
                Source::PerfHw
            }
            Err(e) => {
                SOURCES.perf_hw_error.store(e.to_errno(), Ordering::Relaxed);
                if !no_pmu(e) {
                    pr_err!(
                        "start: perf_hw: cannot create a CPU-cycles counter (error {}), though the error does not say there is no PMU\n",
                        e.to_errno()
                    );
                    return Err(e);
                }
                if !auto || !arch::NMI_IPI {
                    pr_err!(
                        "start: perf_hw: cannot create a CPU-cycles counter (error {}): no PMU; try nmi_source={}\n",
                        e.to_errno(),
                        if arch::NMI_IPI { "ipi" } else { "perf_sw (hard IRQ, no NMI)" }
                    );
                    return Err(e);
                }
                pr_info!(
                    "start: perf_hw unavailable (error {}: no PMU): nmi_source=auto uses ipi\n",
                    e.to_errno()
                );
                Source::Ipi
            }
        }
    } else {
        source
    };
    SOURCES.in_use.store(source as u32, Ordering::Relaxed);
    reset_counts();
    Ok((source, source.start(period_ns)?))
}

// ---- ipi: sending and claiming --------------------------------------------------

/// One CPU's source accounting: how long the source has been attached to
/// it (what the samples expected are reckoned from), and for the `ipi`
/// source the NMIs in flight.
#[derive(Default)]
pub(crate) struct Cpu {
    /// NMIs sent to this CPU and not yet taken: 0 or 1 (2 after a resend).
    outstanding: AtomicU32,
    /// `ktime_get_raw_fast_ns()` when an NMI was last sent to this CPU.
    last_send_ns: AtomicU64,
    /// No NMI is sent to this CPU before this `ktime_get_raw_fast_ns()`
    /// time: `u64::MAX` while its handler runs, then as long again as the
    /// handler took (see [`send`]).
    quiet_until_ns: AtomicU64,
    /// `local_clock()` when the source was attached here, 0 when it is not.
    attached_at_ns: AtomicU64,
    /// Time attached in earlier spans of this run, in ns.
    attached_ns: AtomicU64,
    /// Samples of a ceiling run (the empty handler's count).
    pub(crate) ceiling_samples: AtomicU64,
}

impl Cpu {
    /// Whether an NMI sent to this CPU is still to come.
    pub(crate) fn pending(&self) -> bool {
        self.outstanding.load(Ordering::Acquire) != 0
    }

    /// The source now samples this CPU (task context).
    pub(crate) fn attached(&self) {
        self.attached_at_ns
            .store(ffi::time::local_clock().max(1), Ordering::Relaxed);
    }

    /// The source no longer samples this CPU (task context).
    pub(crate) fn detached(&self) {
        let at = self.attached_at_ns.swap(0, Ordering::Relaxed);
        if at != 0 {
            let span = ffi::time::local_clock().saturating_sub(at);
            self.attached_ns.fetch_add(span, Ordering::Relaxed);
        }
    }

    /// Forgets the attached time (between runs).
    pub(crate) fn reset(&self) {
        self.attached_at_ns.store(0, Ordering::Relaxed);
        self.attached_ns.store(0, Ordering::Relaxed);
        self.quiet_until_ns.store(0, Ordering::Relaxed);
        self.ceiling_samples.store(0, Ordering::Relaxed);
    }

    /// The samples this CPU should have taken so far: the time the source
    /// was attached here over the period.
    pub(crate) fn expected(&self, period_ns: u64) -> u64 {
        let at = self.attached_at_ns.load(Ordering::Relaxed);
        let open = if at == 0 {
            0
        } else {
            ffi::time::local_clock().saturating_sub(at)
        };
        self.attached_ns
            .load(Ordering::Relaxed)
            .saturating_add(open)
            / period_ns.max(1)
    }
}

/// A CPU whose perf counter delivered less than 1/`STARVED_RATIO` of the
/// samples its period asks for is starved: perf throttled the counter
/// (`perf: interrupt took too long`; only the tick unthrottles it), or the
/// PMU cannot keep up. Throttling cuts the rate to 2.5 % or less (250/s
/// idle, 1/s with interrupts off, for 10,000/s asked), below this;
/// emulation's slack stays above it: an arm64 TCG guest delivers 45 % of
/// 10,000/s with its vCPUs busy, 12 % with the host loaded by two other
/// VMs, 5 % by three (QEMU's thread, descheduled, folds the overflows it
/// missed into one).
pub(crate) const STARVED_RATIO: u64 = 32;

/// A CPU is judged only once its source has been attached this long: a
/// perf counter with a sample frequency (arm64's `perf_hw`) starts at a
/// period of one event and takes perf a while to settle.
pub(crate) const STARVED_MIN_ATTACHED_NS: u64 = 1_000_000_000;

/// Whether `received` of `expected` samples at `period_ns` is a starved
/// CPU's, for a perf source (the `ipi` sender counts what it skips itself).
pub(crate) fn starved(
    source: Option<Source>,
    received: u64,
    expected: u64,
    period_ns: u64,
) -> bool {
    matches!(source, Some(Source::PerfHw | Source::PerfSw))
        && expected.saturating_mul(period_ns) >= STARVED_MIN_ATTACHED_NS
        && received.saturating_mul(STARVED_RATIO) < expected
}

/// `(nmi_sent, nmi_sends_skipped, nmi_resent)` of the last `ipi` run.
pub(crate) fn nmi_counts() -> (u64, u64, u64) {
    (
        SOURCES.sent.load(Ordering::Relaxed),
        SOURCES.skipped.load(Ordering::Relaxed),
        SOURCES.resent.load(Ordering::Relaxed),
    )
}

/// Zeroes the counts (at the start of a run).
pub(crate) fn reset_counts() {
    for a in [&SOURCES.sent, &SOURCES.skipped, &SOURCES.resent] {
        a.store(0, Ordering::Relaxed);
    }
}

/// How long an NMI may take to arrive before it is taken as lost and sent
/// again: in the VM the host can hold a vCPU off for milliseconds.
const LOST_NS: u64 = 1_000_000_000;

/// The sender (hard-IRQ, one CPU): sends an NMI to every online CPU that
/// has taken the last one sent to it, and counts it outstanding first.
///
/// One NMI at most is outstanding per CPU, so that every NMI the handler
/// sees can be proven ours or not: x86 latches one NMI behind the one being
/// handled and drops further ones, so with several outstanding the handler
/// could not tell how many are still to come. A CPU that has not taken its
/// NMI yet (in the VM: a vCPU the host holds off) is skipped and counted
/// (`nmi_sends_skipped`); one whose NMI is older than [`LOST_NS`] is sent
/// another (`nmi_resent`), since an NMI can be lost across CPU hotplug.
///
/// Nor is one sent to a CPU whose handler is running, or ran for longer
/// than the time since it returned (also `nmi_sends_skipped`): NMIs take
/// half of a CPU at most. Otherwise, where the handler takes longer than
/// the period (a debug kernel under TCG: milliseconds), an NMI sent while
/// the handler runs is latched and taken as soon as it returns, and the
/// CPU never leaves NMI context: the guest hangs.
fn send(ipi: &mut NmiIpi, period_ns: u64) -> u64 {
    if !live() {
        return 0;
    }
    let now = ffi::time::raw_fast_ns();
    ipi.clear();
    let mut any = false;
    STRESS.cpus.with(|cpus| {
        for (cpu, c) in cpus.iter() {
            if !ffi::cpu::online(cpu) {
                continue;
            }
            let n = &c.nmi;
            let late = now.wrapping_sub(n.last_send_ns.load(Ordering::Relaxed)) > LOST_NS;
            let prev = n.outstanding.load(Ordering::Acquire);
            let busy = now < n.quiet_until_ns.load(Ordering::Acquire);
            if (prev != 0 || busy) && !late {
                SOURCES.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if prev != 0 {
                SOURCES.resent.fetch_add(1, Ordering::Relaxed);
            }
            n.last_send_ns.store(now, Ordering::Relaxed);
            n.outstanding.fetch_add(1, Ordering::AcqRel);
            SOURCES.sent.fetch_add(1, Ordering::Relaxed);
            ipi.add(cpu);
            any = true;
        }
    });
    if any {
        ipi.send();
    }
    period_ns
}

/// The `NMI_LOCAL` handler: an NMI is ours if one sent to this CPU is
/// outstanding; it is then taken and sampled. Any other NMI is left to the
/// kernel, which reports it as unknown.
fn nmi_handler() -> bool {
    STRESS
        .cpus
        .with_this_cpu(|cpu| {
            let ours = cpu
                .nmi
                .outstanding
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok();
            if ours {
                let n = &cpu.nmi;
                n.quiet_until_ns.store(u64::MAX, Ordering::Release);
                let t0 = ffi::time::raw_fast_ns();
                on_sample(Context::Nmi);
                let t1 = ffi::time::raw_fast_ns();
                n.quiet_until_ns
                    .store(t1.saturating_add(t1.wrapping_sub(t0)), Ordering::Release);
            }
            ours
        })
        .unwrap_or(false)
}
