// SPDX-License-Identifier: GPL-2.0

//! What the stress run shows: its part of `stats`, `histogram`, `percpu`,
//! and the End of test line.

use core::fmt::{self, Write};
use core::sync::atomic::Ordering;

use kernel::prelude::*;

use super::checks::{HIST_BUCKETS, NMI_HANDLER_NS};
use super::{anomaly, elapsed_ms, source, state_name, CPUS};
use crate::ffi;
use crate::fmtbuf::FmtBuf;
use crate::kacct;
use crate::kclock;
use crate::settings;

/// One log line (printk takes one string).
type Line = FmtBuf<768>;

/// The run's counts, summed over CPUs.
struct Totals {
    samples: u64,
    nmi_samples: u64,
    torn: u64,
    backwards: u64,
    cross: u64,
    max_backstep: u64,
    clock: kclock::Totals,
    acct: kacct::Totals,
}

impl Totals {
    fn now() -> Self {
        Self {
            samples: CPUS.sum(|c| &c.checks.samples),
            nmi_samples: CPUS.sum(|c| &c.checks.nmi_samples),
            torn: CPUS.sum(|c| &c.checks.torn),
            backwards: CPUS.sum(|c| &c.checks.backwards),
            cross: CPUS.sum(|c| &c.checks.cross),
            max_backstep: CPUS.max(|c| &c.checks.max_backstep),
            clock: kclock::totals(),
            acct: kacct::totals(),
        }
    }

    /// Every anomaly: what makes a run a FAILURE.
    fn errors(&self) -> u64 {
        [
            self.torn,
            self.backwards,
            self.cross,
            self.clock.stalls,
            self.acct.bad_deltas,
            self.acct.backwards,
            self.acct.mismatches,
        ]
        .iter()
        .fold(0u64, |a, b| a.wrapping_add(*b))
    }

    /// The counts of the run's own (the clock's and acct's are in `stats`
    /// already, under the same names).
    fn own(&self) -> [(&'static str, u64); 6] {
        [
            ("samples", self.samples),
            ("nmi_samples", self.nmi_samples),
            ("torn_reads", self.torn),
            ("backwards", self.backwards),
            ("cross_cpu_backwards", self.cross),
            ("max_backstep_ns", self.max_backstep),
        ]
    }

    /// Every count of the End of test line, in order.
    fn all(&self) -> [(&'static str, u64); 15] {
        let [a, b, c, d, e, f] = self.own();
        [
            a,
            b,
            c,
            d,
            e,
            f,
            ("clock_stalls", self.clock.stalls),
            ("epoch_updates", self.clock.epoch_updates),
            ("wrap_overruns", self.clock.wrap_overruns),
            ("acct_updates", self.acct.updates),
            ("acct_races", self.acct.races),
            ("acct_bad_deltas", self.acct.bad_deltas),
            ("acct_timexpd_backwards", self.acct.backwards),
            ("acct_integral_mismatches", self.acct.mismatches),
            ("errors", self.errors()),
        ]
    }
}

/// The source a run uses (or used last), or "none" before the first run.
pub(crate) fn source_used() -> &'static str {
    source::in_use().map_or("none", |s| s.name())
}

/// Logs the End of test line of the run that just stopped for `why`.
pub(crate) fn end_of_test(why: &str) {
    let t = Totals::now();
    let mut line = Line::new();
    let _ = write!(
        line,
        "{} nmi_source_used={}",
        settings::Inline,
        source_used()
    );
    for (k, v) in t.all() {
        let _ = write!(line, " {k}={v}");
    }
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
}

/// Writes the run's part of `stats`.
pub(crate) fn stats(w: &mut impl Write) -> fmt::Result {
    let t = Totals::now();
    writeln!(w, "state: {}", state_name())?;
    writeln!(w, "nmi_source_used: {}", source_used())?;
    writeln!(w, "perf_hw_error: {}", source::perf_hw_error())?;
    for (k, v) in t.own() {
        writeln!(w, "{k}: {v}")?;
    }
    writeln!(w, "errors: {}", t.errors())?;
    writeln!(w, "nmi_leftovers: {}", CPUS.sum(|c| &c.nmi.leftovers))?;
    writeln!(w, "nmi_handler_p50_ns: {}", NMI_HANDLER_NS.quantile(500))?;
    writeln!(w, "nmi_handler_p99_ns: {}", NMI_HANDLER_NS.quantile(990))?;
    writeln!(w, "nmi_handler_max_ns: {}", NMI_HANDLER_NS.max())?;
    writeln!(w, "wakeups: {}", CPUS.sum(|c| &c.wake.wakeups))?;
    writeln!(w, "late_wakeups: {}", CPUS.sum(|c| &c.wake.late_wakeups))?;
    writeln!(
        w,
        "max_wake_latency_ns: {}",
        CPUS.max(|c| &c.wake.max_wake_ns)
    )?;
    writeln!(w, "elapsed_ms: {}", elapsed_ms())?;
    writeln!(w, "anomalies_kept: {}", anomaly::kept())?;
    writeln!(w, "anomalies_dropped: {}", anomaly::dropped())
}

/// Writes `histogram`: the read cost in ns, log2 buckets, bpftrace style.
pub(crate) fn histogram(w: &mut impl Write) -> fmt::Result {
    let mut counts = [0u64; HIST_BUCKETS];
    for (_, c) in CPUS.iter() {
        for (n, h) in counts.iter_mut().zip(c.checks.hist.iter()) {
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
        let mut label = FmtBuf::<32>::new();
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
pub(crate) fn percpu(w: &mut impl Write) -> fmt::Result {
    for (cpu, c) in CPUS.iter() {
        if !ffi::cpu::online(cpu) && c.checks.samples.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let k = kclock::cpu_counts(cpu);
        let (acct_updates, acct_bad, acct_back) = kacct::cpu_counts(cpu);
        writeln!(
            w,
            "cpu{cpu}: samples={} nmi_samples={} torn_reads={} backwards={} cross_cpu_backwards={} clock_reads={} clock_stalls={} epoch_updates={} acct_updates={acct_updates} acct_bad_deltas={acct_bad} acct_timexpd_backwards={acct_back} wakeups={} late_wakeups={} max_wake_latency_ns={}",
            c.checks.samples.load(Ordering::Relaxed),
            c.checks.nmi_samples.load(Ordering::Relaxed),
            c.checks.torn.load(Ordering::Relaxed),
            c.checks.backwards.load(Ordering::Relaxed),
            c.checks.cross.load(Ordering::Relaxed),
            k.reads,
            k.stalls,
            k.epoch_updates,
            c.wake.wakeups.load(Ordering::Relaxed),
            c.wake.late_wakeups.load(Ordering::Relaxed),
            c.wake.max_wake_ns.load(Ordering::Relaxed),
        )?;
    }
    Ok(())
}
