// SPDX-License-Identifier: GPL-2.0

//! The arithmetic of the benchmark (debugfs `bench`), kernel-independent:
//!
//! - [`LatHist`], a log-linear histogram of single-operation costs that
//!   readers on every CPU fill with atomics, giving p50, p99 and the exact
//!   maximum;
//! - [`median`] of the per-run figures, as refscale's readers are judged;
//! - [`Milli`], thousandths printed as refscale prints them (`12.345`);
//! - [`parse_args`], the strict parser of what is written to `bench`.
//!
//! The histogram uses `core`'s atomics directly, not [`crate::sync`]: it is
//! a statistics sink, not part of any protocol the loom models check, and
//! its `const` constructor needs `core`'s `const fn new`.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::parse::{parse_kv, Key};

/// Values below this have a bucket each.
const LINEAR: u64 = 64;
/// log2 of [`LINEAR`].
const LINEAR_BITS: u32 = 6;
/// Sub-buckets per power of two above [`LINEAR`], as a power of two: 16
/// sub-buckets, so a bucket is at most 1/16 of its value wide.
const SUB_BITS: u32 = 4;
/// Highest power of two with buckets of its own; larger values share the
/// last bucket (2^40 ns is about 18 minutes).
const MAX_EXP: u32 = 40;

/// Number of buckets of a [`LatHist`].
pub const BUCKETS: usize = LINEAR as usize + ((MAX_EXP - LINEAR_BITS + 1) << SUB_BITS) as usize;

/// The bucket of `v`: `v` itself below 64 (`LINEAR`), then 16 buckets per
/// power of two. NMI-safe: no operation here can panic (for `v >= 64` the
/// exponent is 6..=63, so the wrapping forms never wrap).
#[inline]
pub fn bucket(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let exp = 63u32.wrapping_sub(v.leading_zeros());
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let sub = v.wrapping_shr(exp.wrapping_sub(SUB_BITS)) & ((1 << SUB_BITS) - 1);
    let row = exp.wrapping_sub(LINEAR_BITS).wrapping_shl(SUB_BITS) as usize;
    (LINEAR as usize)
        .wrapping_add(row)
        .wrapping_add(sub as usize)
}

/// The smallest value in bucket `b` (and the bucket's width), for `b` below
/// [`BUCKETS`].
pub fn bucket_range(b: usize) -> (u64, u64) {
    if b < LINEAR as usize {
        return (b as u64, 1);
    }
    let i = (b - LINEAR as usize) as u64;
    let exp = (i >> SUB_BITS) + u64::from(LINEAR_BITS);
    let sub = i & ((1 << SUB_BITS) - 1);
    let width = 1u64 << (exp - u64::from(SUB_BITS));
    ((1u64 << exp) + sub * width, width)
}

/// A histogram of costs in ns that any number of CPUs fill at once.
pub struct LatHist {
    counts: [AtomicU64; BUCKETS],
    max: AtomicU64,
}

impl Default for LatHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatHist {
    /// An empty histogram.
    pub const fn new() -> Self {
        Self {
            counts: [const { AtomicU64::new(0) }; BUCKETS],
            max: AtomicU64::new(0),
        }
    }

    /// Counts one value. Callable from any context, NMI included.
    #[inline]
    pub fn record(&self, v: u64) {
        if let Some(c) = self.counts.get(bucket(v)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.max.fetch_max(v, Ordering::Relaxed);
    }

    /// Empties the histogram (no recorder may run meanwhile, or its value
    /// may survive).
    pub fn clear(&self) {
        for c in &self.counts {
            c.store(0, Ordering::Relaxed);
        }
        self.max.store(0, Ordering::Relaxed);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.counts
            .iter()
            .fold(0u64, |a, c| a.saturating_add(c.load(Ordering::Relaxed)))
    }

    /// The largest value recorded, exactly (0 when empty).
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// The `permille`/1000 quantile (500 for the median, 990 for p99): the
    /// middle of the bucket that holds it, so within half a bucket (3 %
    /// above 64 ns, exact below), and never above [`LatHist::max`]. 0 when
    /// empty.
    pub fn quantile(&self, permille: u32) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let permille = u64::from(permille.min(1000));
        // The rank of the value (1-based): ceil(total * permille / 1000),
        // at least 1. `total` is a count of recorded values, far below
        // 2^54, so the product cannot overflow; saturate anyway.
        let rank = total
            .saturating_mul(permille)
            .saturating_add(999)
            .checked_div(1000)
            .unwrap_or(total)
            .clamp(1, total);
        let mut seen = 0u64;
        for (b, c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(c.load(Ordering::Relaxed));
            if seen >= rank {
                let (lo, width) = bucket_range(b);
                return lo.saturating_add(width / 2).min(self.max());
            }
        }
        self.max()
    }
}

