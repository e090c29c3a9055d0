// SPDX-License-Identifier: GPL-2.0

//! Host tests of [`Owner`]: one owner at a time, nesting hands it over and
//! back, and a late `end` of an owner that no longer holds it changes
//! nothing (the module's activity guard once wrote a stale owner back that
//! way, leaving every later activity refused).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use nmiclock_core::owner::Owner;

const BENCH: u32 = 4;
const STRESS: u32 = 1;
const CHECK: u32 = 2;

#[test]
fn one_owner_at_a_time() {
    let o = Owner::new();
    assert_eq!(o.current(), 0);
    assert_eq!(o.begin(BENCH), Ok(()));
    assert_eq!(o.begin(CHECK), Err(BENCH));
    assert!(o.end(BENCH, 0));
    assert_eq!(o.begin(CHECK), Ok(()));
    assert_eq!(o.begin(0), Err(0), "kind 0 means nobody: it cannot own");
}

#[test]
fn nesting_hands_over_and_back() {
    let o = Owner::new();
    o.begin(BENCH).unwrap();
    assert_eq!(o.nest(CHECK, STRESS), Err(BENCH), "only the owner nests");
    assert_eq!(o.nest(BENCH, STRESS), Ok(()));
    assert!(o.held_by(STRESS));
    assert!(!o.end(BENCH, 0), "the outer owner cannot end while nested");
    assert!(o.held_by(STRESS));
    assert!(o.end(STRESS, BENCH));
    assert!(o.held_by(BENCH));
    assert!(o.end(BENCH, 0));
    assert_eq!(o.current(), 0);
}

#[test]
fn a_late_end_changes_nothing() {
    // The sequence the bench met: its nested stress run is ended by
    // someone else, the outer owner ends, and something new begins;
    // the nested owner's second (late) end must not write BENCH back.
    let o = Owner::new();
    o.begin(BENCH).unwrap();
    o.nest(BENCH, STRESS).unwrap();
    assert!(o.end(STRESS, BENCH));
    assert!(o.end(BENCH, 0));
    o.begin(CHECK).unwrap();
    assert!(!o.end(STRESS, BENCH), "a stale end was accepted");
    assert!(o.held_by(CHECK));
    assert!(o.end(CHECK, 0));
    assert!(!o.end(STRESS, BENCH));
    assert_eq!(o.current(), 0, "a stale end wrote an owner back");
}

/// An outer owner that waits for its inner one to hand back (however
/// long another thread takes to end it) always ends last, and the owner
/// is free afterwards: 500 rounds with the inner end on another thread.
#[test]
fn an_outer_owner_that_waits_for_the_hand_back_always_frees_it() {
    let o = Arc::new(Owner::new());
    for round in 0..500u32 {
        o.begin(BENCH).unwrap();
        o.nest(BENCH, STRESS).unwrap();
        let go = Arc::new(AtomicBool::new(false));
        let (o2, go2) = (o.clone(), go.clone());
        let stopper = thread::spawn(move || {
            while !go2.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            if round % 3 == 0 {
                thread::yield_now();
            }
            assert!(o2.end(STRESS, BENCH));
        });
        go.store(true, Ordering::Release);
        while !o.held_by(BENCH) {
            std::hint::spin_loop();
        }
        assert!(o.end(BENCH, 0));
        stopper.join().unwrap();
        assert_eq!(o.current(), 0, "round {round}: owner left taken");
    }
}
