// SPDX-License-Identifier: GPL-2.0

//! The settings: one table ([`settings!`] below) declares each setting
//! once, with its key, its values, its default, whether changing it
//! rebuilds the clock, and its help text. The table drives everything a
//! setting appears in:
//!
//! - the module parameters: their values at load are validated here, and
//!   their help text is emitted into `.modinfo` (what `modinfo` shows);
//!   the C glue declares the parameters themselves from one list
//!   (`NMICLOCK_PARAMS` in `rust/nmiclock_glue.h`), and the build fails if
//!   that list and this table differ in length (a name missing on either
//!   side fails the load, naming it);
//! - `config` writes (`key=value`, or several pairs separated by spaces,
//!   applied all or none, while nothing runs) and reads;
//! - the load message, `stats` and the End of test line.
//!
//! A bad key or value gets `-EINVAL` and one log line saying what is
//! accepted, and changes nothing. So does a set of values that are valid
//! alone but not together: the check of the whole set is the caller's
//! (`kclock::validate_settings`, given to [`set_all`] and [`from_params`]).
//!
//! Adding a setting is one line in the table here and one `X(name)` line in
//! `NMICLOCK_PARAMS` (and, for a choice, its enum in [`crate::choices`] and
//! a line in `chosen!`); reading it is [`number`] with its [`Key`], or
//! [`choice`] with its enum: no caller decodes a stored number.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, Ordering};

use kernel::prelude::*;

use crate::choices::{Acct, Choice, CounterRead, Disturb, NmiSource, Protection, Until, Wake};
use crate::ffi;
use crate::fmtbuf::kernel_display;
use crate::parse::parse_u32;

/// What values a setting takes.
pub(crate) enum Kind {
    /// One of these names; the setting holds its index.
    Names(&'static [&'static str]),
    /// One of these names, or a target another module registered (see
    /// [`crate::target`]); the setting holds the target's index.
    Target(&'static [&'static str]),
    /// A decimal number in `min..=max`.
    Number {
        /// Smallest value.
        min: u32,
        /// Largest value.
        max: u32,
    },
}

/// One setting's declaration.
pub(crate) struct Spec {
    /// The key, as in `config` and the module parameter's name.
    pub(crate) key: &'static str,
    /// What values it takes.
    pub(crate) kind: Kind,
    /// Its value when the module parameter is not given.
    pub(crate) default: &'static str,
    /// Whether a change (through `config`) rebuilds the running clock.
    pub(crate) reclock: bool,
    /// One line for `modinfo` and the documentation.
    pub(crate) help: &'static str,
}

