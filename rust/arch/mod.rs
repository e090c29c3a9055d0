// SPDX-License-Identifier: GPL-2.0

//! What differs between architectures, one file each, behind the same
//! names: the counter pair the clocks are built on (`Ordered`, `Bare`), how
//! a `perf_hw` sample period is expressed, and which NMI sources exist.
//!
//! - `x86.rs` (x86_64): the TSC, `perf_hw` periods in TSC cycles, NMI IPIs;
//! - `arm64.rs`: the arch timer's virtual counter, `perf_hw` as a sample
//!   frequency (the PMU's cycle rate is not known to the kernel), and no
//!   NMI IPI the module can send.
//!
//! The C side of each lives in `rust/nmiclock_glue_<arch>.c` behind the
//! declarations of `rust/nmiclock_glue.h` that say "per architecture".

#[cfg(target_arch = "aarch64")]
mod arm64;
#[cfg(target_arch = "aarch64")]
pub(crate) use arm64::*;

#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86::*;

pub(crate) use crate::ffi::nmi::PerfPeriod;
