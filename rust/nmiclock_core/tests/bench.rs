// SPDX-License-Identifier: GPL-2.0

//! Host tests of the benchmark's arithmetic: histogram buckets and
//! quantiles against a sorted reference, the median, and the parser of
//! `bench` writes.

use nmiclock_core::bench::{
    bucket, bucket_range, median, parse_args, ratio_milli, BenchArgs, LatHist, Milli, BUCKETS,
};

#[test]
fn buckets_cover_every_value_once_and_in_order() {
    // Every value falls in the bucket whose range holds it, and buckets
    // are contiguous: each starts where the previous one ends.
    let mut next = 0u64;
    for b in 0..BUCKETS - 1 {
        let (lo, width) = bucket_range(b);
        assert_eq!(lo, next, "bucket {b} starts at {lo}, expected {next}");
        assert!(width >= 1);
        assert_eq!(bucket(lo), b);
        assert_eq!(bucket(lo + width - 1), b);
        next = lo + width;
    }
    assert_eq!(bucket(next), BUCKETS - 1);
    assert_eq!(bucket(u64::MAX), BUCKETS - 1);
}

#[test]
fn buckets_are_exact_below_64_and_within_one_sixteenth_above() {
    for v in 0..64 {
        assert_eq!(bucket_range(bucket(v)), (v, 1));
    }
    for v in [64u64, 65, 100, 1_000, 12_345, 1 << 20, (1 << 40) - 1] {
        let (lo, width) = bucket_range(bucket(v));
        assert!(
            lo <= v && v < lo + width,
            "{v} not in [{lo}, {})",
            lo + width
        );
        assert!(width * 16 <= lo, "bucket of {v} is {width} wide at {lo}");
    }
}

/// The exact quantile of sorted values, by the same rank rule.
fn reference_quantile(sorted: &[u64], permille: u64) -> u64 {
    let n = sorted.len() as u64;
    let rank = ((n * permille).div_ceil(1000)).clamp(1, n);
    sorted[(rank - 1) as usize]
}

#[test]
fn quantiles_are_within_half_a_bucket_of_the_exact_ones() {
    // A skewed, deterministic distribution: mostly short, a long tail.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut values = Vec::new();
    let h = LatHist::new();
    for i in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = if i % 100 == 0 {
            x % 100_000
        } else {
            20 + x % 200
        };
        values.push(v);
        h.record(v);
    }
    values.sort_unstable();
    assert_eq!(h.count(), values.len() as u64);
    assert_eq!(h.max(), *values.last().unwrap());
    for permille in [1, 500, 900, 990, 999, 1000] {
        let exact = reference_quantile(&values, permille);
        let got = h.quantile(permille as u32);
        let (lo, width) = bucket_range(bucket(exact));
        assert!(
            got >= lo && got < lo + width,
            "p{permille}: {got} outside the bucket [{lo}, {}) of the exact {exact}",
            lo + width
        );
        assert!(got <= h.max());
    }
}

#[test]
fn small_and_empty_histograms() {
    let h = LatHist::default();
    assert_eq!((h.count(), h.max(), h.quantile(500)), (0, 0, 0));
    h.record(7);
    assert_eq!(
        (h.quantile(1), h.quantile(500), h.quantile(1000)),
        (7, 7, 7)
    );
    h.record(1_000_000);
    // Two values: the median is the lower (rank 1), p99 the upper, capped
    // at the exact maximum.
    assert_eq!(h.quantile(500), 7);
    let p99 = h.quantile(990);
    assert!(p99 > 900_000 && p99 <= 1_000_000, "p99 {p99}");
    assert_eq!(h.max(), 1_000_000);
    h.clear();
    assert_eq!((h.count(), h.max()), (0, 0));
}

#[test]
fn median_sorts_and_takes_the_middle() {
    assert_eq!(median(&mut []), 0);
    assert_eq!(median(&mut [5]), 5);
    assert_eq!(median(&mut [9, 1, 5]), 5);
    assert_eq!(median(&mut [4, 1, 3, 2]), 3);
}

#[test]
fn milli_prints_three_decimals() {
    assert_eq!(Milli(0).to_string(), "0.000");
    assert_eq!(Milli(12_345).to_string(), "12.345");
    assert_eq!(Milli(1_005).to_string(), "1.005");
    assert_eq!(ratio_milli(3, 2), Some(1_500));
    assert_eq!(ratio_milli(1, 0), None);
    assert_eq!(ratio_milli(u64::MAX, 1), Some(u64::MAX));
}

#[test]
fn parse_accepts_run_and_key_value_lists() {
    assert_eq!(parse_args(b"run"), Ok(BenchArgs::DEFAULT));
    assert_eq!(parse_args(b"run\n"), Ok(BenchArgs::DEFAULT));
    assert_eq!(
        parse_args(b"loops=100 nruns=3\n"),
        Ok(BenchArgs {
            loops: 100,
            nruns: 3,
            ..BenchArgs::DEFAULT
        })
    );
    assert_eq!(
        parse_args(b"update_us=1 loops=1000000 nruns=100"),
        Ok(BenchArgs {
            loops: 1_000_000,
            nruns: 100,
            update_us: 1
        })
    );
}

#[test]
fn parse_refuses_everything_else() {
    for bad in [
        &b""[..],
        b"\n",
        b"run now",
        b"runs",
        b"loops=9",
        b"loops=1000001",
        b"nruns=0",
        b"nruns=101",
        b"update_us=0",
        b"loops=",
        b"=5",
        b"loops=-1",
        b"loops=1e3",
        b"loops=100  nruns=3",
        b" loops=100",
        b"loops=100 ",
        b"loops=100\n\n",
        b"loops=100\nnruns=3",
        b"loops=100 loops=200",
        b"loops=1\x0000",
        b"speed=3",
        b"LOOPS=100",
        b"loops=99999999999999999999",
    ] {
        let e = parse_args(bad).expect_err(&format!("{:?} accepted", String::from_utf8_lossy(bad)));
        assert!(e.token.len() <= 32);
        assert!(e.want.contains("loops="));
    }
}
