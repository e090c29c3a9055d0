// SPDX-License-Identifier: GPL-2.0

//! The highest time any CPU has read, per generation: the mark the stress
//! run's cross-CPU check compares each read with.
//!
//! A generation is the clock's overrun count (an epoch update more than a
//! counter wrap late loses whole wraps, so a read after one must not be
//! compared with a value from before). The generation and the value are
//! one word, so that a value is never seen under a generation it was not
//! read in: the generation's low [`GEN_BITS`] bits above a
//! [`VALUE_BITS`]-bit value (time since a base the caller picks, capped at
//! [`VALUE_MAX`]).
//!
//! [`HighWater::raise`] moves the mark up within its generation, and over
//! to a new generation only while the raiser's is the current one; a
//! raiser whose generation has passed changes nothing. A reader takes the
//! mark ([`HighWater::load`]) and compares with it only under its own
//! generation ([`Mark::under`]). A raiser that was held off for
//! 2^[`GEN_BITS`] generations could put an old value under a tag that
//! matches again; nothing else mixes generations.
//!
//! Kernel-independent: compiled into nmiclock.ko and into the host crate
//! from this file; `tests/high_water.rs` checks it, and the loom model in
//! `tests/loom_high_water.rs` races a raiser whose generation passes
//! against the next generation's raiser and reader.

use crate::sync::{AtomicU64, Ordering};

/// Bits of the value.
pub const VALUE_BITS: u32 = 48;
/// Bits of the generation kept with it.
pub const GEN_BITS: u32 = 64 - VALUE_BITS;
/// The largest value the mark holds: larger ones are held as this.
pub const VALUE_MAX: u64 = (1 << VALUE_BITS) - 1;

/// The generation's tag, as kept in the word.
#[inline]
fn tag(gen: u64) -> u64 {
    gen & ((1 << GEN_BITS) - 1)
}

/// The word for `value` under `gen`.
#[inline]
fn pack(gen: u64, value: u64) -> u64 {
    (tag(gen) << VALUE_BITS) | value.min(VALUE_MAX)
}

/// The mark as one reader saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark(u64);

impl Mark {
    /// The highest value raised under generation `gen`, if the mark is
    /// that generation's (`None`: no read of `gen` has raised it yet, or
    /// `gen` has passed).
    #[inline]
    pub fn under(self, gen: u64) -> Option<u64> {
        (self.0 >> VALUE_BITS == tag(gen)).then_some(self.0 & VALUE_MAX)
    }
}

/// The highest value read in the current generation.
pub struct HighWater(AtomicU64);

impl HighWater {
    crate::clock::loom_const_fn! {
        /// A mark of generation 0, at 0.
        pub fn new() -> Self {
            Self(AtomicU64::new(0))
        }
    }

    /// Starts over at 0 under generation `gen` (not while anyone raises).
    pub fn reset(&self, gen: u64) {
        self.0.store(pack(gen, 0), Ordering::SeqCst);
    }

    /// The mark now.
    #[inline]
    pub fn load(&self) -> Mark {
        Mark(self.0.load(Ordering::SeqCst))
    }

    /// Raises the mark to `value` (capped at [`VALUE_MAX`]), a value read
    /// under generation `gen`: within the mark's generation, if higher;
    /// over a mark of another generation, only while `is_current()` says
    /// that `gen` is the current generation. Lock-free: it retries only
    /// when another raiser moved the mark.
    #[inline]
    pub fn raise(&self, gen: u64, value: u64, is_current: impl Fn() -> bool) {
        let new = pack(gen, value);
        let mut cur = self.0.load(Ordering::SeqCst);
        loop {
            if Mark(cur).under(gen).is_some() {
                if cur >= new {
                    return;
                }
            } else if !is_current() {
                return;
            }
            match self
                .0
                .compare_exchange_weak(cur, new, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }
}
