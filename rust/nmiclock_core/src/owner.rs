// SPDX-License-Identifier: GPL-2.0

//! One owner at a time, with nesting: the state machine behind the module's
//! activity guard (`rust/activity.rs`).
//!
//! An [`Owner`] holds the kind (a non-zero `u32`) of what owns it, or 0.
//! [`Owner::begin`] takes it from nobody, [`Owner::nest`] hands it from an
//! outer owner to an inner one (the bench's own stress runs), and
//! [`Owner::end`] hands it back, to nobody or to the outer owner. Every
//! transition is a compare-exchange from the state it expects, so a late or
//! repeated `end` of an owner that no longer holds it changes nothing and
//! says so: it can never write a stale owner back over a newer one.
//!
//! An outer owner that hands itself over must not end before its inner one
//! has handed back, or the inner one's `end` finds the outer gone and is
//! refused (and the owner stays taken). [`Owner::held_by`] is how the outer
//! one tells that the inner one is done, whoever ended it.
//!
//! Kernel-independent: compiled into nmiclock.ko and into the host crate
//! from this file; `tests/owner.rs` checks every transition and races a
//! late inner `end` against the outer one's.

use crate::sync::{AtomicU32, Ordering};

/// What owns a resource: the kind of the owner, 0 for nobody.
pub struct Owner(AtomicU32);

impl Owner {
    crate::clock::loom_const_fn! {
        /// Owned by nobody.
        pub fn new() -> Self {
            Self(AtomicU32::new(0))
        }
    }

    /// The kind that owns it now, 0 for nobody.
    pub fn current(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }

    /// Whether `kind` owns it now.
    pub fn held_by(&self, kind: u32) -> bool {
        self.current() == kind
    }

    /// Takes it for `kind` (non-zero) if nobody owns it; else gives the
    /// kind that does.
    pub fn begin(&self, kind: u32) -> Result<(), u32> {
        if kind == 0 {
            return Err(0);
        }
        self.0
            .compare_exchange(0, kind, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }

    /// Hands it from `outer`, which must own it, to `inner` (non-zero);
    /// else gives the kind that does own it.
    pub fn nest(&self, outer: u32, inner: u32) -> Result<(), u32> {
        if inner == 0 || outer == 0 {
            return Err(self.current());
        }
        self.0
            .compare_exchange(outer, inner, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }

    /// Hands it from `kind` back to `to` (0 for nobody, or the outer owner
    /// `kind` was nested in). False, changing nothing, if `kind` does not
    /// own it.
    pub fn end(&self, kind: u32, to: u32) -> bool {
        self.0
            .compare_exchange(kind, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

impl Default for Owner {
    fn default() -> Self {
        Self::new()
    }
}
