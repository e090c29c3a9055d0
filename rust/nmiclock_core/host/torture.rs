// SPDX-License-Identifier: GPL-2.0

//! The torture run: settings, clocks, writers, samples, the verdict (see
//! the crate's documentation in `main.rs`).

use std::cell::Cell;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nmiclock_core::clock::{ClockData, ClockSource, EpochUpdate, Reading, Window, Writer};
use nmiclock_core::counter::{mask_for_bits, Counter};
use nmiclock_core::cyc_ns::{calc_mult_shift, same_rate_pair, NSEC_PER_MSEC};
use nmiclock_core::high_water::HighWater;
use nmiclock_core::read_check::{Around, Base, SwitchLog};

use crate::{litmus, sys};

#[cfg(target_arch = "aarch64")]
pub(crate) use nmiclock_core::counter::{Cntvct as Bare, CntvctOrdered as Ordered};
#[cfg(target_arch = "x86_64")]
pub(crate) use nmiclock_core::counter::{Tsc as Bare, TscOrdered as Ordered};

/// The wait budget's clock.
type Wait = fn() -> u64;

nmiclock_core::clocks!(wait Wait = sys::mono_ns as Wait);

/// The clock the run tortures: its index in [`CLOCKS`].
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

fn clock(i: usize) -> &'static dyn ClockSource {
    CLOCKS.get(i).copied().unwrap_or(CLOCKS[0])
}

/// Reads the running clock, statically dispatched (as the module's
/// readers do): signal context included.
#[inline(always)]
fn read_active() -> Reading {
    read_index(ACTIVE.load(Ordering::Relaxed)).unwrap_or_default()
}

/// The names a clock's protection or counter (`of`) takes, in [`CLOCKS`]
/// order, each once.
fn names(of: fn(&dyn ClockSource) -> &'static str) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for c in CLOCKS {
        if !v.contains(&of(c)) {
            v.push(of(c));
        }
    }
    v
}

// ---- settings -------------------------------------------------------------

/// The run's settings, by the module's parameter names.
#[derive(Clone, Debug)]
struct Settings {
    clock: &'static str,
    counter: &'static str,
    counter_bits: u32,
    tear_window_ns: u64,
    period_us: u64,
    duration_s: u64,
    disturb_conversion: bool,
    min_window_hits: u64,
    until_coverage: bool,
    signal_source: String,
    litmus: bool,
    reads: u64,
    backwards_needed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            clock: CLOCKS[0].protection(),
            counter: CLOCKS[0].counter(),
            counter_bits: 64,
            tear_window_ns: 0,
            period_us: 100,
            duration_s: 5,
            disturb_conversion: false,
            min_window_hits: 1000,
            until_coverage: true,
            signal_source: "auto".into(),
            litmus: false,
            reads: 50_000_000,
            backwards_needed: 1000,
        }
    }
}

const USAGE: &str = "\
usage: nmiclock-host [--params \"KEY=VALUE ...\"] [--KEY VALUE | --KEY=VALUE ...]
       nmiclock-host --litmus [--reads N] [--backwards_needed N]
       nmiclock-host -h

Tortures nmiclock's core on this CPU: a pinned writer per CPU moving the
clock's epoch, interrupted by a per-thread signal whose handler reads and
checks the clock, and a reader per CPU. Prints the module's End of test
line; exits 0 SUCCESS, 1 FAILURE, 4 INCONCLUSIVE, 2 bad usage.

