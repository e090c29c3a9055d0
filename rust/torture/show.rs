// SPDX-License-Identifier: GPL-2.0

//! What the stress run shows: its verdict, its part of `stats`,
//! `histogram`, `percpu`, and the End of test line.
//!
//! The verdict: `FAILURE` when any anomaly was counted (`errors`);
//! otherwise `INCONCLUSIVE` when the samples met fewer writer windows than
//! `min_window_hits` asks (`window_hits_needed`: the setting, or when it is
//! 0, 100 per second of `duration_s`, 1 for a kernel clock, whose bracketed
//! update the kernel runs when it will), since a run whose reads never met
//! a writer inside its update proves nothing; else `SUCCESS`.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use kernel::prelude::*;

use super::sample::{self, ERR_BUCKETS, ERR_SIDE, HIST_BUCKETS, NMI_HANDLER_NS};
use super::{anomaly, elapsed_ms, expected, period_ns, source, state_name, STRESS};
use crate::counters::{show, Entry};
use crate::ffi;
use crate::fmtbuf::{kernel_display, FmtBuf};
use crate::kacct;
use crate::kclock;
use crate::lines::split_at_field;
use crate::target;

/// One log line (printk takes one string).
type Line = FmtBuf<2048>;

/// What one printk record holds (the kernel's `PRINTKRB_RECORD_MAX`):
/// `vprintk_store()` formats the whole message, the level marker (2
/// bytes), the log prefix and the newline included, into that many bytes
/// with its terminating NUL, then strips the marker and the newline.
const RECORD_MAX: usize = 1024;
/// What a message spends of [`RECORD_MAX`] besides its prefix and text:
/// the level marker, the newline and the NUL.
const RECORD_OVERHEAD: usize = 4;
/// The log prefix of every line (`pr_fmt`).
const PREFIX: &str = "nmiclock: ";
/// The header of an End of test line's continuation records.
const CONTINUED: &str = "End of test, continued:";

/// Window hits a run without anomaly needs for `SUCCESS` per second of
/// `duration_s`, when `min_window_hits` is 0.
const HITS_PER_SECOND: u64 = 100;

/// A run's verdict.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No anomaly, and enough window hits to mean it.
    Success,
    /// At least one anomaly.
    Failure,
    /// No anomaly, but too few window hits to tell.
    Inconclusive,
}

impl Verdict {
    /// Every verdict.
    const ALL: [Self; 3] = [Self::Success, Self::Failure, Self::Inconclusive];

    fn name(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Inconclusive => "INCONCLUSIVE",
        }
    }
}

/// The same for a kernel clock, whose bracketed update the kernel runs
/// when it will (the timekeeper's: once a tick, a few microseconds each
/// under emulation), not back to back as nmiclock's writers do.
const KERNEL_HITS_PER_SECOND: u64 = 1;

/// Window hits a run without anomaly needs to end `SUCCESS`.
pub(crate) fn hits_needed() -> u64 {
    let per_second = match target::run_kind() {
        // A registered target without an update has no window.
        target::Kind::Registered { update: false } => return 0,
        target::Kind::Kernel => KERNEL_HITS_PER_SECOND,
        _ => HITS_PER_SECOND,
    };
    let s = super::run_settings();
    match s.min_window_hits {
        0 => per_second.saturating_mul(s.duration_ns / 1_000_000_000),
        n => u64::from(n),
    }
}

/// The run's counts, combined over CPUs.
struct Totals {
    /// The stress checks' counts (`sample::counters!`).
    n: sample::Sums,
    samples_expected: u64,
    starved_cpus: u64,
    clock: kclock::Totals,
    acct: kacct::Totals,
}