/// Declares the settings: an enum [`Key`] naming each, the table
/// [`SPECS`], the values, and one `.modinfo` `parm=` entry each.
macro_rules! settings {
    ($($(#[$doc:meta])* $var:ident $key:literal: $kind:expr, default $default:expr,
       $reclock:literal, $help:expr;)*) => {
        /// The settings, in table order (see [`get`]).
        #[derive(Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Key {
            $($(#[$doc])* $var,)*
        }

        /// Every setting's declaration, in [`Key`] order.
        pub(crate) static SPECS: [Spec; [$(Key::$var),*].len()] = [$(Spec {
            key: $key,
            kind: $kind,
            default: $default,
            reclock: $reclock,
            help: $help,
        },)*];

        $(const _: () = {
            const SPEC: &Spec = &SPECS[Key::$var as usize];
            const LEN: usize = modinfo_len(SPEC);
            // A parameter's description is a `.modinfo` entry.
            #[allow(unsafe_code)]
            #[link_section = ".modinfo"]
            // `used(compiler)`, not `used`: see `AUTHOR` in rust/nmiclock_main.rs.
            #[used(compiler)]
            static PARM: [u8; LEN] = modinfo(SPEC);
        };)*
    };
}

settings! {
    /// Read-side protection of nmiclock's clock.
    Clock "clock": Kind::Names(Protection::NAMES), default "latch", true,
        "read-side protection of the clock";
    /// The counter under the clock.
    Counter "counter": Kind::Names(CounterRead::NAMES), default CounterRead::Ordered.const_name(),
        true, crate::arch::COUNTER_HELP;
    /// Width the counter is masked to.
    CounterBits "counter_bits": Kind::Number { min: 16, max: 64 }, default "64", true,
        "counter width in bits: narrower wraps, and moves the epoch, sooner";
    /// Writer pause between its stores (fault injection), ns.
    TearWindowNs "tear_window_ns": Kind::Number { min: 0, max: 1_000_000 }, default "0", true,
        "fault injection: writer pause inside its update, ns (with counter_bits: at most a tenth of the epoch period in hard-IRQ)";
    /// The acct update.
    Acct "acct": Kind::Names(Acct::NAMES), default "cmpxchg", false,
        "acct integrals update";
    /// Interrupt source of the stress run.
    NmiSource "nmi_source": Kind::Names(NmiSource::NAMES), default "auto", false,
        "stress run interrupt source (auto: perf_hw if there is a PMU, else ipi)";
    /// Sample period per CPU, us.
    PeriodUs "period_us": Kind::Number { min: 10, max: 1_000_000 }, default "100", false,
        "stress sample period per CPU, us";
    /// Pause of the stress run's writers between updates, us.
    UpdateUs "update_us": Kind::Number { min: 0, max: 1_000_000 }, default "0", false,
        "pause of the stress run's writers between updates, us (0: back to back)";
    /// Stress run length, s.
    DurationS "duration_s": Kind::Number { min: 1, max: 86_400 }, default "10", false,
        "stress run length, s";
    /// Start a stress run at load.
    Autostart "autostart": Kind::Number { min: 0, max: 1 }, default "0", false,
        "start a stress run at load";
    /// Window hits below which a run without anomaly is inconclusive.
    MinWindowHits "min_window_hits": Kind::Number { min: 0, max: 1_000_000_000 }, default "0",
        false, "window hits a run without anomaly needs to end SUCCESS, not INCONCLUSIVE (0: 100 per second of duration_s, 1 for a kernel clock)";
    /// When the stress run ends.
    Until "until": Kind::Names(Until::NAMES), default "duration", false,
        concat!("end the stress run after duration_s; at its verdict (first anomaly, or min_window_hits reached) with duration_s the cap; or coverage: at an anomaly, else after duration_s once the window hits are met, ", crate::choices::coverage_cap!(), " x duration_s at most");
    /// What the stress run's writers do besides moving the epoch.
    Disturb "disturb": Kind::Names(Disturb::NAMES), default "none", false,
        "stress run disturbance: conversion switches between two mult/shift pairs, stutter pauses the writers";
    /// What the stress run reads.
    Target "target": Kind::Target(&crate::registry::BUILTIN_NAMES), default "nmiclock", false,
        "what the stress run reads: nmiclock (the clock clock= selects), a kernel clock, or a target another module registered";
    /// How the `wake` activity's waiters wait.
    Wake "wake": Kind::Names(Wake::NAMES), default "sleep", false,
        "wake-up design of the wake activity: sleep (mark, re-check, sleep), racy (check, then sleep a tick: the idle loop's lost wake-up) or poll (poll poll_us, then sleep)";
    /// Poll window of `wake=poll`, us.
    PollUs "poll_us": Kind::Number { min: 0, max: 10_000 }, default "100", false,
        "poll window of wake=poll, us";
    /// Stop the kernel's tracing at a stress run's first anomaly.
    TraceOnAnomaly "trace_on_anomaly": Kind::Number { min: 0, max: 1 }, default "0", false,
        "at a stress run's first anomaly, write a marker into the trace instance nmiclock and stop tracing (tracing_off()), so that the trace holds what led up to it (needs CONFIG_TRACING)";
}

/// The glue declares exactly one module parameter per setting.
const _: () = assert!(SPECS.len() == ffi::params::COUNT);

// ---- .modinfo --------------------------------------------------------------------

/// The decimal digits of `v`.
const fn digits(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// Appends `s` to `out` at `at`; returns the new end.
const fn put<const N: usize>(mut out: [u8; N], at: usize, s: &[u8]) -> ([u8; N], usize) {
    let mut i = 0;
    while i < s.len() {
        out[at + i] = s[i];
        i += 1;
    }
    (out, at + s.len())
}

/// Appends `v` in decimal.
const fn put_u32<const N: usize>(mut out: [u8; N], at: usize, mut v: u32) -> ([u8; N], usize) {
    let n = digits(v);
    let mut i = n;
    while i > 0 {
        i -= 1;
        out[at + i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    (out, at + n)
}

const PARM: &[u8] = b"parm=";
const REGISTERED: &[u8] = b"|NAME of a registered target";
const VALUES: &[u8] = b"; values: ";
const DEFAULT: &[u8] = b"; default ";

/// Length of a setting's `.modinfo` entry: `parm=KEY:HELP; values: A|B;
/// default D` (or `MIN..MAX` for numbers) and a NUL.
const fn modinfo_len(s: &Spec) -> usize {
    let mut n = PARM.len() + s.key.len() + 1 + s.help.len() + VALUES.len();
    match s.kind {
        Kind::Names(names) | Kind::Target(names) => {
            let mut i = 0;
            while i < names.len() {
                n += names[i].len() + if i > 0 { 1 } else { 0 };
                i += 1;
            }
            if let Kind::Target(_) = s.kind {
                n += REGISTERED.len();
            }
        }
        Kind::Number { min, max } => n += digits(min) + 2 + digits(max),
    }
    n + DEFAULT.len() + s.default.len() + 1
}

/// A setting's `.modinfo` entry (see [`modinfo_len`]).
const fn modinfo<const N: usize>(s: &Spec) -> [u8; N] {
    let out = [0u8; N];
    let (out, at) = put(out, 0, PARM);
    let (out, at) = put(out, at, s.key.as_bytes());
    let (out, at) = put(out, at, b":");
    let (out, at) = put(out, at, s.help.as_bytes());
    let (mut out, mut at) = put(out, at, VALUES);
    match s.kind {
        Kind::Names(names) | Kind::Target(names) => {
            let mut i = 0;
            while i < names.len() {
                if i > 0 {
                    (out, at) = put(out, at, b"|");
                }
                (out, at) = put(out, at, names[i].as_bytes());
                i += 1;
            }
            if let Kind::Target(_) = s.kind {
                (out, at) = put(out, at, REGISTERED);
            }
        }
        Kind::Number { min, max } => {
            (out, at) = put_u32(out, at, min);
            (out, at) = put(out, at, b"..");
            (out, at) = put_u32(out, at, max);
        }
    }
    let (out, at) = put(out, at, DEFAULT);
    let (out, _) = put(out, at, s.default.as_bytes());
    out
}

// ---- values -------------------------------------------------------------------------

/// The values in force, in [`Key`] order: a name's index, or the number.
static VALUES_NOW: [AtomicU32; SPECS.len()] = [const { AtomicU32::new(0) }; SPECS.len()];

/// The stored value of a setting (a name's index, or the number).
fn get(key: Key) -> u32 {
    VALUES_NOW
        .get(key as usize)
        .map_or(0, |v| v.load(Ordering::Relaxed))
}

/// A choice and the setting that makes it.
pub(crate) trait Chosen: Choice {
    /// The setting.
    const KEY: Key;
}

macro_rules! chosen {
    ($($ty:ident => $key:ident,)*) => {
        $(impl Chosen for $ty {
            const KEY: Key = Key::$key;
        })*
        // Each choice's names are its setting's: pairing an enum with the
        // wrong setting would decode another setting's values as its own.
        $(const _: () = assert!(matches!(
            SPECS[Key::$key as usize].kind,
            Kind::Names(names) if crate::choices::same_names(names, <$ty as Choice>::NAMES)
        ));)*
    };
}

chosen! {
    Protection => Clock,
    CounterRead => Counter,
    Acct => Acct,
    NmiSource => NmiSource,
    Until => Until,
    Disturb => Disturb,
    Wake => Wake,
}

/// What a choice setting holds now.
pub(crate) fn choice<C: Chosen>() -> C {
    C::from_index(get(C::KEY) as usize).unwrap_or(C::FIRST)
}

/// The number a numeric setting holds now (what a name-valued one holds
/// is [`choice`]'s, and `target`'s [`target_index`]'s).
pub(crate) fn number(key: Key) -> u32 {
    match SPECS.get(key as usize).map(|s| &s.kind) {
        Some(Kind::Number { .. }) => get(key),
        _ => 0,
    }
}

/// Whether a 0-or-1 setting (`autostart`, `trace_on_anomaly`) is on.
pub(crate) fn flag(key: Key) -> bool {
    number(key) != 0
}

/// The target the setting `target` selects, as the index
/// [`crate::target`] gave it (built-in or registered; only `target`
/// interprets it).
pub(crate) fn target_index() -> usize {
    get(Key::Target) as usize
}

/// Validates `value` for the setting `spec`: its stored form, or `EINVAL`
/// after one log line saying what is accepted.
fn parse(spec: &Spec, value: &str) -> Result<u32> {
    match spec.kind {
        Kind::Names(names) => match names.iter().position(|n| *n == value) {
            Some(i) => Ok(i as u32),
            None => {
                pr_err!(
                    "{}={}: unknown {}; valid: {}\n",
                    spec.key,
                    value,
                    spec.key,
                    kernel_display!(Joined(names, ", "))
                );
                Err(EINVAL)
            }
        },
        Kind::Target(names) => match crate::registry::lookup(value) {
            Some(i) => Ok(i as u32),
            None => {
                pr_err!(
                    "{}={}: unknown {}; valid: {}, or a registered target's name (registered: {})\n",
                    spec.key,
                    value,
                    spec.key,
                    kernel_display!(Joined(names, ", ")),
                    kernel_display!(crate::registry::RegisteredNames)
                );
                Err(EINVAL)
            }
        },
        Kind::Number { min, max } => match parse_u32(value.as_bytes()) {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            _ => {
                pr_err!(
                    "{}={}: must be a number, {}..{}\n",
                    spec.key,
                    value,
                    min,
                    max
                );
                Err(EINVAL)
            }
        },
    }
}

/// A value for every setting, in [`Key`] order: the values in force, or a
/// set being checked before it is applied.
#[derive(Clone, Copy)]
pub(crate) struct Values([u32; SPECS.len()]);

impl Values {
    /// The values in force.
    pub(crate) fn now() -> Self {
        let mut v = [0; SPECS.len()];
        for (out, slot) in v.iter_mut().zip(VALUES_NOW.iter()) {
            *out = slot.load(Ordering::Relaxed);
        }
        Self(v)
    }

    /// The number a numeric setting holds in this set.
    pub(crate) fn number(&self, key: Key) -> u32 {
        match SPECS.get(key as usize).map(|s| &s.kind) {
            Some(Kind::Number { .. }) => self.0.get(key as usize).copied().unwrap_or(0),
            _ => 0,
        }
    }

    fn store(&self) {
        for (v, slot) in self.0.iter().zip(VALUES_NOW.iter()) {
            slot.store(*v, Ordering::Relaxed);
        }
    }

    /// What a choice setting holds in this set.
    fn choice<C: Chosen>(&self) -> C {
        let v = self.0.get(C::KEY as usize).copied().unwrap_or(0);
        C::from_index(v as usize).unwrap_or(C::FIRST)
    }
}

/// The settings one stress run uses, taken once when it starts
/// ([`RunSettings::now`]): typed, with their units, owned by the run
/// (nothing it does reads the settings in force), and what its End of
/// test line shows. The clock's own settings (`clock`, `counter`,
/// `counter_bits`) are the running clock's, taken when it was built.
#[derive(Clone, Copy)]
pub(crate) struct RunSettings {
    /// The writers' pause inside each update, ns (the clock's, taken
    /// when the clock was built, is the same: `config` cannot change it
    /// during a run).
    pub(crate) tear_window_ns: u32,
    /// The acct update the writers and samples make.
    pub(crate) acct: Acct,
    /// Where the samples come from, and their period per CPU, ns.
    pub(crate) nmi_source: NmiSource,
    pub(crate) period_ns: u64,
    /// The writers' pause between updates, us (0: back to back).
    pub(crate) update_us: u32,
    /// How long the run lasts, ns, and when it ends.
    pub(crate) duration_ns: u64,
    pub(crate) until: Until,
    /// Window hits a run without anomaly needs (0: the default for its
    /// target).
    pub(crate) min_window_hits: u32,
    /// What the writers do besides moving the epoch.
    pub(crate) disturb: Disturb,
    /// What the run reads: the target's index ([`crate::target`]).
    pub(crate) target: usize,
    /// Stop the kernel's tracing at the first anomaly.
    pub(crate) trace_on_anomaly: bool,
    /// Every setting as it was, for the End of test line.
    shown: Values,
}

impl RunSettings {
    /// The settings in force now, as a run's.
    pub(crate) fn now() -> Self {
        Self::of(Values::now())
    }

    /// The settings `v` holds.
    fn of(v: Values) -> Self {
        let n = |k| v.number(k);
        Self {
            tear_window_ns: n(Key::TearWindowNs),
            acct: v.choice(),
            nmi_source: v.choice(),
            period_ns: u64::from(n(Key::PeriodUs)).saturating_mul(1_000),
            update_us: n(Key::UpdateUs),
            duration_ns: u64::from(n(Key::DurationS)).saturating_mul(1_000_000_000),
            until: v.choice(),
            min_window_hits: n(Key::MinWindowHits),
            disturb: v.choice(),
            target: v.0.get(Key::Target as usize).copied().unwrap_or(0) as usize,
            trace_on_anomaly: n(Key::TraceOnAnomaly) != 0,
            shown: v,
        }
    }
}

/// Where a run keeps its settings: set when it starts, while nothing reads
/// them, then read by its parts in task and hard-IRQ context.
pub(crate) struct RunSettingsCell([AtomicU32; SPECS.len()]);

impl RunSettingsCell {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU32::new(0) }; SPECS.len()])
    }

    /// Keeps `s`.
    pub(crate) fn set(&self, s: &RunSettings) {
        for (slot, v) in self.0.iter().zip(s.shown.0.iter()) {
            slot.store(*v, Ordering::Relaxed);
        }
    }

    /// The settings kept.
    pub(crate) fn get(&self) -> RunSettings {
        let mut v = [0; SPECS.len()];
        for (out, slot) in v.iter_mut().zip(self.0.iter()) {
            *out = slot.load(Ordering::Relaxed);
        }
        RunSettings::of(Values(v))
    }
}

/// Every setting of the run as ` key=value` pairs on one line, as
/// [`Inline`] shows the settings in force.
impl fmt::Display for RunSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in SPECS.iter().enumerate() {
            write!(f, " {}={}", s.key, Value(i, Some(&self.shown)))?;
        }
        Ok(())
    }
}

