// SPDX-License-Identifier: GPL-2.0

//! nmiclock_sample: a module that uses nmiclock's exported clock.
//!
//! On load it reads `nmiclock_sched_clock()` a few times from its own
//! (module init, task) context, prints each value with the step from the
//! previous one, and refuses to load (`EINVAL`) unless time moved forward
//! at every step: a clock that went backwards, stood still (a frozen
//! clock) or reads 0 (no clock running) is refused. Printing a line takes
//! microseconds, so every step is that long at least. Load nmiclock.ko
//! first; this module depends on it. Its declaration of the clock comes
//! from `include/nmiclock.h`, through bindgen. (`nmiclock_reader.c` reads
//! the clock in a loop on every CPU: a parameter chooses its CPUs, and
//! 6.12's Rust `module!` has no parameters.)

use kernel::prelude::*;

/// `include/nmiclock.h`, generated (see `Kbuild`).
#[path = "nmiclock_h.rs"]
mod nmiclock;

module! {
    type: NmiclockSample,
    name: "nmiclock_sample",
    description: "Reads nmiclock's exported clock and prints a few values",
    license: "GPL",
}

/// The `author=` entry of `.modinfo`, outside `module!`: 6.12's takes
/// `author:` only, 7.x's `authors: [..]` only.
#[link_section = ".modinfo"]
// `used(compiler)`, not `used`: see `AUTHOR` in rust/nmiclock_main.rs.
#[used(compiler)]
static AUTHOR: [u8; 27] = *b"author=nmiclock developers\0";

/// Values read and printed on load.
const READS: u32 = 5;

fn now() -> u64 {
    // SAFETY: `nmiclock_sched_clock()` has no preconditions and may be
    // called from any context; this module links against nmiclock.ko, so it
    // is loaded while we run.
    unsafe { nmiclock::nmiclock_sched_clock() }
}

struct NmiclockSample;

impl kernel::Module for NmiclockSample {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let first = now();
        let mut prev = first;
        pr_info!("read 0: {} ns\n", first);
        if first == 0 {
            pr_err!("read 0: 0 ns: is nmiclock's clock running?\n");
            return Err(EINVAL);
        }
        for i in 1..READS {
            let t = now();
            if t <= prev {
                pr_err!(
                    "read {}: {} ns, {} ns before the previous read\n",
                    i,
                    t,
                    prev - t
                );
                return Err(EINVAL);
            }
            pr_info!("read {}: {} ns (+{} ns)\n", i, t, t - prev);
            prev = t;
        }
        pr_info!(
            "{} reads, strictly increasing, {} ns in all\n",
            READS,
            prev - first
        );
        Ok(NmiclockSample)
    }
}
