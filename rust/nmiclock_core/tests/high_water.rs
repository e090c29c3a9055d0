// SPDX-License-Identifier: GPL-2.0

//! Host tests of [`HighWater`]: the mark rises within a generation, moves
//! to a new one only for a raiser whose generation is current, is never
//! seen under a generation it was not raised in, and caps its value.

use nmiclock_core::high_water::{HighWater, GEN_BITS, VALUE_MAX};

#[test]
fn rises_within_a_generation() {
    let hw = HighWater::new();
    hw.reset(7);
    assert_eq!(hw.load().under(7), Some(0));
    hw.raise(7, 50, || true);
    hw.raise(7, 40, || true);
    assert_eq!(hw.load().under(7), Some(50), "a lower value leaves it");
    hw.raise(7, 60, || false);
    assert_eq!(
        hw.load().under(7),
        Some(60),
        "within its generation a raiser needs no check"
    );
}

#[test]
fn a_passed_generation_changes_nothing() {
    let hw = HighWater::new();
    hw.reset(3);
    hw.raise(4, 10, || true);
    assert_eq!(
        hw.load().under(4),
        Some(10),
        "the current generation takes over"
    );
    assert_eq!(
        hw.load().under(3),
        None,
        "and the old one's reads compare with nothing"
    );
    hw.raise(3, 1_000, || false);
    assert_eq!(
        hw.load().under(4),
        Some(10),
        "a raiser whose generation passed changes nothing"
    );
    assert_eq!(hw.load().under(3), None);
}

#[test]
fn caps_its_value() {
    let hw = HighWater::new();
    hw.reset(1);
    hw.raise(1, u64::MAX, || true);
    assert_eq!(hw.load().under(1), Some(VALUE_MAX));
}

#[test]
fn the_tag_repeats_only_after_every_tag() {
    let hw = HighWater::new();
    hw.reset(5);
    hw.raise(5, 9, || true);
    assert_eq!(hw.load().under(5 + 1), None);
    assert_eq!(
        hw.load().under(5 + (1 << GEN_BITS)),
        Some(9),
        "documented: tags wrap"
    );
}
