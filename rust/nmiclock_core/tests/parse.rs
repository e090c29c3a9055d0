// SPDX-License-Identifier: GPL-2.0

//! Host tests of `parse`: what a debugfs write accepts and refuses.

use nmiclock_core::parse::{parse_u32, strip_newline};

#[test]
fn accepts_plain_decimal_with_or_without_one_newline() {
    assert_eq!(parse_u32(b"0"), Some(0));
    assert_eq!(parse_u32(b"5000\n"), Some(5000));
    assert_eq!(parse_u32(b"007"), Some(7));
    assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
}

#[test]
fn refuses_everything_else() {
    for bad in [
        &b""[..],
        b"\n",
        b"\n\n",
        b"5000\n\n",
        b"-1",
        b"+1",
        b" 1",
        b"1 ",
        b"1\t",
        b"1\r\n",
        b"0x10",
        b"1e3",
        b"12a",
        b"4294967296",
        b"99999999999999999999",
        b"1\0",
        b"\x001",
        b"\xff",
    ] {
        assert_eq!(parse_u32(bad), None, "{:?}", bad);
    }
}

#[test]
fn strip_newline_strips_exactly_one() {
    assert_eq!(strip_newline(b"a\n"), b"a");
    assert_eq!(strip_newline(b"a\n\n"), b"a\n");
    assert_eq!(strip_newline(b"a"), b"a");
    assert_eq!(strip_newline(b""), b"");
}
