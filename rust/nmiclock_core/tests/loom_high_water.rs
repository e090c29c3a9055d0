// SPDX-License-Identifier: GPL-2.0

//! loom model of the cross-CPU high-water mark across a wrap overrun: a
//! raiser whose read came before the overrun raises late, while the
//! writer announces the overrun and a read after it raises the mark, and
//! a reader after the overrun compares with the mark. With [`HighWater`]
//! the reader never sees the old value under the new generation, over
//! every interleaving loom explores. The protocol it replaced (a
//! generation and a value in two words, the old value taken back after
//! the fact) is modelled too, and loom must catch it (within three
//! preemptions, to keep the model quick).
//!
//! Run with: RUSTFLAGS="--cfg loom" cargo test --release --test loom_high_water

#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

use nmiclock_core::high_water::HighWater;

/// Read before the overrun, higher than anything read after it.
const OLD: u64 = 100;
/// Read after the overrun by the raiser, and by the reader (later).
const NEW: u64 = 10;
const READER: u64 = 20;

#[test]
fn an_old_value_never_stands_under_the_new_generation() {
    loom::model(|| {
        let hw = Arc::new(HighWater::new());
        let overruns = Arc::new(AtomicU64::new(0));
        let late = {
            let (hw, overruns) = (Arc::clone(&hw), Arc::clone(&overruns));
            thread::spawn(move || hw.raise(0, OLD, || overruns.load(SeqCst) == 0))
        };
        let after = {
            let (hw, overruns) = (Arc::clone(&hw), Arc::clone(&overruns));
            thread::spawn(move || {
                overruns.store(1, SeqCst);
                hw.raise(1, NEW, || overruns.load(SeqCst) == 1);
            })
        };
        let mark = hw.load();
        if overruns.load(SeqCst) == 1 {
            if let Some(high) = mark.under(1) {
                assert!(
                    READER >= high,
                    "a read after the overrun met {high}, read before it"
                );
            }
        }
        late.join().unwrap();
        after.join().unwrap();
        assert_eq!(
            hw.load().under(1),
            Some(NEW),
            "the new generation's value stands"
        );
    });
}

/// The two-word protocol the stress run used before, along the paths the
/// race takes: the late raiser finds the generation it read under still
/// held, raises the value, then sees the overrun and takes its value
/// back; the new generation's first raiser takes the generation over,
/// resets the value and raises it. In between, the old value stands under
/// the new generation.
#[test]
fn the_two_word_protocol_is_caught() {
    let caught = std::panic::catch_unwind(|| {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let gen = Arc::new(AtomicU64::new(0));
            let value = Arc::new(AtomicU64::new(0));
            let overruns = Arc::new(AtomicU64::new(0));
            let late = {
                let (gen, value, overruns) =
                    (Arc::clone(&gen), Arc::clone(&value), Arc::clone(&overruns));
                thread::spawn(move || {
                    if gen.load(SeqCst) == 0 {
                        value.fetch_max(OLD, SeqCst);
                        if overruns.load(SeqCst) != 0 {
                            let _ = value.compare_exchange(OLD, 0, SeqCst, SeqCst);
                        }
                    }
                })
            };
            let after = {
                let (gen, value, overruns) =
                    (Arc::clone(&gen), Arc::clone(&value), Arc::clone(&overruns));
                thread::spawn(move || {
                    overruns.store(1, SeqCst);
                    if gen.compare_exchange(0, 1, SeqCst, SeqCst).is_ok() {
                        value.store(0, SeqCst);
                    }
                    value.fetch_max(NEW, SeqCst);
                })
            };
            let (held, high) = (gen.load(SeqCst), value.load(SeqCst));
            if held == 1 && overruns.load(SeqCst) == 1 {
                assert!(READER >= high, "a read after the overrun met {high}");
            }
            late.join().unwrap();
            after.join().unwrap();
        });
    });
    assert!(
        caught.is_err(),
        "loom found no interleaving where the old value stands"
    );
}