/// What a `config` write changed, to [`Change::undo`] if what it implies
/// (rebuilding the clock) fails.
pub(crate) struct Change {
    old: Values,
    /// Whether a setting that rebuilds the clock is among those written.
    pub(crate) reclock: bool,
}

impl Change {
    /// Puts every old value back.
    pub(crate) fn undo(self) {
        self.old.store();
    }
}

/// Validates every `key=value` pair of `pairs`, then the whole set of
/// values they would make with `check` (settings that are valid alone but
/// not together), and only then applies them all. A bad key or value, a
/// key given twice, or a combination `check` refuses is logged in one line
/// and gives `EINVAL`; nothing changes. The caller must hold the activity
/// guard (see [`crate::activity`]).
pub(crate) fn set_all(pairs: &Pairs<'_>, check: impl Fn(&Values) -> Result) -> Result<Change> {
    // A registered target's index stays its own only while the registry's
    // mutex is held: unregistering it resets the setting under the mutex.
    crate::registry::locked(|| {
        let old = Values::now();
        let mut new = old;
        let mut given = [false; SPECS.len()];
        let mut reclock = false;
        for (key, value) in pairs.iter() {
            let Some(index) = SPECS.iter().position(|s| s.key == key) else {
                pr_err!(
                    "{}={}: unknown setting; valid: {}\n",
                    key,
                    value,
                    kernel_display!(Keys)
                );
                return Err(EINVAL);
            };
            let (Some(spec), Some(slot), Some(seen)) =
                (SPECS.get(index), new.0.get_mut(index), given.get_mut(index))
            else {
                return Err(EINVAL);
            };
            if *seen {
                pr_err!("config: {} given twice\n", key);
                return Err(EINVAL);
            }
            *seen = true;
            *slot = parse(spec, value)?;
            reclock |= spec.reclock;
        }
        check(&new)?;
        new.store();
        Ok(Change { old, reclock })
    })
}
/// Sets `key` back to its default (a registered target going away). The
/// caller holds the registry's mutex.
pub(crate) fn reset(key: Key) {
    if let (Some(spec), Some(slot)) = (SPECS.get(key as usize), VALUES_NOW.get(key as usize)) {
        if let Ok(v) = parse(spec, spec.default) {
            slot.store(v, Ordering::Relaxed);
        }
    }
}

