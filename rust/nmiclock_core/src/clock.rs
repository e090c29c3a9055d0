// SPDX-License-Identifier: GPL-2.0

//! The nmiclock clock: a `sched_clock` whose read side an NMI can run at any
//! instant, and the weaker designs it replaced.
//!
//! A read is `epoch_ns + cyc_to_ns((now - epoch_cyc) & mask)`: the time of
//! the last epoch plus the counter cycles since then. The epoch is moved
//! forward (by [`Clock::update_epoch`], from an hrtimer in the kernel)
//! before the masked counter can wrap. The question is what a reader sees
//! while that update is half done, and in particular a reader that is an
//! NMI which interrupted the updater on the same CPU. Three answers, each a
//! [`Protection`]:
//!
//! - [`Latch`] (`latch`): two copies of the data and a sequence count whose
//!   low bit tells readers which copy is stable, as `kernel/time/sched_clock.c`
//!   does. Readers never wait for the writer:
//!
//!   ```text
//!   writer                         seq    readers use
//!   write copy[1]                  even   copy[0]
//!   seq++  (steer to the odd copy) odd    copy[1]
//!   write copy[0]                  odd    copy[1]
//!   seq++  (back to the even copy) even   copy[0]
//!   ```
//!
//!   A reader retries only if `seq` changed while it read, i.e. the copy it
//!   read may have been rewritten under it. This is 6.12's order; 7.x's
//!   `update_clock_read_data()` steers first (readers take the odd copy,
//!   still the old data), writes copy[0], steers back, then rewrites
//!   copy[1]: the same guarantee, but a reader inside the update gets the
//!   old epoch where here it gets the new one. Either is a whole copy, and
//!   the checks accept either, so the kernel's clock is judged alike on
//!   both releases.
//! - [`Seqcount`] (`seqcount`): one copy and a classic sequence count
//!   (odd while writing). Readers wait for an even count; an NMI that landed
//!   inside the write section would wait forever for the code it
//!   interrupted, so the wait has a time budget
//!   ([`crate::spin::cond_load_acquire_timeout`]); on timeout the reader
//!   returns its best (possibly torn) value and says it stalled.
//! - [`Unprotected`] (`unprotected`): one copy, no count. Tears on purpose.
//!
//! The data fields are atomics accessed with relaxed ordering, so a racing
//! reader is defined behaviour (it may see a mix of old and new fields, which
//! the sequence count then rejects); ordering comes from acquire/release on
//! the count and fences, the C11 form of `smp_wmb()`/`smp_rmb()`.
//!
//! What a tear looks like: [`SharedData::store`] writes the conversion, then
//! `epoch_cyc`, then `epoch_ns`, so a reader that mixes the two epochs
//! computes a time early by the whole interval since the old epoch. With
//! the epoch moved by a timer, a torn read therefore shows as a backward
//! step of about one update interval. A reader that mixes the fields of two
//! conversions converts with one that never was (with the pairs of
//! `disturb=conversion`, half or twice the time since the epoch).
//! [`elapsed_bound`] is how the module's checks tell such reads from
//! rounding.
//!
//! Whole counter wraps are invisible in the masked delta: an epoch update
//! that comes more than one wrap late (a narrow counter on a preempted
//! vCPU) cannot be repaired, loses the whole wraps and steps time back by
//! them whatever the protection. It is reported as an overrun
//! ([`EpochUpdate::Updated`]), so that it is never taken for a read-side
//! tear.
//!
//! How the module uses it: a [`Clock`] is a protection over a counter with
//! writer exclusion (a second writer gets [`EpochUpdate::Busy`] and does
//! nothing). The module keeps one static [`Clock`] per protection and
//! counter, selected by name; its writers (the epoch timer, the stress
//! run's writers, a `config` rebuild) reach the running one through a table
//! of the object-safe [`ClockSource`], while its readers, NMI context
//! included, call the concrete [`Clock`], statically dispatched: a call
//! through a pointer is refused on the NMI path. A writer passes a
//! [`Writer`] whose hooks mark its window (for the coverage figures) and
//! pause inside it (fault injection).
//!
//! Kernel-independent: compiled into nmiclock.ko and into the host crate
//! from this file. `tests/clock.rs` checks reads at every counter width
//! against a 128-bit reference, epoch continuity, overruns, recalibration,
//! and an "NMI" inside the writer: the seqcount reader stalls with a torn
//! value where the latch reads the other copy. `tests/loom_clock.rs`
//! model-checks one reader against one update: the latch and the seqcount
//! return the old or the new epoch's time, never a mix, and `unprotected` is
//! caught returning one.

