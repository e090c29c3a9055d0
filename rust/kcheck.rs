// SPDX-License-Identifier: GPL-2.0

//! The task-context check (debugfs `check`): a kthread bound to each
//! online CPU reads nmiclock between two `local_clock()` reads, interrupts
//! off, as fast as it can, and counts backward steps and the largest
//! disagreement with `local_clock()`. Each read also notes whether it met a
//! writer's window ([`crate::coverage`]): with `windows=N` the check ends
//! as soon as the readers have seen N distinct windows, or time went
//! backwards, so its length follows how often readers really met a writer.
//!
//! As in the stress run, what an epoch update a whole counter wrap late
//! does is left out, since it steps time back whatever the protection: a
//! read of an epoch more than a wrap old ([`crate::clock::Reading`]'s
//! `late_epoch`) is not compared, and no step spans such an update
//! ([`kclock::overruns`], announced before its publish, loaded before and
//! after each read: a read it moved during is not compared either, since
//! it may have read the replaced epoch with the count already moved): the
//! reader starts again from the next read, its base for `max_dev_ns` too.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use crate::activity::{Activity, Guard};
use crate::counters::{counters, show, write_cpu_line, write_totals};
use crate::coverage::{Hit, View};
use crate::ffi;
use crate::ffi::kthread::Kthread;
use crate::kclock;
use crate::parse::{parse_kv, parse_u32, Key};
use crate::percpu::PerCpu;

/// Longest check, in ms.
pub(crate) const MAX_MS: u32 = 60_000;

/// Most windows a check may ask for.
const MAX_WINDOWS: u32 = 1_000_000;

/// The keys a `check` write takes, with their ranges.
const KEYS: [Key; 2] = [
    Key {
        name: "ms",
        min: 1,
        max: MAX_MS,
    },
    Key {
        name: "windows",
        min: 0,
        max: MAX_WINDOWS,
    },
];

/// What a write to `check` asks for.
#[derive(Clone, Copy)]
struct Args {
    /// How long to read, at most, in ms.
    ms: u32,
    /// End as soon as the readers have seen this many distinct writer
    /// windows, or time went backwards (0: read for the whole `ms`).
    windows: u32,
}

/// Parses a `check` write: a duration in ms, or `ms=N windows=N`.
fn parse(input: &[u8]) -> Option<Args> {
    if let Some(ms) = parse_u32(input) {
        return (1..=MAX_MS)
            .contains(&ms)
            .then_some(Args { ms, windows: 0 });
    }
    let mut v = [0, 0];
    parse_kv(input, &KEYS, &mut v).ok()?;
    let [ms, windows] = v;
    (ms != 0).then_some(Args { ms, windows })
}

counters! {
    /// One CPU's results, in its own cache line.
    #[repr(align(64))]
    struct CpuResult, totals Totals {
        /// Reads made.
        reads: "reads", sum, show::FILE_CPU;
        /// Reads older than the one before, and the largest step back.
        backwards: "backwards", sum, show::FILE_CPU;
        max_backstep_ns: "max_backstep_ns", max, show::FILE_CPU;
        /// The largest distance from `local_clock()`'s window, and the
        /// widest window.
        max_dev_ns: "max_dev_ns", max, show::FILE_CPU;
        max_window_ns: "max_window_ns", max, show::FILE_CPU;
        /// Reads that met a writer's window, and windows seen inside.
        window_hits: "window_hits", sum, show::FILE_CPU;
        windows_seen: "windows_seen", sum, show::FILE_CPU;
    }
}

/// The check activity's per-CPU results, and the run in progress (or the last).
struct ActivityState {
    /// Each CPU's reader's findings.
    results: PerCpu<CpuResult>,
    /// Runs since load.
    runs: AtomicU64,
    /// CPUs the run reads on.
    cpus: AtomicU32,
    /// How long the run was to last, and lasted, ms.
    duration_ms: AtomicU64,
    elapsed_ms: AtomicU64,
    /// Windows after which the run may stop early.
    want_windows: AtomicU64,
    /// Distinct windows the readers have seen so far, summed over readers.
    windows: AtomicU64,
    /// Set when a reader saw time go backwards.
    caught: AtomicBool,
    /// `windows` when the first backward step was seen, plus one (0: none).
    first_catch: AtomicU64,
    /// Why the last check ended.
    stopped: AtomicU32,
}

static STATE: ActivityState = ActivityState {
    results: PerCpu::new(),
    runs: AtomicU64::new(0),
    cpus: AtomicU32::new(0),
    duration_ms: AtomicU64::new(0),
    elapsed_ms: AtomicU64::new(0),
    want_windows: AtomicU64::new(0),
    windows: AtomicU64::new(0),
    caught: AtomicBool::new(false),
    first_catch: AtomicU64::new(0),
    stopped: AtomicU32::new(Stop::Duration as u32),
};