/// Applies the module parameters, each setting's default where one was not
/// given, once the whole set passes `check`; `EINVAL` (with its log line)
/// for the first bad value or a combination `check` refuses, and then
/// nothing is applied.
pub(crate) fn from_params(check: impl Fn(&Values) -> Result) -> Result {
    let mut values = Values::now();
    for (spec, slot) in SPECS.iter().zip(values.0.iter_mut()) {
        let Some(i) = (0..ffi::params::COUNT).find(|&i| ffi::params::name(i) == Some(spec.key))
        else {
            pr_err!(
                "setting {} has no module parameter: add X({}) to NMICLOCK_PARAMS\n",
                spec.key,
                spec.key
            );
            return Err(EINVAL);
        };
        let value = ffi::params::value(i).unwrap_or(spec.default);
        *slot = parse(spec, value)?;
    }
    check(&values)?;
    values.store();
    Ok(())
}

/// The `key=value` pairs of one `config` write: at most one per setting.
pub(crate) struct Pairs<'a> {
    pairs: [(&'a str, &'a str); SPECS.len()],
    len: usize,
}

impl<'a> Pairs<'a> {
    /// The pairs, in the order written.
    fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.pairs.iter().take(self.len).copied()
    }
}

/// Splits a `config` write: `key=value` pairs separated by spaces or tabs,
/// with an optional trailing newline. `EINVAL` and one log line for a write
/// that is not text, has no pair, a pair without `=` or an empty key, or
/// more pairs than there are settings.
pub(crate) fn split(input: &[u8]) -> Result<Pairs<'_>> {
    const WANT: &str = "want key=value, or several separated by spaces";
    let line = crate::parse::strip_newline(input);
    let text = core::str::from_utf8(line).map_err(|_| {
        pr_err!("config: not text\n");
        EINVAL
    })?;
    let mut out = Pairs {
        pairs: [("", ""); SPECS.len()],
        len: 0,
    };
    for word in text.split([' ', '\t']).filter(|w| !w.is_empty()) {
        let Some((k, v)) = word.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            pr_err!("config: '{}': {}\n", word, WANT);
            return Err(EINVAL);
        };
        let Some(slot) = out.pairs.get_mut(out.len) else {
            pr_err!("config: more pairs than the {} settings\n", SPECS.len());
            return Err(EINVAL);
        };
        *slot = (k, v);
        out.len += 1;
    }
    if out.len == 0 {
        pr_err!("config: {}\n", WANT);
        return Err(EINVAL);
    }
    Ok(out)
}

