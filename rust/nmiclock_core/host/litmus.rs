// SPDX-License-Identifier: GPL-2.0

//! `--litmus`: seed 004's experiment on this CPU. A publisher thread on
//! the first CPU reads a time and stores it with release; a reader on
//! every other CPU loads it with acquire and then reads the time itself:
//! a read older than the value loaded is time seen going backwards across
//! CPUs. With a bare counter read the CPU may execute the read before the
//! load (`rdtsc` is not ordered with loads; neither is a bare `mrs
//! cntvct_el0`); the ordered read (`lfence; rdtsc`, `isb; mrs`) may not.
//! Each counter is tried directly and through nmiclock's latch clock built
//! on it, whose read is the counter's read plus the latch's loads. Beside
//! each, the cost of one read (single thread, median of 15 runs of 1 M).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use nmiclock_core::clock::ClockSource;
use nmiclock_core::counter::Counter;
use nmiclock_core::cyc_ns::{calc_mult_shift, cyc_to_ns, NSEC_PER_MSEC};

use crate::sys;
use crate::torture::{calibrate, Bare, Ordered, LATCH_BARE, LATCH_ORDERED};

/// What one variant showed.
struct Outcome {
    name: String,
    reads: u64,
    backwards: u64,
    /// Largest step back, in the variant's unit (cycles or ns).
    max_back: u64,
    read_ns: f64,
}

