// SPDX-License-Identifier: GPL-2.0

//! nmiclock: is a clock, or anything read from NMI context, really NMI-safe?
//!
//! Crate root of `nmiclock.ko`, a Rust module linked with a thin C glue
//! object (`rust/nmiclock_glue.c`, and `rust/nmiclock_glue_<arch>.c` for
//! what differs per architecture). How the two sides meet (bindgen of the
//! glue's header, closures handed to the glue) is told in [`ffi`].
//!
//! Supported features:
//!
//! - A `sched_clock` replacement read through a seqcount latch, so an NMI
//!   can read it even while the epoch is being updated on its CPU, and the
//!   designs it replaced (`clock=latch|seqcount|unprotected`), over an
//!   ordered or a bare counter read (x86: `counter=tsc_ordered|tsc`; arm64:
//!   `counter=cntvct_ordered|cntvct`, see [`arch`]) masked to
//!   `counter_bits` (16..64) bits; `tear_window_ns` widens the writer's race
//!   window. See [`clock`] and [`kclock`]. Writers mark their windows for
//!   the readers' coverage figures ([`coverage`]).
//! - `nmiclock_sched_clock()`, exported GPL for other modules.
//! - The `__acct_update_integrals()` arithmetic in lock-free `cmpxchg`,
//!   `irqsave` and `racy` forms (`acct=`), driven from task, hard-IRQ and
//!   NMI context on every CPU and checked online. See [`acct`] and
//!   [`kacct`].
//! - The stress run ([`torture`]): NMIs (NMI IPIs or perf counters) sample
//!   the clock and the acct records on every CPU while writers hammer both,
//!   ending in an `End of test: SUCCESS` or `FAILURE` line.
//! - Targets ([`target`]): the stress run reads nmiclock's clock, one of the
//!   kernel's NMI-safe clocks judged by what it promises, or a clock
//!   another module registers through `include/nmiclock.h`
//!   (`nmiclock_register_target()`, exported GPL).
//! - Wake-up designs ([`kwake`], `wake=sleep|racy|poll`): the lost
//!   wake-up of an idle loop that checked and then halted, and polling
//!   before sleeping, run on every CPU and timed (`wake`), and played
//!   ping-pong between two CPUs in the bench.
//! - The settings ([`settings`]): module parameters at load, `config` while
//!   nothing runs (several pairs a write, all or none, checked as a
//!   whole), each choice an enum declared once ([`choices`]); one activity
//!   at a time ([`activity`]).
//!
//! Modules import in one direction (`scripts/check-imports` fails on a
//! circle): [`ffi`] names nothing above it, [`choices`] and [`registry`]
//! (the targets' names) are leaves for [`settings`], and [`torture`] sits
//! above [`target`], [`kclock`] and [`kacct`].
//! - debugfs, root-only, under `/sys/kernel/debug/nmiclock/` (see
//!   [`create_files`]): `stats`, `config`, `control`, `histogram`,
//!   `percpu`, `anomalies` ([`torture`]), `check` ([`kcheck`]), `acct`
//!   ([`kacct`]), `bench` ([`kbench`]), `wake` ([`kwake`]); the last four
//!   block their writer, and a signal (Ctrl-C) ends them early with
//!   `EINTR` ([`ffi::kthread::run_on_each_cpu`]).
//! - Where it runs ([`environment`], [`ffi::hypervisor`]): `qemu-tcg`,
//!   `kvm`, `hypervisor:<signature>` or `bare-metal`, from the hypervisor's
//!   identity, in `stats`, the load message and the bench's header.
//! - One `pr_info` line on load, everything it created removed on unload
//!   ([`Loaded::teardown`], in an order of its own). State that NMI, IRQ
//!   and task context share is per-CPU slots published through one
//!   pointer each and freed one RCU grace period after they are
//!   unpublished ([`percpu`]), or atomics in `static`s: memory safety does
//!   not depend on the order things are torn down in. `unsafe` lives in
//!   [`ffi`], [`percpu`] and the core's counter reads only (the crate
//!   denies `unsafe_code` elsewhere).
//!
//! The kernel-independent core lives in `rust/nmiclock_core/src/`: each file
//! there is a module of this crate (included by `#[path]`) and of the host
//! crate that `cargo test` runs, unchanged; the rules those files follow,
//! and their tests, are in the host crate's root
//! (`rust/nmiclock_core/src/lib.rs`).
//!
//! What runs in NMI or hard-IRQ context takes no lock, allocates nothing,
//! prints nothing and cannot panic; `scripts/check-nmi-context` proves it
//! from the built module's machine code (its header says how).

