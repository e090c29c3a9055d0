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
//! While the module is loaded, a kretprobe brackets `change_clocksource()`
//! ([`Watch`]): its entry and return each add one to a count (odd inside a
//! switch), and are timed on the module's own counter, which no switch
//! moves. The probe's handlers, like the readers, use atomics only.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::c_str;
use kernel::prelude::*;

use crate::arch::Ordered;
use crate::counter::Counter;
use crate::ffi::kprobe::{Bracket, Edge};

/// The switches seen since the module loaded. One switch runs at a time
/// (the kernel's clocksource mutex), so there is one writer at a time.
struct Switches {
    /// Entries plus returns: odd while a switch runs.
    seq: AtomicU64,
    /// The counter at the last entry and at the last return.
    start: AtomicU64,
    end: AtomicU64,
}

static SWITCHES: Switches = Switches {
    seq: AtomicU64::new(0),
    start: AtomicU64::new(0),
    end: AtomicU64::new(0),
};

/// A switch begins: its start is stored before the count goes odd, so a
/// reader that sees it odd sees this start.
fn enter() {
    if SWITCHES.seq.load(Ordering::Relaxed) & 1 == 0 {
        SWITCHES.start.store(Ordered.read(), Ordering::Relaxed);
        SWITCHES.seq.fetch_add(1, Ordering::Release);
    }
}

/// It returns (a return whose entry came before the probe is ignored).
fn leave() {
    if SWITCHES.seq.load(Ordering::Relaxed) & 1 != 0 {
        SWITCHES.end.store(Ordered.read(), Ordering::Relaxed);
        SWITCHES.seq.fetch_add(1, Ordering::Release);
    }
}

/// The switch count now: even and unchanged across two reads if no
/// switch ran between them. Any context.
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
    if seq == 0 {
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
            Ok(b) => Ok(Self { _probe: Some(b) }),
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