use crate::counter::Counter;
use crate::cyc_ns::{cyc_to_ns, max_cycles, mul_u64_u32_shr};
use crate::spin::{cond_load_acquire_timeout, SpinBudget, DEFAULT_POLL_COUNT};
use crate::sync::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Emits a function as `const fn`, except under loom, whose atomics cannot
/// be created in const context. The kernel needs `const` for its statics.
macro_rules! loom_const_fn {
    ($(#[$attr:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[cfg(not(loom))]
        $(#[$attr])*
        $vis const fn $name($($arg: $ty),*) -> $ret $body
        #[cfg(loom)]
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use loom_const_fn;

/// Everything a read needs (the kernel's `struct clock_read_data`, and
/// the sub-nanosecond remainder the kernel's timekeeper keeps as shifted
/// nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockData {
    /// Clock value at the epoch, in ns.
    pub epoch_ns: u64,
    /// What the epoch's time has beyond `epoch_ns`, in `2^-shift` ns
    /// (below `2^shift`): the remainder of the conversion that moved the
    /// epoch there. Kept so that moving the epoch loses nothing: without
    /// it every epoch update would drop up to 1 ns, and a clock whose epoch
    /// moves a million times a second would run 1000 ppm slow.
    pub epoch_frac: u64,
    /// Counter value at the epoch (unmasked).
    pub epoch_cyc: u64,
    /// Cycles to ns multiplier.
    pub mult: u32,
    /// Cycles to ns shift.
    pub shift: u32,
    /// Counter width mask: deltas are taken modulo `mask + 1`.
    pub mask: u64,
}

impl ClockData {
    /// The clock value when the counter reads `now`.
    #[inline(always)]
    pub fn ns_at(&self, now: u64) -> u64 {
        self.epoch_ns
            .wrapping_add(self.shifted_at(now) >> self.shift.min(63))
    }

    /// The time from `epoch_ns` to when the counter reads `now`, in
    /// `2^-shift` ns: the cycles since the epoch converted, plus
    /// `epoch_frac`. Within [`Self::max_ns`] of the epoch it does not
    /// overflow (the epoch moves at half that).
    #[inline(always)]
    fn shifted_at(&self, now: u64) -> u64 {
        let cyc = now.wrapping_sub(self.epoch_cyc) & self.mask;
        cyc.wrapping_mul(u64::from(self.mult))
            .wrapping_add(self.epoch_frac)
    }

    /// This data with its epoch moved to counter value `now`, losing no
    /// time: the new epoch's whole nanoseconds go to `epoch_ns`, the
    /// remainder to `epoch_frac`.
    #[inline]
    pub fn moved_to(&self, now: u64) -> Self {
        let shift = self.shift.min(63);
        let t = self.shifted_at(now);
        Self {
            epoch_ns: self.epoch_ns.wrapping_add(t >> shift),
            epoch_frac: t & ((1u64 << shift) - 1),
            epoch_cyc: now,
            ..*self
        }
    }

    /// This data's epoch moved to `now` and switched to conversion
    /// `(mult, shift)`, with no step in time: the remainder is carried
    /// over to the new shift (less than `2^-shift` ns of it may be lost).
    #[inline]
    pub fn converted_at(&self, now: u64, mult: u32, shift: u32) -> Self {
        let moved = self.moved_to(now);
        let (from, to) = (self.shift.min(63), shift.min(63));
        let frac = if to >= from {
            moved.epoch_frac << (to - from)
        } else {
            moved.epoch_frac >> (from - to)
        };
        Self {
            epoch_frac: frac & ((1u64 << to) - 1),
            mult,
            shift,
            ..moved
        }
    }

    /// Time in ns until a delta can no longer be converted: the counter
    /// wraps or `cyc * mult` overflows, whichever comes first.
    pub fn max_ns(&self) -> u64 {
        cyc_to_ns(max_cycles(self.mult, self.mask), self.mult, self.shift)
    }

    /// How often the epoch must move: half of [`Self::max_ns`], the margin
    /// the kernel's `clocks_calc_max_nsecs()` takes for `wrap_kt`.
    pub fn update_interval_ns(&self) -> u64 {
        self.max_ns() >> 1
    }
}

/// Which part of an update a writer is in: the window an NMI (or a reader
/// on another CPU) can land in. Reported through [`Writer::enter`], so the
/// module can tell how often its readers really met a half-written update
/// (its coverage), and by the reads of which copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Window {
    /// Latch: the odd copy is being written; readers use the even one.
    FirstCopy = 1,
    /// Latch: the even copy is being written; readers use the odd one.
    SecondCopy = 2,
    /// Seqcount: the count is odd and its one copy is being written.
    SeqOdd = 3,
    /// Unprotected: its one copy is being written, nothing tells readers.
    Bare = 4,
    /// A target another module registered is inside its `update`: what it
    /// writes there, and how, is its own.
    Target = 5,
}

impl Window {
    /// The window a marker value (`window as u32`) stands for; `None` for 0
    /// (no update in progress) and anything unknown.
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::FirstCopy),
            2 => Some(Self::SecondCopy),
            3 => Some(Self::SeqOdd),
            4 => Some(Self::Bare),
            5 => Some(Self::Target),
            _ => None,
        }
    }

    /// The copy being written: 1 for the latch's first (odd) copy, 0 for
    /// every other (the latch's even copy, or the one copy there is).
    pub fn copy_written(self) -> u32 {
        match self {
            Self::FirstCopy => 1,
            _ => 0,
        }
    }

    /// Name used in `anomalies` and the documentation.
    pub fn name(self) -> &'static str {
        match self {
            Self::FirstCopy => "first_copy",
            Self::SecondCopy => "second_copy",
            Self::SeqOdd => "seq_odd",
            Self::Bare => "bare",
            Self::Target => "target_update",
        }
    }
}

