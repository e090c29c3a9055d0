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

pub mod cyc_ns;
