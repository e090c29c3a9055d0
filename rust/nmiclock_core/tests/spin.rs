// SPDX-License-Identifier: GPL-2.0

//! Host tests of `cond_load_acquire_timeout()`: it returns as soon as the
//! condition holds (without reading the time), gives up when the budget is spent (and not before), and
//! reads the time only every `poll_count` spins.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nmiclock_core::spin::{cond_load_acquire_timeout, SpinBudget};

#[test]
fn returns_at_once_when_the_condition_holds() {
    let v = AtomicU32::new(4);
    let mut calls = 0;
    let budget = SpinBudget {
        timeout_ns: 0,
        poll_count: 10,
    };
    let r = cond_load_acquire_timeout(
        &v,
        |x| x % 2 == 0,
        budget,
        || {
            calls += 1;
            0
        },
    );
    assert_eq!(r, Ok(4));
    assert_eq!(calls, 0, "the fast path does not read the time");
}

#[test]
fn times_out_after_the_budget_and_reads_time_every_poll_count_spins() {
    let v = AtomicU32::new(1);
    let mut t = 0u64;
    let mut calls = 0u64;
    let budget = SpinBudget {
        timeout_ns: 10_000,
        poll_count: 7,
    };
    // Time advances 1000 ns per read: start at 0, then 1000, 2000, ...
    let r = cond_load_acquire_timeout(
        &v,
        |x| x == 0,
        budget,
        || {
            calls += 1;
            let now = t;
            t += 1_000;
            now
        },
    );
    assert_eq!(r, Err(1));
    // One read to start, ten more to reach 10 us.
    assert_eq!(calls, 11);
}

#[test]
fn zero_poll_count_checks_every_spin() {
    let v = AtomicU32::new(1);
    let mut calls = 0u64;
    let budget = SpinBudget {
        timeout_ns: 3,
        poll_count: 0,
    };
    let r = cond_load_acquire_timeout(
        &v,
        |x| x == 0,
        budget,
        || {
            calls += 1;
            calls - 1
        },
    );
    assert_eq!(r, Err(1));
    assert_eq!(calls, 4);
}

#[test]
fn time_going_backwards_does_not_end_the_wait_early() {
    let v = AtomicU32::new(1);
    let mut t: u64 = 1_000_000;
    let budget = SpinBudget {
        timeout_ns: 5_000,
        poll_count: 1,
    };
    let mut reads = 0;
    let r = cond_load_acquire_timeout(
        &v,
        |x| x == 0,
        budget,
        || {
            reads += 1;
            // Jumps back by 1 ms once, then moves forward.
            t = if reads == 2 { t - 1_000_000 } else { t + 1_000 };
            t
        },
    );
    assert_eq!(r, Err(1));
    assert!(reads > 5);
}

#[test]
fn sees_a_value_stored_by_another_thread_with_real_time() {
    let v = Arc::new(AtomicU32::new(1));
    let writer = {
        let v = Arc::clone(&v);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            v.store(2, Ordering::Release);
        })
    };
    let start = Instant::now();
    let budget = SpinBudget {
        timeout_ns: 10_000_000_000,
        poll_count: 200,
    };
    let r = cond_load_acquire_timeout(&v, |x| x == 2, budget, || start.elapsed().as_nanos() as u64);
    writer.join().unwrap();
    assert_eq!(r, Ok(2));
}
