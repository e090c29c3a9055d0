// SPDX-License-Identifier: GPL-2.0

//! The `__acct_update_integrals()` arithmetic, three ways, and a checker.
//!
//! The kernel integrates a task's RSS and VM size over the CPU time it
//! used: `delta = time - acct_timexpd`; if `delta` is at least one tick,
//! `acct_timexpd = time`, `rss_mem1 += delta * rss >> 10` and
//! `vm_mem1 += delta * vm >> 10`. It runs from task context and from
//! interrupt context for the same task. An interrupt that advances
//! `acct_timexpd` between the task's reading of the time and its own update
//! makes `delta` negative, which unsigned arithmetic turns into a huge
//! delta; one that lands between the task's read of `acct_timexpd` and its
//! write makes both apply the same interval.
//!
//! The [`AcctStrategy`] implementations:
//!
//! - [`Cmpxchg`] (`cmpxchg`): reads `acct_timexpd` once, takes a signed
//!   delta, skips a negative one or one below the tick, and publishes the
//!   new `acct_timexpd` with a compare-and-exchange so only one context
//!   applies a given interval; the integrals are added atomically. Lock-free
//!   and safe against interrupts and NMIs alike.
//! - [`IrqSave`] (`irqsave`): the kernel's arithmetic with interrupts
//!   disabled around it (and around the reading of the time). Safe against
//!   interrupts; an NMI is not masked and can still interleave.
//! - [`Racy`] (`racy`): the same arithmetic with plain loads and stores and
//!   no protection, as before the fix.
//!
//! Every update reports an [`Outcome`]; [`AcctRecord::account`] checks it
//! against the invariants (no negative delta, no delta larger than the time
//! since the previous applied update, `acct_timexpd` never backwards) and
//! keeps shadow sums of the terms applied, so that at the end the integrals
//! must equal them ([`AcctRecord::integrals_match`]).
//!
//! The time since the previous applied update is taken from the
//! `acct_timexpd` each write replaced, not from what the update had read:
//! the compare-and-exchange knows it, and the racy forms take it with a swap
//! where C stores (the same write, returning the old value). So the checker
//! sees each race for what it is: an interval applied twice (an interrupt
//! between the task's read and write of `acct_timexpd`), or a negative delta
//! made huge (an interrupt that advanced `acct_timexpd` after the task read
//! the time), each a bad delta. The shadow sums are added atomically, while
//! the racy forms' `+=` is a load and a store: an interrupt between the two
//! loses an add, and the integrals no longer match.
//!
//! [`IrqSave`] keeps the interrupt side out through an [`IrqExclusion`]:
//! `local_irq_save()` in the module, a per-record spin flag
//! ([`SpinExclusion`]) on the host.
//!
//! Kernel-independent: compiled into nmiclock.ko and into the host crate
//! from this file. Nothing here can panic: the racy variant's huge deltas
//! wrap. `tests/acct.rs` injects an "interrupt" (a nested update) at the two
//! racy points; `tests/loom_acct.rs` runs a task-side and an interrupt-side
//! update over one shared monotonic clock through every interleaving:
//! `cmpxchg` and `irqsave` never apply a bad interval and their integrals
//! add up, `racy` is caught.

use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// One task's accounting (the `task_struct` fields the update touches) and
/// the checker's shadow of it.
pub struct AcctRecord {
    timexpd: AtomicU64,
    rss_mem1: AtomicU64,
    vm_mem1: AtomicU64,
    shadow_rss: AtomicU64,
    shadow_vm: AtomicU64,
    /// Serialises the exclusion the host uses to model `local_irq_save()`.
    excl: AtomicBool,
}

/// What one update did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An interval was applied.
    Applied {
        /// `acct_timexpd` just before this update's write (the true value,
        /// whatever the update itself had read).
        prev: u64,
        /// The time written to `acct_timexpd`.
        time: u64,
        /// The delta the update applied (wrapped, if it was negative).
        delta: u64,
        /// The term added to `rss_mem1`.
        rss_term: u64,
        /// The term added to `vm_mem1`.
        vm_term: u64,
    },
    /// Less than the minimum delta since `acct_timexpd`: nothing to do.
    TooSoon,
    /// The delta was negative (another context got there first): skipped.
    Negative,
    /// The compare-and-exchange lost to another context: skipped.
    Lost,
}

