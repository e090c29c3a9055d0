// SPDX-License-Identifier: GPL-2.0

//! loom models of the clock protections: one reader racing one epoch
//! update, over every interleaving loom explores (with relaxed-memory
//! effects). The latch and the seqcount must return the time of the old or
//! of the new epoch, never a mix; `unprotected` must be caught returning a
//! mix.
//!
//! Run with: RUSTFLAGS="--cfg loom" cargo test --release --test loom_clock

#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;

use nmiclock_core::clock::{Clock, ClockData, Latch, Protection, Seqcount, Unprotected};
use nmiclock_core::counter::Counter;
use nmiclock_core::spin::SpinBudget;

/// The counter is frozen: any difference between reads comes from the data.
struct Frozen;

const NOW: u64 = 1_000_000;

impl Counter for Frozen {
    const NAME: &'static str = "frozen";
    fn read(&self) -> u64 {
        NOW
    }
}

fn no_time() -> u64 {
    0
}

const OLD: ClockData = ClockData {
    epoch_ns: 1_000,
    epoch_frac: 0,
    epoch_cyc: 500_000,
    mult: 1,
    shift: 0,
    mask: u64::MAX,
};

const NEW: ClockData = ClockData {
    epoch_ns: 2_000,
    epoch_frac: 0,
    epoch_cyc: 700_000,
    mult: 1,
    shift: 0,
    mask: u64::MAX,
};

fn race<P: Protection + Send + 'static>(make: fn() -> P) {
    let old_ns = OLD.ns_at(NOW);
    let new_ns = NEW.ns_at(NOW);
    loom::model(move || {
        let p = Arc::new(make());
        p.publish(&OLD, &mut || {});
        let writer = {
            let p = Arc::clone(&p);
            thread::spawn(move || p.publish(&NEW, &mut || {}))
        };
        let budget = SpinBudget {
            timeout_ns: u64::MAX,
            poll_count: 1,
        };
        let r = p.read(&Frozen, budget, no_time);
        assert!(
            r.ns == old_ns || r.ns == new_ns,
            "torn read: {} is neither the old epoch's {} nor the new one's {}",
            r.ns,
            old_ns,
            new_ns
        );
        assert!(!r.stalled);
        writer.join().unwrap();
        // After the update, readers see the new epoch.
        assert_eq!(p.read(&Frozen, budget, no_time).ns, new_ns);
    });
}

#[test]
fn latch_never_returns_a_mix() {
    race(Latch::new);
}

#[test]
fn seqcount_never_returns_a_mix_when_the_writer_can_run() {
    race(Seqcount::new);
}

#[test]
#[should_panic(expected = "torn read")]
fn unprotected_is_caught_returning_a_mix() {
    race(Unprotected::new);
}

#[test]
fn latch_clock_reads_stay_monotonic_across_an_update() {
    // Through the whole Clock: a reader before and after an epoch update
    // with a counter that does not move sees the same time.
    loom::model(|| {
        let clock = Arc::new(Clock::new(Latch::new(), Frozen, no_time as fn() -> u64));
        use nmiclock_core::clock::ClockSource;
        assert!(clock.start(5_000, 1, 0, u64::MAX));
        let writer = {
            let clock = Arc::clone(&clock);
            thread::spawn(move || {
                clock.update_epoch(&mut || {});
            })
        };
        let a = clock.read().ns;
        let b = clock.read().ns;
        writer.join().unwrap();
        assert_eq!((a, b), (5_000, 5_000));
    });
}
