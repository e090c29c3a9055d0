// SPDX-License-Identifier: GPL-2.0

//! The names of the targets: the built-in ones, and the registry's slots
//! with the names other modules registered, each copied at registration
//! so that showing the setting `target` needs no lock. Looking a name up,
//! showing one and counting them is here, for the settings; registering,
//! unregistering and pinning a target for a run are [`crate::target`]'s.
//!
//! Imports only the FFI layer (the registry's mutex), so that the settings
//! can use it without importing what imports them.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::ffi::target::{Locked, RegisteredCell};

/// The built-in targets, in setting order; the first is the default.
pub(crate) const BUILTIN: [&str; 8] = [
    "nmiclock",
    "sched_clock",
    "local_clock",
    "ktime_get_mono_fast_ns",
    "ktime_get_raw_fast_ns",
    "ktime_get_boot_fast_ns",
    "ktime_get_tai_fast_ns",
    "ktime_get_real_fast_ns",
];

/// `target=nmiclock`.
pub(crate) const NMICLOCK: usize = 0;

/// Targets registered at once, at most.
pub(crate) use crate::ffi::target::MAX_REGISTERED;

/// Longest name of a registered target, in bytes.
pub(crate) const NAME_MAX: usize = 31;

/// One registry slot.
pub(crate) struct Slot {
    /// The target, empty when the slot is free.
    pub(crate) target: RegisteredCell,
    /// Its name, copied at registration ([a-z0-9_], NUL-padded), so that
    /// showing the setting needs no lock.
    pub(crate) name: [AtomicU64; 4],
    /// Being unregistered: no run may pin it.
    pub(crate) going: AtomicBool,
    /// What its target promises, copied at registration: the step back
    /// it allows on one CPU and across CPUs (`u64::MAX`: any), and whether
    /// its rate is promised.
    pub(crate) back_cpu_ns: AtomicU64,
    pub(crate) back_cross_ns: AtomicU64,
    pub(crate) rate: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    target: RegisteredCell::new(),
    name: [const { AtomicU64::new(0) }; 4],
    going: AtomicBool::new(false),
    back_cpu_ns: AtomicU64::new(0),
    back_cross_ns: AtomicU64::new(0),
    rate: AtomicBool::new(true),
};

pub(crate) static SLOTS: [Slot; MAX_REGISTERED] = [FREE; MAX_REGISTERED];

/// A name copied into a slot.
pub(crate) fn store_name(slot: &Slot, name: &[u8]) {
    for (i, word) in slot.name.iter().enumerate() {
        let mut b = [0u8; 8];
        for (j, x) in b.iter_mut().enumerate() {
            *x = name.get(i * 8 + j).copied().unwrap_or(0);
        }
        word.store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
}

/// A slot's name, as stored.
pub(crate) struct SlotName([u8; 32]);

impl SlotName {
    pub(crate) fn of(slot: &Slot) -> Self {
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_mut(8).zip(slot.name.iter()) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        Self(out)
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        let n = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        self.0.get(..n).unwrap_or(&[])
    }
}

/// Writes the name of target `index` (a built-in one, or a registered
/// one's; `?` for an empty slot).
pub(crate) fn write_name(f: &mut core::fmt::Formatter<'_>, index: usize) -> core::fmt::Result {
    if let Some(n) = BUILTIN.get(index) {
        return f.write_str(n);
    }
    let Some(slot) = index.checked_sub(BUILTIN.len()).and_then(|i| SLOTS.get(i)) else {
        return f.write_str("?");
    };
    let name = SlotName::of(slot);
    match core::str::from_utf8(name.as_bytes()) {
        Ok(s) if !s.is_empty() => f.write_str(s),
        _ => f.write_str("?"),
    }
}

/// The index of the target named `name`, if any. The caller holds the
/// registry's mutex (see [`crate::settings::set_all`]) when it keeps the index.
pub(crate) fn lookup(name: &str) -> Option<usize> {
    if let Some(i) = BUILTIN.iter().position(|n| *n == name) {
        return Some(i);
    }
    SLOTS
        .iter()
        .position(|s| s.target.is_set() && SlotName::of(s).as_bytes() == name.as_bytes())
        .map(|i| i + BUILTIN.len())
}

/// Runs `f` with the registry's mutex held. Task context.
pub(crate) fn locked<R>(f: impl FnOnce() -> R) -> R {
    let _l = Locked::new();
    f()
}

/// Whether `name` may name a registered target: 1 to [`NAME_MAX`] bytes
/// of `[a-z0-9_]`.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    (1..=NAME_MAX).contains(&name.len())
        && name
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// Registered targets now.
pub(crate) fn registered() -> usize {
    SLOTS.iter().filter(|s| s.target.is_set()).count()
}

/// The registered targets' names, comma-separated (`none registered` when
/// there is none), for a message that names what may be chosen. Reads the
/// slots without the registry's mutex: a name being registered or
/// unregistered meanwhile may be shown or not.
pub(crate) struct RegisteredNames;

impl core::fmt::Display for RegisteredNames {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut any = false;
        for (i, slot) in SLOTS.iter().enumerate() {
            if !slot.target.is_set() {
                continue;
            }
            if any {
                f.write_str(", ")?;
            }
            any = true;
            write_name(f, i + BUILTIN.len())?;
        }
        if !any {
            f.write_str("none registered")?;
        }
        Ok(())
    }
}

/// Target `index`'s name, as [`write_name`] writes it.
pub(crate) struct Name(pub(crate) usize);

impl core::fmt::Display for Name {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write_name(f, self.0)
    }
}
