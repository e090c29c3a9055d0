// SPDX-License-Identifier: GPL-2.0

//! `--litmus`: the rdtsc-ordering thread's experiment (x86/vdso: use non-serializing rdtsc) on this CPU. A publisher thread on
//! the first CPU reads a time and stores it with release; a reader on
//! every other CPU loads it with acquire and then reads the time itself:
//! a read older than the value loaded is time seen going backwards across
//! CPUs. With a bare counter read the CPU may execute the read before the
//! load (`rdtsc` is not ordered with loads; neither is a bare `mrs
//! cntvct_el0`); the ordered read (`lfence; rdtsc`, `isb; mrs`) may not.
//!
//! So that a step back is the CPU's doing and not the compiler's, the
//! variant the verdict rests on, `<bare>_cbarrier`, reads the counter
//! bare but as a compiler barrier ([`sys::counter_after_barrier`]): the
//! load stays before it in the machine code (each variant's reader step
//! is its own function with a fixed symbol, `nmiclock_litmus_*`, and
//! run-tests checks that order in the built binary). The core's bare
//! read, which the module uses as the kernel uses its plain `rdtsc()`,
//! lets the compiler move it too: it is measured beside, and so are both
//! counters through nmiclock's latch clock, whose read is the counter's
//! read plus the latch's loads. Beside each, the cost of one read (single
//! thread, median of 15 runs of 1 M).

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

/// Declares the reader steps: each loads what the publisher stored
/// (acquire), then reads the time, and returns both. Never inlined, under
/// a fixed symbol, so that the order of the load and the read in the
/// machine code can be checked in the binary.
macro_rules! steps {
    ($($(#[$doc:meta])* $name:ident: $read:expr;)*) => {
        $(
            $(#[$doc])*
            #[no_mangle]
            #[inline(never)]
            fn $name(published: &AtomicU64) -> (u64, u64) {
                let p = published.load(Ordering::Acquire);
                (p, $read)
            }
        )*
    };
}

steps! {
    /// The ordered counter read.
    nmiclock_litmus_ordered: Ordered.read();
    /// The bare counter read as a compiler barrier: only the CPU can take
    /// it before the load.
    nmiclock_litmus_cbarrier: sys::counter_after_barrier();
    /// The core's bare counter read (`nomem`): the compiler may hoist it.
    nmiclock_litmus_bare: Bare.read();
    /// The latch clock over the ordered counter.
    nmiclock_litmus_latch_ordered: LATCH_ORDERED.read().ns;
    /// The latch clock over the core's bare counter.
    nmiclock_litmus_latch_bare: LATCH_BARE.read().ns;
}

/// Runs one variant: `read` is the time read (counter cycles, or ns), and
/// `step` a reader's load then read of it.
fn variant(
    name: String,
    cpus: &[usize],
    reads: u64,
    needed: u64,
    read: fn() -> u64,
    step: fn(&AtomicU64) -> (u64, u64),
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
                        let (p, t) = step(published);
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
    let ordered = variant(
        Ordered::NAME.into(),
        &cpus,
        r,
        n,
        || Ordered.read(),
        nmiclock_litmus_ordered,
    )?;
    let barrier = variant(
        format!("{}_cbarrier", Bare::NAME),
        &cpus,
        r,
        n,
        sys::counter_after_barrier,
        nmiclock_litmus_cbarrier,
    )?;
    let bare = variant(
        Bare::NAME.into(),
        &cpus,
        r,
        n,
        || Bare.read(),
        nmiclock_litmus_bare,
    )?;
    let latch_ordered = variant(
        format!("latch/{}", Ordered::NAME),
        &cpus,
        r,
        n,
        || LATCH_ORDERED.read().ns,
        nmiclock_litmus_latch_ordered,
    )?;
    let latch_bare = variant(
        format!("latch/{}", Bare::NAME),
        &cpus,
        r,
        n,
        || LATCH_BARE.read().ns,
        nmiclock_litmus_latch_bare,
    )?;
    let ns = |cyc: u64| cyc_to_ns(cyc, ms.mult, ms.shift);
    for (o, in_cycles) in [
        (&ordered, true),
        (&barrier, true),
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
    for (c, l) in [
        (&ordered, Some(&latch_ordered)),
        (&barrier, None),
        (&bare, Some(&latch_bare)),
    ] {
        let (l_ns, plus, l_rate, l_back) = match l {
            Some(l) => (
                format!("{:.2}", l.read_ns),
                format!("{:.2}", l.read_ns - c.read_ns),
                rate(l),
                format!("{} ns", l.max_back),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:<16} {:>8.2} {:>9} {:>8}  {:<30} {:>13}  {:<30} {:>9}",
            c.name,
            c.read_ns,
            l_ns,
            plus,
            rate(c),
            format!("{} cyc {} ns", c.max_back, ns(c.max_back)),
            l_rate,
            l_back
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
    } else if barrier.backwards > 0 {
        (
            format!(
                "FAILURE ({} went backwards across CPUs: {} of {} reads, by up to {} cycles, the load before it in the machine code, so the CPU reordered it; {} did not in {})",
                barrier.name,
                barrier.backwards,
                barrier.reads,
                barrier.max_back,
                Ordered::NAME,
                ordered.reads
            ),
            1,
        )
    } else {
        (
            format!(
                "INCONCLUSIVE ({} never went backwards in {} reads: this CPU did not reorder it, or its threads seldom ran side by side on a loaded machine)",
                barrier.name,
                barrier.reads
            ),
            4,
        )
    };
    println!("nmiclock-host: litmus: End of test: {verdict}");
    Ok(code)
}
