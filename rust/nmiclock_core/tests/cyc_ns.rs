// SPDX-License-Identifier: GPL-2.0

//! Host tests of `cyc_ns`: every result is checked against a 128-bit
//! reference (allowed here, never in the module).

use nmiclock_core::cyc_ns::{
    calc_mult_shift, cyc_to_ns, max_cycles, mul_u64_u32_shr, MultShift, NSEC_PER_MSEC, NSEC_PER_SEC,
};

/// splitmix64: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value of a random bit width, so small and large magnitudes are
    /// both well represented.
    fn any_width(&mut self) -> u64 {
        let bits = self.next() % 65;
        if bits == 0 {
            0
        } else {
            self.next() >> (64 - bits)
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Frequencies real counters run at, plus the extremes.
const FREQS: &[u32] = &[
    1,
    32_768,
    1_000_000,
    3_579_545,
    14_318_180,
    19_200_000,
    24_000_000,
    25_000_000,
    100_000_000,
    1_000_000_000,
    2_100_000_000,
    2_994_375_000,
    3_999_999_999,
    u32::MAX,
];

const MAXSECS: &[u32] = &[0, 1, 10, 600, 3_600, 86_400, 1_000_000, u32::MAX];

/// Number of significant bits of `v`.
fn bits(v: u128) -> u32 {
    128 - v.leading_zeros()
}

/// The kernel's range limit: how many bits `mult` may have for `maxsec`.
fn sftacc(from: u32, maxsec: u32) -> u32 {
    32 - bits((maxsec as u128 * from as u128) >> 32)
}

/// Rounded `to * 2^shift / from`, exactly.
fn ideal_mult(from: u32, to: u32, shift: u32) -> u128 {
    (((to as u128) << shift) + from as u128 / 2) / from as u128
}

fn check_pair(from: u32, to: u32, maxsec: u32) -> MultShift {
    let ms = calc_mult_shift(from, to, maxsec).expect("from != 0");
    let ctx = format!("from={from} to={to} maxsec={maxsec} -> {ms:?}");
    assert!(ms.shift <= 32, "{ctx}");
    let acc = sftacc(from, maxsec);
    if ms.shift > 0 {
        // Range: the rounded multiplier fits in `acc` bits, so a full
        // `maxsec` worth of cycles times `mult` fits in 64 bits.
        assert_eq!(ms.mult as u128, ideal_mult(from, to, ms.shift), "{ctx}");
        assert!(bits(ms.mult as u128) <= acc, "{ctx}");
        let max_cyc = maxsec as u128 * from as u128;
        assert!(max_cyc * ms.mult as u128 <= u64::MAX as u128, "{ctx}");
        // Best precision: one more bit of shift would break the range.
        if ms.shift < 32 {
            assert!(
                bits(ideal_mult(from, to, ms.shift + 1)) > acc,
                "shift {} is not the largest that fits: {ctx}",
                ms.shift
            );
        }
    } else {
        // Shift 0 is the kernel's fallback when even shift 1 does not fit.
        assert!(bits(ideal_mult(from, to, 1)) > acc, "{ctx}");
    }
    ms
}

#[test]
fn from_zero_is_refused() {
    assert_eq!(calc_mult_shift(0, NSEC_PER_SEC, 600), None);
}

#[test]
fn mult_shift_matches_the_kernel_rules_for_real_frequencies() {
    for &from in FREQS {
        for &maxsec in MAXSECS {
            check_pair(from, NSEC_PER_SEC, maxsec);
            check_pair(from, NSEC_PER_MSEC, maxsec);
        }
    }
}

#[test]
fn mult_shift_matches_the_kernel_rules_for_random_inputs() {
    let mut rng = Rng(0x6e6d_6963_6c6f_636b);
    for _ in 0..200_000 {
        let from = (rng.next() as u32).max(1);
        let to = rng.next() as u32;
        let maxsec = (rng.any_width() & 0xffff_ffff) as u32;
        check_pair(from, to, maxsec);
    }
}

#[test]
fn known_pairs() {
    // 1 GHz to ns is the identity: mult = 2^shift at the largest shift the
    // range allows. 600 s of 1 GHz cycles need 40 bits, leaving 24 for mult.
    let ms = calc_mult_shift(1_000_000_000, NSEC_PER_SEC, 600).unwrap();
    assert_eq!(
        ms,
        MultShift {
            mult: 1 << 23,
            shift: 23
        }
    );
    // Without a range constraint the full 32-bit shift is used.
    let ms = calc_mult_shift(NSEC_PER_SEC, NSEC_PER_SEC, 0).unwrap();
    assert_eq!(
        ms,
        MultShift {
            mult: 1 << 31,
            shift: 31
        }
    );
}

#[test]
fn cyc_to_ns_is_exact_within_range_and_close_to_real_time() {
    let mut rng = Rng(42);
    for &from in FREQS {
        for &maxsec in &[1u32, 10, 600, 3_600] {
            let ms = check_pair(from, NSEC_PER_SEC, maxsec);
            if ms.shift == 0 {
                continue;
            }
            let max = maxsec as u64 * from as u64;
            assert_eq!(max_cycles(ms.mult, u64::MAX).min(max), max);
            let mut samples = vec![0, 1, max / 2, max.saturating_sub(1), max];
            samples.extend((0..2_000).map(|_| rng.below(max + 1)));
            for cyc in samples {
                let got = cyc_to_ns(cyc, ms.mult, ms.shift);
                let product = cyc as u128 * ms.mult as u128;
                assert_eq!(got as u128, product >> ms.shift, "cyc={cyc} {ms:?}");
                // Against real time: the error of a rounded multiplier is
                // at most half a unit of 2^-shift per cycle, plus the
                // truncation of the final shift.
                let exact = cyc as u128 * NSEC_PER_SEC as u128 / from as u128;
                let err = (got as i128 - exact as i128).unsigned_abs();
                let bound = ((cyc as u128) >> (ms.shift + 1)) + 2;
                assert!(err <= bound, "cyc={cyc} from={from} err={err} > {bound}");
            }
        }
    }
}

#[test]
fn cyc_to_ns_is_monotonic_within_range() {
    let mut rng = Rng(7);
    let ms = calc_mult_shift(2_994_375_000, NSEC_PER_SEC, 600).unwrap();
    let max = max_cycles(ms.mult, u64::MAX);
    for _ in 0..100_000 {
        let a = rng.below(max);
        let b = a + rng.below(max - a + 1);
        assert!(cyc_to_ns(a, ms.mult, ms.shift) <= cyc_to_ns(b, ms.mult, ms.shift));
    }
}

#[test]
fn cyc_to_ns_wraps_instead_of_panicking_out_of_range() {
    let ms = calc_mult_shift(1_000_000, NSEC_PER_SEC, 1).unwrap();
    let cyc = u64::MAX;
    let want = (cyc.wrapping_mul(ms.mult as u64)) >> ms.shift;
    assert_eq!(cyc_to_ns(cyc, ms.mult, ms.shift), want);
    // A bogus shift does not panic either.
    assert_eq!(cyc_to_ns(12345, 1, 64), 0);
}

#[test]
fn mul_u64_u32_shr_matches_128_bit_reference() {
    let mut rng = Rng(0xdead_beef);
    let check = |a: u64, mul: u32, shift: u32| {
        let want = ((a as u128 * mul as u128) >> shift) as u64;
        assert_eq!(
            mul_u64_u32_shr(a, mul, shift),
            want,
            "a={a} mul={mul} shift={shift}"
        );
    };
    for shift in 0..=32 {
        for &a in &[0, 1, u32::MAX as u64, 1 << 32, u64::MAX] {
            for &mul in &[0, 1, 3, u32::MAX] {
                check(a, mul, shift);
            }
        }
    }
    for _ in 0..500_000 {
        let shift = (rng.next() % 33) as u32;
        check(rng.any_width(), rng.any_width() as u32, shift);
    }
}

#[test]
fn mul_u64_u32_shr_agrees_with_cyc_to_ns_in_range() {
    let mut rng = Rng(99);
    for &from in FREQS {
        let ms = calc_mult_shift(from, NSEC_PER_SEC, 600).unwrap();
        let max = max_cycles(ms.mult, u64::MAX);
        for _ in 0..1_000 {
            let cyc = rng.below(max);
            assert_eq!(
                cyc_to_ns(cyc, ms.mult, ms.shift),
                mul_u64_u32_shr(cyc, ms.mult, ms.shift)
            );
        }
    }
}

#[test]
fn max_cycles_is_the_overflow_limit() {
    let mut rng = Rng(3);
    for _ in 0..100_000 {
        let mult = (rng.any_width() as u32).max(1);
        let mask = rng.any_width();
        let m = max_cycles(mult, mask);
        assert!(m <= mask);
        assert!(m as u128 * mult as u128 <= u64::MAX as u128);
        if m < mask {
            assert!((m as u128 + 1) * mult as u128 > u64::MAX as u128);
        }
    }
    assert_eq!(max_cycles(0, 0xffff), 0xffff);
}

#[test]
fn the_same_rate_pair_converts_alike() {
    use nmiclock_core::cyc_ns::same_rate_pair;
    let ms = calc_mult_shift(2_300_000, NSEC_PER_MSEC, 3_600_000).unwrap();
    let (m, s) = same_rate_pair(ms.mult, ms.shift);
    assert_eq!((m, s), (ms.mult * 2, ms.shift + 1));
    for cyc in [1u64, 1_000, 2_300_000_000, 1 << 40] {
        assert_eq!(
            mul_u64_u32_shr(cyc, m, s),
            mul_u64_u32_shr(cyc, ms.mult, ms.shift)
        );
    }
    // No room to double: half the multiplier, one less shift.
    assert_eq!(same_rate_pair(u32::MAX, 8), (u32::MAX / 2, 7));
    assert_eq!(same_rate_pair(6, 32), (3, 31));
}
