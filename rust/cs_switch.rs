// SPDX-License-Identifier: GPL-2.0

//! The kernel's clocksource switches, as the stress run's checks need to
//! know them.
//!
//! A switch (`change_clocksource()` in kernel/time/timekeeping.c, run under
//! `stop_machine()`) accumulates the time read on the old clocksource,
//! then reads the new one to count from: the stretch in between is lost
//! to every clock of the timekeeper, `CLOCK_MONOTONIC_RAW` included. So
//! across a switch
//!
//! - the checks' reference, `ktime_get_raw_fast_ns()`, falls behind a
//!   clock that does not read the clocksource (nmiclock's own, on its own
//!   counter): no reference check may span a switch
//!   ([`crate::read_check::Around::cs_seq`]);
//! - a fast timekeeper's read of the old copy (an NMI inside the update, or
//!   another CPU before it) may be ahead of a read of the new one by up to
//!   that stretch: the kernel's "not guaranteed to be monotonic across an
//!   update". The checks allow a kernel clock that promises it
//!   ([`crate::registry::Promise::at_switch`]) a step back up to the
//!   switch's own length, and only within that length of its end
//!   ([`allowance`]).
//!
//! And between switches, the reference is comparable with a clock on
//! nmiclock's counter only while the clocksource is that counter: another
//! one (the HPET, the ACPI PM timer) agrees with it only as well as the
//! two were calibrated against each other. Under QEMU TCG they do not at
//! all: the emulated TSC gains on the emulated HPET by up to 3 % while
//! both vCPUs read it (QEMU's `cpu_get_ticks()` moves its offset forward
//! whenever a host `rdtsc` reads behind the last value it gave). So
//! the count says which kind of clocksource each stretch had
//! ([`OTHER_COUNTER`]), and a reference check is made on the counter's
//! own only. Which kind the new clocksource is, task context tells
//! ([`note_kind`]: the timekeeper's snapshot, which no probe may take:
//! the same trampoline serves probes inside the timekeeper's update): a
//! switch's return marks its stretch as on another counter until a
//! run's writer has looked.
//!
//! While the module is loaded, a kretprobe brackets `change_clocksource()`
//! ([`Watch`]): its entry and return each add one to a count (odd inside a
//! switch), and are timed on the module's own counter, which no switch
//! moves. The probe's handlers, like the readers, use atomics only.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub(crate) use crate::read_check::CS_OTHER_COUNTER as OTHER_COUNTER;

use kernel::c_str;
use kernel::prelude::*;

use crate::arch::Ordered;
use crate::counter::Counter;
use crate::ffi::kprobe::{Bracket, Edge};

/// The switches seen since the module loaded. One switch runs at a time
/// (the kernel's clocksource mutex), so there is one writer at a time.
struct Switches {
    /// Entries plus returns: odd while a switch runs; and
    /// [`OTHER_COUNTER`] while the clocksource is not nmiclock's counter.
    seq: AtomicU64,
    /// The counter at the last entry and at the last return.
    start: AtomicU64,
    end: AtomicU64,
    /// A switch returned since [`note_kind`] last looked.
    unnoted: AtomicBool,
}

static SWITCHES: Switches = Switches {
    seq: AtomicU64::new(0),
    start: AtomicU64::new(0),
    end: AtomicU64::new(0),
    unnoted: AtomicBool::new(false),
};

/// A switch begins: its start is stored before the count goes odd, so a
/// reader that sees it odd sees this start.
fn enter() {
    if SWITCHES.seq.load(Ordering::Relaxed) & 1 == 0 {
        SWITCHES.start.store(Ordered.read(), Ordering::Relaxed);
        SWITCHES.seq.fetch_add(1, Ordering::Release);
    }
}

/// It returns (a return whose entry came before the probe is ignored):
/// the count goes even, on another counter until [`note_kind`] looks.
fn leave() {
    if SWITCHES.seq.load(Ordering::Relaxed) & 1 != 0 {
        SWITCHES.end.store(Ordered.read(), Ordering::Relaxed);
        let _ = SWITCHES
            .seq
            .fetch_update(Ordering::Release, Ordering::Relaxed, |s| {
                Some(s.wrapping_add(1) | OTHER_COUNTER)
            });
        SWITCHES.unnoted.store(true, Ordering::Release);
    }
}