/// What a writer calls inside its update: fault injection ([`Writer::pause`])
/// and coverage marking ([`Writer::enter`], [`Writer::leave`]). Every hook
/// defaults to doing nothing; any `FnMut()` is a `Writer` whose `pause` it
/// is.
///
/// A window is entered before the first store of the stretch in which a
/// reader could see a half-written update (a copy's stores; for the
/// seqcount, its whole odd phase) and left after the last, so it encloses
/// every such instant: a read that could see a half-written update always
/// counts as landing in a window (so may a few that land just before the
/// first store).
pub trait Writer {
    /// A stretch in which readers could see a half-written update begins:
    /// `window` says which.
    fn enter(&mut self, _window: Window) {}
    /// Between the stores of `epoch_cyc` and `epoch_ns`, inside the window:
    /// a reader of this copy here sees the new counter value with the old
    /// time, the tear the protections exist to prevent.
    fn pause(&mut self) {}
    /// The stretch is over: the update is whole again.
    fn leave(&mut self) {}
    /// The update about to be published comes more than a whole counter
    /// wrap after the epoch it replaces, so whole wraps are lost (see
    /// [`EpochUpdate::Updated`]). Called before the publish, so that a
    /// reader that sees the new epoch can have heard of the loss first.
    fn overrun(&mut self) {}
    /// A conversion switch ([`ClockSource::recalibrate`]) is about to
    /// publish `new`, whose epoch is the switch's pivot: the counter value
    /// from which the new conversion applies. Called before the publish,
    /// under the writer exclusion, so that a reader that sees `new` can
    /// know the pivot (see [`switch_skewed_bound`]).
    fn switching(&mut self, _new: &ClockData) {}
    /// The conversion switch announced by [`Writer::switching`] has been
    /// published. Called after the publish and still under the writer
    /// exclusion, so that no other switch can begin before the switch
    /// counts as finished: a reader that takes its count of finished
    /// switches then knows every switch it may have crossed (see
    /// [`crate::read_check::SwitchLog::finish`]).
    fn switched(&mut self) {}
}

impl<F: FnMut()> Writer for F {
    fn pause(&mut self) {
        self()
    }
}

/// One copy of [`ClockData`], field by field in atomics.
pub struct SharedData {
    epoch_ns: AtomicU64,
    epoch_frac: AtomicU64,
    epoch_cyc: AtomicU64,
    mult: AtomicU32,
    shift: AtomicU32,
    mask: AtomicU64,
}

impl SharedData {
    loom_const_fn! {
        /// All zero: reads give 0 until data is published (`mult` is 0).
        pub fn new() -> Self {
            Self {
                epoch_ns: AtomicU64::new(0),
                epoch_frac: AtomicU64::new(0),
                epoch_cyc: AtomicU64::new(0),
                mult: AtomicU32::new(0),
                shift: AtomicU32::new(0),
                mask: AtomicU64::new(0),
            }
        }
    }

    /// Loads every field (relaxed; the caller orders the loads).
    #[inline(always)]
    pub fn load(&self) -> ClockData {
        ClockData {
            epoch_ns: self.epoch_ns.load(Ordering::Relaxed),
            epoch_frac: self.epoch_frac.load(Ordering::Relaxed),
            epoch_cyc: self.epoch_cyc.load(Ordering::Relaxed),
            mult: self.mult.load(Ordering::Relaxed),
            shift: self.shift.load(Ordering::Relaxed),
            mask: self.mask.load(Ordering::Relaxed),
        }
    }

    /// Stores every field (relaxed), calling [`Writer::pause`] where a
    /// reader would see a tear.
    ///
    /// The conversion comes first, then `epoch_cyc` and last `epoch_ns`
    /// (with `epoch_frac` just before it, worth less than 1 ns): a
    /// reader that sees the new `epoch_cyc` with the old `epoch_ns` computes
    /// a time that is early by the whole interval since the old epoch, and
    /// one that sees a new `mult` with the old `shift` or epoch converts
    /// with a conversion that never was: the tears the protections exist
    /// to prevent. [`Writer::pause`] widens that window on purpose (fault
    /// injection).
    pub fn store(&self, d: &ClockData, w: &mut dyn Writer) {
        self.mult.store(d.mult, Ordering::Relaxed);
        self.shift.store(d.shift, Ordering::Relaxed);
        self.mask.store(d.mask, Ordering::Relaxed);
        self.epoch_cyc.store(d.epoch_cyc, Ordering::Relaxed);
        w.pause();
        self.epoch_frac.store(d.epoch_frac, Ordering::Relaxed);
        self.epoch_ns.store(d.epoch_ns, Ordering::Relaxed);
    }
}

