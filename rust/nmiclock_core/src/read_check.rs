// SPDX-License-Identifier: GPL-2.0

//! The checks of one read of the clock against the reads before it on the
//! same reader, kernel-independent: one implementation for nmiclock.ko's
//! stress run (`rust/torture/sample.rs`, whose samples come from NMIs and
//! hard IRQs; it counts and records what these find) and the host torture
//! (`host/`, whose come from signal handlers and reader threads).
//!
//! A reader's [`Base`] is its last good read. A new read is checked
//!
//! - **exactly**: its elapsed time since the base must be the conversion
//!   of the counter cycles between them ([`elapsed_bound`], widened for a
//!   conversion switch in between by [`switch_skewed_bound`]);
//! - against the **reference** clock read on both sides of it, give or
//!   take [`REF_TOLERANCE_NS`] and [`REF_TOLERANCE_PPM`] of the gap, unless
//!   a clocksource switch came in between (the kernel's reference loses
//!   the switch's own time) or the reference read another counter than
//!   the clock ([`Around::cs_seq`]);
//! - against the reader's **previous** read (backwards).
//!
//! No check spans an overrun (an epoch update a whole counter wrap late),
//! which loses whole wraps whatever the protection. A torn read is no
//! base, so consecutive torn reads each count. One reader's [`Base`] is
//! used by that reader only (one CPU with interrupts off, one thread with
//! its signals blocked in the handler): its atomics are for NMI and
//! signal safety, not for sharing. Nothing here allocates, locks or
//! panics.

use crate::clock::{elapsed_bound, switch_skewed_bound, ClockData, Reading};
use crate::sync::{fence, AtomicBool, AtomicU64, Ordering};

/// Fixed part of the tolerance of the reference check, ns.
pub const REF_TOLERANCE_NS: u64 = 20_000;
/// Part of the tolerance of the reference check that grows with the gap
/// between two reads, in parts per million of it.
pub const REF_TOLERANCE_PPM: u64 = 1_000;

/// Set in [`Around::cs_seq`] while the reference reads another counter than
/// the clock checked (the kernel's clocksource is the HPET, say, and the
/// clock reads the TSC). Two counters agree only as well as one was
/// calibrated against the other, which no tolerance here can promise:
/// under QEMU TCG the emulated TSC gains up to 3 % on the emulated HPET
/// while vCPUs read it. No reference check then.
pub const CS_OTHER_COUNTER: u64 = 1 << 63;

/// What the writers had done around one read, gathered by the reader.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Around {
    /// Conversion switches finished before the read began.
    pub switches: u64,
    /// Conversion switches recorded (pivot known) by the time it ended.
    pub switched: u64,
    /// Overruns counted before the read began.
    pub overruns: u64,
    /// No overrun was counted while it read.
    pub same: bool,
    /// The reference clock just before and just after the read, ns.
    pub ref_lo: u64,
    /// See `ref_lo`.
    pub ref_hi: u64,
    /// The kernel's clocksource switches around the reference's two reads:
    /// a count that is odd while one runs, made odd by the reader if it
    /// changed between them; with [`CS_OTHER_COUNTER`] while the
    /// clocksource is not the clock's counter. The reference (the kernel's)
    /// stands still for part of a switch, so no reference check spans one:
    /// a read under another count than its base's, an odd one or one on
    /// another counter is not checked against the reference. Always 0
    /// where nothing switches (the host).
    pub cs_seq: u64,
}

/// What the checks of one read found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// The exact check's error, ns (0: within the bound; negative: below
    /// it) and the time at the end of the bound it missed; `None`: no
    /// exact check (no base, an overrun, or the switch it spans is no
    /// longer known).
    pub exact: Option<(i64, u64)>,
    /// How far a late conversion switch widened the exact bound, ns.
    pub skew: u64,
    /// The previous read, when this one is older than it.
    pub backwards: Option<u64>,
    /// How far off the reference's window the elapsed time is, ns, and the
    /// time it was expected near, when off by more than the tolerance.
    pub reference: Option<(u64, u64)>,
}

