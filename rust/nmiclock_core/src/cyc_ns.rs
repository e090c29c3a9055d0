// SPDX-License-Identifier: GPL-2.0

//! Counter cycles to nanoseconds, the way the kernel's clocksource and
//! `sched_clock` code convert them.
//!
//! A counter that runs at `from` Hz is turned into `to` units per second
//! (nanoseconds: `to` = 10^9) with one multiply and one shift:
//!
//! ```text
//!     ns = (cycles * mult) >> shift        where mult / 2^shift ~= to / from
//! ```
//!
//! [`calc_mult_shift`] picks the most precise pair for which `cycles * mult`
//! still fits in 64 bits for up to `maxsec` seconds of cycles, as
//! `clocks_calc_mult_shift()` in kernel/time/clocksource.c does.
//! [`cyc_to_ns`] is the fast conversion for deltas within that range (the one
//! `sched_clock` uses); [`mul_u64_u32_shr`] is the full-width one that splits
//! the product into 32-bit halves instead of needing a 128-bit multiply
//! (the exact checks of the stress run convert with it, so that a long gap
//! between two samples cannot overflow). [`max_cycles`] is the longest delta
//! [`cyc_to_ns`] converts exactly, capped at the counter's mask: half the
//! time it spans is how often a clock's epoch must move
//! ([`crate::clock::ClockData::update_interval_ns`]).
//!
//! Kernel-independent: compiled into nmiclock.ko and into the host test
//! crate from this file. Nothing here can panic. `tests/cyc_ns.rs` checks
//! every function against 128-bit arithmetic, for real counter frequencies
//! and for hundreds of thousands of random inputs.

/// Nanoseconds per second.
pub const NSEC_PER_SEC: u32 = 1_000_000_000;

/// Nanoseconds per millisecond (the `to` of a kHz-based conversion).
pub const NSEC_PER_MSEC: u32 = 1_000_000;

/// A multiplier and shift converting counter cycles to another unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MultShift {
    /// Multiplier: `to * 2^shift / from`, rounded to nearest.
    pub mult: u32,
    /// Right shift applied after the multiply, `0..=32`.
    pub shift: u32,
}

/// Computes the `mult`/`shift` pair converting a `from` Hz counter to `to`
/// units per second, exact to the kernel's `clocks_calc_mult_shift()`.
///
/// `maxsec` bounds the conversion range: for any `cycles <= maxsec * from`,
/// `cycles * mult` fits in 64 bits (unless even shift 1 cannot honour the
/// range, in which case the kernel, and this function, return shift 0).
/// A larger `maxsec` costs precision. Returns `None` when `from` is 0.
pub fn calc_mult_shift(from: u32, to: u32, maxsec: u32) -> Option<MultShift> {
    if from == 0 {
        return None;
    }
    let from64 = u64::from(from);

    // How many bits of `mult` the conversion range leaves: cycles for
    // `maxsec` seconds take up to 64 bits, `mult` gets the rest of 64.
    // The product shifted right by 32 has at most 32 significant bits, so
    // `sftacc` never goes below 0; the saturation only says so.
    let mut sftacc: u32 = 32;
    // Both factors are below 2^32: the product fits in 64 bits.
    let mut tmp = u64::from(maxsec).wrapping_mul(from64) >> 32;
    while tmp != 0 {
        tmp >>= 1;
        sftacc = sftacc.saturating_sub(1);
    }

    // Largest shift (best precision) whose rounded multiplier fits. The
    // wrapping operations never wrap (`to << 32` is at most 2^64 - 2^32 and
    // `from / 2` below 2^31; `sft` and `sftacc` stay within 0..=32); they
    // only keep overflow-check panics out of the module.
    let mut sft: u32 = 32;
    let mut mult: u64 = 0;
    while sft > 0 {
        mult = u64::from(to).wrapping_shl(sft).wrapping_add(from64 / 2) / from64;
        if mult.wrapping_shr(sftacc) == 0 {
            break;
        }
        sft -= 1;
    }
    Some(MultShift {
        // Truncation is the kernel's behaviour in the shift-0 corner case.
        mult: mult as u32,
        shift: sft,
    })
}

/// Converts a cycle delta with a precomputed pair: `(cyc * mult) >> shift`.
///
/// Exact (equal to the 128-bit product shifted) only while `cyc * mult` fits
/// in 64 bits, i.e. for deltas inside the range the pair was computed for;
/// beyond that it wraps rather than panics, as the kernel's C does. Callers
/// keep deltas in range by refreshing their epoch in time.
#[inline(always)]
pub fn cyc_to_ns(cyc: u64, mult: u32, shift: u32) -> u64 {
    cyc.wrapping_mul(u64::from(mult))
        .checked_shr(shift)
        .unwrap_or(0)
}

/// `(a * mul) >> shift` over the full 96-bit product, truncated to 64 bits,
/// for `shift <= 32` (larger shifts are clamped to 32): the kernel's generic
/// `mul_u64_u32_shr()`, built from two 32x32->64 multiplies.
#[inline]
pub fn mul_u64_u32_shr(a: u64, mul: u32, shift: u32) -> u64 {
    let shift = if shift > 32 { 32 } else { shift };
    let al = a & 0xffff_ffff;
    let ah = a >> 32;
    let mul = u64::from(mul);
    // Both products are of two values below 2^32: they fit in 64 bits.
    let mut ret = (al * mul) >> shift;
    if ah != 0 {
        ret = ret.wrapping_add((ah * mul).wrapping_shl(32 - shift));
    }
    ret
}

/// The largest cycle delta that [`cyc_to_ns`] converts without overflowing
/// `cyc * mult`, and at most `mask` (a counter cannot count further).
#[inline]
pub fn max_cycles(mult: u32, mask: u64) -> u64 {
    if mult == 0 {
        return mask;
    }
    let limit = u64::MAX / u64::from(mult);
    if limit < mask {
        limit
    } else {
        mask
    }
}

/// The same rate as `(mult, shift)` with another pair: twice the
/// multiplier and one more shift, or (when that does not fit) half and one
/// less. What `disturb=conversion` switches between: the clock stays
/// right, and a reader that mixes the two pairs' fields reads half or
/// twice the time since the epoch.
pub fn same_rate_pair(mult: u32, shift: u32) -> (u32, u32) {
    match (mult.checked_mul(2), shift.checked_add(1)) {
        (Some(m), Some(s)) if s <= 32 => (m, s),
        _ => (mult / 2, shift.saturating_sub(1)),
    }
}