/// Notes whether the kernel's clocksource is nmiclock's counter, outside
/// a switch: when the module loads, at each run's start (all a kernel
/// whose switch cannot be probed gets) and after a switch
/// ([`note_kind_after_switch`]). Task context: the timekeeper's snapshot.
/// If a switch runs meanwhile, the count has moved and this changes
/// nothing (that switch leaves its own note to take).
pub(crate) fn note_kind() {
    let seq = SWITCHES.seq.load(Ordering::Acquire);
    if seq & 1 != 0 {
        return;
    }
    let kind = if crate::ffi::time::on_own_counter() {
        0
    } else {
        OTHER_COUNTER
    };
    let _ = SWITCHES.seq.compare_exchange(
        seq,
        (seq & !OTHER_COUNTER) | kind,
        Ordering::Release,
        Ordering::Relaxed,
    );
}

/// [`note_kind`], if a switch returned since it last looked: a run's
/// writers call it as they go, so its common case is a plain load, which
/// leaves the flag's cache line shared between their CPUs. Task context.
pub(crate) fn note_kind_after_switch() {
    if SWITCHES.unnoted.load(Ordering::Relaxed) && SWITCHES.unnoted.swap(false, Ordering::Acquire) {
        note_kind();
    }
}

/// The switch count now: even and unchanged across two reads if no
/// switch ran between them, with [`OTHER_COUNTER`] while the clocksource
/// is not nmiclock's counter. Any context.
#[inline]
pub(crate) fn seq() -> u64 {
    SWITCHES.seq.load(Ordering::Acquire)
}

/// The count over a stretch that began at count `before`: itself, or made
/// odd if a switch came since ([`crate::read_check::Around::cs_seq`]).
#[inline]
pub(crate) fn since(before: u64) -> u64 {
    let after = seq();
    if after == before {
        before
    } else {
        before | 1
    }
}

/// How far, in counter cycles, a kernel clock read at counter value `at`
/// may step back for a clocksource switch: while one runs, the time since
/// it began; within the last one's length after it returned, that length
/// (a read of the old copy is older than the new copy's first reads by at
/// most the stretch the switch lost, which lies inside it). `None`
/// otherwise, or if no switch was seen. Any context.
pub(crate) fn allowance(at: u64) -> Option<u64> {
    let seq = seq();
    let start = SWITCHES.start.load(Ordering::Acquire);
    let end = SWITCHES.end.load(Ordering::Acquire);
    if seq & !OTHER_COUNTER == 0 {
        return None;
    }
    if seq & 1 != 0 || since(seq) != seq {
        return Some(at.saturating_sub(start));
    }
    let len = end.saturating_sub(start);
    (at.saturating_sub(end) <= len).then_some(len)
}

/// The kretprobe on `change_clocksource()`, for as long as the module is
/// loaded: unregistered on drop.
pub(crate) struct Watch {
    _probe: Option<Bracket>,
}

impl Watch {
    /// Brackets the kernel's clocksource switch. A kernel without
    /// kretprobes, or whose switch cannot be probed, gets one log line and
    /// no watch (reference checks then may span a switch, and a kernel
    /// clock's step back across one is judged without it); out of memory
    /// is an error. Task context.
    pub(crate) fn new() -> Result<Self> {
        let symbol = c_str!("change_clocksource");
        match Bracket::new(symbol, |e| match e {
            Edge::Enter => enter(),
            Edge::Leave => leave(),
        }) {
            Ok(b) => {
                note_kind();
                Ok(Self { _probe: Some(b) })
            }
            Err(e) if e == ENOMEM => Err(e),
            Err(e) => {
                pr_info!(
                    "cannot bracket {}() (error {}{}): clocksource switches are not seen\n",
                    symbol.to_str().unwrap_or("?"),
                    e.to_errno(),
                    if Bracket::unsupported(e) {
                        ", a kernel without CONFIG_KRETPROBES"
                    } else {
                        ""
                    }
                );
                Ok(Self { _probe: None })
            }
        }
    }
}