impl Findings {
    /// The read passed its exact and reference checks (or had none): it
    /// may be the next base.
    pub fn good(&self) -> bool {
        !matches!(self.exact, Some((e, _)) if e != 0) && self.reference.is_none()
    }

    /// The exact check failed.
    pub fn torn(&self) -> bool {
        matches!(self.exact, Some((e, _)) if e != 0)
    }
}

/// One reader's last good read and previous read.
pub struct Base {
    ns: AtomicU64,
    cyc: AtomicU64,
    switches: AtomicU64,
    conv: AtomicU64,
    overruns: AtomicU64,
    ref_lo: AtomicU64,
    ref_hi: AtomicU64,
    cs_seq: AtomicU64,
    has: AtomicBool,
    prev_ns: AtomicU64,
    prev_overruns: AtomicU64,
}

impl Default for Base {
    fn default() -> Self {
        Self::new()
    }
}

impl Base {
    crate::clock::loom_const_fn! {
        /// No base yet: the first read is taken as one, unchecked.
        pub fn new() -> Self {
            Self {
                ns: AtomicU64::new(0),
                cyc: AtomicU64::new(0),
                switches: AtomicU64::new(0),
                conv: AtomicU64::new(0),
                overruns: AtomicU64::new(0),
                ref_lo: AtomicU64::new(0),
                ref_hi: AtomicU64::new(0),
                cs_seq: AtomicU64::new(0),
                has: AtomicBool::new(false),
                prev_ns: AtomicU64::new(0),
                prev_overruns: AtomicU64::new(0),
            }
        }
    }

    /// Makes the next read a new base: nothing before compares with it.
    pub fn forget(&self) {
        self.has.store(false, Ordering::Relaxed);
    }

    /// The base's counter value (for an anomaly's record).
    pub fn cyc(&self) -> u64 {
        self.cyc.load(Ordering::Relaxed)
    }

    /// Checks read `r`, whose surroundings are `a`, against this base: the
    /// clock having used only `conversions` since the run began, and
    /// `switch` giving switch number `i`'s pivot and new conversion.
    pub fn check(
        &self,
        r: &Reading,
        a: &Around,
        conversions: impl Iterator<Item = (u32, u32)>,
        switch: impl Fn(u64) -> Option<(u64, u32, u32)>,
    ) -> Findings {
        let mut f = Findings::default();
        if !self.has.load(Ordering::Relaxed) || !a.same {
            return f;
        }
        let ns = r.ns;
        if self.prev_overruns.load(Ordering::Relaxed) == a.overruns {
            let prev = self.prev_ns.load(Ordering::Relaxed);
            if ns < prev {
                f.backwards = Some(prev);
            }
        }
        if self.overruns.load(Ordering::Relaxed) != a.overruns {
            return f;
        }
        let base = self.ns.load(Ordering::Relaxed);
        let d = ns.wrapping_sub(base) as i64;
        let cycles = r.now_cyc.wrapping_sub(self.cyc.load(Ordering::Relaxed));
        // The switches that may have taken effect between the two reads:
        // those recorded by the end of this one, less those finished before
        // the base began. Epoch updates move the epoch exactly and widen
        // nothing.
        let k = a
            .switched
            .wrapping_sub(self.switches.load(Ordering::Relaxed));
        if let Some((lo, hi)) =
            self.switch_bound(elapsed_bound(cycles, k, conversions), a, &switch, &mut f)
        {
            let err = if d < lo {
                d.wrapping_sub(lo)
            } else if d > hi {
                d.wrapping_sub(hi)
            } else {
                0
            };
            let end = if err < 0 { lo } else { hi };
            f.exact = Some((err, base.wrapping_add(end as u64)));
        }
        f.reference = self.off_reference(ns, a.ref_lo, a.ref_hi, a.cs_seq);
        f
    }