// ---- rendering ----------------------------------------------------------------------

/// The value of setting `index` as text: in the set given, or in force.
struct Value<'a>(usize, Option<&'a Values>);

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = match self.1 {
            Some(values) => values.0.get(self.0).copied().unwrap_or(0),
            None => VALUES_NOW
                .get(self.0)
                .map_or(0, |v| v.load(Ordering::Relaxed)),
        };
        match SPECS.get(self.0).map(|s| &s.kind) {
            Some(Kind::Names(names)) => f.write_str(names.get(v as usize).copied().unwrap_or("?")),
            Some(Kind::Target(_)) => crate::registry::write_name(f, v as usize),
            _ => write!(f, "{v}"),
        }
    }
}

/// Names joined by a separator.
struct Joined(&'static [&'static str], &'static str);

impl fmt::Display for Joined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, n) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(self.1)?;
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
        for (i, s) in SPECS.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(s.key)?;
        }
        Ok(())
    }
}

/// Writes every setting as a `key: value` line (`config`, `stats`).
pub(crate) fn show(w: &mut impl Write) -> fmt::Result {
    for (i, s) in SPECS.iter().enumerate() {
        writeln!(w, "{}: {}", s.key, Value(i, None))?;
    }
    Ok(())
}

/// Every setting as ` key=value` pairs on one line (the load message and
/// the End of test line).
pub(crate) struct Inline;

impl fmt::Display for Inline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in SPECS.iter().enumerate() {
            write!(f, " {}={}", s.key, Value(i, None))?;
        }
        Ok(())
    }
}
