// SPDX-License-Identifier: GPL-2.0

//! One owner of "what is running": every activity that uses the clock, the
//! acct records or the settings in a way another must not disturb takes a
//! [`Guard`] first, and there is one at a time. A second gets `EBUSY` and
//! one log line naming what is in progress; nothing changes.
//!
//! | activity      | started by                         | held until           |
//! |---------------|------------------------------------|----------------------|
//! | `stress run`  | `start` to `control`, `autostart`  | the run stops        |
//! | `check`       | a write to `check`                 | the check returns    |
//! | `acct run`    | a write to `acct`                  | the run returns      |
//! | `bench`       | a write to `bench`                 | the bench returns    |
//! | `config`      | a write to `config`                | the write returns    |
//! | `reset`       | `reset` to `control`               | the reset returns    |
//! | `wake`        | a write to `wake`                  | the run returns      |
//!
//! `bench` times the NMI handler with a stress run of its own: its guard
//! [`Guard::nest`]s one for the run, which hands the activity back to
//! `bench` when the run ends, whoever ends it (the bench itself, or a
//! target being unregistered). The bench waits for that hand-back
//! ([`Guard::wait_handed_back`]) before it goes on, so it never ends
//! while its run's guard is alive. The transitions are [`Owner`]'s: each
//! a compare-exchange from the state it expects.

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::prelude::*;

use crate::owner::Owner;

/// What can run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum Activity {
    /// A stress run (`control`).
    Stress = 1,
    /// The task-context clock check (`check`).
    Check,
    /// The acct updater (`acct`).
    Acct,
    /// The benchmark (`bench`).
    Bench,
    /// A `config` write.
    Config,
    /// A `reset` of the counters.
    Reset,
    /// The wake-up designs (`wake`).
    Wake,
}

impl Activity {
    /// Every activity, in `repr` order from 1.
    const ALL: [Self; 7] = [
        Self::Stress,
        Self::Check,
        Self::Acct,
        Self::Bench,
        Self::Config,
        Self::Reset,
        Self::Wake,
    ];

    fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| *a as u32 == v)
    }

    /// Its name in log lines.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Stress => "a stress run",
            Self::Check => "a check",
            Self::Acct => "an acct run",
            Self::Bench => "a bench",
            Self::Config => "a config write",
            Self::Reset => "a reset",
            Self::Wake => "a wake run",
        }
    }
}

/// The activity in progress (`Activity as u32`), 0 for none.
static CURRENT: Owner = Owner::new();

/// The activity in progress, if any.
pub(crate) fn current() -> Option<Activity> {
    Activity::from_u32(CURRENT.current())
}

/// The right to run one activity; dropping it ends the activity (or hands
/// it back to the one it was nested in).
///
/// # Invariants
///
/// [`CURRENT`] holds `kind` from the guard's creation until its drop.
pub(crate) struct Guard {
    kind: Activity,
    /// What [`CURRENT`] goes back to on drop (0: nothing).
    outer: u32,
}

impl Guard {
    /// Starts `kind`, if nothing else runs; else logs `what: not while ...
    /// is in progress` and gives `EBUSY`.
    pub(crate) fn try_begin(kind: Activity, what: &str) -> Result<Self> {
        match CURRENT.begin(kind as u32) {
            // INVARIANT: `CURRENT` went from nothing to `kind`.
            Ok(_) => Ok(Self { kind, outer: 0 }),
            Err(busy) => {
                pr_err!(
                    "{}: not while {} is in progress\n",
                    what,
                    Activity::from_u32(busy).map_or("something", Activity::name)
                );
                Err(EBUSY)
            }
        }
    }

    /// Hands the activity over to `kind` nested inside this one (which
    /// must outlive it): `bench`'s own stress run. The nested guard gives
    /// the activity back to this one when dropped.
    pub(crate) fn nest(&self, kind: Activity) -> Result<Self> {
        CURRENT
            .nest(self.kind as u32, kind as u32)
            .map_err(|_| EBUSY)?;
        // INVARIANT: `CURRENT` went from the outer kind to `kind`.
        Ok(Self {
            kind,
            outer: self.kind as u32,
        })
    }

    /// Whether this guard's activity owns [`CURRENT`] now: false while a
    /// guard nested in it is alive.
    pub(crate) fn in_force(&self) -> bool {
        CURRENT.held_by(self.kind as u32)
    }

    /// Whether this guard was nested in another's (the bench's stress
    /// runs).
    pub(crate) fn is_nested(&self) -> bool {
        self.outer != 0
    }

    /// Waits until the guard nested in this one has handed the activity
    /// back, whoever dropped it. Task context; may sleep.
    pub(crate) fn wait_handed_back(&self) {
        while !self.in_force() {
            crate::ffi::cpu::sleep_us(1_000);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // By the type invariant `CURRENT` holds our kind: then the exchange
        // succeeds. Were it ever to fail, it changes nothing rather than
        // write a stale owner over a newer one.
        if !CURRENT.end(self.kind as u32, self.outer) {
            pr_err!(
                "{}: ended while not the activity in progress\n",
                self.kind.name()
            );
        }
    }
}

/// How a blocking activity's last run ended, for its file's `stopped:`
/// line: by itself (`duration`) or at a signal to its writer
/// (`interrupted`; see [`crate::ffi::kthread::run_on_each_cpu`]).
pub(crate) struct LastRun(AtomicBool);

impl LastRun {
    /// No run yet.
    pub(crate) const fn new() -> Self {
        Self(AtomicBool::new(false))
    }

    /// Records `ret`, the run's result: an `EINTR` is logged once (see
    /// [`log_interrupted`]).
    pub(crate) fn record(&self, file: &str, ret: &Result, elapsed_ms: u64) {
        let interrupted = *ret == Err(EINTR);
        self.0.store(interrupted, Ordering::Relaxed);
        if interrupted {
            log_interrupted(file, elapsed_ms);
        }
    }

    /// The value of the `stopped:` line.
    pub(crate) fn stopped(&self) -> &'static str {
        if self.0.load(Ordering::Relaxed) {
            "interrupted"
        } else {
            "duration"
        }
    }
}

/// The one log line of a run of the activity behind debugfs file `file`
/// that a signal ended after `elapsed_ms`.
pub(crate) fn log_interrupted(file: &str, elapsed_ms: u64) {
    pr_info!(
        "{}: interrupted by a signal after {} ms; its results so far are in {}\n",
        file,
        elapsed_ms,
        file
    );
}
