// SPDX-License-Identifier: GPL-2.0

//! The per-read checks (`src/read_check.rs`): a base, the exact bound and
//! a tear outside it, a torn read that is no base, backwards, the
//! reference, overruns, a late switch's allowance, and the time-only checks
//! of targets.

use nmiclock_core::clock::Reading;
use nmiclock_core::cyc_ns::{calc_mult_shift, mul_u64_u32_shr, NSEC_PER_MSEC};
use nmiclock_core::read_check::{Around, Base, REF_TOLERANCE_NS};

fn pair() -> (u32, u32) {
    let ms = calc_mult_shift(2_300_000, NSEC_PER_MSEC, 3_600_000).unwrap();
    (ms.mult, ms.shift)
}

/// A read at counter value `cyc` on the line through (0, 0).
fn at(cyc: u64, (mult, shift): (u32, u32)) -> Reading {
    Reading {
        ns: mul_u64_u32_shr(cyc, mult, shift),
        now_cyc: cyc,
        mult,
        shift,
        ..Reading::default()
    }
}

/// Around a read at `r`: no writer, the reference on the clock's time.
fn around(r: &Reading) -> Around {
    Around {
        same: true,
        ref_lo: r.ns,
        ref_hi: r.ns,
        ..Around::default()
    }
}

fn no_switch(_: u64) -> Option<(u64, u32, u32)> {
    None
}

#[test]
fn a_read_on_the_line_passes_and_a_torn_one_is_no_base() {
    let p = pair();
    let b = Base::new();
    let first = at(1_000_000, p);
    let f = b.check(&first, &around(&first), [p].into_iter(), no_switch);
    assert_eq!(f.exact, None, "the first read is the base, unchecked");
    b.settle(&first, &around(&first), f.good());
    let good = at(3_000_000, p);
    let f = b.check(&good, &around(&good), [p].into_iter(), no_switch);
    assert_eq!(f.exact.map(|e| e.0), Some(0));
    assert!(f.good() && !f.torn());
    // 10 ns too late for its counter value: torn, above the bound.
    let mut torn = at(5_000_000, p);
    torn.ns += 10;
    let f = b.check(&torn, &around(&torn), [p].into_iter(), no_switch);
    assert!(f.torn(), "{f:?}");
    let (err, against) = f.exact.unwrap();
    assert!((9..=10).contains(&err), "err {err}");
    assert_eq!(torn.ns as i64 - against as i64, err);
    b.settle(&torn, &around(&torn), f.good());
    assert_eq!(b.cyc(), 1_000_000, "a torn read is no base");
    // The next good read still checks against the last good base.
    let next = at(7_000_000, p);
    let f = b.check(&next, &around(&next), [p].into_iter(), no_switch);
    assert_eq!(f.exact.map(|e| e.0), Some(0));
    // Nor is it behind the torn read before it.
    assert_eq!(f.backwards, None);
}

#[test]
fn backwards_reference_and_overruns() {
    let p = pair();
    let b = Base::new();
    let first = at(10_000_000, p);
    b.settle(&first, &around(&first), true);
    let mut back = at(10_000_100, p);
    back.ns = first.ns - 5;
    let f = b.check(&back, &around(&back), [p].into_iter(), no_switch);
    assert_eq!(f.backwards, Some(first.ns));
    // The reference says 1 ms passed, the clock says 2 us: off by more
    // than the tolerance.
    let later = at(10_004_600, p);
    let mut a = around(&later);
    a.ref_lo = first.ns + 1_000_000;
    a.ref_hi = a.ref_lo;
    let f = b.check(&later, &a, [p].into_iter(), no_switch);
    let (err, _) = f.reference.unwrap();
    assert!(err > REF_TOLERANCE_NS && !f.good());
    // Across an overrun nothing compares.
    let mut a = around(&later);
    a.overruns = 1;
    let f = b.check(&back, &a, [p].into_iter(), no_switch);
    assert_eq!(f.exact, None);
    assert_eq!(f.reference, None);
    // An overrun during the read: nothing either.
    let mut a = around(&back);
    a.same = false;
    assert_eq!(
        b.check(&back, &a, [p].into_iter(), no_switch).backwards,
        None
    );
}

#[test]
fn a_late_switch_widens_the_bound_by_its_skew_only() {
    let from = pair();
    let to = (from.0 + 40, from.1);
    let b = Base::new();
    // The base, on the old line, 1,000,000 cycles past switch 0's pivot.
    let pivot = 5_000_000u64;
    let base = at(pivot + 1_000_000, from);
    b.settle(&base, &around(&base), true);
    // The read on the new line through the pivot.
    let c = pivot + 3_000_000;
    let old_at_pivot = mul_u64_u32_shr(pivot, from.0, from.1);
    let r = Reading {
        ns: old_at_pivot + mul_u64_u32_shr(c - pivot, to.0, to.1),
        now_cyc: c,
        mult: to.0,
        shift: to.1,
        ..Reading::default()
    };
    let mut a = around(&r);
    a.started = 1;
    a.switched = 1;
    let f = b.check(&r, &a, [from, to].into_iter(), no_switch);
    assert_eq!(f.exact, None, "the switch's record is gone: no exact check");
    let rec = |i: u64| (i == 0).then_some((pivot, to.0, to.1));
    let f = b.check(&r, &a, [from, to].into_iter(), rec);
    assert_eq!(f.exact.map(|e| e.0), Some(0), "{f:?}");
    let skew = mul_u64_u32_shr(1_000_000, 40, from.1);
    assert!(
        f.skew >= skew && f.skew <= skew + 2,
        "skew {} for {skew}",
        f.skew
    );
    // Without the switch counted, the same read is torn.
    let mut a0 = a;
    a0.switched = 0;
    assert!(b.check(&r, &a0, [from, to].into_iter(), rec).torn());
}

#[test]
fn a_target_read_is_checked_for_time_only() {
    let b = Base::new();
    assert_eq!(b.check_time(100, 100, 100), Default::default());
    b.settle_time(1_000, 1_000, 1_000, true);
    let f = b.check_time(990, 2_000, 2_000);
    assert_eq!(f.backwards, Some(1_000));
    assert_eq!(f.exact, None);
    let f = b.check_time(1_000 + 100_000, 1_000 + 10_000_000, 1_000 + 10_000_000);
    assert!(f.reference.is_some());
}

#[test]
fn the_switch_log_keeps_the_last_switches_pivots() {
    use nmiclock_core::clock::ClockData;
    use nmiclock_core::read_check::{SwitchLog, SWITCH_RING};
    let log = SwitchLog::new();
    assert_eq!((log.started(), log.finished(), log.get(0)), (0, 0, None));
    let n = SWITCH_RING as u64 + 3;
    for i in 0..n {
        log.record(&ClockData {
            epoch_cyc: 1_000 + i,
            mult: 7 + i as u32,
            shift: 3,
            ..ClockData::default()
        });
        assert_eq!(log.started(), i + 1);
        assert_eq!(log.get(i), Some((1_000 + i, 7 + i as u32, 3)));
        log.finish();
    }
    assert_eq!(log.finished(), n);
    // The oldest three are overwritten, the next one not yet recorded.
    assert_eq!(log.get(2), None);
    assert_eq!(log.get(3), Some((1_003, 10, 3)));
    assert_eq!(log.get(n), None);
}