/// The median of `v`, sorting it: the middle value, or for an even count
/// the upper of the two middle ones (0 when empty).
pub fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// A count of thousandths, printed with three decimals (`12345` as
/// `12.345`), as refscale prints its per-run times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Milli(pub u64);

impl fmt::Display for Milli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// `a / b` in thousandths; `None` when `b` is 0.
pub fn ratio_milli(a: u64, b: u64) -> Option<u64> {
    a.saturating_mul(1000).checked_div(b)
}

/// What a write to `bench` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchArgs {
    /// Operations per reader per run (refscale's `loops`).
    pub loops: u32,
    /// Runs per operation and phase (refscale's `nruns`).
    pub nruns: u32,
    /// Period of the epoch updaters in the second phase, in µs.
    pub update_us: u32,
}

impl BenchArgs {
    /// refscale's defaults, and an updater every 20 µs.
    pub const DEFAULT: Self = Self {
        loops: 10_000,
        nruns: 30,
        update_us: 20,
    };
    /// Accepted `loops`.
    pub const LOOPS: (u32, u32) = (10, 1_000_000);
    /// Accepted `nruns` (the per-run figures are kept in a fixed table).
    pub const NRUNS: (u32, u32) = (1, 100);
    /// Accepted `update_us`.
    pub const UPDATE_US: (u32, u32) = (1, 100_000);
}

/// Why [`parse_args`] refused a write: the offending token (at most its
/// first 32 bytes) and what was wrong with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgError<'a> {
    /// The token, or the whole input when it is not text.
    pub token: &'a [u8],
    /// What a valid token looks like.
    pub want: &'static str,
}

/// Parses a write to `bench`: `run` for the defaults, or one or more
/// `loops=N`, `nruns=N`, `update_us=N` separated by single spaces, each
/// key at most once, with an optional trailing newline. Anything else is
/// refused whole.
pub fn parse_args(input: &[u8]) -> Result<BenchArgs, ArgError<'_>> {
    const WANT: &str = "run, or loops=10..1000000 nruns=1..100 update_us=1..100000";
    let line = crate::parse::strip_newline(input);
    fn err(token: &[u8]) -> ArgError<'_> {
        ArgError {
            token: token.get(..32).unwrap_or(token),
            want: WANT,
        }
    }
    if line == b"run" {
        return Ok(BenchArgs::DEFAULT);
    }
    if line.is_empty() {
        return Err(err(line));
    }
    let keys = [
        Key {
            name: "loops",
            min: BenchArgs::LOOPS.0,
            max: BenchArgs::LOOPS.1,
        },
        Key {
            name: "nruns",
            min: BenchArgs::NRUNS.0,
            max: BenchArgs::NRUNS.1,
        },
        Key {
            name: "update_us",
            min: BenchArgs::UPDATE_US.0,
            max: BenchArgs::UPDATE_US.1,
        },
    ];
    let d = BenchArgs::DEFAULT;
    let mut v = [d.loops, d.nruns, d.update_us];
    parse_kv(input, &keys, &mut v).map_err(err)?;
    let [loops, nruns, update_us] = v;
    let args = BenchArgs {
        loops,
        nruns,
        update_us,
    };
    Ok(args)
}