// `unsafe` (and what the compiler counts with it: exported symbols, link
// sections) only where a module below allows it, each with its reason.
#![deny(unsafe_code)]

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::c_str;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

use crate::fmtbuf::kernel_display;

#[path = "nmiclock_core/src/acct.rs"]
pub mod acct;
#[path = "nmiclock_core/src/bench.rs"]
pub mod bench;
#[path = "nmiclock_core/src/clock.rs"]
pub mod clock;
// The counter reads are inline assembly.
#[allow(unsafe_code)]
#[path = "nmiclock_core/src/counter.rs"]
pub mod counter;
#[path = "nmiclock_core/src/cyc_ns.rs"]
pub mod cyc_ns;
#[path = "nmiclock_core/src/environment.rs"]
pub mod environment;
#[path = "nmiclock_core/src/high_water.rs"]
pub mod high_water;
#[path = "nmiclock_core/src/lines.rs"]
pub mod lines;
#[path = "nmiclock_core/src/owner.rs"]
pub mod owner;
#[path = "nmiclock_core/src/parse.rs"]
pub mod parse;
#[path = "nmiclock_core/src/read_check.rs"]
pub mod read_check;
#[path = "nmiclock_core/src/spin.rs"]
pub mod spin;

mod activity;
mod arch;
mod choices;
mod counters;
mod coverage;
mod cs_switch;
mod kcheck;
// Every FFI call, wrapped in safe types.
#[allow(unsafe_code)]
mod ffi;
mod fmtbuf;
mod kacct;
mod kbench;
mod kclock;
mod kwake;
// Per-CPU slots published by pointer and freed after a grace period.
#[allow(unsafe_code)]
mod percpu;
mod registry;
mod settings;
mod target;
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
    description: "NMI-safe clock and accounting torture",
    license: "GPL",
}

/// The `author=` entry of `.modinfo`, outside `module!`: 6.12's takes
/// `author:` only, 7.x's `authors: [..]` only.
#[allow(unsafe_code)]
#[link_section = ".modinfo"]
// `used(compiler)`, as module! does: plain `used` is `used(linker)` since
// rustc 1.89, whose SHF_GNU_RETAIN keeps GNU ld from merging this
// `.modinfo` with the C side's: the module then has two, and the
// loader, reading the first, finds no vermagic ("invalid module format").
#[used(compiler)]
static AUTHOR: [u8; 27] = *b"author=nmiclock developers\0";

/// Version reported in `stats` and the load message.
const VERSION: &str = "0.8.0";

/// Range of the counter conversion shown in `stats`: 600 s, in ms (the pair
/// is computed from kHz, as the kernel's own `cyc2ns` does).
const COUNTER_MAXSEC_MS: u32 = 600 * 1000;

/// Reads of `stats` since load.
static STATS_READS: AtomicU64 = AtomicU64::new(0);

/// What the debugfs files' closures need besides the statics: the clock's
/// rebuilder (for `config`) and the stress run (for `control` and `bench`).
struct Shared {
    rebuilder: kclock::Rebuilder,
    stress: Arc<torture::Stress>,
}