/// The median ns of one call of `f`, over 15 runs of 1 M calls.
fn cost(mut f: impl FnMut() -> u64) -> f64 {
    let mut sink = 0u64;
    let mut runs: Vec<f64> = (0..15)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..1_000_000 {
                sink = sink.wrapping_add(f());
            }
            t.elapsed().as_nanos() as f64 / 1e6
        })
        .collect();
    std::hint::black_box(sink);
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// Runs one variant: `read` is the time read (counter cycles, or ns).
fn variant(
    name: String,
    cpus: &[usize],
    reads: u64,
    needed: u64,
    read: &(dyn Fn() -> u64 + Sync),
) -> Result<Outcome, String> {
    let published = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let backwards = AtomicU64::new(0);
    let max_back = AtomicU64::new(0);
    let total = AtomicU64::new(0);
    let readers = &cpus[1..];
    std::thread::scope(|s| -> Result<(), String> {
        let publisher = s.spawn(|| -> Result<(), String> {
            sys::pin_to(cpus[0]).map_err(|e| format!("pinning to CPU {}: {e}", cpus[0]))?;
            while !done.load(Ordering::Relaxed) {
                published.store(read(), Ordering::Release);
            }
            Ok(())
        });
        let handles: Vec<_> = readers
            .iter()
            .map(|&cpu| {
                let (published, backwards, max_back, total) =
                    (&published, &backwards, &max_back, &total);
                s.spawn(move || -> Result<(), String> {
                    sys::pin_to(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
                    let mut n = 0u64;
                    while n < reads {
                        let p = published.load(Ordering::Acquire);
                        let t = read();
                        n += 1;
                        if t < p {
                            backwards.fetch_add(1, Ordering::Relaxed);
                            max_back.fetch_max(p - t, Ordering::Relaxed);
                        }
                        if n % 65_536 == 0 && backwards.load(Ordering::Relaxed) >= needed {
                            break;
                        }
                    }
                    total.fetch_add(n, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        let mut r = Ok(());
        for h in handles {
            r = r.and(h.join().unwrap_or(Err("a reader panicked".into())));
        }
        done.store(true, Ordering::Relaxed);
        r.and(
            publisher
                .join()
                .unwrap_or(Err("the publisher panicked".into())),
        )
    })?;
    Ok(Outcome {
        name,
        reads: total.load(Ordering::Relaxed),
        backwards: backwards.load(Ordering::Relaxed),
        max_back: max_back.load(Ordering::Relaxed),
        read_ns: cost(read),
    })
}

/// The litmus, all variants; its exit status (see the usage).
pub(crate) fn run(reads: &u64, needed: &u64) -> Result<u8, String> {
    let cpus = sys::cpus_allowed().map_err(|e| format!("sched_getaffinity: {e}"))?;
    if cpus.len() < 2 {
        println!("nmiclock-host: litmus: End of test: INCONCLUSIVE (one CPU: nothing to cross)");
        return Ok(4);
    }
    let khz = calibrate(&Ordered, 100);
    let ms = calc_mult_shift(khz, NSEC_PER_MSEC, 3_600_000)
        .ok_or(format!("no conversion for a {khz} kHz counter"))?;
    for c in [&LATCH_ORDERED as &dyn ClockSource, &LATCH_BARE] {
        if !c.start(sys::mono_raw_ns(), ms.mult, ms.shift, u64::MAX) {
            return Err("a latch clock's writer is busy at start".into());
        }
    }
    let (r, n) = (*reads, *needed);
    let ordered = variant(Ordered::NAME.into(), &cpus, r, n, &|| Ordered.read())?;
    let bare = variant(Bare::NAME.into(), &cpus, r, n, &|| Bare.read())?;
    let latch_ordered = variant(format!("latch/{}", Ordered::NAME), &cpus, r, n, &|| {
        LATCH_ORDERED.read().ns
    })?;
    let latch_bare = variant(format!("latch/{}", Bare::NAME), &cpus, r, n, &|| {
        LATCH_BARE.read().ns
    })?;
    let ns = |cyc: u64| cyc_to_ns(cyc, ms.mult, ms.shift);
    for (o, in_cycles) in [
        (&ordered, true),
        (&bare, true),
        (&latch_ordered, false),
        (&latch_bare, false),
    ] {
        let (cycles, back_ns) = if in_cycles {
            (o.max_back.to_string(), ns(o.max_back))
        } else {
            ("-".into(), o.max_back)
        };
        println!(
            "litmus: read={} reads={} backwards={} max_back_cycles={cycles} max_back_ns={back_ns} read_ns={:.2} cpus={} counter_khz={khz}",
            o.name,
            o.reads,
            o.backwards,
            o.read_ns,
            cpus.len(),
        );
    }
    println!(
        "litmus: latch_over_counter_ns {}={:.2} {}={:.2}",
        Ordered::NAME,
        latch_ordered.read_ns - ordered.read_ns,
        Bare::NAME,
        latch_bare.read_ns - bare.read_ns
    );
    // The trade-off in one table: what each counter read costs, what the
    // latch adds, and how often and how far each went backwards.
    let rate = |o: &Outcome| {
        format!(
            "{}/{} ({:.3} %)",
            o.backwards,
            o.reads,
            o.backwards as f64 * 100.0 / o.reads.max(1) as f64
        )
    };
    println!();
    println!(
        "{:<16} {:>8} {:>9} {:>8}  {:<30} {:>13}  {:<30} {:>9}",
        "counter",
        "read_ns",
        "latch_ns",
        "+latch",
        "backwards, direct",
        "max back",
        "backwards, through the latch",
        "max back"
    );
    for (c, l) in [(&ordered, &latch_ordered), (&bare, &latch_bare)] {
        println!(
            "{:<16} {:>8.2} {:>9.2} {:>8.2}  {:<30} {:>13}  {:<30} {:>9}",
            c.name,
            c.read_ns,
            l.read_ns,
            l.read_ns - c.read_ns,
            rate(c),
            format!("{} cyc {} ns", c.max_back, ns(c.max_back)),
            rate(l),
            format!("{} ns", l.max_back)
        );
    }
    println!();
    let (verdict, code) = if ordered.backwards > 0 || latch_ordered.backwards > 0 {
        (
            format!(
                "FAILURE ({} went backwards across CPUs too: {} of {} reads; the counter is not synchronised across CPUs here)",
                Ordered::NAME,
                ordered.backwards,
                ordered.reads
            ),
            1,
        )
    } else if bare.backwards > 0 {
        (
            format!(
                "FAILURE ({} went backwards across CPUs: {} of {} reads, by up to {} cycles; {} did not in {})",
                Bare::NAME,
                bare.backwards,
                bare.reads,
                bare.max_back,
                Ordered::NAME,
                ordered.reads
            ),
            1,
        )
    } else {
        (
            format!(
                "INCONCLUSIVE ({} never went backwards in {} reads: this CPU did not reorder it, or its threads seldom ran side by side on a loaded machine)",
                Bare::NAME,
                bare.reads
            ),
            4,
        )
    };
    println!("nmiclock-host: litmus: End of test: {verdict}");
    Ok(code)
}
