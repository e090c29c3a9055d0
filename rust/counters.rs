// SPDX-License-Identifier: GPL-2.0

//! Per-CPU counters declared once ([`counters!`]): each activity's table
//! gives every count's field, the key its file shows it under, how CPUs
//! combine it and where it is shown; the macro generates the per-CPU
//! struct, its reset, the totals over CPUs and the entries its files
//! print ([`write_totals`], [`write_cpu_line`]).
//!
//! A leaf: it names no other module of the crate.

use core::fmt::{self, Write};

/// Where an activity's file shows a count: in its totals and on each
/// CPU's line, or in the totals only.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Totals and per-CPU lines.
    Everywhere,
    /// Totals only.
    Totals,
}

/// Declares a per-CPU struct of counts and its totals (each with its
/// visibility), each count once, as
/// `field: "key", sum|max, Where;` (`Where` a variant of the table's
/// `shown:` enum, such as [`Shown`]), and after the counts, optionally,
/// the per-CPU state that is not a count, with its initial values.
///
/// It generates the struct (the counts as `AtomicU64`s), its `Default`,
/// `counts()` (every count, in table order), `reset_counts()`,
/// `entries()` (key, value and where shown, in table order), and the
/// totals struct: one `u64` per count, `of()` combining CPUs (summed,
/// wrapping, or the largest) and its own `entries()`.
macro_rules! counters {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident, totals $tvis:vis $totals:ident, shown $shown:ident {
            $($(#[$doc:meta])* $field:ident: $key:literal, $how:ident, $where_:ident;)*
        }
        $(state {
            $($(#[$sdoc:meta])* $svis:vis $sfield:ident: $sty:ty = $sinit:expr;)*
        })?
    ) => {
        $(#[$attr])*
        $vis struct $name {
            $($(#[$doc])* pub(crate) $field: ::core::sync::atomic::AtomicU64,)*
            $($($(#[$sdoc])* $svis $sfield: $sty,)*)?
        }

        impl Default for $name {
            fn default() -> Self {
                Self {
                    $($field: ::core::sync::atomic::AtomicU64::new(0),)*
                    $($($sfield: $sinit,)*)?
                }
            }
        }

        #[allow(dead_code)]
        impl $name {
            /// Every count, in table order.
            pub(crate) fn counts(
                &self,
            ) -> [&::core::sync::atomic::AtomicU64; [$(stringify!($field)),*].len()] {
                [$(&self.$field),*]
            }

            /// Zeroes every count (not the state).
            pub(crate) fn reset_counts(&self) {
                for c in self.counts() {
                    c.store(0, ::core::sync::atomic::Ordering::Relaxed);
                }
            }

            /// Each count with its key and where it is shown, in table
            /// order.
            pub(crate) fn entries(&self) -> [(&'static str, u64, $shown); [$($key),*].len()] {
                [$((
                    $key,
                    self.$field.load(::core::sync::atomic::Ordering::Relaxed),
                    $shown::$where_,
                )),*]
            }
        }

        /// The counts, combined over CPUs.
        $tvis struct $totals {
            $($(#[$doc])* pub(crate) $field: u64,)*
        }

        #[allow(dead_code)]
        impl $totals {
            /// The counts of `cpus`, each summed or the largest taken
            /// (as visible as the per-CPU struct).
            $vis fn of<'a, I: Iterator<Item = &'a $name>>(cpus: impl Fn() -> I) -> Self {
                Self {
                    $($field: counters!(
                        @combine $how,
                        cpus().map(|c| c.$field.load(::core::sync::atomic::Ordering::Relaxed))
                    ),)*
                }
            }

            /// Each count with its key and where it is shown, in table
            /// order.
            pub(crate) fn entries(&self) -> [(&'static str, u64, $shown); [$($key),*].len()] {
                [$(($key, self.$field, $shown::$where_)),*]
            }
        }
    };
    (@combine sum, $values:expr) => {
        $values.fold(0u64, |a, v| a.wrapping_add(v))
    };
    (@combine max, $values:expr) => {
        $values.max().unwrap_or(0)
    };
}
pub(crate) use counters;

/// Writes `key: value`, a line each, for the totals' `entries`.
pub(crate) fn write_totals(w: &mut impl Write, entries: &[(&str, u64, Shown)]) -> fmt::Result {
    entries
        .iter()
        .try_for_each(|(key, value, _)| writeln!(w, "{key}: {value}"))
}

/// Writes CPU `cpu`'s line, `cpuN: key=value ...`, of the per-CPU
/// `entries` shown [`Shown::Everywhere`].
pub(crate) fn write_cpu_line(
    w: &mut impl Write,
    cpu: u32,
    entries: &[(&str, u64, Shown)],
) -> fmt::Result {
    write!(w, "cpu{cpu}:")?;
    for (key, value, _) in entries.iter().filter(|e| e.2 == Shown::Everywhere) {
        write!(w, " {key}={value}")?;
    }
    writeln!(w)
}