/// Renders `stats`: one `key: value` per line, keys in snake case.
fn show_stats(seq: &mut impl Write) -> fmt::Result {
    let reads = STATS_READS.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let khz = ffi::time::counter_khz();
    let conv = cyc_ns::calc_mult_shift(khz, cyc_ns::NSEC_PER_MSEC, COUNTER_MAXSEC_MS);
    let (mult, shift) = conv.map_or((0, 0), |ms| (ms.mult, ms.shift));

    writeln!(seq, "version: {VERSION}")?;
    writeln!(seq, "online_cpus: {}", ffi::cpu::num_online_cpus())?;
    writeln!(seq, "arch: {}", arch::NAME)?;
    writeln!(seq, "environment: {}", ffi::hypervisor::environment())?;
    writeln!(seq, "counter_khz: {khz}")?;
    writeln!(seq, "counter_mult: {mult}")?;
    writeln!(seq, "counter_shift: {shift}")?;
    writeln!(seq, "stats_reads: {reads}")?;
    writeln!(
        seq,
        "activity: {}",
        activity::current().map_or("none", activity::Activity::name)
    )?;
    settings::show(seq)?;
    torture::show::stats(seq)?;
    kclock::show_stats(seq)?;
    kacct::show_stats(seq)
}

/// `control`: `start`, `stop` or `reset`.
fn write_control(shared: &Shared, input: &[u8]) -> Result {
    match parse::strip_newline(input) {
        b"start" => shared.stress.start(),
        b"stop" => torture::stop_written(),
        b"reset" => torture::reset(),
        _ => {
            pr_err!("control: want start, stop or reset\n");
            Err(EINVAL)
        }
    }
}

/// `config`: `key=value`, or several pairs separated by spaces, while
/// nothing runs; all or none. A change that cannot be applied (the clock
/// cannot be rebuilt) is undone.
fn write_config(shared: &Shared, input: &[u8]) -> Result {
    let pairs = settings::split(input)?;
    let guard = activity::Guard::try_begin(activity::Activity::Config, "config")?;
    let change = settings::set_all(&pairs, kclock::validate_settings)?;
    if change.reclock {
        if let Err(e) = shared.rebuilder.rebuild(&guard) {
            pr_err!(
                "config: cannot rebuild the clock (error {}); settings unchanged\n",
                e.to_errno()
            );
            change.undo();
            return Err(e);
        }
    }
    Ok(())
}

/// The loaded module: what init created, until [`Loaded::teardown`]
/// consumes it at unload.
struct NmiClock(Option<Loaded>);

/// What init created.
///
/// Memory safety does not depend on the order these go in: per-CPU state
/// is freed only once no reader can reach it ([`percpu`]), and each part
/// owns what it started. [`Loaded::teardown`] still removes them in an
/// order of its own, from the outside in, so that nothing runs on state
/// that is already gone: a run would otherwise find its slots empty and
/// end with nothing counted.
struct Loaded {
    debugfs: ffi::debugfs::Dir,
    stress: Arc<torture::Stress>,
    wake: kwake::WakeSlots,
    acct: kacct::AcctSlots,
    check: kcheck::CheckSlots,
    clock: kclock::Running,
    coverage: coverage::MarkSlots,
    switches: cs_switch::Watch,
}

impl Loaded {
    /// Removes everything, in order: the debugfs files first (waiting for
    /// handlers in flight: no activity can start after), then the stress
    /// run (stopping a run in progress), the wake designs, the updater,
    /// the check, the clock and its epoch timer, the coverage marks the
    /// clock's writers made, the clocksource switches' probe.
    fn teardown(self) {
        let Self {
            debugfs,
            stress,
            wake,
            acct,
            check,
            clock,
            coverage,
            switches,
        } = self;
        drop(debugfs);
        drop(stress);
        drop(wake);
        drop(acct);
        drop(check);
        drop(clock);
        drop(coverage);
        drop(switches);
    }
}

/// Logs a debugfs file that could not be created.
fn file_error(name: &CStr) -> impl Fn(&Error) + '_ {
    move |e| {
        pr_err!(
            "cannot create debugfs file {} (error {})\n",
            name,
            e.to_errno()
        )
    }
}

