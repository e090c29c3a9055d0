// SPDX-License-Identifier: GPL-2.0

//! The choices a setting can make, one enum each, declared once: the
//! variants, in the order of the setting's values, with their names.
//!
//! A leaf module: it imports only the kernel-independent core and the
//! architecture's counter pair (for names those already declare), nothing
//! that imports the settings. The settings table takes each choice's
//! names from here ([`Choice::NAMES`]) and gives its callers the enum
//! ([`crate::settings::choice`]), so that no caller decodes a number and
//! reordering a declaration here reorders the names and the values
//! together: behaviour cannot change with it.
//!
//! A module whose types carry a name of their own (the clock protections,
//! the acct strategies, the interrupt sources) checks at build time that it
//! is the one declared here.

/// One choice a setting makes: its variants in the order of the setting's
/// values, and their names.
pub(crate) trait Choice: Copy + PartialEq + 'static {
    /// Every variant, in value order; the first is the setting's default
    /// unless the table says otherwise.
    const ALL: &'static [Self];
    /// Their names, in the same order.
    const NAMES: &'static [&'static str];
    /// The first variant (what a stored value out of range reads as).
    const FIRST: Self;

    /// Its position in [`Choice::ALL`]: how the setting stores it.
    fn index(self) -> usize {
        Self::ALL.iter().position(|v| *v == self).unwrap_or(0)
    }

    /// The variant at `index` in [`Choice::ALL`], if any.
    fn from_index(index: usize) -> Option<Self> {
        Self::ALL.get(index).copied()
    }

    /// Its name.
    fn name(self) -> &'static str {
        Self::NAMES.get(self.index()).copied().unwrap_or("?")
    }
}

/// `until=coverage`: a run without anomaly goes on past `duration_s` until
/// it has met its window hits, up to this many times `duration_s`: enough
/// for a source whose NMIs seldom land in a window (an emulated PMU meets
/// them a few times a second) to meet 100 a second. A macro, so that the
/// texts that name it (the setting's help, the End of test reason) are
/// built from it with `concat!`.
macro_rules! coverage_cap {
    () => {
        30
    };
}
pub(crate) use coverage_cap;

/// Whether two strings are equal, in const context (for the build-time
/// checks of names declared twice).
pub(crate) const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether two lists of names are equal, in const context.
pub(crate) const fn same_names(a: &[&str], b: &[&str]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !same(a[i], b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// Declares each choice: the enum, its [`Choice`] table, and a `const fn
/// name` for build-time checks.
macro_rules! choices {
    ($($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $var:ident = $name:expr,)* })*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        pub(crate) enum $ty {
            $($(#[$vdoc])* $var,)*
        }

        impl Choice for $ty {
            const ALL: &'static [Self] = &[$(Self::$var),*];
            const NAMES: &'static [&'static str] = &[$($name),*];
            const FIRST: Self = [$(Self::$var),*][0];
        }

        impl $ty {
            /// Its name, in const context.
            #[allow(dead_code)]
            pub(crate) const fn const_name(self) -> &'static str {
                match self {
                    $(Self::$var => $name,)*
                }
            }
        }
    )*};
}

choices! {
    /// Setting `clock`: the read-side protection of nmiclock's clock.
    Protection {
        /// The seqcount latch: two copies.
        Latch = <crate::clock::Latch as crate::clock::Protection>::NAME,
        /// One copy and a classic sequence count.
        Seqcount = <crate::clock::Seqcount as crate::clock::Protection>::NAME,
        /// One copy, nothing.
        Unprotected = <crate::clock::Unprotected as crate::clock::Protection>::NAME,
    }

    /// Setting `counter`: this architecture's counter read, ordered or not.
    CounterRead {
        /// Ordered like a load (`lfence; rdtsc`, `isb; mrs`).
        Ordered = <crate::arch::Ordered as crate::counter::Counter>::NAME,
        /// The bare read, which may run early.
        Bare = <crate::arch::Bare as crate::counter::Counter>::NAME,
    }

    /// Setting `acct`: the acct integrals update.
    Acct {
        /// Lock-free, compare-and-exchange with a signed delta.
        Cmpxchg = "cmpxchg",
        /// Interrupts off around the update.
        IrqSave = "irqsave",
        /// Nothing: as before the fix.
        Racy = "racy",
    }

    /// Setting `nmi_source`: what interrupts the stress run's CPUs.
    NmiSource {
        /// `perf_hw` where there is a PMU, else `ipi`.
        Auto = "auto",
        /// CPU-cycle counter overflows (NMI).
        PerfHw = "perf_hw",
        /// cpu-clock software event overflows (hard IRQ).
        PerfSw = "perf_sw",
        /// NMI IPIs.
        Ipi = "ipi",
    }

    /// Setting `until`: when a stress run ends.
    Until {
        /// After `duration_s`.
        Duration = "duration",
        /// At the first anomaly, or once the window hits are met.
        Verdict = "verdict",
        /// At an anomaly, else after `duration_s` once the hits are met.
        Coverage = "coverage",
    }

    /// Setting `disturb`: what the stress run's writers do besides moving
    /// the epoch.
    Disturb {
        /// Nothing.
        None = "none",
        /// Switch between two conversions of one rate now and then.
        Conversion = "conversion",
        /// Run and pause by turns.
        Stutter = "stutter",
    }

    /// Setting `wake`: how the `wake` activity's waiters wait.
    Wake {
        /// Mark the task sleeping, re-check, sleep.
        Sleep = "sleep",
        /// Check, then sleep a tick: the lost wake-up.
        Racy = "racy",
        /// Poll `poll_us`, then sleep.
        Poll = "poll",
    }
}