/// One read of the clock and how it went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The time read, in ns.
    pub ns: u64,
    /// Counter value the time was computed from.
    pub now_cyc: u64,
    /// Epoch of the data used.
    pub epoch_ns: u64,
    /// Counter value at that epoch.
    pub epoch_cyc: u64,
    /// Conversion of the data used: a read that mixes two conversions'
    /// fields shows here.
    pub mult: u32,
    /// Its shift.
    pub shift: u32,
    /// Sequence count the read was validated against (0 if none).
    pub seq: u32,
    /// Latch copy read (0 or 1; always 0 without a latch).
    pub copy: u32,
    /// Times the read was restarted because the writer moved.
    pub retries: u32,
    /// The read gave up waiting for the writer: its value may be torn.
    pub stalled: bool,
    /// The epoch read was more than a whole counter wrap old (the counter,
    /// read unmasked, had passed `mask` since it): the masked delta lost
    /// whole wraps, so the value is early by them, whatever the protection.
    /// Not a tear: the epoch update came too late (see [`EpochUpdate`]).
    pub late_epoch: bool,
}

impl Reading {
    /// A read of `d` at counter value `now`, validated against nothing yet.
    #[inline(always)]
    fn of(d: &ClockData, now: u64) -> Self {
        let since = now.wrapping_sub(d.epoch_cyc);
        Self {
            ns: d.ns_at(now),
            now_cyc: now,
            epoch_ns: d.epoch_ns,
            epoch_cyc: d.epoch_cyc,
            mult: d.mult,
            shift: d.shift,
            late_epoch: (since as i64) > 0 && since > d.mask,
            ..Self::default()
        }
    }
}

/// Retries after which a read gives up and reports a stall: no real writer
/// updates this fast, but an NMI handler must never loop without bound.
pub const MAX_RETRIES: u32 = 1 << 16;

/// How a reader is protected from a concurrent update.
///
/// # Writers
///
/// [`Protection::publish`] must not run concurrently with itself:
/// [`Clock`] serialises writers.
pub trait Protection: Sync {
    /// Name used in module parameters and `stats`.
    const NAME: &'static str;

    /// Reads the clock with `counter`. Any wait for the writer ends after
    /// `budget`, measured with `now_ns`.
    fn read<C: Counter, N: FnMut() -> u64>(
        &self,
        counter: &C,
        budget: SpinBudget,
        now_ns: N,
    ) -> Reading;

    /// Makes `data` the data readers use, telling `w` where it is.
    fn publish(&self, data: &ClockData, w: &mut dyn Writer);

    /// The data last published (for the writer).
    fn published(&self) -> ClockData;
}

/// Two copies steered by a latch sequence count.
///
/// Both the order of [`Protection::publish`] (the copy readers are not
/// using first) and the release fence after each step of the count are
/// needed: without either, the loom model (`tests/loom_clock.rs`) finds a
/// reader returning a mix.
pub struct Latch {
    seq: AtomicU32,
    even: SharedData,
    odd: SharedData,
}

impl Latch {
    loom_const_fn! {
        /// A latch with zeroed data.
        pub fn new() -> Self {
            Self {
                seq: AtomicU32::new(0),
                even: SharedData::new(),
                odd: SharedData::new(),
            }
        }
    }

    #[inline(always)]
    fn copy(&self, seq: u32) -> &SharedData {
        if seq & 1 == 0 {
            &self.even
        } else {
            &self.odd
        }
    }

    /// Moves readers to the other copy (`raw_write_seqcount_latch()`).
    fn latch(&self) {
        let seq = self.seq.load(Ordering::Relaxed);
        // Release: a reader that sees the new count sees the copy it
        // selects fully written.
        self.seq.store(seq.wrapping_add(1), Ordering::Release);
        // And the stores that follow (to the copy readers just left) are
        // seen only by readers whose re-check then sees the new count.
        fence(Ordering::Release);
    }
}

impl Protection for Latch {
    const NAME: &'static str = "latch";

