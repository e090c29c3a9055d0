// SPDX-License-Identifier: GPL-2.0

//! Strict parsing of what users write to debugfs files.
//!
//! A write is one value and at most one trailing newline (what `echo`
//! adds). Anything else (empty, signs, spaces, other bytes, NUL, overflow)
//! is refused, so a typo can never half-apply.
//!
//! Module parameters are parsed here too: `rust/settings.rs` takes every
//! parameter as a string and reads its numbers with [`parse_u32`], as it
//! does for `config` writes, so load and `config` accept the same values.

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

/// One key a `key=value` write accepts, with the range of its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// The key, as written.
    pub name: &'static str,
    /// Smallest value accepted.
    pub min: u32,
    /// Largest value accepted.
    pub max: u32,
}

/// Parses `key=N` tokens separated by single spaces, with at most one
/// trailing newline, into `values` (`values[i]` for `keys[i]`; keys not
/// written keep what `values` held). Each key may appear once; an unknown
/// key, a value out of its range, a repeated key or any other byte is
/// refused whole: `Err` carries the offending token (or the whole input when
/// it is empty), and `values` is left as it was.
pub fn parse_kv<'a, const N: usize>(
    input: &'a [u8],
    keys: &[Key; N],
    values: &mut [u32; N],
) -> Result<(), &'a [u8]> {
    let line = strip_newline(input);
    if line.is_empty() {
        return Err(line);
    }
    let mut out = *values;
    let mut seen = [false; N];
    for token in line.split(|&b| b == b' ') {
        let mut kv = token.splitn(2, |&b| b == b'=');
        let (Some(name), Some(value)) = (kv.next(), kv.next()) else {
            return Err(token);
        };
        let Some(i) = keys.iter().position(|k| k.name.as_bytes() == name) else {
            return Err(token);
        };
        let (Some(k), Some(slot), Some(once)) = (keys.get(i), out.get_mut(i), seen.get_mut(i))
        else {
            return Err(token);
        };
        match parse_u32(value) {
            // `value` has no newline of its own: `strip_newline` took the
            // only one allowed, at the end of the line.
            Some(v) if (k.min..=k.max).contains(&v) && !value.ends_with(b"\n") && !*once => {
                *once = true;
                *slot = v;
            }
            _ => return Err(token),
        }
    }
    *values = out;
    Ok(())
}