/// Why a check ended.
#[derive(Clone, Copy)]
#[repr(u32)]
enum Stop {
    /// Its whole duration passed.
    Duration = 0,
    /// The readers saw the windows asked for.
    Windows = 1,
    /// Time went backwards.
    Caught = 2,
    /// A signal interrupted the write that started it.
    Interrupted = 3,
}

impl Stop {
    /// The name of a stored `Stop as u32`, for the `check` file.
    fn name_of(v: u32) -> &'static str {
        match v {
            v if v == Self::Windows as u32 => "windows",
            v if v == Self::Caught as u32 => "caught",
            v if v == Self::Interrupted as u32 => "interrupted",
            _ => "duration",
        }
    }
}

/// The check's per-CPU results, installed at load; dropping it removes
/// them.
pub(crate) struct CheckSlots(());

impl CheckSlots {
    /// Installs the per-CPU results.
    pub(crate) fn new() -> Result<Self> {
        STATE.results.install(CpuResult::default)?;
        Ok(Self(()))
    }
}

impl Drop for CheckSlots {
    fn drop(&mut self) {
        STATE.results.uninstall();
    }
}

/// One sample: nmiclock read between two `local_clock()` reads, interrupts
/// off so only an NMI (or, in a VM, the host) can come between them. The
/// window `[before, after]` bounds when the read happened; `hit` says
/// whether a writer's window was open meanwhile.
#[derive(Clone, Copy)]
struct Sample {
    before: u64,
    ns: u64,
    after: u64,
    hit: Hit,
    /// Not to be compared: the read's epoch was more than a wrap old
    /// (early by whole wraps), or a late update was announced while it
    /// read (it may have read the epoch that update replaces, which is not
    /// late yet, with the count already moved).
    skip: bool,
    /// Epoch updates a wrap late announced by the end of the read.
    overruns: u64,
}

fn sample() -> Sample {
    ffi::cpu::with_irqs_disabled(|| {
        let v0 = View::now();
        let before = ffi::time::local_clock();
        let announced = kclock::overruns();
        let r = kclock::read();
        let overruns = kclock::overruns();
        let after = ffi::time::local_clock();
        let v1 = View::now();
        Sample {
            before,
            ns: r.ns,
            after,
            hit: Hit::between(v0, v1),
            skip: r.late_epoch || overruns != announced,
            overruns,
        }
    })
}

/// How far nmiclock's elapsed time since `base` falls outside what
/// `local_clock()` allows: elapsed local time is at least
/// `s.before - base.after` and at most `s.after - base.before`.
fn deviation(base: &Sample, s: &Sample) -> u64 {
    let elapsed = s.ns.wrapping_sub(base.ns) as i64;
    let lo = s.before.wrapping_sub(base.after) as i64;
    let hi = s.after.wrapping_sub(base.before) as i64;
    if elapsed < lo {
        lo.wrapping_sub(elapsed) as u64
    } else if elapsed > hi {
        elapsed.wrapping_sub(hi) as u64
    } else {
        0
    }
}

/// Samples taken to pick the base of the check: the one with the narrowest
/// window, since its window is slack for every later comparison.
const BASE_SAMPLES: u32 = 100;

/// One CPU's share of the check.
fn check_cpu(k: &Kthread, cpu: u32) {
    let Some(slots) = STATE.results.pin() else {
        return;
    };
    let Some(slot) = slots.get(cpu) else {
        return;
    };
    let duration = STATE
        .duration_ms
        .load(Ordering::Relaxed)
        .saturating_mul(1_000_000);
    let want = STATE.want_windows.load(Ordering::Relaxed);
    let mut base = sample();
    for _ in 1..BASE_SAMPLES {
        let s = sample();
        // Never a read that is not compared, while there is another.
        let narrower = s.after.wrapping_sub(s.before) < base.after.wrapping_sub(base.before);
        if base.skip || (!s.skip && narrower) {
            base = s;
        }
    }
    let end = base.after.wrapping_add(duration);
    let mut prev = base.ns;
    let mut prev_overruns = base.overruns;
    let (mut reads, mut backwards, mut backstep, mut dev, mut window) = (0u64, 0u64, 0, 0, 0);
    let (mut hits, mut seen, mut last_seq) = (0u64, 0u64, None);
    loop {
        let s = sample();
        reads = reads.wrapping_add(1);
        if s.hit.any() {
            hits = hits.wrapping_add(1);
        }
        if s.hit.inside && last_seq != Some(s.hit.seq) {
            last_seq = Some(s.hit.seq);
            seen = seen.wrapping_add(1);
            STATE.windows.fetch_add(1, Ordering::Relaxed);
        }
        window = window.max(s.after.wrapping_sub(s.before));
        if s.skip {
            // Early by the wraps a late update loses, or maybe the epoch
            // it replaces: not compared.
        } else if s.overruns != prev_overruns {
            // A late update took effect since `prev`: start again here.
            prev_overruns = s.overruns;
            prev = s.ns;
            base = s;
        } else {
            if s.ns < prev {
                backwards = backwards.wrapping_add(1);
                backstep = backstep.max(prev - s.ns);
                if !STATE.caught.swap(true, Ordering::Relaxed) {
                    let at = STATE.windows.load(Ordering::Relaxed);
                    STATE
                        .first_catch
                        .store(at.wrapping_add(1), Ordering::Relaxed);
                }
            }
            prev = s.ns;
            dev = dev.max(deviation(&base, &s));
        }
        if s.after.wrapping_sub(end) as i64 >= 0 {
            break;
        }
        if want != 0 {
            // A verdict either way: a catch, or enough windows survived.
            if STATE.caught.load(Ordering::Relaxed) {
                STATE.stopped.store(Stop::Caught as u32, Ordering::Relaxed);
                break;
            }
            if STATE.windows.load(Ordering::Relaxed) >= want {
                STATE.stopped.store(Stop::Windows as u32, Ordering::Relaxed);
                break;
            }
        }
        if reads % 64 == 0 {
            if k.should_stop() {
                break;
            }
            ffi::cpu::cond_resched();
        }
    }
    for (a, v) in slot
        .counts()
        .into_iter()
        .zip([reads, backwards, backstep, dev, window, hits, seen])
    {
        a.store(v, Ordering::Relaxed);
    }
}

