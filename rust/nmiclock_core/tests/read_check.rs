// SPDX-License-Identifier: GPL-2.0

//! The per-read checks (`src/read_check.rs`): a base, the exact bound and
//! a tear outside it, a torn read that is no base, backwards, the
//! reference, overruns, a late switch's allowance (1 ns per switch, none
//! per epoch update), a switch whose writer is held up between its publish
//! and its count, no reference check across a clocksource switch or on
//! another counter, and the time-only checks of targets.

use nmiclock_core::clock::Reading;
use nmiclock_core::cyc_ns::{calc_mult_shift, mul_u64_u32_shr, NSEC_PER_MSEC};
use nmiclock_core::read_check::{Around, Base, CS_OTHER_COUNTER, REF_TOLERANCE_NS};

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
    assert_eq!(b.check_time(100, 100, 100, 0), Default::default());
    b.settle_time(1_000, 1_000, 1_000, 0, true);
    let f = b.check_time(990, 2_000, 2_000, 0);
    assert_eq!(f.backwards, Some(1_000));
    assert_eq!(f.exact, None);
    let f = b.check_time(1_000 + 100_000, 1_000 + 10_000_000, 1_000 + 10_000_000, 0);
    assert!(f.reference.is_some());
}

#[test]
fn no_reference_check_spans_a_clocksource_switch() {
    // The reference stood still for 96 us of a switch: the clock's read
    // after it is that far ahead of the reference's elapsed time.
    let b = Base::new();
    b.settle_time(1_000, 1_000, 1_000, 2, true);
    let ahead = (1_000 + 1_000_000, 1_000 + 1_000_000 - 96_000);
    let f = b.check_time(ahead.0, ahead.1, ahead.1, 2);
    assert!(f.reference.is_some(), "under one count the step is caught");
    for cs in [3, 4] {
        let f = b.check_time(ahead.0, ahead.1, ahead.1, cs);
        assert_eq!(f.reference, None, "count {cs}: a switch ran or runs");
    }
    // The read across the switch is the new base: the next is checked.
    b.settle_time(ahead.0, ahead.1, ahead.1, 4, true);
    let f = b.check_time(ahead.0 + 1_000, ahead.1 + 1_000, ahead.1 + 1_000, 4);
    assert_eq!(f.reference, None);
    let f = b.check_time(ahead.0 + 200_000, ahead.1 + 1_000, ahead.1 + 1_000, 4);
    assert!(f.reference.is_some());
    // So is a read of nmiclock's clock (`Base::check`).
    let p = pair();
    let b = Base::new();
    let first = at(1_000_000, p);
    b.settle(&first, &around(&first), true);
    let next = at(2_000_000, p);
    let mut a = around(&next);
    a.ref_lo = next.ns - 96_000;
    a.ref_hi = a.ref_lo;
    assert!(b
        .check(&next, &a, [p].into_iter(), no_switch)
        .reference
        .is_some());
    a.cs_seq = 1;
    assert_eq!(
        b.check(&next, &a, [p].into_iter(), no_switch).reference,
        None
    );
}