/// What [`AcctRecord::account`] found wrong with one outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The applied delta was negative or larger than the time since the
    /// previous applied update: an interval counted twice or backwards.
    pub bad_delta: bool,
    /// `acct_timexpd` was moved backwards.
    pub backwards: bool,
}

impl Verdict {
    /// Whether anything was wrong.
    pub fn any(&self) -> bool {
        self.bad_delta || self.backwards
    }
}

/// `delta * input >> 10` as the kernel computes it (wrapping, as C would).
#[inline(always)]
pub fn term(delta: u64, input: u64) -> u64 {
    delta.wrapping_mul(input) >> 10
}

impl AcctRecord {
    crate::clock::loom_const_fn! {
        /// A record starting at `acct_timexpd` 0 with empty integrals.
        pub fn new() -> Self {
            Self {
                timexpd: AtomicU64::new(0),
                rss_mem1: AtomicU64::new(0),
                vm_mem1: AtomicU64::new(0),
                shadow_rss: AtomicU64::new(0),
                shadow_vm: AtomicU64::new(0),
                excl: AtomicBool::new(false),
            }
        }
    }

    /// Restarts the record at `time` with empty integrals. Not concurrently
    /// with updates.
    pub fn reset(&self, time: u64) {
        self.timexpd.store(time, Ordering::Relaxed);
        for a in [
            &self.rss_mem1,
            &self.vm_mem1,
            &self.shadow_rss,
            &self.shadow_vm,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }

    /// `acct_timexpd`.
    pub fn timexpd(&self) -> u64 {
        self.timexpd.load(Ordering::Relaxed)
    }

    /// `(rss_mem1, vm_mem1)`.
    pub fn integrals(&self) -> (u64, u64) {
        (
            self.rss_mem1.load(Ordering::Relaxed),
            self.vm_mem1.load(Ordering::Relaxed),
        )
    }

    /// Checks one outcome and adds its terms to the shadow sums. Safe to
    /// call from any context, concurrently.
    pub fn account(&self, o: &Outcome) -> Verdict {
        match *o {
            Outcome::Applied {
                prev,
                time,
                delta,
                rss_term,
                vm_term,
            } => {
                self.shadow_rss.fetch_add(rss_term, Ordering::Relaxed);
                self.shadow_vm.fetch_add(vm_term, Ordering::Relaxed);
                let backwards = time < prev;
                let negative = (delta as i64) < 0;
                let elapsed = time.wrapping_sub(prev);
                Verdict {
                    bad_delta: negative || backwards || delta > elapsed,
                    backwards,
                }
            }
            _ => Verdict::default(),
        }
    }

    /// Whether the integrals equal the sums of the terms applied. Only
    /// meaningful once every update has finished.
    pub fn integrals_match(&self) -> bool {
        self.integrals()
            == (
                self.shadow_rss.load(Ordering::Relaxed),
                self.shadow_vm.load(Ordering::Relaxed),
            )
    }
}

impl Default for AcctRecord {
    fn default() -> Self {
        Self::new()
    }
}

/// One update of an [`AcctRecord`]. Generic over its two hooks, so that a
/// caller in NMI context calls them directly, not through a pointer.
pub struct Update<N, P> {
    /// Reads the current time (the task's CPU time, in the kernel's terms).
    pub now: N,
    /// Current RSS (pages).
    pub rss: u64,
    /// Current VM size (pages).
    pub vm: u64,
    /// Smallest delta worth applying (the kernel's one tick).
    pub min_delta: u64,
    /// Called between reading `acct_timexpd` and writing it: fault
    /// injection that widens the race window.
    pub pause: P,
}

/// A way to run the update. The module keeps one of each in a table and
/// picks one by name; calls are statically dispatched (the trait is not
/// object-safe on purpose: its callers include NMI context).
pub trait AcctStrategy: Sync {
    /// Name used in module parameters and `stats`.
    const NAME: &'static str;

    /// Updates `rec` once.
    fn update<N: FnMut() -> u64, P: FnMut()>(&self, rec: &AcctRecord, u: Update<N, P>) -> Outcome;
}

/// The lock-free update.
///
/// The compare-and-exchange that publishes `acct_timexpd` is what makes
/// one context apply each interval: with a plain store there instead, the
/// loom model (`tests/loom_acct.rs`) fails.
pub struct Cmpxchg;

impl AcctStrategy for Cmpxchg {
    const NAME: &'static str = "cmpxchg";

