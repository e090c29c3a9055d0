// SPDX-License-Identifier: GPL-2.0

//! [`FmtBuf`]: text formatted into a fixed buffer on the stack, for a log
//! line (printk takes one string) or a padded table cell (`{:>10}` pads a
//! `Display` that writes in pieces only if it is formatted as one string).
//! [`kernel_display!`]: one of our `Display` types as a `pr_*!` argument.

use core::fmt::{self, Write};

/// Up to `N` bytes of formatted text; what does not fit is cut off (the
/// write that overflows fails, so `write!` stops there).
pub(crate) struct FmtBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> FmtBuf<N> {
    /// An empty buffer.
    pub(crate) fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    /// `args` formatted into a new buffer.
    pub(crate) fn from_fmt(args: fmt::Arguments<'_>) -> Self {
        let mut b = Self::new();
        let _ = b.write_fmt(args);
        b
    }

    /// The text written so far.
    pub(crate) fn as_str(&self) -> &str {
        core::str::from_utf8(self.buf.get(..self.len).unwrap_or(&[])).unwrap_or("")
    }
}

impl<const N: usize> Write for FmtBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `$e`, a `core::fmt::Display`, as an argument of `pr_*!` on every
/// release: 7.x's `pr_*!` format through `kernel::fmt`, whose `Display`
/// our types do not implement, 6.12's through `core::fmt`. Both
/// implement theirs for `core::fmt::Arguments`.
macro_rules! kernel_display {
    ($e:expr) => {
        format_args!("{}", $e)
    };
}
pub(crate) use kernel_display;

/// The text, padded and aligned as the format asks.
impl<const N: usize> fmt::Display for FmtBuf<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
