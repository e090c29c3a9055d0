// SPDX-License-Identifier: GPL-2.0

//! Host tests of `acct`: each strategy's arithmetic, and what happens when
//! an "interrupt" (a nested update) lands at the two racy points: right
//! after the task read the time, and between its read and its write of
//! `acct_timexpd`. Concurrency proper is model-checked in `loom_acct.rs`.

use std::cell::Cell;

use nmiclock_core::acct::{
    term, AcctRecord, AcctStrategy, Cmpxchg, IrqSave, Outcome, Racy, SpinExclusion, Update, Verdict,
};

const RSS: u64 = 1000;
const VM: u64 = 5000;

/// Runs one update at `time` with no interference.
fn at<S: AcctStrategy>(s: &S, rec: &AcctRecord, time: u64, min_delta: u64) -> Outcome {
    s.update(
        rec,
        Update {
            now: || time,
            rss: RSS,
            vm: VM,
            min_delta,
            pause: || {},
        },
    )
}

#[test]
fn each_strategy_integrates_like_the_kernel() {
    integrates_like_the_kernel(&Cmpxchg);
    integrates_like_the_kernel(&IrqSave(SpinExclusion));
    integrates_like_the_kernel(&Racy);
    assert_eq!(
        [Cmpxchg::NAME, IrqSave::<SpinExclusion>::NAME, Racy::NAME],
        ["cmpxchg", "irqsave", "racy"]
    );
}

fn integrates_like_the_kernel<S: AcctStrategy>(s: &S) {
    let name = S::NAME;
    {
        let rec = AcctRecord::new();
        rec.reset(1_000);
        assert_eq!(at(s, &rec, 1_500, 1_000), Outcome::TooSoon, "{}", name);
        let o = at(s, &rec, 5_000, 1_000);
        assert_eq!(
            o,
            Outcome::Applied {
                prev: 1_000,
                time: 5_000,
                delta: 4_000,
                rss_term: 4_000 * RSS >> 10,
                vm_term: 4_000 * VM >> 10,
            },
            "{}",
            name
        );
        assert_eq!(rec.account(&o), Verdict::default(), "{}", name);
        let o = at(s, &rec, 9_000, 1_000);
        assert!(!rec.account(&o).any());
        assert_eq!(rec.timexpd(), 9_000);
        assert_eq!(rec.integrals(), (8_000 * RSS >> 10, 8_000 * VM >> 10));
        assert!(rec.integrals_match(), "{}", name);
    }
}

#[test]
fn terms_wrap_instead_of_panicking() {
    assert_eq!(term(u64::MAX, 1024), u64::MAX.wrapping_mul(1024) >> 10);
    assert_eq!(term(0, u64::MAX), 0);
}

/// The task's update at `task_time`, with an interrupt's update at
/// `irq_time` landing right after the task read the time (inside `now`).
fn irq_after_time_read<S: AcctStrategy>(
    s: &S,
    task_time: u64,
    irq_time: u64,
) -> (Outcome, Outcome, AcctRecord) {
    let rec = AcctRecord::new();
    let irq = Cell::new(None);
    let task = s.update(
        &rec,
        Update {
            now: || {
                irq.set(Some(at(s, &rec, irq_time, 1)));
                task_time
            },
            rss: RSS,
            vm: VM,
            min_delta: 1,
            pause: || {},
        },
    );
    (task, irq.get().unwrap(), rec)
}

/// The task's update at `task_time`, with an interrupt's update at
/// `irq_time` landing between the task's read and write of acct_timexpd.
fn irq_in_window<S: AcctStrategy>(
    s: &S,
    task_time: u64,
    irq_time: u64,
) -> (Outcome, Outcome, AcctRecord) {
    let rec = AcctRecord::new();
    let irq = Cell::new(None);
    let task = s.update(
        &rec,
        Update {
            now: || task_time,
            rss: RSS,
            vm: VM,
            min_delta: 1,
            pause: || irq.set(Some(at(s, &rec, irq_time, 1))),
        },
    );
    (task, irq.get().unwrap(), rec)
}

#[test]
fn cmpxchg_skips_a_negative_delta() {
    let (task, irq, rec) = irq_after_time_read(&Cmpxchg, 100, 150);
    assert_eq!(task, Outcome::Negative);
    assert!(!rec.account(&irq).any());
    assert_eq!(rec.timexpd(), 150);
    assert!(rec.integrals_match());
}

#[test]
fn cmpxchg_loses_to_an_update_inside_its_window() {
    let (task, irq, rec) = irq_in_window(&Cmpxchg, 100, 150);
    assert_eq!(task, Outcome::Lost);
    assert!(!rec.account(&irq).any());
    assert_eq!(rec.timexpd(), 150);
    assert!(rec.integrals_match());
}

#[test]
fn racy_applies_a_negative_delta_as_a_huge_one() {
    let (task, irq, rec) = irq_after_time_read(&Racy, 100, 150);
    assert!(!rec.account(&irq).any());
    let v = rec.account(&task);
    assert_eq!(
        v,
        Verdict {
            bad_delta: true,
            backwards: true
        },
        "{task:?}"
    );
    match task {
        Outcome::Applied { delta, .. } => assert_eq!(delta, 100u64.wrapping_sub(150)),
        other => panic!("{other:?}"),
    }
    assert_eq!(rec.timexpd(), 100, "acct_timexpd went back from 150 to 100");
}

#[test]
fn racy_applies_an_interval_twice() {
    let (task, irq, rec) = irq_in_window(&Racy, 150, 100);
    assert!(!rec.account(&irq).any());
    // The task applies (0, 150] though the interrupt already did (0, 100].
    let v = rec.account(&task);
    assert_eq!(
        v,
        Verdict {
            bad_delta: true,
            backwards: false
        },
        "{task:?}"
    );
}