    /// `bound` widened for the first conversion switch that finished after
    /// the base was read, if any did; `None` if its record is gone.
    fn switch_bound(
        &self,
        bound: (i64, i64),
        a: &Around,
        switch: &impl Fn(u64) -> Option<(u64, u32, u32)>,
        f: &mut Findings,
    ) -> Option<(i64, i64)> {
        let first = self.switches.load(Ordering::Relaxed);
        if a.switched <= first {
            return Some(bound);
        }
        let (pivot, mult, shift) = switch(first)?;
        let conv = self.conv.load(Ordering::Relaxed);
        let from = ((conv >> 32) as u32, conv as u32);
        let skewed = switch_skewed_bound(bound, self.cyc(), pivot, from, (mult, shift));
        let widened = bound.0.wrapping_sub(skewed.0) | skewed.1.wrapping_sub(bound.1);
        f.skew = widened as u64;
        Some(skewed)
    }

    /// The reference check of a read `ns` bracketed by `ref_lo` and
    /// `ref_hi` against the base: the elapsed reference time lies in
    /// [lo, hi], the clock's must too, give or take the tolerance. None
    /// across a clocksource switch or on another counter (`cs_seq`, see
    /// [`Around::cs_seq`]).
    fn off_reference(&self, ns: u64, ref_lo: u64, ref_hi: u64, cs_seq: u64) -> Option<(u64, u64)> {
        if cs_seq & (1 | CS_OTHER_COUNTER) != 0 || self.cs_seq.load(Ordering::Relaxed) != cs_seq {
            return None;
        }
        let base = self.ns.load(Ordering::Relaxed);
        let d = ns.wrapping_sub(base) as i64;
        let lo = ref_lo.wrapping_sub(self.ref_hi.load(Ordering::Relaxed)) as i64;
        let hi = ref_hi.wrapping_sub(self.ref_lo.load(Ordering::Relaxed)) as i64;
        let growth = (hi.max(0) as u64 / 1_000_000).saturating_mul(REF_TOLERANCE_PPM);
        let tol = REF_TOLERANCE_NS.saturating_add(growth) as i64;
        let err = if d < lo {
            lo.saturating_sub(d)
        } else {
            d.saturating_sub(hi).max(0)
        };
        (err > tol).then(|| {
            let mid = (lo / 2).wrapping_add(hi / 2);
            (err as u64, base.wrapping_add(mid as u64))
        })
    }

    /// The checks of a read `ns` of a clock without a counter (another
    /// module's, or the kernel's): against the previous read and the
    /// reference bracketing it (under clocksource switch count `cs_seq`);
    /// there is no exact check, and no overruns.
    pub fn check_time(&self, ns: u64, ref_lo: u64, ref_hi: u64, cs_seq: u64) -> Findings {
        let mut f = Findings::default();
        if self.has.load(Ordering::Relaxed) {
            let prev = self.prev_ns.load(Ordering::Relaxed);
            if ns < prev {
                f.backwards = Some(prev);
            }
            f.reference = self.off_reference(ns, ref_lo, ref_hi, cs_seq);
        }
        f
    }

    /// After [`Self::check_time`] of `ns`: it is the previous read now, and
    /// the base if it was `good` (or there was none).
    pub fn settle_time(&self, ns: u64, ref_lo: u64, ref_hi: u64, cs_seq: u64, good: bool) {
        self.prev_ns.store(ns, Ordering::Relaxed);
        if good || !self.has.load(Ordering::Relaxed) {
            self.ns.store(ns, Ordering::Relaxed);
            self.ref_lo.store(ref_lo, Ordering::Relaxed);
            self.ref_hi.store(ref_hi, Ordering::Relaxed);
            self.cs_seq.store(cs_seq, Ordering::Relaxed);
            self.has.store(true, Ordering::Relaxed);
        }
    }

    /// After the checks of `r`: it is the previous read now, and the base
    /// if it was `good` (or there was none).
    pub fn settle(&self, r: &Reading, a: &Around, good: bool) {
        self.prev_ns.store(r.ns, Ordering::Relaxed);
        self.prev_overruns.store(a.overruns, Ordering::Relaxed);
        if good || !self.has.load(Ordering::Relaxed) {
            self.ns.store(r.ns, Ordering::Relaxed);
            self.cyc.store(r.now_cyc, Ordering::Relaxed);
            self.switches.store(a.switches, Ordering::Relaxed);
            let conv = (u64::from(r.mult) << 32) | u64::from(r.shift);
            self.conv.store(conv, Ordering::Relaxed);
            self.overruns.store(a.overruns, Ordering::Relaxed);
            self.ref_lo.store(a.ref_lo, Ordering::Relaxed);
            self.ref_hi.store(a.ref_hi, Ordering::Relaxed);
            self.cs_seq.store(a.cs_seq, Ordering::Relaxed);
            self.has.store(true, Ordering::Relaxed);
        }
    }
}

