// SPDX-License-Identifier: GPL-2.0

//! Counter sources a clock can be built on, behind one trait.
//!
//! - [`TscOrdered`]: the TSC read with the ordering the kernel's
//!   `rdtsc_ordered()` gives (`lfence; rdtsc`): ordered like a load, so a
//!   value read after seeing another CPU's epoch is not older than it.
//! - [`Tsc`]: a bare `rdtsc`, as in the vDSO change that made reads faster
//!   but let time be seen going backwards: the CPU may execute it before
//!   earlier loads.
//! - [`CntvctOrdered`] (arm64): the arch timer's virtual counter read the
//!   way the kernel's `arch_timer_read_cntvct_el0()` does, `isb; mrs
//!   cntvct_el0`: the `isb` keeps the read from being taken early.
//! - [`Cntvct`] (arm64): a bare `mrs cntvct_el0`, which the CPU may
//!   execute speculatively ahead of earlier instructions.
//!
//! Each architecture's pair is compiled only for it (inline `asm!`); the
//! module picks its architecture's pair in `rust/arch/`.
//!
//! A counter narrower than 64 bits is modelled by masking (the setting
//! `counter_bits`, see [`mask_for_bits`]): the masked counter wraps, and
//! the clock's epoch must move, that much more often. A 16-bit TSC at
//! 2.1 GHz wraps every 31 us, so its epoch moves every 15.6 us: writers
//! come often enough for readers to meet them.

/// A free-running hardware counter.
pub trait Counter: Sync {
    /// Name used in module parameters and `stats`.
    const NAME: &'static str;

    /// Reads the counter. Must be callable from any context, NMI included.
    fn read(&self) -> u64;
}

/// Narrowest counter width [`mask_for_bits`] accepts.
pub const MIN_COUNTER_BITS: u32 = 16;
/// Widest counter width [`mask_for_bits`] accepts.
pub const MAX_COUNTER_BITS: u32 = 64;

/// The mask of a `bits`-wide counter, for `bits` in 16..=64; `None` outside.
pub fn mask_for_bits(bits: u32) -> Option<u64> {
    if !(MIN_COUNTER_BITS..=MAX_COUNTER_BITS).contains(&bits) {
        return None;
    }
    Some(u64::MAX >> (64 - bits))
}

/// The TSC, read in program order (`lfence; rdtsc`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TscOrdered;

/// The TSC, read with a bare `rdtsc`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tsc;

/// Reads the TSC; `ORDERED` adds the `lfence` and compiler barrier of the
/// kernel's `rdtsc_ordered()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc<const ORDERED: bool>() -> u64 {
    let lo: u32;
    let hi: u32;
    if ORDERED {
        // SAFETY: `lfence` and `rdtsc` only read the time stamp counter into
        // EDX:EAX; they write no memory and no stack, and leave flags alone.
        // No `nomem`: like the kernel's "memory" clobber, the compiler must
        // not move memory accesses across it either, only then is the read
        // ordered with the loads before it.
        unsafe {
            core::arch::asm!(
                "lfence",
                "rdtsc",
                out("eax") lo,
                out("edx") hi,
                options(nostack, preserves_flags)
            );
        }
    } else {
        // SAFETY: `rdtsc` only reads the time stamp counter into EDX:EAX; it
        // touches no memory and no stack, and leaves flags alone. `nomem`
        // lets the compiler move it like the kernel's plain `rdtsc()`.
        unsafe {
            core::arch::asm!(
                "rdtsc",
                out("eax") lo,
                out("edx") hi,
                options(nomem, nostack, preserves_flags)
            );
        }
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

#[cfg(target_arch = "x86_64")]
impl Counter for TscOrdered {
    const NAME: &'static str = "tsc_ordered";

    #[inline(always)]
    fn read(&self) -> u64 {
        rdtsc::<true>()
    }
}

#[cfg(target_arch = "x86_64")]
impl Counter for Tsc {
    const NAME: &'static str = "tsc";

    #[inline(always)]
    fn read(&self) -> u64 {
        rdtsc::<false>()
    }
}

/// The arm64 arch timer's virtual counter, read after an `isb`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CntvctOrdered;

/// The arm64 arch timer's virtual counter, read with a bare `mrs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cntvct;

/// Reads `CNTVCT_EL0`; `ORDERED` adds the `isb` and compiler barrier of the
/// kernel's `arch_timer_read_cntvct_el0()`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn cntvct<const ORDERED: bool>() -> u64 {
    let v: u64;
    if ORDERED {
        // The register is readable at EL1, where the kernel runs, and at
        // EL0 under Linux, which sets CNTKCTL_EL1.EL0VCTEN for its vDSO:
        // the host torture's case.
        //
        // SAFETY: `isb` and `mrs` of CNTVCT_EL0 only read the virtual
        // counter into a register; no memory, no stack, flags untouched.
        // No `nomem`: like the kernel's "memory" clobber, memory accesses
        // must not move across it either.
        unsafe {
            core::arch::asm!(
                "isb",
                "mrs {v}, cntvct_el0",
                v = out(reg) v,
                options(nostack, preserves_flags)
            );
        }
    } else {
        // SAFETY: `mrs` of CNTVCT_EL0 (readable at EL0 too, as above) only
        // reads the virtual counter into a register; no memory, no stack,
        // flags untouched. `nomem` lets the compiler move it like a bare
        // sysreg read.
        unsafe {
            core::arch::asm!(
                "mrs {v}, cntvct_el0",
                v = out(reg) v,
                options(nomem, nostack, preserves_flags)
            );
        }
    }
    v
}

#[cfg(target_arch = "aarch64")]
impl Counter for CntvctOrdered {
    const NAME: &'static str = "cntvct_ordered";

    #[inline(always)]
    fn read(&self) -> u64 {
        cntvct::<true>()
    }
}

#[cfg(target_arch = "aarch64")]
impl Counter for Cntvct {
    const NAME: &'static str = "cntvct";

    #[inline(always)]
    fn read(&self) -> u64 {
        cntvct::<false>()
    }
}
