// SPDX-License-Identifier: GPL-2.0

//! nmiclock: is a clock, or anything read from NMI context, really NMI-safe?
//!
//! Crate root of `nmiclock.ko`, a Rust module linked with a thin C glue
//! object (`rust/nmiclock_glue.c`, wrapped by [`ffi`]).
//!
//! Supported features:
//!
//! - A `sched_clock` replacement read through a seqcount latch, so an NMI
//!   can read it even while the epoch is being updated on its CPU, and the
//!   designs it replaced (`clock=latch|seqcount|unprotected`), over an
//!   ordered or a bare TSC read (`counter=tsc_ordered|tsc`) masked to
//!   `counter_bits` (16..64) bits; `tear_window_ns` widens the writer's race
//!   window. See [`clock`] and [`kclock`].
//! - `nmiclock_sched_clock()`, exported GPL for other modules.
//! - The `__acct_update_integrals()` arithmetic in lock-free `cmpxchg`,
//!   `irqsave` and `racy` forms (`acct=`), driven from task and hard-IRQ
//!   context on every CPU and checked online. See [`acct`] and [`kacct`].
//! - debugfs, root-only, under `/sys/kernel/debug/nmiclock/`: `stats`
//!   (`key: value` lines); `check` (write a duration in ms to run the
//!   task-context clock check on every CPU; read its results); `acct`
//!   (write a duration in ms to run the acct updater; read its results);
//!   `acct_bench` (write a number of rounds to time the strategies);
//!   `bench` (write `run` for the refscale-style benchmark of every clock,
//!   the kernel's clocks and the acct strategies; read its table; see
//!   [`kbench`]).
//! - One `pr_info` line on load, everything it created removed on unload.
//!
//! The kernel-independent core lives in `rust/nmiclock_core/src/`: each file
//! there is a module of this crate (included by `#[path]`) and of the host
//! crate that `cargo test` runs, unchanged.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::c_str;
use kernel::prelude::*;

#[path = "nmiclock_core/src/acct.rs"]
pub mod acct;
#[path = "nmiclock_core/src/bench.rs"]
pub mod bench;
#[path = "nmiclock_core/src/clock.rs"]
pub mod clock;
#[path = "nmiclock_core/src/counter.rs"]
pub mod counter;
#[path = "nmiclock_core/src/cyc_ns.rs"]
pub mod cyc_ns;
#[path = "nmiclock_core/src/parse.rs"]
pub mod parse;
#[path = "nmiclock_core/src/spin.rs"]
pub mod spin;

mod ffi;
mod fmtbuf;
mod kacct;
mod kbench;
mod kclock;
mod percpu;
mod settings;
mod torture;

/// Atomics and the spin hint for the shared core files: `core`'s (the host
/// crate switches to loom's for model checking).
mod sync {
    pub(crate) use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

    /// `cpu_relax()`.
    #[inline(always)]
    pub(crate) fn spin_loop() {
        core::hint::spin_loop();
    }
}

module! {
    type: NmiClock,
    name: "nmiclock",
    author: "nmiclock developers",
    description: "NMI-safe clock and accounting torture",
    license: "GPL",
}

/// Version reported in `stats` and the load message.
const VERSION: &str = "0.5.0";

/// Range of the TSC conversion shown in `stats`: 600 s, in ms (the pair is
/// computed from kHz, as the kernel's own `cyc2ns` does).
const TSC_MAXSEC_MS: u32 = 600 * 1000;

/// Reads of `stats` since load.
static STATS_READS: AtomicU64 = AtomicU64::new(0);

static STATS_OPS: ffi::FileOps = ffi::FileOps {
    show: show_stats,
    write: None,
};

static CHECK_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| kclock::show_check(w),
    write: Some(write_check),
};

static ACCT_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| kacct::show_run(w),
    write: Some(write_acct),
};

static ACCT_BENCH_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| kacct::show_bench(w),
    write: Some(write_acct_bench),
};

static BENCH_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| kbench::show(w),
    write: Some(kbench::write),
};

static CONTROL_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| writeln!(w, "{}", torture::state()),
    write: Some(write_control),
};

static CONFIG_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| settings::show(w, false),
    write: Some(write_config),
};

static HISTOGRAM_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| torture::show_histogram(w),
    write: None,
};

static PERCPU_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| torture::show_percpu(w),
    write: None,
};

static ANOMALIES_OPS: ffi::FileOps = ffi::FileOps {
    show: |w| torture::show_anomalies(w),
    write: None,
};

/// Renders `stats`: one `key: value` per line, keys in snake case.
fn show_stats(seq: &mut ffi::SeqFile) -> fmt::Result {
    let reads = STATS_READS.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let khz = ffi::tsc_khz();
    let tsc = cyc_ns::calc_mult_shift(khz, cyc_ns::NSEC_PER_MSEC, TSC_MAXSEC_MS);
    let (mult, shift) = tsc.map_or((0, 0), |ms| (ms.mult, ms.shift));

    writeln!(seq, "version: {VERSION}")?;
    writeln!(seq, "online_cpus: {}", ffi::num_online_cpus())?;
    writeln!(seq, "tsc_khz: {khz}")?;
    writeln!(seq, "tsc_mult: {mult}")?;
    writeln!(seq, "tsc_shift: {shift}")?;
    writeln!(seq, "stats_reads: {reads}")?;
    torture::show_stats(seq)?;
    kclock::show_stats(seq)?;
    kacct::show_stats(seq)
}