impl Totals {
    fn now() -> Self {
        let source = source::in_use();
        let (n, samples_expected, starved_cpus) = STRESS
            .cpus
            .with(|cpus| {
                let (mut samples_expected, mut starved_cpus) = (0u64, 0u64);
                for (_, c) in cpus.iter() {
                    let e = expected(c);
                    samples_expected = samples_expected.saturating_add(e);
                    let received = c.checks.samples.load(Ordering::Relaxed);
                    if source::starved(source, received, e, period_ns()) {
                        starved_cpus = starved_cpus.saturating_add(1);
                    }
                }
                let n = sample::Sums::of(|| cpus.iter().map(|(_, c)| &c.checks));
                (n, samples_expected, starved_cpus)
            })
            .unwrap_or_else(|| (sample::Sums::of(core::iter::empty), 0, 0));
        Self {
            n,
            samples_expected,
            starved_cpus,
            clock: kclock::totals(),
            acct: kacct::totals(),
        }
    }

    /// Every anomaly: what makes a run a FAILURE (the counts their
    /// tables mark [`show::ANOMALY`]).
    fn errors(&self) -> u64 {
        self.n
            .anomalies()
            .wrapping_add(self.clock.anomalies())
            .wrapping_add(self.acct.anomalies())
    }

    fn verdict(&self) -> Verdict {
        if self.errors() != 0 {
            Verdict::Failure
        } else if self.starved_cpus != 0 {
            // Too few samples to vouch for the clock: throttled perf.
            Verdict::Inconclusive
        } else if self.n.hits_local.saturating_add(self.n.hits_remote) < hits_needed() {
            Verdict::Inconclusive
        } else {
            Verdict::Success
        }
    }

    /// The counts of the run's own (the clock's and acct's are in `stats`
    /// already, under the same names): the checks' table, then what is
    /// computed here.
    fn own(&self) -> impl Iterator<Item = Entry> {
        let (updates, skips) = target::update_counts();
        let computed = |key, value, show| Entry {
            key,
            stress_key: key,
            value,
            show,
        };
        Iterator::chain(
            self.n.entries().into_iter(),
            [
                computed(
                    "samples_expected",
                    self.samples_expected,
                    show::STATS | show::EOT,
                ),
                computed("starved_cpus", self.starved_cpus, show::STATS | show::EOT),
                computed("target_updates", updates, show::STATS | show::EOT_TARGET),
                computed("target_update_skips", skips, show::STATS),
            ],
        )
    }

    /// The clock's and the acct updater's counts, for the End of test line.
    fn theirs(&self) -> impl Iterator<Item = Entry> {
        Iterator::chain(
            self.clock.entries().into_iter(),
            self.acct.entries().into_iter(),
        )
    }
}

/// The verdict so far and the totals the per-second series keeps, from
/// one look at the counts (for the monitor). Any context but NMI.
pub(crate) fn progress() -> (Verdict, super::series::Totals) {
    let t = Totals::now();
    let p = super::series::Totals {
        samples: t.n.samples,
        nmi_samples: t.n.nmi_samples,
        hits: t.n.hits_local.wrapping_add(t.n.hits_remote),
        anomalies: t.errors(),
    };
    (t.verdict(), p)
}

/// The source a run uses (or used last), or "none" before the first run.
pub(crate) fn source_used() -> &'static str {
    source::in_use().map_or("none", |s| s.name())
}

/// What the last run ended with, measured at its end.
struct Ended {
    /// The clock's rate against the counter over the last run, in ppb.
    rate_error_ppb: AtomicI64,
    /// The verdict of the last run, if any.
    last_verdict: VerdictCell,
}

/// A verdict kept for any context to read: none, or one of [`Verdict`].
struct VerdictCell(AtomicU32);

impl VerdictCell {
    const fn new() -> Self {
        Self(AtomicU32::new(0))
    }

    fn set(&self, v: Verdict) {
        self.0.store(v as u32 + 1, Ordering::Relaxed);
    }

    fn get(&self) -> Option<Verdict> {
        let stored = self.0.load(Ordering::Relaxed);
        Verdict::ALL.into_iter().find(|v| *v as u32 + 1 == stored)
    }
}