    #[inline(always)]
    fn read<C: Counter, N: FnMut() -> u64>(&self, counter: &C, _: SpinBudget, _: N) -> Reading {
        let mut retries: u32 = 0;
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            let d = self.copy(seq).load();
            let now = counter.read();
            fence(Ordering::Acquire);
            let again = self.seq.load(Ordering::Relaxed) != seq;
            if !again || retries >= MAX_RETRIES {
                return Reading {
                    seq,
                    copy: seq & 1,
                    retries,
                    stalled: again,
                    ..Reading::of(&d, now)
                };
            }
            retries += 1;
        }
    }

    fn publish(&self, data: &ClockData, w: &mut dyn Writer) {
        // Update the odd copy while readers use the even one.
        w.enter(Window::FirstCopy);
        self.odd.store(data, w);
        w.leave();
        // Steer readers to the odd copy.
        self.latch();
        // Now the even copy is free to update.
        w.enter(Window::SecondCopy);
        self.even.store(data, w);
        w.leave();
        // Steer readers back to the even copy.
        self.latch();
    }

    fn published(&self) -> ClockData {
        self.even.load()
    }
}

/// One copy and a classic sequence count (odd while writing).
pub struct Seqcount {
    seq: AtomicU32,
    data: SharedData,
}

impl Seqcount {
    loom_const_fn! {
        /// A seqcount with zeroed data.
        pub fn new() -> Self {
            Self {
                seq: AtomicU32::new(0),
                data: SharedData::new(),
            }
        }
    }
}

impl Protection for Seqcount {
    const NAME: &'static str = "seqcount";

    #[inline(always)]
    fn read<C: Counter, N: FnMut() -> u64>(
        &self,
        counter: &C,
        budget: SpinBudget,
        mut now_ns: N,
    ) -> Reading {
        let mut retries: u32 = 0;
        loop {
            // Wait for the writer to leave its section, within the budget.
            let (seq, stalled) =
                match cond_load_acquire_timeout(&self.seq, |s| s & 1 == 0, budget, &mut now_ns) {
                    Ok(seq) => (seq, false),
                    Err(seq) => (seq, true),
                };
            let d = self.data.load();
            let now = counter.read();
            fence(Ordering::Acquire);
            let again = self.seq.load(Ordering::Relaxed) != seq;
            if stalled || !again || retries >= MAX_RETRIES {
                return Reading {
                    seq,
                    copy: 0,
                    retries,
                    stalled: stalled || again,
                    ..Reading::of(&d, now)
                };
            }
            retries += 1;
        }
    }

    fn publish(&self, data: &ClockData, w: &mut dyn Writer) {
        // The window is the whole odd phase: a reader on this CPU that
        // interrupts any of it waits for a writer that cannot go on.
        w.enter(Window::SeqOdd);
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // The odd count is visible before any of the new data.
        fence(Ordering::Release);
        self.data.store(data, w);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
        w.leave();
    }

    fn published(&self) -> ClockData {
        self.data.load()
    }
}

/// One copy, no sequence count: readers can see a half-written update.
pub struct Unprotected {
    data: SharedData,
}

impl Unprotected {
    loom_const_fn! {
        /// Unprotected zeroed data.
        pub fn new() -> Self {
            Self {
                data: SharedData::new(),
            }
        }
    }
}

impl Protection for Unprotected {
    const NAME: &'static str = "unprotected";

    #[inline(always)]
    fn read<C: Counter, N: FnMut() -> u64>(&self, counter: &C, _: SpinBudget, _: N) -> Reading {
        let d = self.data.load();
        let now = counter.read();
        Reading::of(&d, now)
    }

    fn publish(&self, data: &ClockData, w: &mut dyn Writer) {
        w.enter(Window::Bare);
        self.data.store(data, w);
        w.leave();
    }

    fn published(&self) -> ClockData {
        self.data.load()
    }
}

/// What [`ClockSource::update_epoch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochUpdate {
    /// The epoch moved to the current counter value. `overrun`: more than
    /// one full counter wrap had passed since the previous epoch, so whole
    /// wraps were lost and the clock fell behind (the update came too late
    /// to be repaired, e.g. a very narrow counter on a preempted vCPU), or
    /// had passed by the end of the writer's window, so that readers of the
    /// old epoch in it may have lost one.
    Updated {
        /// Whole wraps were lost.
        overrun: bool,
    },
    /// Another writer was updating; nothing done.
    Busy,
    /// The counter read behind the epoch (another CPU's counter, or an
    /// unordered read executed early); the epoch was left alone.
    CounterBehind,
}

