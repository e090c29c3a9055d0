// SPDX-License-Identifier: GPL-2.0

//! nmiclock_target_rust: a clock registered as an nmiclock target from
//! Rust, `sample_rust_latch`, correct: `CLOCK_MONOTONIC_RAW` rebased at
//! every update (as `samples/nmiclock_target_c.c` explains), its epoch in
//! two copies behind a seqcount latch built from atomics, so a reader in
//! NMI context always reads a whole copy, even one that interrupted the
//! update on its own CPU.
//!
//! The registration's declarations come from nmiclock's public header,
//! `include/nmiclock.h`, through bindgen (see `Kbuild`). Load nmiclock.ko
//! first; select the clock with `target=sample_rust_latch`.

use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use kernel::c_str;
use kernel::prelude::*;

/// `include/nmiclock.h`, generated (see `Kbuild`).
#[path = "nmiclock_h.rs"]
mod nmiclock;

module! {
    type: NmiclockTargetRust,
    name: "nmiclock_target_rust",
    description: "An nmiclock target from Rust: a latch over CLOCK_MONOTONIC_RAW",
    license: "GPL",
}

/// The `author=` entry of `.modinfo`, outside `module!`: 6.12's takes
/// `author:` only, 7.x's `authors: [..]` only.
#[link_section = ".modinfo"]
// `used(compiler)`, not `used`: see `AUTHOR` in rust/nmiclock_main.rs.
#[used(compiler)]
static AUTHOR: [u8; 27] = *b"author=nmiclock developers\0";

/// One copy of the epoch: `CLOCK_MONOTONIC_RAW` at the update, and the
/// clock's time then.
struct Epoch {
    raw: AtomicU64,
    ns: AtomicU64,
}

impl Epoch {
    const fn new() -> Self {
        Self {
            raw: AtomicU64::new(0),
            ns: AtomicU64::new(0),
        }
    }

    fn set(&self, raw: u64, ns: u64) {
        self.raw.store(raw, Ordering::Relaxed);
        self.ns.store(ns, Ordering::Relaxed);
    }

    /// The time at `now`, by this copy.
    fn at(&self, now: u64) -> u64 {
        let raw = self.raw.load(Ordering::Relaxed);
        let ns = self.ns.load(Ordering::Relaxed);
        ns.wrapping_add(now.wrapping_sub(raw))
    }
}

/// The latch: odd `SEQ` steers readers to copy 1 while copy 0 is written,
/// even to copy 0 while copy 1 is.
static SEQ: AtomicU32 = AtomicU32::new(0);
static COPIES: [Epoch; 2] = [Epoch::new(), Epoch::new()];

fn raw_now() -> u64 {
    // SAFETY: No preconditions; NMI-safe by the kernel's documentation.
    unsafe { kernel::bindings::ktime_get_raw_fast_ns() }
}

/// The read under test: any context, NMI included.
extern "C" fn read() -> u64 {
    loop {
        let seq = SEQ.load(Ordering::Acquire);
        let copy = if seq & 1 == 0 { &COPIES[0] } else { &COPIES[1] };
        let ns = copy.at(raw_now());
        // The copy's loads happen before the re-read of the count.
        fence(Ordering::Acquire);
        if SEQ.load(Ordering::Relaxed) == seq {
            return ns;
        }
    }
}

/// One update: the epoch moved to now, one copy at a time. nmiclock calls
/// it from task and hard-IRQ context, one call at a time.
extern "C" fn update() {
    let now = raw_now();
    let ns = COPIES[0].at(now);
    // Readers to copy 1 while copy 0 is written, then back.
    SEQ.fetch_add(1, Ordering::Release);
    fence(Ordering::Release);
    COPIES[0].set(now, ns);
    // SAFETY: No preconditions: a busy wait (the rest of an update's work,
    // as in the C sample).
    unsafe { kernel::bindings::__udelay(1) };
    SEQ.fetch_add(1, Ordering::Release);
    fence(Ordering::Release);
    COPIES[1].set(now, ns);
}

struct NmiclockTargetRust {
    target: *mut nmiclock::nmiclock_target,
}

// SAFETY: The target is only handed to nmiclock and freed at unload.
unsafe impl Sync for NmiclockTargetRust {}
// SAFETY: As above.
unsafe impl Send for NmiclockTargetRust {}

impl kernel::Module for NmiclockTargetRust {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let now = raw_now();
        COPIES[0].set(now, now);
        COPIES[1].set(now, now);
        let target = KBox::into_raw(KBox::new(
            nmiclock::nmiclock_target {
                name: c_str!("sample_rust_latch").as_char_ptr(),
                read: Some(read),
                update: Some(update),
                owner: module.as_ptr().cast(),
                // A plain read, and the default promise
                // (no step back on a CPU or across CPUs, the rate checked).
                read_status: None,
                back_cpu_ns: 0,
                back_cross_ns: 0,
                any_rate: false,
            },
            GFP_KERNEL,
        )?);
        // SAFETY: `target` is valid, all of its size, and stays so until
        // `drop` unregisters it; nmiclock.ko is loaded (we link against
        // it). The header's nmiclock_register_target() is this call (a
        // macro, which bindgen does not carry over).
        let ret = unsafe {
            nmiclock::__nmiclock_register_target(
                target,
                core::mem::size_of::<nmiclock::nmiclock_target>(),
            )
        };
        if ret != 0 {
            // SAFETY: Not registered: ours alone again.
            drop(unsafe { KBox::from_raw(target) });
            return Err(Error::from_errno(ret));
        }
        Ok(Self { target })
    }
}

impl Drop for NmiclockTargetRust {
    fn drop(&mut self) {
        // SAFETY: Registered in `init`; once this returns nmiclock no longer
        // uses it, and it is freed.
        unsafe {
            nmiclock::nmiclock_unregister_target(self.target);
            drop(KBox::from_raw(self.target));
        }
    }
}
