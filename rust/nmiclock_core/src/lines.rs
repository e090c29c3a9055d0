// SPDX-License-Identifier: GPL-2.0

//! Splitting a long log line into records that each fit: the End of test
//! line (every setting and count as ` key=value`) can outgrow one printk
//! record (1024 bytes); it is then logged as one record and continuation
//! records, each cut at a field boundary so no `key=value` is split.
//!
//! Kernel-independent: compiled into nmiclock.ko and into the host crate
//! from this file; `tests/lines.rs` checks the cuts.

/// Splits `s` (fields each starting with a space) into the longest head
/// of at most `room` bytes that ends before a field's space, and the rest
/// (starting with that space, or empty when `s` fits). A field longer than
/// `room` by itself is cut at `room` (at a character boundary), so that
/// every call makes progress while `room` is not 0.
pub fn split_at_field(s: &str, room: usize) -> (&str, &str) {
    if s.len() <= room {
        return (s, "");
    }
    let head = s.as_bytes().get(..=room).unwrap_or(s.as_bytes());
    let cut = match head.iter().rposition(|&b| b == b' ') {
        Some(0) | None => {
            let mut at = room.max(1);
            while at < s.len() && !s.is_char_boundary(at) {
                at += 1;
            }
            at
        }
        Some(i) => i,
    };
    // No panicking slice: a cut past the end, or not at a character
    // boundary (which the search above rules out), keeps the whole line.
    match (s.get(..cut), s.get(cut..)) {
        (Some(a), Some(b)) => (a, b),
        _ => (s, ""),
    }
}