/// A clock as the module uses it: any protection over any counter, behind
/// one object-safe trait so the module can pick one by name at run time.
pub trait ClockSource: Sync {
    /// The protection's name.
    fn protection(&self) -> &'static str;
    /// The counter's name.
    fn counter(&self) -> &'static str;
    /// Reads the clock.
    fn read(&self) -> Reading;
    /// (Re)starts the clock at `start_ns` now, with a new conversion.
    /// Returns false (nothing done) if a writer is busy.
    fn start(&self, start_ns: u64, mult: u32, shift: u32, mask: u64) -> bool {
        self.start_from(&|| start_ns, mult, shift, mask)
    }
    /// (Re)starts the clock with a new conversion, continuing from the time
    /// `at` gives (another clock's read, or this one's): `at` is called
    /// after the counter was read for the new epoch, with writers held
    /// off, so the new epoch's time is no earlier than anything `at` could
    /// have read at that counter value, and the clock does not step back
    /// however long the writer had to be waited for. Returns false (nothing
    /// done, `at` not called) if a writer is busy.
    fn start_from(&self, at: &dyn Fn() -> u64, mult: u32, shift: u32, mask: u64) -> bool;
    /// (Re)starts the clock on the line `from` (another clock over the same
    /// counter, or this one) is on now, with a new conversion and mask: the
    /// new epoch is the current counter value and the very time `from`'s
    /// data gives for it, remainder included (as
    /// [`ClockSource::recalibrate`] does), so with the same conversion the
    /// two clocks read alike at every counter value, and a reader still
    /// reading `from` after the switch reads nothing the new clock had
    /// not. Both clocks' writers are held off meanwhile. Returns false
    /// (nothing done) if either's writer is busy.
    fn continue_from(&self, from: &dyn ClockSource, mult: u32, shift: u32, mask: u64) -> bool;
    /// Calls `f` with the data last published while this clock's writer is
    /// held off, so that it is whole and current. Returns false (`f` not
    /// called) if a writer is busy.
    fn with_data(&self, f: &mut dyn FnMut(&ClockData)) -> bool;
    /// Switches to a new conversion without a step in time: the new epoch
    /// is the current counter value and the time the old conversion gives
    /// for that very value (as `sched_clock_register()` does). Returns false
    /// (nothing done) if a writer is busy. `w` is told where the update is,
    /// as for [`ClockSource::update_epoch`].
    fn recalibrate(&self, mult: u32, shift: u32, w: &mut dyn Writer) -> bool;
    /// Moves the epoch to now, telling `w` where the update is (and letting
    /// it pause inside).
    fn update_epoch(&self, w: &mut dyn Writer) -> EpochUpdate;
    /// The data last published.
    fn data(&self) -> ClockData;
    /// Sets how long a reader may wait for the writer.
    fn set_wait_budget_ns(&self, ns: u64);
}

/// What a reader that waits for the writer measures its budget with: a
/// time in ns, readable wherever reads happen (NMI context included).
/// A type, not a function pointer, so that the wait calls it directly.
pub trait TimeSource: Sync {
    /// The time now, in ns.
    fn now_ns(&self) -> u64;
}

/// Any `fn() -> u64` is a time source (for the host's tests).
impl TimeSource for fn() -> u64 {
    fn now_ns(&self) -> u64 {
        self()
    }
}

/// A [`Protection`] over a [`Counter`], with writer exclusion; `T` times
/// the waits of protections that wait.
pub struct Clock<P, C, T> {
    prot: P,
    counter: C,
    writer: AtomicBool,
    budget_ns: AtomicU64,
    wait_clock: T,
}

impl<P: Protection, C: Counter, T: TimeSource> Clock<P, C, T> {
    loom_const_fn! {
        /// A clock reading 0 until [`ClockSource::start`].
        pub fn new(prot: P, counter: C, wait_clock: T) -> Self {
            Self {
                prot,
                counter,
                writer: AtomicBool::new(false),
                budget_ns: AtomicU64::new(100_000),
                wait_clock,
            }
        }
    }

    fn try_lock_writer(&self) -> bool {
        self.writer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn unlock_writer(&self) {
        self.writer.store(false, Ordering::Release);
    }
}

impl<P: Protection, C: Counter, T: TimeSource> ClockSource for Clock<P, C, T> {
    fn protection(&self) -> &'static str {
        P::NAME
    }