Settings (the module's names):
  clock=latch|seqcount|unprotected       the protection (latch)
  counter=ORDERED|BARE                   the counter read (the ordered one)
  counter_bits=16..64                    counter width, by masking (64)
  tear_window_ns=0..1000000              the writer's pause inside its
                                         update, widening the window (0)
  period_us=10..100000                   the signal's period, of the
                                         writer's CPU time (100)
  duration_s=1..3600                     the run's length (5)
  disturb=none|conversion                switch the conversion every 16th
                                         update (none)
  min_window_hits=N                      window hits SUCCESS needs (1000)
  until=coverage|duration                coverage: end at the first anomaly,
                                         or once duration_s passed and the
                                         window hits are met, at 4 times
                                         duration_s at most; duration: end
                                         at duration_s (coverage)
  signal_source=auto|perf|timer          perf sigtrap, else a POSIX timer
                                         (auto: perf where allowed)

--litmus: the rdtsc-ordering thread's experiment (x86/vdso: use non-serializing rdtsc): a publisher thread reads the counter and
stores it (release); readers on the other CPUs load it (acquire), then read
the counter, and count the reads older than what they loaded. Variants:
ORDERED; BARE_cbarrier, the bare read kept after the load by a compiler
barrier (only the CPU can reorder it: the verdict rests on it); BARE as
the module reads it (the compiler may move it too); and the latch clock
over ORDERED and over BARE. Stops a variant after --reads N reads per
reader (50000000) or once --backwards_needed N (1000) were seen. Exits 1
if BARE_cbarrier went backwards and ORDERED did not (or if ORDERED did:
the counter is not synchronised across CPUs), 4 if neither did
(INCONCLUSIVE), 2 bad usage.";

fn bad(what: &str) -> Result<Settings, String> {
    Err(what.to_string())
}

fn number(key: &str, v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("{key}={v}: not a number in {lo}..={hi}")),
    }
}

fn set(s: &mut Settings, key: &str, v: &str) -> Result<(), String> {
    match key {
        "clock" => {
            let known = names(|c| c.protection());
            s.clock = known
                .iter()
                .find(|p| **p == v)
                .copied()
                .ok_or(format!("clock={v}: not one of {}", known.join(", ")))?
        }
        "counter" => {
            let known = names(|c| c.counter());
            s.counter = known
                .iter()
                .find(|c| **c == v)
                .copied()
                .ok_or(format!("counter={v}: not one of {}", known.join(", ")))?
        }
        "counter_bits" => s.counter_bits = number(key, v, 16, 64)? as u32,
        "tear_window_ns" => s.tear_window_ns = number(key, v, 0, 1_000_000)?,
        "period_us" => s.period_us = number(key, v, 10, 100_000)?,
        "duration_s" => s.duration_s = number(key, v, 1, 3600)?,
        "disturb" => {
            s.disturb_conversion = match v {
                "none" => false,
                "conversion" => true,
                _ => return Err(format!("disturb={v}: not one of none, conversion")),
            }
        }
        "min_window_hits" => s.min_window_hits = number(key, v, 0, u64::MAX)?,
        "until" => {
            s.until_coverage = match v {
                "duration" => false,
                "coverage" => true,
                _ => return Err(format!("until={v}: not one of duration, coverage")),
            }
        }
        "signal_source" => match v {
            "auto" | "perf" | "timer" => s.signal_source = v.into(),
            _ => return Err(format!("signal_source={v}: not one of auto, perf, timer")),
        },
        "reads" => s.reads = number(key, v, 1, u64::MAX)?,
        "backwards_needed" => s.backwards_needed = number(key, v, 1, u64::MAX)?,
        _ => return Err(format!("unknown setting {key}")),
    }
    Ok(())
}

/// Parses the command line; `Ok(None)` for `-h`.
fn parse(args: &[String]) -> Result<Option<Settings>, String> {
    let mut s = Settings::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--litmus" => s.litmus = true,
            "--params" => {
                let Some(p) = args.get(i) else {
                    return bad("--params needs a value").map(Some);
                };
                i += 1;
                for kv in p.split_whitespace() {
                    let Some((k, v)) = kv.split_once('=') else {
                        return bad(&format!("{kv}: not KEY=VALUE")).map(Some);
                    };
                    set(&mut s, k, v)?;
                }
            }
            _ => {
                let Some(opt) = a.strip_prefix("--") else {
                    return bad(&format!("{a}: not an option")).map(Some);
                };
                if let Some((k, v)) = opt.split_once('=') {
                    set(&mut s, k, v)?;
                } else {
                    let Some(v) = args.get(i) else {
                        return bad(&format!("--{opt} needs a value")).map(Some);
                    };
                    i += 1;
                    set(&mut s, opt, v)?;
                }
            }
        }
    }
    Ok(Some(s))
}