/// Creates `/sys/kernel/debug/nmiclock/` and its files: `stats`, `config`,
/// `control`, `histogram`, `percpu`, `anomalies`, `check`, `acct`, `bench`,
/// `wake` (root-only; read-only files 0400, writable ones 0600).
fn create_files(shared: Arc<Shared>) -> Result<ffi::debugfs::Dir> {
    let mut dir = ffi::debugfs::Dir::new(c_str!("nmiclock")).inspect_err(|e| {
        pr_err!(
            "cannot create /sys/kernel/debug/nmiclock (error {}); is debugfs enabled?\n",
            e.to_errno()
        )
    })?;
    let (ro, rw) = (0o400, 0o600);
    let name = c_str!("stats");
    dir.add_ro(name, ro, |w| show_stats(w))
        .inspect_err(file_error(name))?;
    let (name, s) = (c_str!("config"), shared.clone());
    dir.add_rw(
        name,
        rw,
        |w| settings::show(w),
        move |b| write_config(&s, b),
    )
    .inspect_err(file_error(name))?;
    let (name, s) = (c_str!("control"), shared.clone());
    dir.add_rw(
        name,
        rw,
        |w| writeln!(w, "{}", torture::state_name()),
        move |b| write_control(&s, b),
    )
    .inspect_err(file_error(name))?;
    let name = c_str!("histogram");
    dir.add_ro(name, ro, |w| torture::show::histogram(w))
        .inspect_err(file_error(name))?;
    let name = c_str!("percpu");
    dir.add_ro(name, ro, |w| torture::show::percpu(w))
        .inspect_err(file_error(name))?;
    let name = c_str!("anomalies");
    dir.add_ro(name, ro, |w| torture::anomaly::show(w))
        .inspect_err(file_error(name))?;
    let name = c_str!("series");
    dir.add_ro(name, ro, |w| torture::series::show(w))
        .inspect_err(file_error(name))?;
    let name = c_str!("check");
    dir.add_rw(name, rw, |w| kcheck::show(w), kcheck::write)
        .inspect_err(file_error(name))?;
    let name = c_str!("acct");
    dir.add_rw(name, rw, |w| kacct::show(w), kacct::write)
        .inspect_err(file_error(name))?;
    let (name, s) = (c_str!("bench"), shared);
    dir.add_rw(
        name,
        rw,
        |w| kbench::show(w),
        move |b| kbench::write(&s.stress, b),
    )
    .inspect_err(file_error(name))?;
    let name = c_str!("wake");
    dir.add_rw(name, rw, |w| kwake::show(w), kwake::write)
        .inspect_err(file_error(name))?;
    Ok(dir)
}

impl kernel::Module for NmiClock {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let environment = ffi::hypervisor::detect();
        settings::from_params(kclock::validate_settings)?;
        let coverage = coverage::MarkSlots::new()?;
        let switches = cs_switch::Watch::new()?;
        let clock = kclock::Running::start()?;
        let check = kcheck::CheckSlots::new()?;
        let acct = kacct::AcctSlots::new()?;
        let wake = kwake::WakeSlots::new()?;
        let stress = Arc::new(torture::Stress::new()?, GFP_KERNEL)?;
        let shared = Arc::new(
            Shared {
                rebuilder: clock.rebuilder(),
                stress: stress.clone(),
            },
            GFP_KERNEL,
        )?;
        let debugfs = create_files(shared)?;

        pr_info!(
            "loaded: version {}, environment {}, {} CPUs online, {} at {} kHz, debugfs at /sys/kernel/debug/nmiclock;{}\n",
            VERSION,
            kernel_display!(environment),
            ffi::cpu::num_online_cpus(),
            arch::COUNTER,
            ffi::time::counter_khz(),
            kernel_display!(settings::Inline)
        );
        if settings::flag(settings::Key::Autostart) {
            stress.start()?;
        }
        Ok(NmiClock(Some(Loaded {
            debugfs,
            stress,
            wake,
            acct,
            check,
            clock,
            coverage,
            switches,
        })))
    }
}

impl Drop for NmiClock {
    fn drop(&mut self) {
        pr_info!("unloading\n");
        if let Some(loaded) = self.0.take() {
            loaded.teardown();
        }
    }
}