    fn counter(&self) -> &'static str {
        C::NAME
    }

    #[inline]
    fn read(&self) -> Reading {
        let budget = SpinBudget {
            timeout_ns: self.budget_ns.load(Ordering::Relaxed),
            poll_count: DEFAULT_POLL_COUNT,
        };
        self.prot
            .read(&self.counter, budget, || self.wait_clock.now_ns())
    }

    fn start_from(&self, at: &dyn Fn() -> u64, mult: u32, shift: u32, mask: u64) -> bool {
        if !self.try_lock_writer() {
            return false;
        }
        let epoch_cyc = self.counter.read();
        let data = ClockData {
            epoch_ns: at(),
            epoch_frac: 0,
            epoch_cyc,
            mult,
            shift,
            mask,
        };
        self.prot.publish(&data, &mut || {});
        self.unlock_writer();
        true
    }

    fn continue_from(&self, from: &dyn ClockSource, mult: u32, shift: u32, mask: u64) -> bool {
        if !self.try_lock_writer() {
            return false;
        }
        let mut done = false;
        let mut publish = |old: &ClockData| {
            let now = self.counter.read();
            let data = ClockData {
                mask,
                ..old.converted_at(now, mult, shift)
            };
            self.prot.publish(&data, &mut || {});
            done = true;
        };
        // This clock itself: its writer is held already.
        if core::ptr::eq(
            (from as *const dyn ClockSource).cast::<u8>(),
            (self as *const Self).cast::<u8>(),
        ) {
            publish(&self.prot.published());
        } else {
            from.with_data(&mut publish);
        }
        self.unlock_writer();
        done
    }

    fn with_data(&self, f: &mut dyn FnMut(&ClockData)) -> bool {
        if !self.try_lock_writer() {
            return false;
        }
        f(&self.prot.published());
        self.unlock_writer();
        true
    }

    fn recalibrate(&self, mult: u32, shift: u32, w: &mut dyn Writer) -> bool {
        if !self.try_lock_writer() {
            return false;
        }
        let old = self.prot.published();
        let now = self.counter.read();
        let data = old.converted_at(now, mult, shift);
        w.switching(&data);
        self.prot.publish(&data, w);
        w.switched();
        self.unlock_writer();
        true
    }

    fn update_epoch(&self, w: &mut dyn Writer) -> EpochUpdate {
        if !self.try_lock_writer() {
            return EpochUpdate::Busy;
        }
        let old = self.prot.published();
        let now = self.counter.read();
        let elapsed = now.wrapping_sub(old.epoch_cyc);
        let result = if (elapsed as i64) < 0 {
            EpochUpdate::CounterBehind
        } else {
            let new = old.moved_to(now);
            if elapsed > old.mask {
                w.overrun();
            }
            self.prot.publish(&new, w);
            // Readers of the old epoch, until the window closed, may have
            // wrapped if the counter had passed a whole wrap by then: a
            // late update whose window (a pause, a preempted vCPU) crossed
            // the wrap.
            let closed = self.counter.read().wrapping_sub(old.epoch_cyc);
            EpochUpdate::Updated {
                overrun: elapsed > old.mask || closed > old.mask,
            }
        };
        self.unlock_writer();
        result
    }

    fn data(&self) -> ClockData {
        self.prot.published()
    }

    fn set_wait_budget_ns(&self, ns: u64) {
        self.budget_ns.store(ns, Ordering::Relaxed);
    }
}

/// The interval, in ns, that a clock's elapsed time between two reads must
/// lie in when the reads' counter values are `cycles` apart and at most
/// `switches` conversion switches took effect between them, the clock
/// having used only the `conversions` given (`(mult, shift)` pairs).
///
/// A read is `E + floor((c - e) * x + f)` with `x = mult / 2^shift` and
/// `f` the epoch's remainder (`epoch_frac`, below 1 ns), and an epoch
/// update moves the epoch exactly: `E' + f' = E + f + (e' - e) * x`
/// ([`ClockData::moved_to`]). So with one conversion the reads are two
/// floors of one exact line, `cycles * x` apart: with `conv = floor(cycles
/// * x)`, the elapsed time is `conv` or `conv + 1`, however many epoch
/// updates came in between; they cost the bound nothing. A switch of
/// conversion carries the remainder to the new shift and may lose a
/// fraction of a nanosecond ([`ClockData::converted_at`]); and the part
/// before it goes at one rate, the rest at the other. So with more than
/// one conversion the ends are taken over every conversion, and the low
/// end allows 1 ns per switch between the reads: `[min conv - switches,
/// max conv + 1]`. No `conversions` gives `(0, 1)` less `switches`.
/// Nothing here can panic; the multiply is the full 96-bit one.
pub fn elapsed_bound(
    cycles: u64,
    switches: u64,
    conversions: impl Iterator<Item = (u32, u32)>,
) -> (i64, i64) {
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut n = 0u32;
    for (mult, shift) in conversions {
        let conv = mul_u64_u32_shr(cycles, mult, shift);
        lo = lo.min(conv);
        hi = hi.max(conv);
        n = n.saturating_add(1);
    }
    if lo > hi {
        lo = hi;
    }
    let slack = if n == 1 { 0 } else { switches };
    (
        (lo as i64).wrapping_sub(slack as i64),
        (hi as i64).wrapping_add(1),
    )
}

/// [`elapsed_bound`]'s `bound` for two reads, widened for what a conversion
/// switch in between does when it is not instant: the first switch that
/// finished after the earlier read (the base, at counter value `base_cyc`,
/// read with conversion `from`) switched to `to` from the pivot
/// `pivot_cyc` (its new epoch), and may have published only after the
/// base was read past the pivot, on the old line. The later read is on
/// the new line, which meets the old one at the pivot: so the elapsed
/// time is off the single-line figure by the two conversions' difference
/// over `base_cyc - pivot_cyc`, plus 1 ns for the floors. The kernel's
/// `sched_clock_register()` pivots the same way; it is the time the
/// switch took from its counter read to its publish (a writer held up by
/// NMIs or a descheduled vCPU) that lets a read land past the pivot on
/// the old line. A base before the pivot gets the bound unchanged, and so
/// does a switch at the same rate (the pairs of `disturb=conversion`
/// differ only in rounding). Nothing here can panic.
pub fn switch_skewed_bound(
    bound: (i64, i64),
    base_cyc: u64,
    pivot_cyc: u64,
    from: (u32, u32),
    to: (u32, u32),
) -> (i64, i64) {
    let past = base_cyc.wrapping_sub(pivot_cyc);
    if past as i64 <= 0 {
        return bound;
    }
    let new = mul_u64_u32_shr(past, to.0, to.1) as i64;
    let old = mul_u64_u32_shr(past, from.0, from.1) as i64;
    let skew = new.wrapping_sub(old);
    let (lo, hi) = bound;
    if skew > 0 {
        (lo, hi.saturating_add(skew).saturating_add(1))
    } else if skew < 0 {
        (lo.saturating_add(skew).saturating_sub(1), hi)
    } else {
        bound
    }
}

