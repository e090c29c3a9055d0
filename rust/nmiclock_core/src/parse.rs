// SPDX-License-Identifier: GPL-2.0

//! Strict parsing of what users write to debugfs files.
//!
//! A write is one value and at most one trailing newline (what `echo`
//! adds). Anything else (empty, signs, spaces, other bytes, NUL, overflow)
//! is refused, so a typo can never half-apply.

/// Strips the one trailing newline `echo` adds, if there is one.
pub fn strip_newline(bytes: &[u8]) -> &[u8] {
    match bytes.split_last() {
        Some((b'\n', rest)) => rest,
        _ => bytes,
    }
}

/// Parses a decimal `u32`: digits only (after [`strip_newline`]), at least
/// one, no overflow.
pub fn parse_u32(bytes: &[u8]) -> Option<u32> {
    let digits = strip_newline(bytes);
    if digits.is_empty() {
        return None;
    }
    let mut v: u32 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u32::from(b - b'0'))?;
    }
    Some(v)
}