#[test]
fn no_reference_check_on_another_counter() {
    // The reference on the HPET, the clock on the TSC, the two 3 % apart
    // (QEMU TCG): 30 us in a millisecond, off the reference by far.
    let on_other = 2 | CS_OTHER_COUNTER;
    let b = Base::new();
    b.settle_time(1_000, 1_000, 1_000, on_other, true);
    let (ns, r) = (1_000 + 1_030_000, 1_000 + 1_000_000);
    assert_eq!(b.check_time(ns, r, r, on_other).reference, None);
    // Step back checks go on: only the reference is not judged.
    assert_eq!(b.check_time(900, r, r, on_other).backwards, Some(1_000));
    // Back on the clock's counter (the count moved with the switch): the
    // first read re-bases, the next is judged again.
    b.settle_time(ns, r, r, 4, true);
    let f = b.check_time(ns + 1_030_000, r + 1_000_000, r + 1_000_000, 4);
    assert!(f.reference.is_some());
    // The same for nmiclock's clock (`Base::check`).
    let p = pair();
    let b = Base::new();
    let first = at(1_000_000, p);
    let mut a = around(&first);
    a.cs_seq = on_other;
    b.settle(&first, &a, true);
    let next = at(2_000_000, p);
    let mut a = around(&next);
    a.ref_lo = next.ns - 30_000;
    a.ref_hi = a.ref_lo;
    a.cs_seq = on_other;
    assert_eq!(
        b.check(&next, &a, [p].into_iter(), no_switch).reference,
        None
    );
    // On the clock's own counter, under one count, it is caught.
    let b = Base::new();
    let mut a0 = around(&first);
    a0.cs_seq = 2;
    b.settle(&first, &a0, true);
    a.cs_seq = 2;
    assert!(b
        .check(&next, &a, [p].into_iter(), no_switch)
        .reference
        .is_some());
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

/// A read at counter value `cyc` whose time since a base at `base_cyc`
/// (taken before any switch) is `early` ns short of the conversion of the
/// cycles between them, with `switched` switches recorded by its end: its
/// exact error.
fn early_read_error(base_cyc: u64, cyc: u64, early: u64, switched: u64) -> Option<i64> {
    let p = pair();
    let q = nmiclock_core::cyc_ns::same_rate_pair(p.0, p.1);
    let b = Base::new();
    let base = at(base_cyc, p);
    b.settle(&base, &around(&base), true);
    let mut r = at(cyc, p);
    r.ns = base.ns + mul_u64_u32_shr(cyc - base_cyc, p.0, p.1) - early;
    let mut a = around(&r);
    a.switched = switched;
    // Every switch pivoted before the base: none skews the bound.
    let rec = |_: u64| Some((base_cyc / 2, q.0, q.1));
    b.check(&r, &a, [p, q].into_iter(), rec).exact.map(|e| e.0)
}

#[test]
fn the_bound_allows_a_nanosecond_per_switch_and_none_per_epoch_update() {
    // Both conversions of the rate give the same time for these 1,000
    // cycles, so the bound's low end is that time less its slack. A thousand
    // epoch updates between the reads (which Around no longer counts) and
    // one switch allow 1 ns: a read early by 2 is torn, by 1 it is not.
    let (base, cyc) = (1_000_000, 1_001_000);
    assert_eq!(
        early_read_error(base, cyc, 2, 1),
        Some(-1),
        "early by 2 after one switch"
    );
    assert_eq!(early_read_error(base, cyc, 1, 1), Some(0));
    // A thousand switches allow a thousand, and not one more.
    assert_eq!(early_read_error(base, cyc, 1_000, 1_000), Some(0));
    assert_eq!(early_read_error(base, cyc, 1_001, 1_000), Some(-1));
    // No switch: the one line's floor, exactly.
    assert_eq!(early_read_error(base, cyc, 1, 0), Some(-1));
}

mod held_up_switch {
    //! A conversion switch whose writer is held up (preempted, or NMIs)
    //! after its publish, before its switch counts as finished, during a
    //! real rate change by a second switch: a base read on the second
    //! switch's old line past its pivot must be allowed that switch's skew.

    use super::around;
    use nmiclock_core::clock::{Clock, ClockData, ClockSource, Latch, Reading, Writer};
    use nmiclock_core::counter::Counter;
    use nmiclock_core::cyc_ns::{calc_mult_shift, NSEC_PER_MSEC};
    use nmiclock_core::read_check::{Around, Base, SwitchLog};
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Fake(&'static AtomicU64);
    impl Counter for Fake {
        const NAME: &'static str = "fake";
        fn read(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    fn no_time() -> u64 {
        0
    }

    type C = Clock<Latch, Fake, fn() -> u64>;

    /// The second switch's writer: records its pivot, and in its first
    /// copy's pause (readers still on the old data) lets the counter run
    /// on `late` cycles past the pivot and takes the base read there,
    /// with the switch counts a reader would take around it.
    struct Second<'a> {
        clock: &'a C,
        log: &'a SwitchLog,
        now: &'static AtomicU64,
        late: u64,
        base: Option<(Reading, Around)>,
    }

    impl Writer for Second<'_> {
        fn switching(&mut self, new: &ClockData) {
            self.log.record(new);
        }
        fn pause(&mut self) {
            if self.base.is_none() {
                let pivot = self.log.get(self.log.started() - 1).unwrap().0;
                self.now.store(pivot + self.late, Ordering::Relaxed);
                let switches = self.log.finished();
                let r = self.clock.read();
                let mut a = around(&r);
                a.switches = switches;
                a.switched = self.log.started();
                self.base = Some((r, a));
            }
        }
        fn switched(&mut self) {
            self.log.finish();
        }
    }

    /// The first switch's writer, held up in `hold` after its publish:
    /// with `in_exclusion` its switch counts as finished in
    /// [`Writer::switched`], still under the writer exclusion (as the
    /// module's and the host torture's writers do); without, after
    /// `recalibrate` returns (as they did before).
    struct First<'a> {
        log: &'a SwitchLog,
        in_exclusion: bool,
        hold: Option<Box<dyn FnOnce() + 'a>>,
    }

    impl Writer for First<'_> {
        fn switching(&mut self, new: &ClockData) {
            self.log.record(new);
        }
        fn switched(&mut self) {
            if self.in_exclusion {
                if let Some(h) = self.hold.take() {
                    h();
                }
                self.log.finish();
            }
        }
    }

    /// The base's check of a read on the new line well past the second
    /// switch: whether it is torn, with the log's records as they are.
    fn run(in_exclusion: bool, now: &'static AtomicU64) -> (bool, bool) {
        // The kernel's refined TSC calibration: 2300.009 MHz, then 2299.968.
        let conv = |khz| {
            let ms = calc_mult_shift(khz, NSEC_PER_MSEC, 600_000).unwrap();
            (ms.mult, ms.shift)
        };
        let (c0, c1) = (conv(2_300_009), conv(2_299_968));
        let same = nmiclock_core::cyc_ns::same_rate_pair(c0.0, c0.1);
        let clock: C = Clock::new(Latch::new(), Fake(now), no_time as fn() -> u64);
        let log = SwitchLog::new();
        now.store(1_000, Ordering::Relaxed);
        assert!(clock.start(0, c0.0, c0.1, u64::MAX));
        now.store(5_000_000_000, Ordering::Relaxed);
        let mut second = Second {
            clock: &clock,
            log: &log,
            now,
            late: 618_524,
            base: None,
        };
        let mut second_ran = false;
        {
            let mut hold = || {
                // Held up after the first switch's publish: the second
                // switch (the real rate change) tries to run meanwhile.
                now.fetch_add(1_000_000, Ordering::Relaxed);
                second_ran = clock.recalibrate(c1.0, c1.1, &mut second);
            };
            let mut first = First {
                log: &log,
                in_exclusion,
                hold: None,
            };
            if in_exclusion {
                first.hold = Some(Box::new(&mut hold));
                assert!(clock.recalibrate(same.0, same.1, &mut first));
            } else {
                assert!(clock.recalibrate(same.0, same.1, &mut first));
                hold();
                log.finish();
            }
        }
        if !second_ran {
            // Refused while the first held the exclusion: it runs now.
            assert!(
                in_exclusion,
                "the second switch ran only after the first finished"
            );
            assert!(clock.recalibrate(c1.0, c1.1, &mut second));
        }
        let (base_read, base_around) = second.base.unwrap();
        assert_eq!(base_read.mult, same.0, "the base was read on the old line");
        let b = Base::new();
        b.settle(&base_read, &base_around, true);
        now.fetch_add(167_938, Ordering::Relaxed);
        let r = clock.read();
        assert_eq!(r.mult, c1.0);
        let mut a = around(&r);
        a.switches = log.finished();
        a.switched = log.started();
        let conversions = [c0, same, c1];
        let f = b.check(&r, &a, conversions.into_iter(), |i| log.get(i));
        assert!(f.exact.is_some(), "{f:?}");
        (second_ran, f.torn())
    }

    static N1: AtomicU64 = AtomicU64::new(0);
    static N2: AtomicU64 = AtomicU64::new(0);

    #[test]
    fn finished_inside_the_exclusion_the_skew_is_allowed() {
        let (second_ran, torn) = run(true, &N1);
        assert!(
            !second_ran,
            "the second switch ran while the first held the exclusion"
        );
        assert!(!torn, "a good read was called torn");
    }

    /// The order the writers had before (the count after the exclusion):
    /// the held-up first switch leaves `finished` behind, the base takes
    /// the first switch (same rate: no skew) as the one it may have
    /// crossed, and the good read is called torn. Kept so that the test
    /// above is known to see the difference.
    #[test]
    fn finished_after_the_exclusion_a_good_read_is_called_torn() {
        let (second_ran, torn) = run(false, &N2);
        assert!(second_ran);
        assert!(
            torn,
            "the old order no longer shows the false tear: the test above proves nothing"
        );
    }
}