/// Declares the clocks, one static per protection over each of the
/// caller's two counters (its `Ordered` and `Bare`), and the ways to reach
/// them: `CLOCKS`, every clock (the first, the latch over `Ordered`, is the
/// default), for the writers; `index_of`, a clock's index by its
/// protection's and counter's names; `read_index`, a chain of comparisons
/// that reads one statically (no call through a pointer), for readers in
/// NMI or signal context; and `read_index_ns`, the time alone, the
/// default clock read inline and the others out of line, for a caller
/// whose cost is the default's read. `wait TYPE = VALUE` is the clocks'
/// [`TimeSource`]. nmiclock.ko's clocks and the host torture's are this
/// one declaration, each over its own counters and time source.
#[macro_export]
macro_rules! clocks {
    (wait $wty:ty = $winit:expr) => {
        $crate::clocks! {
            @each wait $wty = $winit;
            LATCH_ORDERED: Latch over Ordered;
            LATCH_BARE: Latch over Bare;
            SEQCOUNT_ORDERED: Seqcount over Ordered;
            SEQCOUNT_BARE: Seqcount over Bare;
            UNPROTECTED_ORDERED: Unprotected over Ordered;
            UNPROTECTED_BARE: Unprotected over Bare;
        }
    };
    (@each wait $wty:ty = $winit:expr;
     $first:ident: $fprot:ident over $fctr:ident;
     $($name:ident: $prot:ident over $ctr:ident;)*) => {
        $(
            #[doc = concat!("`", stringify!($prot), "` over `", stringify!($ctr), "`.")]
            pub(crate) static $name: $crate::clock::Clock<$crate::clock::$prot, $ctr, $wty> =
                $crate::clock::Clock::new($crate::clock::$prot::new(), $ctr, $winit);
        )*
        #[doc = concat!("`", stringify!($fprot), "` over `", stringify!($fctr), "`: the default.")]
        pub(crate) static $first: $crate::clock::Clock<$crate::clock::$fprot, $fctr, $wty> =
            $crate::clock::Clock::new($crate::clock::$fprot::new(), $fctr, $winit);

        /// Every protection over every counter; the first is the default.
        pub(crate) static CLOCKS: [&dyn $crate::clock::ClockSource;
            [stringify!($first), $(stringify!($name)),*].len()] = [&$first, $(&$name),*];

        /// Reads clock `index` of [`CLOCKS`], statically dispatched.
        #[inline(always)]
        fn read_index(index: usize) -> Option<$crate::clock::Reading> {
            if index == 0 {
                return Some($crate::clock::ClockSource::read(&$first));
            }
            let mut i = 1;
            $(
                if index == i {
                    return Some($crate::clock::ClockSource::read(&$name));
                }
                i += 1;
            )*
            let _ = i;
            None
        }

        /// The time clock `index` of [`CLOCKS`] reads, in ns (0 for no
        /// clock): the default's read inline, behind one comparison; any
        /// other's through [`read_other_ns`]. So a caller of the default
        /// pays for its read and one comparison; inlining all six reads,
        /// as [`read_index`] does, gives it their code, loops and
        /// registers too. (Not every user of the macro reads this way,
        /// nor looks clocks up by name: hence the `dead_code` allows.)
        #[allow(dead_code)]
        #[inline(always)]
        fn read_index_ns(index: usize) -> u64 {
            if index == 0 {
                return $crate::clock::ClockSource::read(&$first).ns;
            }
            read_other_ns(index)
        }

        /// [`read_index_ns`] of a clock other than the default, out of line.
        #[allow(dead_code)]
        #[cold]
        #[inline(never)]
        fn read_other_ns(index: usize) -> u64 {
            read_index(index).map_or(0, |r| r.ns)
        }

        /// The index in [`CLOCKS`] of the clock with this protection and
        /// counter, by their names.
        #[allow(dead_code)]
        pub(crate) fn index_of(protection: &str, counter: &str) -> Option<usize> {
            CLOCKS
                .iter()
                .position(|c| c.protection() == protection && c.counter() == counter)
        }
    };
}
