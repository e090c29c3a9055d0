// SPDX-License-Identifier: GPL-2.0

//! Per-CPU counters declared once ([`counters!`]): each activity's table
//! gives every count's field, the key its file shows it under, how CPUs
//! combine it and where it is shown; the macro generates the per-CPU
//! struct, its reset, the totals over CPUs and the entries its files
//! print ([`write_totals`], [`write_cpu_line`]).
//!
//! A leaf: it names no other module of the crate.

use core::fmt::{self, Write};

/// Where a count is shown and what it means: a set of these bits, given
/// with each count in its table, from which every file and line that
/// shows counts takes them.
pub(crate) mod show {
    /// On each CPU's line of its activity's own file (`acct`, `check`,
    /// `wake`); that file's totals show every count.
    pub(crate) const FILE_CPU: u8 = 1 << 0;
    /// In `stats`.
    pub(crate) const STATS: u8 = 1 << 1;
    /// On each CPU's line of `percpu`.
    pub(crate) const PERCPU: u8 = 1 << 2;
    /// In the End of test line of a run of nmiclock's clock, of a run of
    /// another target, of every run.
    pub(crate) const EOT_NMICLOCK: u8 = 1 << 3;
    pub(crate) const EOT_TARGET: u8 = 1 << 4;
    pub(crate) const EOT: u8 = EOT_NMICLOCK | EOT_TARGET;
    /// An anomaly: any count of it makes a stress run a `FAILURE`.
    pub(crate) const ANOMALY: u8 = 1 << 5;

    /// Whether `show` puts a count in the End of test line of a run of
    /// nmiclock's clock (`nmiclock`) or of another target.
    pub(crate) const fn in_end_of_test(show: u8, nmiclock: bool) -> bool {
        show & if nmiclock { EOT_NMICLOCK } else { EOT_TARGET } != 0
    }
}

/// One count as its table declares it, with its value.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    /// Its key in its activity's own file.
    pub(crate) key: &'static str,
    /// Its key in `stats`, `percpu` and the End of test line: the key
    /// after the table's prefix.
    pub(crate) stress_key: &'static str,
    /// Its value.
    pub(crate) value: u64,
    /// Where it is shown ([`show`]).
    pub(crate) show: u8,
}

impl Entry {
    /// Whether it is shown where `bits` says.
    pub(crate) fn is(&self, bits: u8) -> bool {
        self.show & bits != 0
    }
}

/// Declares a per-CPU struct of counts and its totals, each count once,
/// as `field: "key", sum|max, SHOW;` (`SHOW` a set of [`show`] bits), in
/// a table with an optional prefix for the keys outside its own file
/// (`prefix "acct_"`), and after the counts, optionally, the per-CPU
/// state that is not a count, with its initial values.
///
/// It generates the struct (the counts as `AtomicU64`s), its `Default`,
/// `counts()` (every count, in table order), `reset_counts()`,
/// `entries()` (each count's [`Entry`], in table order), and the totals
/// struct: one `u64` per count, `of()` combining CPUs (summed, wrapping,
/// or the largest), its own `entries()` and `anomalies()` (the sum of the
/// counts marked [`show::ANOMALY`]).
macro_rules! counters {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident, totals $tvis:vis $totals:ident, prefix $prefix:literal {
            $($(#[$doc:meta])* $field:ident: $key:literal, $how:ident, $show:expr;)*
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

            /// Each count, in table order.
            pub(crate) fn entries(&self) -> [$crate::counters::Entry; [$($key),*].len()] {
                [$($crate::counters::Entry {
                    key: $key,
                    stress_key: concat!($prefix, $key),
                    value: self.$field.load(::core::sync::atomic::Ordering::Relaxed),
                    show: $show,
                }),*]
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

            /// Each count, in table order.
            pub(crate) fn entries(&self) -> [$crate::counters::Entry; [$($key),*].len()] {
                [$($crate::counters::Entry {
                    key: $key,
                    stress_key: concat!($prefix, $key),
                    value: self.$field,
                    show: $show,
                }),*]
            }

            /// The sum of the counts that are anomalies.
            pub(crate) fn anomalies(&self) -> u64 {
                self.entries()
                    .iter()
                    .filter(|e| e.is($crate::counters::show::ANOMALY))
                    .fold(0u64, |a, e| a.wrapping_add(e.value))
            }
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident, totals $tvis:vis $totals:ident { $($body:tt)* }
        $($rest:tt)*
    ) => {
        counters! {
            $(#[$attr])*
            $vis struct $name, totals $tvis $totals, prefix "" { $($body)* }
            $($rest)*
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

/// Writes `key: value`, a line each, for the totals' `entries` (an
/// activity's own file: every count).
pub(crate) fn write_totals(w: &mut impl Write, entries: &[Entry]) -> fmt::Result {
    entries
        .iter()
        .try_for_each(|e| writeln!(w, "{}: {}", e.key, e.value))
}

/// Writes CPU `cpu`'s line, `cpuN: key=value ...`, of the per-CPU
/// `entries` shown on it ([`show::FILE_CPU`]).
pub(crate) fn write_cpu_line(w: &mut impl Write, cpu: u32, entries: &[Entry]) -> fmt::Result {
    write!(w, "cpu{cpu}:")?;
    for e in entries.iter().filter(|e| e.is(show::FILE_CPU)) {
        write!(w, " {}={}", e.key, e.value)?;
    }
    writeln!(w)
}

/// Writes `key: value`, a line each, of the `entries` shown in `stats`,
/// under their `stats` keys.
pub(crate) fn write_stats(w: &mut impl Write, entries: &[Entry]) -> fmt::Result {
    entries
        .iter()
        .filter(|e| e.is(show::STATS))
        .try_for_each(|e| writeln!(w, "{}: {}", e.stress_key, e.value))
}

/// Writes ` key=value` for each of the per-CPU `entries` shown in
/// `percpu`, under their `stats` keys.
pub(crate) fn write_percpu(w: &mut impl Write, entries: &[Entry]) -> fmt::Result {
    entries
        .iter()
        .filter(|e| e.is(show::PERCPU))
        .try_for_each(|e| write!(w, " {}={}", e.stress_key, e.value))
}
