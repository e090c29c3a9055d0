// SPDX-License-Identifier: GPL-2.0

//! my_clock_rust: the shortest complete nmiclock provider in Rust, to copy
//! and make your own. It registers one clock, `my_clock_rust`, which
//! nmiclock's stress run reads from NMI, hard-IRQ and task context while
//! its writers call the clock's update, and judges as its own clock.
//!
//! The clock: `CLOCK_MONOTONIC_RAW` rebased at every update, the epoch in
//! two copies behind a seqcount latch made of atomics, so that a read,
//! even an NMI's over the update on its own CPU, reads one whole copy.
//! Replace `read` and `update` with yours; keep their contexts.
//!
//! ```text
//! scripts/run-main --with samples/template/rust --params target=my_clock_rust
//! ```

use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering::*};

use kernel::c_str;
use kernel::prelude::*;

/// `include/nmiclock.h`, by bindgen (the `Kbuild` beside this file).
#[allow(
    dead_code,
    missing_docs,
    non_camel_case_types,
    unreachable_pub,
    clippy::all
)]
mod nmiclock {
    use kernel::ffi;
    include!("nmiclock_h_generated.rs");
}

module! {
    type: MyClock,
    name: "my_clock_rust",
    description: "my_clock_rust: a clock registered with nmiclock, to be judged NMI-safe",
    license: "GPL",
}

/// The latch's count (odd: readers take copy 1) and the two copies of the
/// epoch: `[raw time, clock time]` when it was taken.
static SEQ: AtomicU32 = AtomicU32::new(0);
static COPIES: [[AtomicU64; 2]; 2] = [const { [const { AtomicU64::new(0) }; 2] }; 2];

fn raw_now() -> u64 {
    // SAFETY: No preconditions; NMI-safe by the kernel's documentation.
    unsafe { kernel::bindings::ktime_get_raw_fast_ns() }
}

/// The clock's time at raw time `now`, by copy `i`.
fn at(i: usize, now: u64) -> u64 {
    let [raw, ns] = &COPIES[i & 1];
    ns.load(Relaxed)
        .wrapping_add(now.wrapping_sub(raw.load(Relaxed)))
}

/// The read under test: any context, NMI included. No locks, no sleeping,
/// no panicking arithmetic.
extern "C" fn read() -> u64 {
    loop {
        let seq = SEQ.load(Acquire);
        let ns = at(seq as usize, raw_now());
        fence(Acquire);
        if SEQ.load(Relaxed) == seq {
            return ns;
        }
    }
}

/// One update, called by nmiclock's writers (task and hard-IRQ context,
/// one call at a time); the reads that meet it are the run's coverage.
extern "C" fn update() {
    let now = raw_now();
    let ns = at(0, now);
    for i in [0, 1] {
        // Readers to the other copy, then this one written.
        SEQ.fetch_add(1, Release);
        fence(Release);
        COPIES[i][0].store(now, Relaxed);
        COPIES[i][1].store(ns, Relaxed);
    }
}

struct MyClock(*mut nmiclock::nmiclock_target);

// SAFETY: The target is only handed to nmiclock, and freed at unload.
unsafe impl Sync for MyClock {}
// SAFETY: As above.
unsafe impl Send for MyClock {}

impl kernel::Module for MyClock {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let now = raw_now();
        for copy in &COPIES {
            copy[0].store(now, Relaxed);
            copy[1].store(now, Relaxed);
        }
        let target = KBox::into_raw(KBox::new(
            nmiclock::nmiclock_target {
                name: c_str!("my_clock_rust").as_char_ptr(),
                read: Some(read),
                update: Some(update),
                owner: module.as_ptr().cast(),
                read_status: None,
                // The promise the run judges: never a step back, on one
                // CPU or across CPUs, and the rate of CLOCK_MONOTONIC_RAW.
                back_cpu_ns: 0,
                back_cross_ns: 0,
                any_rate: false,
            },
            GFP_KERNEL,
        )?);
        // SAFETY: `target` is valid, all of its size, until `drop`
        // unregisters it; nmiclock.ko is loaded (this module links against
        // it). The header's nmiclock_register_target() macro is this call.
        let ret = unsafe {
            nmiclock::__nmiclock_register_target(target, size_of::<nmiclock::nmiclock_target>())
        };
        if ret != 0 {
            // SAFETY: Not registered: ours alone again.
            drop(unsafe { KBox::from_raw(target) });
            return Err(Error::from_errno(ret));
        }
        Ok(Self(target))
    }
}

impl Drop for MyClock {
    fn drop(&mut self) {
        // SAFETY: Registered in `init`; once this returns nmiclock no
        // longer uses it, and it is freed.
        unsafe {
            nmiclock::nmiclock_unregister_target(self.0);
            drop(KBox::from_raw(self.0));
        }
    }
}
