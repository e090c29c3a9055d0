// SPDX-License-Identifier: GPL-2.0

//! Host tests of `parse`: what a debugfs write accepts and refuses.

use nmiclock_core::parse::{parse_kv, parse_u32, strip_newline, Key};

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

const KEYS: [Key; 2] = [
    Key {
        name: "ms",
        min: 1,
        max: 60_000,
    },
    Key {
        name: "windows",
        min: 0,
        max: 1_000_000,
    },
];

#[test]
fn key_value_lists_parse_each_key_once_within_its_range() {
    let mut v = [5, 7];
    assert_eq!(parse_kv(b"ms=100\n", &KEYS, &mut v), Ok(()));
    assert_eq!(v, [100, 7]);
    assert_eq!(parse_kv(b"windows=0 ms=60000", &KEYS, &mut v), Ok(()));
    assert_eq!(v, [60_000, 0]);
    for (bad, token) in [
        (&b""[..], &b""[..]),
        (b"\n", b""),
        (b"ms=0", b"ms=0"),
        (b"ms=60001", b"ms=60001"),
        (b"ms=1 ms=2", b"ms=2"),
        (b"ms=1  windows=2", b""),
        (b"ms=1 bogus=2", b"bogus=2"),
        (b"ms", b"ms"),
        (b"ms=", b"ms="),
        (b"=5", b"=5"),
        (b"ms=1\n\n", b"ms=1\n"),
        (b"ms=1 windows=2\n ", b"windows=2\n"),
        (b"MS=1", b"MS=1"),
    ] {
        let mut v = [5, 7];
        assert_eq!(
            parse_kv(bad, &KEYS, &mut v),
            Err(token),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
        assert_eq!(v, [5, 7], "a refused write changed the values");
    }
}