// ---- what the writers publish, for the readers ------------------------------

/// Overruns (epoch updates a whole wrap late) and the conversion
/// switches: as the module's `kclock` counts them.
static OVERRUNS: AtomicU64 = AtomicU64::new(0);
static SWITCHES: SwitchLog = SwitchLog::new();

/// The conversions the run published: the base and its alternate.
static CONVERSIONS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

fn conversions() -> impl Iterator<Item = (u32, u32)> {
    CONVERSIONS
        .iter()
        .filter_map(|c| match c.load(Ordering::Relaxed) {
            0 => None,
            v => Some(((v >> 32) as u32, v as u32)),
        })
}

/// Writers inside an update, and windows entered: for remote hits.
static OPEN: AtomicU32 = AtomicU32::new(0);
static SEQ: AtomicU32 = AtomicU32::new(0);

/// The highest time any reader has read (minus [`HW_BASE`]).
static HIGH_WATER: HighWater = HighWater::new();
static HW_BASE: AtomicU64 = AtomicU64::new(0);

static STOP: AtomicBool = AtomicBool::new(false);
static RUNNING: AtomicBool = AtomicBool::new(false);

// ---- per-thread state -------------------------------------------------------

/// One thread's counters and check state: a writer's (its handler's
/// samples) or a reader's. Touched by that thread only (and summed at
/// the end).
struct Slot {
    base: Base,
    window: AtomicU32,
    samples: AtomicU64,
    signal_samples: AtomicU64,
    hits_local: AtomicU64,
    hits_remote: AtomicU64,
    stable_copy: AtomicU64,
    torn: AtomicU64,
    backwards: AtomicU64,
    cross: AtomicU64,
    reference: AtomicU64,
    stalls: AtomicU64,
    late_reads: AtomicU64,
    max_backstep: AtomicU64,
    max_cross_backstep: AtomicU64,
    max_tear_ns: AtomicU64,
    max_skew: AtomicU64,
    epoch_updates: AtomicU64,
    switches: AtomicU64,
}

impl Slot {
    const fn new() -> Self {
        Self {
            base: Base::new(),
            window: AtomicU32::new(0),
            samples: AtomicU64::new(0),
            signal_samples: AtomicU64::new(0),
            hits_local: AtomicU64::new(0),
            hits_remote: AtomicU64::new(0),
            stable_copy: AtomicU64::new(0),
            torn: AtomicU64::new(0),
            backwards: AtomicU64::new(0),
            cross: AtomicU64::new(0),
            reference: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            late_reads: AtomicU64::new(0),
            max_backstep: AtomicU64::new(0),
            max_cross_backstep: AtomicU64::new(0),
            max_tear_ns: AtomicU64::new(0),
            max_skew: AtomicU64::new(0),
            epoch_updates: AtomicU64::new(0),
            switches: AtomicU64::new(0),
        }
    }
}

const MAX_SLOTS: usize = 512;
static SLOTS: [Slot; MAX_SLOTS] = [const { Slot::new() }; MAX_SLOTS];

