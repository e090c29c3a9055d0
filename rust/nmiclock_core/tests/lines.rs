// SPDX-License-Identifier: GPL-2.0

//! Host tests of `split_at_field()`: a line that fits stays whole; one that
//! does not is cut before a field, each piece within the room; the pieces
//! put back together are the line; a field longer than the room still
//! makes progress.

use nmiclock_core::lines::split_at_field;

fn pieces(s: &str, room: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let (head, tail) = split_at_field(rest, room);
        assert!(!head.is_empty(), "no progress on {rest:?}");
        out.push(head);
        rest = tail;
    }
    out
}

#[test]
fn a_line_that_fits_stays_whole() {
    assert_eq!(split_at_field(" a=1 b=2", 8), (" a=1 b=2", ""));
    assert_eq!(split_at_field("", 8), ("", ""));
}

#[test]
fn a_long_line_is_cut_before_a_field() {
    assert_eq!(split_at_field(" a=1 b=2 c=3", 9), (" a=1 b=2", " c=3"));
    assert_eq!(split_at_field(" a=1 b=2 c=3", 8), (" a=1 b=2", " c=3"));
    assert_eq!(split_at_field(" a=1 b=2 c=3", 7), (" a=1", " b=2 c=3"));
}

#[test]
fn every_piece_fits_and_together_they_are_the_line() {
    let line: String = (0..300).map(|i| format!(" key_{i}={}", i * 7919)).collect();
    for room in [20, 64, 100, 977, 2000] {
        let p = pieces(&line, room);
        assert_eq!(p.concat(), line, "room {room}");
        for piece in &p {
            assert!(
                piece.len() <= room,
                "room {room}: a piece of {}",
                piece.len()
            );
            assert!(
                piece.starts_with(' '),
                "room {room}: {piece:?} does not start at a field"
            );
        }
        if line.len() > room {
            assert!(p.len() > 1);
        }
    }
}

#[test]
fn a_field_longer_than_the_room_still_makes_progress() {
    let p = pieces(" abcdefghij k=1", 4);
    assert_eq!(p.concat(), " abcdefghij k=1");
    assert!(p.iter().all(|s| s.len() <= 4));
}