/// Parses a write as a number in `1..=max`; anything else is logged as
/// wanting `what` and gives `EINVAL`.
fn parse_arg(file: &str, input: &[u8], max: u32, what: &str) -> Result<u32> {
    match parse::parse_u32(input) {
        Some(v) if (1..=max).contains(&v) => Ok(v),
        _ => {
            pr_err!("{}: want {}, 1..{}\n", file, what, max);
            Err(EINVAL)
        }
    }
}

/// `check`: a duration in ms, or `ms=N windows=N`, runs the clock check
/// (blocking).
fn write_check(input: &[u8]) -> Result {
    let Some(args) = kclock::parse_check(input) else {
        pr_err!(
            "check: want a duration in ms, 1..{}, or ms=1..{} windows=0..1000000\n",
            kclock::MAX_CHECK_MS,
            kclock::MAX_CHECK_MS
        );
        return Err(EINVAL);
    };
    kclock::run_check(args)
}

/// `control`: `start`, `stop` or `reset`.
fn write_control(input: &[u8]) -> Result {
    match parse::strip_newline(input) {
        b"start" => torture::start(),
        b"stop" => torture::stop("stop written to control").inspect_err(|_| {
            pr_err!("stop: no run in progress\n");
        }),
        b"reset" => torture::reset(),
        _ => {
            pr_err!("control: want start, stop or reset\n");
            Err(EINVAL)
        }
    }
}

/// `config`: `key=value`, while no run is in progress.
fn write_config(input: &[u8]) -> Result {
    let (key, value) = settings::split(input)?;
    if !torture::idle() || kbench::running() {
        pr_err!(
            "config: {}={}: not while a run or benchmark is in progress\n",
            key,
            value
        );
        return Err(EBUSY);
    }
    settings::set(key, value)?;
    if matches!(key, "clock" | "counter" | "counter_bits" | "tear_window_ns") {
        kclock::reconfigure()?;
    }
    Ok(())
}

/// `acct`: a duration in ms runs the acct updater on every CPU (blocking).
fn write_acct(input: &[u8]) -> Result {
    kacct::run(parse_arg(
        "acct",
        input,
        kacct::MAX_RUN_MS,
        "a duration in ms",
    )?)
}

/// `acct_bench`: a number of rounds runs the cost benchmark (blocking).
fn write_acct_bench(input: &[u8]) -> Result {
    kacct::bench(parse_arg(
        "acct_bench",
        input,
        kacct::MAX_BENCH_ROUNDS,
        "a number of rounds",
    )?)
}

/// Every setting as ` key=value` pairs, for the load message.
struct SettingsInline;

impl fmt::Display for SettingsInline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        settings::show(f, true)
    }
}

/// The loaded module. Fields drop in order: debugfs first (waiting for
/// handlers in flight), then the clock.
struct NmiClock {
    _debugfs: ffi::DebugfsDir,
    _torture: torture::Installed,
    _acct: kacct::Running,
    _clock: kclock::Running,
}

impl kernel::Module for NmiClock {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let params = ffi::params();
        settings::from_params(&params)?;
        let clock = kclock::Running::start()?;
        let acct = kacct::Running::start()?;
        let stress = torture::Installed::new()?;

        let debugfs = ffi::DebugfsDir::new(c_str!("nmiclock")).inspect_err(|e| {
            pr_err!(
                "cannot create /sys/kernel/debug/nmiclock (error {}); is debugfs enabled?\n",
                e.to_errno()
            )
        })?;
        for (name, mode, ops) in [
            (c_str!("stats"), 0o400, &STATS_OPS),
            (c_str!("check"), 0o600, &CHECK_OPS),
            (c_str!("acct"), 0o600, &ACCT_OPS),
            (c_str!("acct_bench"), 0o600, &ACCT_BENCH_OPS),
            (c_str!("bench"), 0o600, &BENCH_OPS),
            (c_str!("control"), 0o600, &CONTROL_OPS),
            (c_str!("config"), 0o600, &CONFIG_OPS),
            (c_str!("histogram"), 0o400, &HISTOGRAM_OPS),
            (c_str!("percpu"), 0o400, &PERCPU_OPS),
            (c_str!("anomalies"), 0o400, &ANOMALIES_OPS),
        ] {
            debugfs.create_file(name, mode, ops).inspect_err(|e| {
                pr_err!(
                    "cannot create debugfs file {} (error {})\n",
                    name,
                    e.to_errno()
                )
            })?;
        }

        pr_info!(
            "loaded: version {}, {} CPUs online, TSC {} kHz, debugfs at /sys/kernel/debug/nmiclock;{}\n",
            VERSION,
            ffi::num_online_cpus(),
            ffi::tsc_khz(),
            SettingsInline
        );
        if settings::get(settings::Key::Autostart) == 1 {
            torture::start()?;
        }
        Ok(NmiClock {
            _debugfs: debugfs,
            _torture: stress,
            _acct: acct,
            _clock: clock,
        })
    }
}

impl Drop for NmiClock {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