/// Conversion switches a [`SwitchLog`] keeps: a check whose base is older
/// than this many switches cannot look its first one up, and is skipped.
pub const SWITCH_RING: usize = 64;

/// One conversion switch: its number plus 1 (0 while being written), its
/// pivot (the counter value its new epoch is at) and its new conversion
/// (`mult << 32 | shift`).
struct SwitchRecord {
    num: AtomicU64,
    pivot: AtomicU64,
    conv: AtomicU64,
}

impl SwitchRecord {
    crate::clock::loom_const_fn! {
        fn new() -> Self {
            Self {
                num: AtomicU64::new(0),
                pivot: AtomicU64::new(0),
                conv: AtomicU64::new(0),
            }
        }
    }
}

/// The conversion switches of a clock, for the checks' bound (see
/// [`switch_skewed_bound`]): each switch's pivot and new conversion,
/// recorded by its writer before the publish ([`SwitchLog::record`], from
/// [`crate::clock::Writer::switching`]), and counts of the switches
/// recorded and finished. Readers look a switch up by its number
/// ([`SwitchLog::get`]), NMI and signal context included: a record is a
/// small seqlock whose reader gives up (`None`) rather than wait.
pub struct SwitchLog {
    ring: [SwitchRecord; SWITCH_RING],
    started: AtomicU64,
    finished: AtomicU64,
}

impl Default for SwitchLog {
    fn default() -> Self {
        Self::new()
    }
}

impl SwitchLog {
    /// An empty log.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            ring: [const { SwitchRecord::new() }; SWITCH_RING],
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
        }
    }

    /// An empty log.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            ring: core::array::from_fn(|_| SwitchRecord::new()),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
        }
    }

    /// Records the switch about to publish `new`. Its writer's only: under
    /// the clock's writer exclusion, one recorder at a time.
    pub fn record(&self, new: &ClockData) {
        let i = self.started.load(Ordering::Relaxed);
        if let Some(r) = self.ring.get((i % SWITCH_RING as u64) as usize) {
            r.num.store(0, Ordering::Relaxed);
            fence(Ordering::Release);
            r.pivot.store(new.epoch_cyc, Ordering::Relaxed);
            let conv = (u64::from(new.mult) << 32) | u64::from(new.shift);
            r.conv.store(conv, Ordering::Relaxed);
            r.num.store(i.wrapping_add(1), Ordering::Release);
        }
        self.started.store(i.wrapping_add(1), Ordering::Release);
    }

    /// The switch recorded last has been published. Its writer's only,
    /// from [`crate::clock::Writer::switched`]: still under the writer
    /// exclusion, so that the count of finished switches is never behind
    /// a later switch's record (a reader that took `finished` before its
    /// read then finds, as the first switch it may have crossed, the one
    /// that was really in flight, and not an older one).
    pub fn finish(&self) {
        self.finished.fetch_add(1, Ordering::AcqRel);
    }

    /// Switches recorded so far. Any context.
    #[inline]
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::Acquire)
    }

    /// Switches whose publish has finished. Any context.
    #[inline]
    pub fn finished(&self) -> u64 {
        self.finished.load(Ordering::Acquire)
    }

    /// Switch number `i` (from 0): its pivot and new `(mult, shift)`, or
    /// `None` if it is not recorded (yet, or any more). Any context.
    #[inline]
    pub fn get(&self, i: u64) -> Option<(u64, u32, u32)> {
        let r = self.ring.get((i % SWITCH_RING as u64) as usize)?;
        let want = i.wrapping_add(1);
        if r.num.load(Ordering::Acquire) != want {
            return None;
        }
        let pivot = r.pivot.load(Ordering::Relaxed);
        let conv = r.conv.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (r.num.load(Ordering::Relaxed) == want).then_some((pivot, (conv >> 32) as u32, conv as u32))
    }
}