static ENDED: Ended = Ended {
    rate_error_ppb: AtomicI64::new(0),
    last_verdict: VerdictCell::new(),
};

/// Takes the measures that need the clock at the end of a run.
pub(crate) fn end_run() {
    // nmiclock's own clock only: the writers leave it alone otherwise.
    let ppb = if target::run_index() == crate::registry::NMICLOCK {
        sample::rate_error_ppb()
    } else {
        0
    };
    ENDED.rate_error_ppb.store(ppb, Ordering::Relaxed);
}

/// A signed count that is -1 for "none".
struct OrNone(Option<u64>);

impl fmt::Display for OrNone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("-1"),
        }
    }
}

/// `first_anomaly_samples`, `_window_hits` and `_ns`.
fn first_anomaly() -> [(&'static str, OrNone); 3] {
    let f = sample::first_anomaly();
    [
        ("first_anomaly_samples", OrNone(f.map(|f| f.0))),
        ("first_anomaly_window_hits", OrNone(f.map(|f| f.1))),
        ("first_anomaly_ns", OrNone(f.map(|f| f.2))),
    ]
}

/// Logs the End of test line of the run that just stopped for `why`.
///
/// Where the kernel runs (`environment`) is in `stats` and the load
/// message, not here: a day-long run against a registered target with a
/// long name already needs more than the 1020 bytes a printk record keeps.
pub(crate) fn end_of_test(why: &str) {
    let t = Totals::now();
    let verdict = t.verdict();
    ENDED.last_verdict.set(verdict);
    let mut line = Line::new();
    let _ = write!(
        line,
        "{} nmi_source_used={}",
        super::run_settings(),
        source_used()
    );
    let nmiclock = target::run_index() == crate::registry::NMICLOCK;
    for e in Iterator::chain(t.own(), t.theirs()) {
        if show::in_end_of_test(e.show, nmiclock) {
            let _ = write!(line, " {}={}", e.stress_key, e.value);
        }
    }
    let _ = write!(
        line,
        " errors={} window_hits_needed={}",
        t.errors(),
        hits_needed()
    );
    for (k, v) in first_anomaly() {
        let _ = write!(line, " {k}={v}");
    }
    if let Some(k) = target::kernel_coverage() {
        let (calls, _) = target::kernel_update_counts();
        let _ = write!(
            line,
            " kernel_update_calls={calls} kernel_update_coverage={}",
            k.word()
        );
    }
    if nmiclock {
        let _ = write!(
            line,
            " rate_error_ppb={}",
            ENDED.rate_error_ppb.load(Ordering::Relaxed)
        );
    }
    // One record if it fits, else continuation records, each cut before a
    // field: a printk record longer than RECORD_MAX is cut off.
    let head = FmtBuf::<256>::from_fmt(format_args!("End of test: {} ({}):", verdict.name(), why));
    let room =
        |header: &str| RECORD_MAX.saturating_sub(PREFIX.len() + header.len() + RECORD_OVERHEAD);
    let (first, mut rest) = split_at_field(line.as_str(), room(head.as_str()));
    pr_info!("{}{}\n", kernel_display!(head), first);
    while !rest.is_empty() {
        let (piece, tail) = split_at_field(rest, room(CONTINUED));
        pr_info!("{}{}\n", CONTINUED, piece);
        rest = tail;
    }
}

/// Writes the run's part of `stats`.
pub(crate) fn stats(w: &mut impl Write) -> fmt::Result {
    let t = Totals::now();
    writeln!(w, "state: {}", state_name())?;
    writeln!(
        w,
        "verdict: {}",
        ENDED.last_verdict.get().map_or("none", Verdict::name)
    )?;
    writeln!(w, "nmi_source_used: {}", source_used())?;
    writeln!(w, "coverage_cap: {}", super::COVERAGE_CAP)?;
    target::show(w)?;
    writeln!(w, "perf_hw_error: {}", source::perf_hw_error())?;
    for e in t.own().filter(|e| e.is(show::STATS)) {
        writeln!(w, "{}: {}", e.stress_key, e.value)?;
    }
    writeln!(w, "errors: {}", t.errors())?;
    writeln!(w, "window_hits_needed: {}", hits_needed())?;
    let (calls, missed) = target::kernel_update_counts();
    writeln!(w, "kernel_update_calls: {calls}")?;
    writeln!(w, "kernel_update_missed: {missed}")?;
    match target::kernel_coverage() {
        Some(k @ target::KernelCoverage::NotBracketed(e)) => {
            writeln!(w, "kernel_update_coverage: {} (error -{e})", k.text())?
        }
        Some(k) => writeln!(w, "kernel_update_coverage: {}", k.text())?,
        None => writeln!(w, "kernel_update_coverage: -")?,
    }
    for (k, v) in first_anomaly() {
        writeln!(w, "{k}: {v}")?;
    }
    writeln!(
        w,
        "rate_error_ppb: {}",
        ENDED.rate_error_ppb.load(Ordering::Relaxed)
    )?;
    let (sent, skipped, resent) = source::nmi_counts();
    writeln!(w, "nmi_sent: {sent}")?;
    writeln!(w, "nmi_sends_skipped: {skipped}")?;
    writeln!(w, "nmi_resent: {resent}")?;
    writeln!(w, "nmi_handler_p50_ns: {}", NMI_HANDLER_NS.quantile(500))?;
    writeln!(w, "nmi_handler_p99_ns: {}", NMI_HANDLER_NS.quantile(990))?;
    writeln!(w, "nmi_handler_max_ns: {}", NMI_HANDLER_NS.max())?;
    // The run's NMI-context samples per second, what its period asked for
    // (the samples expected, per second), and the ceiling the bench last
    // measured for its source (0 and "-": none measured).
    let per_s = |n: u64| n.saturating_mul(1_000) / elapsed_ms().max(1);
    let rate = per_s(t.n.nmi_samples);
    let ceiling = source::in_use()
        .and_then(super::ceiling::per_s)
        .unwrap_or(0);
    writeln!(w, "nmi_rate_per_s: {rate}")?;
    writeln!(w, "nmi_asked_per_s: {}", per_s(t.samples_expected))?;
    writeln!(w, "nmi_ceiling_per_s: {ceiling}")?;
    match crate::bench::ratio_milli(rate, ceiling) {
        Some(m) => writeln!(
            w,
            "nmi_ceiling_fraction: {}.{:02}",
            m / 1000,
            (m % 1000) / 10
        )?,
        None => writeln!(w, "nmi_ceiling_fraction: -")?,
    }
    writeln!(w, "wakeups_issued: {}", STRESS.cpus.sum(|c| &c.wake.issued))?;
    writeln!(w, "wakeups: {}", STRESS.cpus.sum(|c| &c.wake.wakeups))?;
    writeln!(
        w,
        "late_wakeups: {}",
        STRESS.cpus.sum(|c| &c.wake.late_wakeups)
    )?;
    writeln!(
        w,
        "max_wake_latency_ns: {}",
        STRESS.cpus.max(|c| &c.wake.max_wake_ns)
    )?;
    writeln!(w, "elapsed_ms: {}", elapsed_ms())?;
    writeln!(w, "anomalies_kept: {}", anomaly::kept())?;
    writeln!(w, "anomalies_dropped: {}", anomaly::dropped())
}

/// Writes one bucket line: label, count, and a bar of at most 52 `@`, at
/// least one for any count.
fn bar(w: &mut impl Write, label: &str, n: u64, max: u64) -> fmt::Result {
    let len = n.saturating_mul(52).div_ceil(max.max(1)) as usize;
    write!(w, "{:<20} {:>10} |", label, n)?;
    for i in 0..52 {
        w.write_char(if i < len { '@' } else { ' ' })?;
    }
    writeln!(w, "|")
}

/// Writes `histogram`: the read cost in ns, log2 buckets, bpftrace style;
/// then the error of every exact check (0: within the bound; otherwise how
/// far outside it, negative below), signed log2 buckets.
pub(crate) fn histogram(w: &mut impl Write) -> fmt::Result {
    let mut counts = [0u64; HIST_BUCKETS];
    let mut errs = [0u64; ERR_BUCKETS];
    let cpus = STRESS.cpus.pin();
    for (_, c) in cpus.iter().flat_map(|s| s.iter()) {
        for (n, h) in counts.iter_mut().zip(c.checks.hist.iter()) {
            *n = n.wrapping_add(h.load(Ordering::Relaxed));
        }
        for (n, h) in errs.iter_mut().zip(c.checks.err_hist.iter()) {
            *n = n.wrapping_add(h.load(Ordering::Relaxed));
        }
    }
    section(w, "read_ns", &counts, |b| match b {
        0 => FmtBuf::from_fmt(format_args!("[0]")),
        1 => FmtBuf::from_fmt(format_args!("[1]")),
        _ => FmtBuf::from_fmt(format_args!("[{}, {})", 1u64 << (b - 1), 1u64 << b)),
    })?;
    section(w, "tear_error_ns", &errs, |b| {
        if b == ERR_SIDE {
            FmtBuf::from_fmt(format_args!("[0]"))
        } else if b > ERR_SIDE {
            let k = b - ERR_SIDE;
            FmtBuf::from_fmt(format_args!("[{}, {})", 1u64 << (k - 1), 1u64 << k))
        } else {
            let k = ERR_SIDE - b;
            FmtBuf::from_fmt(format_args!("(-{}, -{}]", 1u64 << k, 1u64 << (k - 1)))
        }
    })
}

/// Writes one histogram section: `@name:`, then a bar for every bucket
/// from the first to the last with a count, labelled by `label`.
fn section(
    w: &mut impl Write,
    name: &str,
    counts: &[u64],
    label: impl Fn(usize) -> FmtBuf<32>,
) -> fmt::Result {
    writeln!(w, "@{name}:")?;
    let max = counts.iter().copied().max().unwrap_or(0);
    if let (Some(first), Some(last)) = (
        counts.iter().position(|&n| n != 0),
        counts.iter().rposition(|&n| n != 0),
    ) {
        for (b, &n) in counts.iter().enumerate().take(last + 1).skip(first) {
            bar(w, label(b).as_str(), n, max)?;
        }
    }
    Ok(())
}

/// Writes `percpu`: one line of counts per CPU, those the tables mark
/// [`show::PERCPU`] (the run's checks, the clock's, acct's), then the
/// samples expected and the wake-up probe's.
pub(crate) fn percpu(w: &mut impl Write) -> fmt::Result {
    let cpus = STRESS.cpus.pin();
    for (cpu, c) in cpus.iter().flat_map(|s| s.iter()) {
        if !ffi::cpu::online(cpu) && c.checks.samples.load(Ordering::Relaxed) == 0 {
            continue;
        }
        write!(w, "cpu{cpu}:")?;
        crate::counters::write_percpu(w, &c.checks.entries())?;
        write!(w, " samples_expected={}", expected(c))?;
        kclock::write_percpu(w, cpu)?;
        kacct::write_percpu(w, cpu)?;
        writeln!(
            w,
            " wakeups={} late_wakeups={} max_wake_latency_ns={}",
            c.wake.wakeups.load(Ordering::Relaxed),
            c.wake.late_wakeups.load(Ordering::Relaxed),
            c.wake.max_wake_ns.load(Ordering::Relaxed),
        )?;
    }
    Ok(())
}
