// SPDX-License-Identifier: GPL-2.0

//! The settings in force: what the module parameters set at load and what
//! `config` writes change while no run is in progress. One validating
//! setter serves both, so a bad value gets the same `-EINVAL` and the same
//! one-line message either way.
//!
//! | key              | values                                   | default       |
//! |------------------|------------------------------------------|---------------|
//! | `clock`          | `latch`, `seqcount`, `unprotected`       | `latch`       |
//! | `counter`        | `tsc_ordered`, `tsc`                     | `tsc_ordered` |
//! | `counter_bits`   | 16..64                                   | 64            |
//! | `acct`           | `cmpxchg`, `irqsave`, `racy`             | `cmpxchg`     |
//! | `nmi_source`     | `auto`, `perf_hw`, `perf_sw`, `ipi`      | `auto`        |
//! | `period_us`      | 10..1000000                              | 100           |
//! | `update_us`      | 0..1000000                               | 0             |
//! | `tear_window_ns` | 0..1000000                               | 0             |
//! | `duration_s`     | 1..86400                                 | 10            |
//! | `autostart`      | 0, 1                                     | 0             |

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, Ordering};

use kernel::prelude::*;

use crate::parse::parse_u32;

/// What values a setting takes.
enum Kind {
    /// One of these names; the setting holds its index.
    Name(&'static [&'static str]),
    /// A decimal number in `min..=max`.
    Number { min: u32, max: u32 },
}

/// One setting.
struct Setting {
    key: &'static str,
    kind: Kind,
    value: AtomicU32,
}

/// Protections, in the order of `kclock`'s table.
pub(crate) const CLOCKS: &[&str] = &["latch", "seqcount", "unprotected"];
/// Counters, in the order of `kclock`'s table.
pub(crate) const COUNTERS: &[&str] = &["tsc_ordered", "tsc"];
/// acct strategies, in the order of `kacct`'s table.
pub(crate) const ACCTS: &[&str] = &["cmpxchg", "irqsave", "racy"];
/// Interrupt sources of the stress run.
pub(crate) const SOURCES: &[&str] = &["auto", "perf_hw", "perf_sw", "ipi"];

const fn name(key: &'static str, names: &'static [&'static str]) -> Setting {
    Setting {
        key,
        kind: Kind::Name(names),
        value: AtomicU32::new(0),
    }
}

const fn number(key: &'static str, min: u32, max: u32, default: u32) -> Setting {
    Setting {
        key,
        kind: Kind::Number { min, max },
        value: AtomicU32::new(default),
    }
}

static SETTINGS: [Setting; 10] = [
    name("clock", CLOCKS),
    name("counter", COUNTERS),
    number("counter_bits", 16, 64, 64),
    name("acct", ACCTS),
    name("nmi_source", SOURCES),
    number("period_us", 10, 1_000_000, 100),
    number("update_us", 0, 1_000_000, 0),
    number("tear_window_ns", 0, 1_000_000, 0),
    number("duration_s", 1, 86_400, 10),
    number("autostart", 0, 1, 0),
];

/// Indices into [`SETTINGS`], for the getters.
#[derive(Clone, Copy)]
pub(crate) enum Key {
    Clock = 0,
    Counter,
    CounterBits,
    Acct,
    NmiSource,
    PeriodUs,
    UpdateUs,
    TearWindowNs,
    DurationS,
    Autostart,
}

/// The value of a setting (a name's index, or the number).
pub(crate) fn get(key: Key) -> u32 {
    SETTINGS
        .get(key as usize)
        .map_or(0, |s| s.value.load(Ordering::Relaxed))
}

/// Validates `value` for `key` and, if good, makes it the setting. A bad
/// key or value is logged in one line and gives `EINVAL`; nothing changes.
pub(crate) fn set(key: &str, value: &str) -> Result {
    let Some(s) = SETTINGS.iter().find(|s| s.key == key) else {
        pr_err!("{}={}: unknown setting; valid: {}\n", key, value, Keys);
        return Err(EINVAL);
    };
    let v = match s.kind {
        Kind::Name(names) => match names.iter().position(|n| *n == value) {
            Some(i) => i as u32,
            None => {
                pr_err!(
                    "{}={}: unknown {}; valid: {}\n",
                    key,
                    value,
                    key,
                    OneOf(names)
                );
                return Err(EINVAL);
            }
        },
        Kind::Number { min, max } => match parse_u32(value.as_bytes()) {
            Some(v) if (min..=max).contains(&v) => v,
            _ => {
                pr_err!("{}={}: must be a number, {}..{}\n", key, value, min, max);
                return Err(EINVAL);
            }
        },
    };
    s.value.store(v, Ordering::Relaxed);
    Ok(())
}

/// Splits a `config` write, `key=value` with an optional trailing newline.
pub(crate) fn split(input: &[u8]) -> Result<(&str, &str)> {
    let line = crate::parse::strip_newline(input);
    let text = core::str::from_utf8(line).map_err(|_| {
        pr_err!("config: not text\n");
        EINVAL
    })?;
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k, v)),
        _ => {
            pr_err!("config: want key=value, one per write\n");
            Err(EINVAL)
        }
    }
}

/// The value of a setting as text.
struct Value<'a>(&'a Setting);

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0.value.load(Ordering::Relaxed);
        match self.0.kind {
            Kind::Name(names) => f.write_str(names.get(v as usize).copied().unwrap_or("?")),
            Kind::Number { .. } => write!(f, "{v}"),
        }
    }
}

/// Comma-separated names.
struct OneOf(&'static [&'static str]);

impl fmt::Display for OneOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, n) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(n)?;
        }
        Ok(())
    }
}

/// Every key, comma-separated.
struct Keys;

impl fmt::Display for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in SETTINGS.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(s.key)?;
        }
        Ok(())
    }
}

/// The name a name-valued setting holds.
pub(crate) fn name_of(key: Key) -> &'static str {
    let Some(s) = SETTINGS.get(key as usize) else {
        return "?";
    };
    match s.kind {
        Kind::Name(names) => names
            .get(s.value.load(Ordering::Relaxed) as usize)
            .copied()
            .unwrap_or("?"),
        Kind::Number { .. } => "?",
    }
}

/// Writes every setting as `key: value`, or as `key=value ` pairs on one
/// line when `inline` (for the End of test line).
pub(crate) fn show(w: &mut impl Write, inline: bool) -> fmt::Result {
    for s in SETTINGS.iter() {
        if inline {
            write!(w, " {}={}", s.key, Value(s))?;
        } else {
            writeln!(w, "{}: {}", s.key, Value(s))?;
        }
    }
    Ok(())
}

/// The module parameters, applied in table order.
pub(crate) fn from_params(p: &crate::ffi::Params) -> Result {
    for (key, value) in [
        ("clock", p.clock),
        ("counter", p.counter),
        ("counter_bits", p.counter_bits),
        ("acct", p.acct),
        ("nmi_source", p.nmi_source),
        ("period_us", p.period_us),
        ("update_us", p.update_us),
        ("tear_window_ns", p.tear_window_ns),
        ("duration_s", p.duration_s),
        ("autostart", p.autostart),
    ] {
        set(key, value)?;
    }
    Ok(())
}
