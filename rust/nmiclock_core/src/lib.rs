// SPDX-License-Identifier: GPL-2.0

//! Host crate root of nmiclock's kernel-independent core.
//!
//! Each module below is one file that nmiclock.ko also compiles, unchanged,
//! as a module of the same name at its crate root (`rust/nmiclock_main.rs`
//! includes it with `#[path]`). So a module may refer to another as
//! `crate::name` in both builds. The rules for those files:
//!
//! - `core` only: no `std`, no `alloc`, no allocation at all;
//! - no `u128` and no floats (the kernel's intrinsics for them panic);
//! - no panicking arithmetic, indexing or shifts on any path that NMI context
//!   can reach (`CONFIG_RUST_OVERFLOW_CHECKS` is on in the kernel).
//!
//! The last two are enforced on the built module: `scripts/check-nmi-context`,
//! which the test command (`scripts/run-tests`) runs on every module it
//! builds, refuses any reference to the kernel's 128-bit and float
//! intrinsics anywhere in nmiclock.ko, and any path to a panic (overflow
//! checks included) from NMI or hard-IRQ context.
//!
//! Tests live in `tests/`, one file per module (`tests/clock.rs` covers
//! [`counter`] too), and may use `u128` as the reference. Three of them are
//! loom models, built only with `RUSTFLAGS="--cfg loom"` (which swaps
//! [`sync`] for loom's atomics): `tests/loom_clock.rs` races a reader against
//! an epoch update, `tests/loom_acct.rs` a task-side against an
//! interrupt-side acct update, `tests/loom_high_water.rs` a late raiser of
//! the cross-CPU mark against a wrap overrun, over every interleaving loom
//! explores, relaxed-memory effects included. `benches/latch.rs` is the host
//! microbenchmark of the latch read (`cargo bench`).

#![no_std]
#![warn(missing_docs, unreachable_pub, unsafe_op_in_unsafe_fn)]

pub mod acct;
pub mod bench;
pub mod clock;
pub mod counter;
pub mod cyc_ns;
pub mod environment;
pub mod high_water;
pub mod lines;
pub mod owner;
pub mod parse;
pub mod read_check;
pub mod spin;

/// Atomics and the spin hint the shared files use: `core`'s, or loom's when
/// model-checking (`RUSTFLAGS="--cfg loom"`). The kernel build has its own
/// `sync` module with `core`'s.
pub mod sync {
    #[cfg(not(loom))]
    pub use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
    #[cfg(loom)]
    pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

    /// The CPU relax hint of a spin loop; under loom a yield, so the model
    /// lets the awaited thread run.
    #[inline(always)]
    pub fn spin_loop() {
        #[cfg(not(loom))]
        core::hint::spin_loop();
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}