/// Handles a write to `check`: parses it and runs the check on every
/// online CPU, blocking, for `ms`, or until the readers have seen
/// `windows` writer windows or a backward step. `EINVAL` for a bad write,
/// `EBUSY` while anything else runs; nothing runs then. A signal ends the
/// check early (`stopped: interrupted`, its results so far kept) with
/// `EINTR`.
pub(crate) fn write(input: &[u8]) -> Result {
    let Some(args) = parse(input) else {
        pr_err!(
            "check: want a duration in ms, 1..{}, or ms=1..{} windows=0..{}\n",
            MAX_MS,
            MAX_MS,
            MAX_WINDOWS
        );
        return Err(EINVAL);
    };
    let _guard = Guard::try_begin(Activity::Check, "check")?;
    let slots = STATE.results.pin();
    for (_, s) in slots.iter().flat_map(|s| s.iter()) {
        s.reset_counts();
    }
    STATE
        .duration_ms
        .store(u64::from(args.ms), Ordering::Relaxed);
    STATE
        .want_windows
        .store(u64::from(args.windows), Ordering::Relaxed);
    STATE.windows.store(0, Ordering::Relaxed);
    STATE.caught.store(false, Ordering::Relaxed);
    STATE.first_catch.store(0, Ordering::Relaxed);
    STATE
        .stopped
        .store(Stop::Duration as u32, Ordering::Relaxed);
    STATE
        .cpus
        .store(ffi::cpu::num_online_cpus(), Ordering::Relaxed);
    let t0 = ffi::time::local_clock();
    let ret = ffi::kthread::run_on_each_cpu(&check_cpu);
    let elapsed = ffi::time::local_clock().wrapping_sub(t0) / 1_000_000;
    STATE.elapsed_ms.store(elapsed, Ordering::Relaxed);
    if ret == Err(EINTR) {
        STATE
            .stopped
            .store(Stop::Interrupted as u32, Ordering::Relaxed);
        crate::activity::log_interrupted("check", elapsed);
    }
    STATE.runs.fetch_add(1, Ordering::Relaxed);
    ret
}

/// Writes the `check` file: the last check's results, totals then per CPU.
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    let running = crate::activity::current() == Some(Activity::Check);
    let first = STATE.first_catch.load(Ordering::Relaxed);
    writeln!(w, "state: {}", if running { "running" } else { "idle" })?;
    writeln!(w, "runs: {}", STATE.runs.load(Ordering::Relaxed))?;
    writeln!(
        w,
        "duration_ms: {}",
        STATE.duration_ms.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "elapsed_ms: {}",
        STATE.elapsed_ms.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "windows_wanted: {}",
        STATE.want_windows.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "stopped: {}",
        Stop::name_of(STATE.stopped.load(Ordering::Relaxed))
    )?;
    writeln!(w, "cpus: {}", STATE.cpus.load(Ordering::Relaxed))?;
    if first == 0 {
        writeln!(w, "first_catch_windows: -1")?;
    } else {
        writeln!(w, "first_catch_windows: {}", first - 1)?;
    }
    let slots = STATE.results.pin();
    let cpus = || slots.iter().flat_map(|s| s.iter()).map(|(_, s)| s);
    write_totals(w, &Totals::of(cpus).entries())?;
    for (cpu, s) in slots.iter().flat_map(|s| s.iter()) {
        if s.reads.load(Ordering::Relaxed) != 0 {
            write_cpu_line(w, cpu, &s.entries())?;
        }
    }
    Ok(())
}
