// SPDX-License-Identifier: GPL-2.0

//! nmiclock: is a clock, or anything read from NMI context, really NMI-safe?
//!
//! Crate root of `nmiclock.ko`, a Rust module linked with a thin C glue
//! object (`rust/nmiclock_glue.c`, wrapped by [`ffi`]).
//!
//! Supported features:
//!
//! - `/sys/kernel/debug/nmiclock/stats` (root-only): `key: value` lines
//!   describing the module and the machine's counter, including the TSC
//!   `mult`/`shift` pair computed by the same [`cyc_ns`] code the host tests
//!   check.
//! - One `pr_info` line on load, everything it created removed on unload.
//!
//! The kernel-independent core lives in `rust/nmiclock_core/src/`: each file
//! there is a module of this crate (included by `#[path]`) and of the host
//! crate that `cargo test` runs, unchanged.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::c_str;
use kernel::prelude::*;

#[path = "nmiclock_core/src/cyc_ns.rs"]
pub mod cyc_ns;
mod ffi;

module! {
    type: NmiClock,
    name: "nmiclock",
    author: "nmiclock developers",
    description: "NMI-safe clock and accounting torture",
    license: "GPL",
}

/// Version reported in `stats` and the load message.
const VERSION: &str = "0.1.0";

/// Range of the TSC conversion shown in `stats`: 600 s, in ms (the pair is
/// computed from kHz, as the kernel's own `cyc2ns` does).
const TSC_MAXSEC_MS: u32 = 600 * 1000;

/// Reads of `stats` since load.
static STATS_READS: AtomicU64 = AtomicU64::new(0);

static STATS_OPS: ffi::FileOps = ffi::FileOps { show: show_stats };

/// Renders `stats`: one `key: value` per line, keys in snake case.
fn show_stats(seq: &mut ffi::SeqFile) -> fmt::Result {
    let reads = STATS_READS.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let khz = ffi::tsc_khz();
    let tsc = cyc_ns::calc_mult_shift(khz, cyc_ns::NSEC_PER_MSEC, TSC_MAXSEC_MS);
    let (mult, shift) = tsc.map_or((0, 0), |ms| (ms.mult, ms.shift));

    writeln!(seq, "version: {VERSION}")?;
    writeln!(seq, "state: idle")?;
    writeln!(seq, "online_cpus: {}", ffi::num_online_cpus())?;
    writeln!(seq, "tsc_khz: {khz}")?;
    writeln!(seq, "tsc_mult: {mult}")?;
    writeln!(seq, "tsc_shift: {shift}")?;
    writeln!(seq, "stats_reads: {reads}")
}

/// The loaded module. Dropping it tears down in the reverse order of
/// [`NmiClock::init`].
struct NmiClock {
    _debugfs: ffi::DebugfsDir,
}

impl kernel::Module for NmiClock {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let debugfs = ffi::DebugfsDir::new(c_str!("nmiclock")).inspect_err(|e| {
            pr_err!(
                "cannot create /sys/kernel/debug/nmiclock (error {}); is debugfs enabled?\n",
                e.to_errno()
            )
        })?;
        debugfs
            .create_file(c_str!("stats"), 0o400, &STATS_OPS)
            .inspect_err(|e| {
                pr_err!(
                    "cannot create debugfs file stats (error {})\n",
                    e.to_errno()
                )
            })?;

        pr_info!(
            "loaded: version {}, {} CPUs online, TSC {} kHz, debugfs at /sys/kernel/debug/nmiclock\n",
            VERSION,
            ffi::num_online_cpus(),
            ffi::tsc_khz()
        );
        Ok(NmiClock { _debugfs: debugfs })
    }
}

impl Drop for NmiClock {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