    #[inline]
    fn update<N: FnMut() -> u64, P: FnMut()>(
        &self,
        rec: &AcctRecord,
        mut u: Update<N, P>,
    ) -> Outcome {
        let time = (u.now)();
        let old = rec.timexpd.load(Ordering::Relaxed);
        let delta = time.wrapping_sub(old) as i64;
        if delta < 0 {
            return Outcome::Negative;
        }
        let delta = delta as u64;
        if delta < u.min_delta {
            return Outcome::TooSoon;
        }
        (u.pause)();
        // Only the context that moves acct_timexpd from `old` applies the
        // interval (old, time].
        if rec
            .timexpd
            .compare_exchange(old, time, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return Outcome::Lost;
        }
        let (rss_term, vm_term) = (term(delta, u.rss), term(delta, u.vm));
        rec.rss_mem1.fetch_add(rss_term, Ordering::Relaxed);
        rec.vm_mem1.fetch_add(vm_term, Ordering::Relaxed);
        Outcome::Applied {
            prev: old,
            time,
            delta,
            rss_term,
            vm_term,
        }
    }
}

/// How [`IrqSave`] keeps interrupts out: `local_irq_save()` in the kernel,
/// an equivalent exclusion on the host.
pub trait IrqExclusion: Sync {
    /// Runs `f` with the record's interrupt side kept out.
    fn exclude<R>(&self, rec: &AcctRecord, f: impl FnOnce() -> R) -> R;
}

/// The host's model of `local_irq_save()` for one CPU: the task side and the
/// interrupt side never run the update at the same time, so each holds a
/// per-record spin flag across it.
pub struct SpinExclusion;

impl IrqExclusion for SpinExclusion {
    fn exclude<R>(&self, rec: &AcctRecord, f: impl FnOnce() -> R) -> R {
        while rec
            .excl
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            crate::sync::spin_loop();
        }
        let r = f();
        rec.excl.store(false, Ordering::Release);
        r
    }
}

/// The kernel's arithmetic with plain loads and stores. The true previous
/// `acct_timexpd` is taken with a swap where C would store: the same write,
/// with the old value for the checker.
#[inline(always)]
fn plain_update<N: FnMut() -> u64, P: FnMut()>(rec: &AcctRecord, mut u: Update<N, P>) -> Outcome {
    let time = (u.now)();
    let old = rec.timexpd.load(Ordering::Relaxed);
    // Unsigned, as in C: a negative delta is huge and passes the check.
    let delta = time.wrapping_sub(old);
    if delta < u.min_delta {
        return Outcome::TooSoon;
    }
    (u.pause)();
    let prev = rec.timexpd.swap(time, Ordering::Relaxed);
    let (rss_term, vm_term) = (term(delta, u.rss), term(delta, u.vm));
    // `x += y` as a load and a store: an interrupt in between loses an add.
    let rss = rec.rss_mem1.load(Ordering::Relaxed);
    rec.rss_mem1
        .store(rss.wrapping_add(rss_term), Ordering::Relaxed);
    let vm = rec.vm_mem1.load(Ordering::Relaxed);
    rec.vm_mem1
        .store(vm.wrapping_add(vm_term), Ordering::Relaxed);
    Outcome::Applied {
        prev,
        time,
        delta,
        rss_term,
        vm_term,
    }
}

/// The kernel's update with interrupts disabled around it.
pub struct IrqSave<X>(pub X);

impl<X: IrqExclusion> AcctStrategy for IrqSave<X> {
    const NAME: &'static str = "irqsave";

    #[inline]
    fn update<N: FnMut() -> u64, P: FnMut()>(&self, rec: &AcctRecord, u: Update<N, P>) -> Outcome {
        self.0.exclude(rec, || plain_update(rec, u))
    }
}

/// The kernel's update with no protection.
pub struct Racy;

impl AcctStrategy for Racy {
    const NAME: &'static str = "racy";

    #[inline]
    fn update<N: FnMut() -> u64, P: FnMut()>(&self, rec: &AcctRecord, u: Update<N, P>) -> Outcome {
        plain_update(rec, u)
    }
}
