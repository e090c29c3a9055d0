// SPDX-License-Identifier: GPL-2.0

//! loom models of the acct strategies: a task-side and an interrupt-side
//! update of one record, over every interleaving loom explores. `cmpxchg`
//! and `irqsave` (with the host's exclusion) never apply a negative or an
//! already applied interval and their integrals add up; `racy` is caught.
//!
//! Run with: RUSTFLAGS="--cfg loom" cargo test --release --test loom_acct

#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

use nmiclock_core::acct::{
    AcctRecord, AcctStrategy, Cmpxchg, IrqSave, Outcome, Racy, SpinExclusion, Update,
};

/// One update reading a shared clock: every read is 50 ns after the one
/// before it, whichever thread made it, so time never runs backwards.
fn update<S: AcctStrategy>(s: &S, rec: &AcctRecord, clock: &AtomicU64) -> Outcome {
    s.update(
        rec,
        Update {
            now: || clock.fetch_add(50, Ordering::SeqCst) + 50,
            rss: 3,
            vm: 7,
            min_delta: 1,
            pause: || {},
        },
    )
}

fn race<S: AcctStrategy + Send + 'static>(make: fn() -> S) {
    loom::model(move || {
        let s = Arc::new(make());
        let rec = Arc::new(AcctRecord::new());
        let clock = Arc::new(AtomicU64::new(0));
        let irq = {
            let (s, rec, clock) = (Arc::clone(&s), Arc::clone(&rec), Arc::clone(&clock));
            thread::spawn(move || update(&*s, &rec, &clock))
        };
        let task = update(&*s, &rec, &clock);
        let irq = irq.join().unwrap();
        let mut applied = 0u64;
        for o in [task, irq] {
            let v = rec.account(&o);
            assert!(!v.any(), "bad update: {o:?} ({v:?})");
            if let Outcome::Applied { delta, .. } = o {
                applied = applied.wrapping_add(delta);
            }
        }
        // Every nanosecond up to acct_timexpd applied exactly once (a lost
        // or skipped update leaves its interval to the next one).
        let end = rec.timexpd();
        assert!(
            end == 50 || end == 100,
            "bad update: acct_timexpd ended at {end}"
        );
        assert_eq!(applied, end, "bad update: {applied} ns applied up to {end}");
        assert!(rec.integrals_match(), "bad update: integrals lost an add");
    });
}

#[test]
fn cmpxchg_never_applies_a_bad_interval() {
    race(|| Cmpxchg);
}

#[test]
fn irqsave_never_applies_a_bad_interval() {
    race(|| IrqSave(SpinExclusion));
}

#[test]
#[should_panic(expected = "bad update")]
fn racy_is_caught() {
    race(|| Racy);
}