thread_local! {
    /// This thread's slot. Const-initialised and without a destructor, so
    /// reading it is a plain thread-local load, never a lazy
    /// initialisation: safe in a signal handler.
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn inc(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

// ---- anomalies --------------------------------------------------------------

/// The first anomalies, kept for the report.
const KEPT: usize = 16;

struct Anomaly {
    ready: AtomicBool,
    seq: AtomicU64,
    kind: AtomicU32,
    slot: AtomicU32,
    value: AtomicU64,
    against: AtomicU64,
    cyc: AtomicU64,
    base_cyc: AtomicU64,
}

impl Anomaly {
    const fn new() -> Self {
        Self {
            ready: AtomicBool::new(false),
            seq: AtomicU64::new(0),
            kind: AtomicU32::new(0),
            slot: AtomicU32::new(0),
            value: AtomicU64::new(0),
            against: AtomicU64::new(0),
            cyc: AtomicU64::new(0),
            base_cyc: AtomicU64::new(0),
        }
    }

    /// Fills this record: once, by the caller that claimed it.
    fn fill(
        &self,
        seq: u64,
        kind: u32,
        slot: usize,
        value: u64,
        against: u64,
        cyc: u64,
        base: u64,
    ) {
        self.seq.store(seq, Ordering::Relaxed);
        self.kind.store(kind, Ordering::Relaxed);
        self.slot.store(slot as u32, Ordering::Relaxed);
        self.value.store(value, Ordering::Relaxed);
        self.against.store(against, Ordering::Relaxed);
        self.cyc.store(cyc, Ordering::Relaxed);
        self.base_cyc.store(base, Ordering::Relaxed);
        self.ready.store(true, Ordering::Release);
    }
}

static ANOMALIES: [Anomaly; KEPT] = [const { Anomaly::new() }; KEPT];
static NEXT_ANOMALY: AtomicU64 = AtomicU64::new(0);

const KINDS: [&str; 5] = [
    "torn_read",
    "backwards",
    "cross_cpu_backwards",
    "clock_stall",
    "reference_mismatch",
];

/// Past the first KEPT, the first anomaly of each kind in each context (a
/// handler's: slots below WRITERS; a reader's), so that a kind met in a
/// handler is reported even where readers' anomalies filled the first
/// KEPT: on a loaded machine a writer preempted inside its update stalls
/// the readers on other CPUs too (seen: up to half of the 16 kept), and a
/// seqcount run once counted 33 stalls with none in a handler among the
/// 16 kept.
static FIRSTS: [[Anomaly; 2]; KINDS.len()] = [const { [const { Anomaly::new() }; 2] }; KINDS.len()];
static FIRST_CLAIMED: [[AtomicBool; 2]; KINDS.len()] =
    [const { [const { AtomicBool::new(false) }; 2] }; KINDS.len()];
/// How many of the slots are writers' (their handlers read in them).
static WRITERS: AtomicUsize = AtomicUsize::new(0);

fn record(kind: u32, slot: usize, value: u64, against: u64, r: &Reading, base_cyc: u64) {
    let i = NEXT_ANOMALY.fetch_add(1, Ordering::Relaxed);
    let a = match usize::try_from(i).ok().and_then(|i| ANOMALIES.get(i)) {
        Some(a) => a,
        None => {
            let role = usize::from(slot >= WRITERS.load(Ordering::Relaxed));
            let (Some(first), Some(claimed)) = (
                FIRSTS.get(kind as usize).and_then(|f| f.get(role)),
                FIRST_CLAIMED.get(kind as usize).and_then(|c| c.get(role)),
            ) else {
                return;
            };
            if claimed.swap(true, Ordering::Relaxed) {
                return;
            }
            first
        }
    };
    a.fill(i, kind, slot, value, against, r.now_cyc, base_cyc);
}

// ---- the writers ------------------------------------------------------------

/// A writer's hooks: its window marked in its slot, the pause inside,
/// overruns announced before their publish, switches' pivots recorded
/// and their ends counted.
struct HostWriter {
    slot: &'static Slot,
    pause_ns: u64,
    announced: bool,
}

impl Writer for HostWriter {
    fn enter(&mut self, window: Window) {
        self.slot.window.store(window as u32, Ordering::Release);
        OPEN.fetch_add(1, Ordering::AcqRel);
        SEQ.fetch_add(1, Ordering::AcqRel);
    }

    fn pause(&mut self) {
        if self.pause_ns != 0 {
            let end = sys::mono_ns().wrapping_add(self.pause_ns);
            while sys::mono_ns() < end {
                std::hint::spin_loop();
            }
        }
    }

    fn leave(&mut self) {
        OPEN.fetch_sub(1, Ordering::AcqRel);
        self.slot.window.store(0, Ordering::Release);
    }

    fn overrun(&mut self) {
        OVERRUNS.fetch_add(1, Ordering::SeqCst);
        self.announced = true;
    }

    fn switching(&mut self, new: &ClockData) {
        SWITCHES.record(new);
    }

    fn switched(&mut self) {
        SWITCHES.finish();
    }
}

/// What interrupts a writer.
enum Source {
    Perf(#[allow(dead_code)] sys::PerfSigtrap),
    Timer(#[allow(dead_code)] sys::ThreadTimer),
}

/// The signal the fallback timer sends (perf's is `SIGTRAP`).
fn timer_signal() -> libc::c_int {
    libc::SIGRTMIN()
}

static SOURCE_USED: AtomicU32 = AtomicU32::new(0);

fn open_source(kind: &str, period_ns: u64) -> Result<Source, String> {
    if kind != "timer" {
        match sys::PerfSigtrap::open(period_ns) {
            Ok(p) => {
                SOURCE_USED.fetch_or(1, Ordering::Relaxed);
                return Ok(Source::Perf(p));
            }
            Err(e) if kind == "perf" => {
                return Err(format!(
                    "perf_event_open (task-clock, sigtrap): {e}; perf_event_paranoid is {}",
                    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                        .unwrap_or_default()
                        .trim()
                ))
            }
            Err(_) => {}
        }
    }
    let t = sys::ThreadTimer::new(timer_signal(), period_ns)
        .map_err(|e| format!("timer_create (SIGEV_THREAD_ID): {e}"))?;
    SOURCE_USED.fetch_or(2, Ordering::Relaxed);
    Ok(Source::Timer(t))
}

/// A writer thread's loop, on `cpu`, as slot `slot`.
fn writer(cpu: usize, slot: usize, s: &Settings) -> Result<(), String> {
    sys::pin_to(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    SLOT.with(|c| c.set(slot));
    let me = &SLOTS[slot];
    let _source = open_source(&s.signal_source, s.period_us * 1000)?;
    while !RUNNING.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let c = clock(ACTIVE.load(Ordering::Relaxed));
    let mut n: u64 = 0;
    while !STOP.load(Ordering::Relaxed) {
        n = n.wrapping_add(1);
        let mut w = HostWriter {
            slot: me,
            pause_ns: s.tear_window_ns,
            announced: false,
        };
        if s.disturb_conversion && n % 16 == 0 {
            let d = c.data();
            let base = CONVERSIONS[0].load(Ordering::Relaxed);
            let (bm, bs) = ((base >> 32) as u32, base as u32);
            let (m, sh) = if (d.mult, d.shift) == (bm, bs) {
                same_rate_pair(bm, bs)
            } else {
                (bm, bs)
            };
            if c.recalibrate(m, sh, &mut w) {
                inc(&me.switches);
            }
        } else if let EpochUpdate::Updated { overrun } = c.update_epoch(&mut w) {
            inc(&me.epoch_updates);
            if overrun && !w.announced {
                OVERRUNS.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    Ok(())
}

// ---- the samples ------------------------------------------------------------

/// One sample on the calling thread (slot `slot`): reads the clock between
/// two reads of the reference and two looks at the writers' windows, and
/// checks it. Signal-safe: atomics only.
#[inline(always)]
fn sample(slot: usize, in_signal: bool) {
    let Some(me) = SLOTS.get(slot) else {
        return;
    };
    inc(&me.samples);
    if in_signal {
        inc(&me.signal_samples);
    }
    let local0 = me.window.load(Ordering::Acquire);
    let (open0, seq0) = (OPEN.load(Ordering::Acquire), SEQ.load(Ordering::Acquire));
    let switches = SWITCHES.finished();
    let overruns = OVERRUNS.load(Ordering::SeqCst);
    let ref_lo = sys::mono_raw_ns();
    // The mark, then at once the read: nothing ordering in between, so a
    // bare counter read may be taken before the mark's load, as in the rdtsc-ordering thread (x86/vdso: use non-serializing rdtsc)
    // says it can.
    let high = HIGH_WATER.load();
    let r = read_active();
    let ref_hi = sys::mono_raw_ns();
    let switched = SWITCHES.started();
    let same = OVERRUNS.load(Ordering::SeqCst) == overruns;
    let (open1, seq1) = (OPEN.load(Ordering::Acquire), SEQ.load(Ordering::Acquire));
    // A handler that interrupted its own writer in its window: local. Any
    // other writer inside one while it read: remote.
    let others0 = open0.saturating_sub(u32::from(local0 != 0));
    if in_signal && local0 != 0 {
        inc(&me.hits_local);
        if let Some(w @ (Window::FirstCopy | Window::SecondCopy)) = Window::from_u32(local0) {
            if r.copy != w.copy_written() {
                inc(&me.stable_copy);
            }
        }
    } else if others0 > 0 || open1 > 0 || seq0 != seq1 {
        inc(&me.hits_remote);
    }
    if r.late_epoch {
        inc(&me.late_reads);
        me.base.forget();
        return;
    }
    let a = Around {
        switches,
        switched,
        overruns,
        same,
        ref_lo,
        ref_hi,
        cs_seq: 0,
    };
    let f = me.base.check(&r, &a, conversions(), |i| SWITCHES.get(i));
    me.max_skew.fetch_max(f.skew, Ordering::Relaxed);
    if let Some(prev) = f.backwards {
        inc(&me.backwards);
        me.max_backstep.fetch_max(prev - r.ns, Ordering::Relaxed);
        record(1, slot, r.ns, prev, &r, 0);
    }
    if let Some((err, against)) = f.exact {
        if err != 0 {
            inc(&me.torn);
            me.max_tear_ns
                .fetch_max(err.unsigned_abs(), Ordering::Relaxed);
            record(0, slot, r.ns, against, &r, me.base.cyc());
        }
    }
    if let Some((_, against)) = f.reference {
        inc(&me.reference);
        record(4, slot, r.ns, against, &r, 0);
    }
    let since = r.ns.saturating_sub(HW_BASE.load(Ordering::Relaxed));
    if let (true, Some(h)) = (same, high.under(overruns)) {
        if since < h {
            inc(&me.cross);
            me.max_cross_backstep
                .fetch_max(h - since, Ordering::Relaxed);
            record(
                2,
                slot,
                r.ns,
                h.wrapping_add(HW_BASE.load(Ordering::Relaxed)),
                &r,
                0,
            );
        }
    }
    // Only a good read raises the mark (as in the module).
    if same && f.good() {
        HIGH_WATER.raise(overruns, since, || {
            OVERRUNS.load(Ordering::SeqCst) == overruns
        });
    }
    if r.stalled {
        inc(&me.stalls);
        record(3, slot, r.ns, 0, &r, 0);
    }
    me.base.settle(&r, &a, f.good());
}

/// The handler of the interrupting signal: a sample, as an NMI's.
extern "C" fn on_interrupt(_sig: libc::c_int) {
    let _errno = sys::SavedErrno::save();
    if !RUNNING.load(Ordering::Acquire) || STOP.load(Ordering::Relaxed) {
        return;
    }
    let slot = SLOT.with(|c| c.get());
    sample(slot, true);
}

/// A reader thread's loop, on `cpu`, as slot `slot`.
fn reader(cpu: usize, slot: usize) -> Result<(), String> {
    sys::pin_to(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    SLOT.with(|c| c.set(slot));
    while !RUNNING.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    while !STOP.load(Ordering::Relaxed) {
        sample(slot, false);
    }
    Ok(())
}

// ---- the run ----------------------------------------------------------------

/// The counter's rate against `CLOCK_MONOTONIC_RAW`, kHz, over `ms`.
pub(crate) fn calibrate<C: Counter>(c: &C, ms: u64) -> u32 {
    let (t0, c0) = (sys::mono_raw_ns(), c.read());
    std::thread::sleep(Duration::from_millis(ms));
    let (t1, c1) = (sys::mono_raw_ns(), c.read());
    let khz =
        (c1.wrapping_sub(c0) as u128 * 1_000_000 / u128::from(t1.wrapping_sub(t0)).max(1)) as u64;
    khz.min(u64::from(u32::MAX)) as u32
}

fn sum(f: impl Fn(&Slot) -> &AtomicU64, n: usize) -> u64 {
    SLOTS[..n]
        .iter()
        .map(|s| f(s).load(Ordering::Relaxed))
        .sum()
}

fn max(f: impl Fn(&Slot) -> &AtomicU64, n: usize) -> u64 {
    SLOTS[..n]
        .iter()
        .map(|s| f(s).load(Ordering::Relaxed))
        .max()
        .unwrap_or(0)
}

/// Why the run ended.
static WHY: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// The errors counted so far, on the first `slots` slots.
fn errors(slots: usize) -> u64 {
    [
        sum(|s| &s.torn, slots),
        sum(|s| &s.backwards, slots),
        sum(|s| &s.cross, slots),
        sum(|s| &s.reference, slots),
        sum(|s| &s.stalls, slots),
    ]
    .iter()
    .sum()
}

/// The window hits counted so far.
fn hits(slots: usize) -> u64 {
    sum(|s| &s.hits_local, slots) + sum(|s| &s.hits_remote, slots)
}

fn torture(s: &Settings) -> Result<u8, String> {
    let cpus = sys::cpus_allowed().map_err(|e| format!("sched_getaffinity: {e}"))?;
    if cpus.len() * 2 > MAX_SLOTS {
        return Err(format!(
            "{} CPUs: at most {} supported",
            cpus.len(),
            MAX_SLOTS / 2
        ));
    }
    let khz = calibrate(&Ordered, 100);
    let ms = calc_mult_shift(khz, NSEC_PER_MSEC, 3_600_000)
        .ok_or(format!("no conversion for a {khz} kHz counter"))?;
    let mask = mask_for_bits(s.counter_bits).ok_or("counter_bits")?;
    let index = index_of(s.clock, s.counter).ok_or("no such clock")?;
    ACTIVE.store(index, Ordering::Relaxed);
    let c = clock(index);
    c.set_wait_budget_ns(100_000 + 2 * s.tear_window_ns);
    if !c.start(sys::mono_raw_ns(), ms.mult, ms.shift, mask) {
        return Err("the clock's writer is busy at start".into());
    }
    CONVERSIONS[0].store(
        (u64::from(ms.mult) << 32) | u64::from(ms.shift),
        Ordering::Relaxed,
    );
    if s.disturb_conversion {
        let (m, sh) = same_rate_pair(ms.mult, ms.shift);
        CONVERSIONS[1].store((u64::from(m) << 32) | u64::from(sh), Ordering::Relaxed);
    }
    HW_BASE.store(c.read().ns.saturating_sub(1 << 40), Ordering::Relaxed);
    HIGH_WATER.reset(0);
    sys::on_signal(libc::SIGTRAP, on_interrupt).map_err(|e| format!("sigaction: {e}"))?;
    sys::on_signal(timer_signal(), on_interrupt).map_err(|e| format!("sigaction: {e}"))?;

    let n = cpus.len();
    WRITERS.store(n, Ordering::Relaxed);
    let t0 = Instant::now();
    let results = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, &cpu) in cpus.iter().enumerate() {
            handles.push(scope.spawn(move || writer(cpu, i, s)));
            handles.push(scope.spawn(move || reader(cpu, n + i)));
        }
        RUNNING.store(true, Ordering::Release);
        let least = Duration::from_secs(s.duration_s);
        let most = if s.until_coverage { least * 4 } else { least };
        let slots = 2 * n;
        let why = loop {
            std::thread::sleep(Duration::from_millis(20));
            let el = t0.elapsed();
            if handles.iter().any(|h| h.is_finished()) {
                break "a thread ended";
            }
            if s.until_coverage && errors(slots) > 0 {
                break "until=coverage: an anomaly";
            }
            let met = hits(slots) >= s.min_window_hits;
            if el >= least && (met || !s.until_coverage) {
                break if s.until_coverage {
                    "until=coverage: duration_s elapsed, window hits met"
                } else {
                    "duration_s elapsed"
                };
            }
            if el >= most {
                break "until=coverage: 4 times duration_s elapsed";
            }
        };
        STOP.store(true, Ordering::Release);
        let _ = WHY.set(why);
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err("a thread panicked".into())))
            .collect::<Vec<_>>()
    });
    for r in results {
        r?;
    }
    let elapsed_ms = t0.elapsed().as_millis();
    let slots = 2 * n;
    let torn = sum(|s| &s.torn, slots);
    let backwards = sum(|s| &s.backwards, slots);
    let cross = sum(|s| &s.cross, slots);
    let reference = sum(|s| &s.reference, slots);
    let stalls = sum(|s| &s.stalls, slots);
    let errors = torn + backwards + cross + reference + stalls;
    let local = sum(|s| &s.hits_local, slots);
    let remote = sum(|s| &s.hits_remote, slots);
    let why = WHY.get().copied().unwrap_or("?");
    let (verdict, code) = if errors > 0 {
        ("FAILURE", 1)
    } else if local + remote >= s.min_window_hits {
        ("SUCCESS", 0)
    } else {
        ("INCONCLUSIVE", 4)
    };
    let source = match SOURCE_USED.load(Ordering::Relaxed) {
        1 => "perf",
        2 => "timer",
        _ => "perf+timer",
    };
    println!(
        "nmiclock-host: End of test: {verdict} ({why}): clock={} counter={} counter_bits={} \
         tear_window_ns={} period_us={} duration_s={} disturb={} min_window_hits={} until={} \
         signal_source={} signal_source_used={source} cpus={n} counter_khz={khz} \
         samples={} signal_samples={} window_hits_local={local} window_hits_remote={remote} \
         stable_copy_reads={} torn_reads={torn} max_tear_error_ns={} max_switch_skew_ns={} \
         wrap_late_reads={} reference_mismatches={reference} backwards={backwards} \
         cross_cpu_backwards={cross} max_backstep_ns={} max_cross_backstep_ns={} \
         clock_stalls={stalls} epoch_updates={} conversion_switches={} wrap_overruns={} \
         errors={errors} elapsed_ms={elapsed_ms}",
        s.clock,
        s.counter,
        s.counter_bits,
        s.tear_window_ns,
        s.period_us,
        s.duration_s,
        if s.disturb_conversion {
            "conversion"
        } else {
            "none"
        },
        s.min_window_hits,
        if s.until_coverage {
            "coverage"
        } else {
            "duration"
        },
        s.signal_source,
        sum(|s| &s.samples, slots),
        sum(|s| &s.signal_samples, slots),
        sum(|s| &s.stable_copy, slots),
        max(|s| &s.max_tear_ns, slots),
        max(|s| &s.max_skew, slots),
        sum(|s| &s.late_reads, slots),
        max(|s| &s.max_backstep, slots),
        max(|s| &s.max_cross_backstep, slots),
        sum(|s| &s.epoch_updates, slots),
        sum(|s| &s.switches, slots),
        OVERRUNS.load(Ordering::Relaxed),
    );
    // The first KEPT, then the first of each kind in each context past
    // them, in the order they were met.
    let mut past: Vec<&Anomaly> = FIRSTS.iter().flatten().collect();
    past.retain(|a| a.ready.load(Ordering::Acquire));
    past.sort_by_key(|a| a.seq.load(Ordering::Relaxed));
    for a in ANOMALIES.iter().chain(past) {
        if !a.ready.load(Ordering::Acquire) {
            continue;
        }
        let i = a.seq.load(Ordering::Relaxed);
        let slot = a.slot.load(Ordering::Relaxed) as usize;
        let (role, cpu) = if slot < n {
            ("signal", cpus[slot])
        } else {
            ("reader", cpus[slot - n])
        };
        println!(
            "anomaly {i}: kind={} cpu={cpu} ctx={role} value_ns={} against_ns={} cyc={} base_cyc={}",
            KINDS.get(a.kind.load(Ordering::Relaxed) as usize).unwrap_or(&"?"),
            a.value.load(Ordering::Relaxed),
            a.against.load(Ordering::Relaxed),
            a.cyc.load(Ordering::Relaxed),
            a.base_cyc.load(Ordering::Relaxed),
        );
    }
    Ok(code)
}

pub(crate) fn main() -> ExitCode {
    sys::default_sigpipe();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let s = match parse(&args) {
        Ok(Some(s)) => s,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("nmiclock-host: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let r = if s.litmus {
        litmus::run(&s.reads, &s.backwards_needed)
    } else {
        torture(&s)
    };
    match r {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("nmiclock-host: {e}");
            ExitCode::from(2)
        }
    }
}
