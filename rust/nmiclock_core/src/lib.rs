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
//! Tests live in `tests/` and may use `u128` as the reference.

#![no_std]
#![warn(missing_docs, unreachable_pub, unsafe_op_in_unsafe_fn)]

pub mod acct;
pub mod bench;
pub mod clock;
pub mod counter;
pub mod cyc_ns;
pub mod environment;
pub mod parse;
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
