// SPDX-License-Identifier: GPL-2.0

//! Host microbenchmark: the latch read algorithm of nmiclock.ko (the same
//! source file, `src/clock.rs`) in userspace on the real CPU, next to the
//! counter reads it is built on and the C library's
//! `clock_gettime(CLOCK_MONOTONIC)`.
//!
//! `cargo bench` runs it (no external harness: nothing to download). Each
//! figure is the median over `NRUNS` runs of `LOOPS` reads in a row, in ns
//! per read, measured with `std::time::Instant`, with the spread of the
//! runs (the 10th to the 90th percentile) beside it; the ratio column is
//! against the bare ordered TSC read, taken in the same run of this
//! program. The clocks are the module's declaration ([`nmiclock_core::clocks!`])
//! over the TSC; the `nmiclock_sched_clock()` row is the exported
//! function's path: the running clock's index loaded atomically, then
//! `read_index_ns` (the default clock's latch read inline, behind one
//! comparison), as `kclock::now_ns` does.
//! `cargo bench -- --quick` runs a short smoke version (the test command
//! uses it to prove the benchmark builds and runs; its figures are noise).

use std::hint::black_box;
use std::time::Instant;

use std::sync::atomic::{AtomicUsize, Ordering};

use nmiclock_core::clock::ClockSource;
use nmiclock_core::counter::{Counter, Tsc, TscOrdered};
use nmiclock_core::cyc_ns::calc_mult_shift;

// The module's six clocks, over the TSC read ordered and bare.
type Wait = fn() -> u64;
use nmiclock_core::counter::{Tsc as Bare, TscOrdered as Ordered};
nmiclock_core::clocks!(wait Wait = wait_clock as Wait);

/// Monotonic ns for the clocks' wait budget (never consulted by the latch).
fn wait_clock() -> u64 {
    use std::sync::OnceLock;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// ns per call of `f` over `nruns` runs of `loops` calls: the median, and
/// the 10th and 90th percentiles of the runs.
fn measure(loops: u32, nruns: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..loops.min(10_000) {
        f();
    }
    let mut runs: Vec<f64> = (0..nruns)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..loops {
                f();
            }
            t0.elapsed().as_nanos() as f64 / f64::from(loops)
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    let at = |q: usize| runs[(runs.len() - 1) * q / 100];
    (runs[runs.len() / 2], at(10), at(90))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (loops, nruns) = if quick { (10_000, 3) } else { (1_000_000, 30) };

    // Any frequency gives the same work per read; 1 GHz keeps the figures
    // readable if anyone prints the clocks' values.
    let ms = calc_mult_shift(1_000_000, 1_000_000, 3_600_000).expect("a conversion for 1 GHz");
    for c in CLOCKS {
        assert!(c.start(0, ms.mult, ms.shift, u64::MAX));
    }
    let (latch_ordered, latch_bare, seq_ordered) = (&LATCH_ORDERED, &LATCH_BARE, &SEQCOUNT_ORDERED);

    // The exported function's path: the running clock's index, read
    // atomically, and the read it selects (the default's inline).
    let running = AtomicUsize::new(0);
    let exported = || read_index_ns(running.load(Ordering::Acquire));

    let rows: [(&str, (f64, f64, f64)); 7] = [
        (
            "rdtsc_ordered (lfence; rdtsc)",
            measure(loops, nruns, || {
                black_box(TscOrdered.read());
            }),
        ),
        (
            "rdtsc",
            measure(loops, nruns, || {
                black_box(Tsc.read());
            }),
        ),
        (
            "latch over rdtsc_ordered",
            measure(loops, nruns, || {
                black_box(latch_ordered.read());
            }),
        ),
        (
            "latch over rdtsc",
            measure(loops, nruns, || {
                black_box(latch_bare.read());
            }),
        ),
        (
            "nmiclock_sched_clock() path",
            measure(loops, nruns, || {
                black_box(exported());
            }),
        ),
        (
            "seqcount over rdtsc_ordered",
            measure(loops, nruns, || {
                black_box(seq_ordered.read());
            }),
        ),
        (
            "clock_gettime(CLOCK_MONOTONIC)",
            measure(loops, nruns, || {
                black_box(Instant::now());
            }),
        ),
    ];

    let base = rows[0].1 .0;
    println!(
        "# nmiclock host microbenchmark: median of {nruns} runs of {loops} reads, ns per read{}",
        if quick {
            " (--quick: smoke run, figures are noise)"
        } else {
            ""
        }
    );
    println!(
        "{:<32} {:>9} {:>8} {:>17}",
        "read", "ns", "ratio", "runs p10..p90"
    );
    for (name, (ns, p10, p90)) in rows {
        println!(
            "{name:<32} {ns:>9.2} {:>8.2} {:>17}",
            ns / base,
            format!("{p10:.2}..{p90:.2}")
        );
    }
}
