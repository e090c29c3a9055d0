// SPDX-License-Identifier: GPL-2.0

//! [`Bracket`]: a kretprobe on a kernel function that calls a closure as
//! the function is entered and as it returns, so that the stretch the
//! kernel spends in it can be marked like the module's own writers'
//! windows.
//!
//! The closure runs in the kretprobe's handlers, in whatever context the
//! probed function runs in: the kernel's timekeeping update, for one,
//! holds its raw spinlock with interrupts off and its seqcount odd, so a
//! handler that read the timekeeper would spin for ever. Hence the same
//! rules as for NMI context (no locks, no allocation, no printk, nothing
//! that sleeps, waits or reads the kernel's clocks), which
//! `scripts/check-nmi-context` enforces from [`bracket_trampoline`].

use core::ptr::NonNull;

use kernel::error::{from_err_ptr, Error, Result};
use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::str::CStr;

use super::{bindings, closure, erase, Owned};

/// Where a [`Bracket`]'s closure is called.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edge {
    /// The probed function was entered.
    Enter,
    /// It is returning.
    Leave,
}

/// The glue's kretprobe callback: an entry point of the module in the
/// probed function's context (see the module doc).
///
/// # Safety
///
/// `data` points at the closure of a live [`Bracket`].
unsafe extern "C" fn bracket_trampoline<F: Fn(Edge)>(data: *const c_void, entered: bool) {
    // SAFETY: The caller's contract: the bracket outlives its calls.
    let f = unsafe { closure::<F>(data) };
    f(if entered { Edge::Enter } else { Edge::Leave });
}

/// A registered kretprobe calling a closure at each entry into and return
/// from one kernel function; unregistered on drop (which may sleep, and
/// returns once no call of the closure is in flight).
///
/// # Invariants
///
/// `ptr` was returned by `nmiclock_bracket_new()` with data pointing at
/// the closure in `_owned`, and has not been freed.
pub(crate) struct Bracket {
    ptr: NonNull<bindings::nmiclock_bracket>,
    _owned: Owned,
}

// SAFETY: A kretprobe may be unregistered from any thread; the closure is
// `Send + Sync`.
unsafe impl Send for Bracket {}
// SAFETY: `missed` only reads the probe's counters.
unsafe impl Sync for Bracket {}

impl Bracket {
    /// Brackets the kernel function `symbol` with `f` (called with
    /// [`Edge::Enter`] and [`Edge::Leave`] on the CPU that runs it). Task
    /// context. `EOPNOTSUPP` on a kernel without `CONFIG_KRETPROBES`,
    /// `ENOENT` for no such function, `EINVAL` where kprobes may not go.
    pub(crate) fn new<F>(symbol: &'static CStr, f: F) -> Result<Self>
    where
        F: Fn(Edge) + Send + Sync + 'static,
    {
        let f = KBox::new(f, GFP_KERNEL)?;
        let data: *const F = &*f;
        // SAFETY: `symbol` is NUL-terminated and static (the kprobe keeps
        // the pointer); the trampoline matches the closure's type, and the
        // closure is owned by the `Bracket`, which unregisters the probe
        // (waiting for its handlers) before the closure is dropped.
        let ptr = from_err_ptr(unsafe {
            bindings::nmiclock_bracket_new(
                symbol.as_char_ptr(),
                Some(bracket_trampoline::<F>),
                data.cast(),
            )
        })?;
        // INVARIANT: Not an error pointer: a live bracket with `data`.
        NonNull::new(ptr)
            .map(|ptr| Self {
                ptr,
                _owned: erase(f),
            })
            .ok_or(ENOMEM)
    }

    /// Calls of the function whose bracket the kernel skipped (it had no
    /// free kretprobe instance, or a probe was already running there).
    pub(crate) fn missed(&self) -> u64 {
        // SAFETY: The bracket is live (type invariant).
        let n = unsafe { bindings::nmiclock_bracket_missed(self.ptr.as_ptr()) };
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// Whether `e`, from [`Bracket::new`], says the kernel has no
    /// kretprobes.
    pub(crate) fn unsupported(e: Error) -> bool {
        u32::try_from(e.to_errno().saturating_neg()) == Ok(kernel::bindings::EOPNOTSUPP)
    }
}

impl Drop for Bracket {
    fn drop(&mut self) {
        // SAFETY: The bracket is live and freed once, here; the glue
        // unregisters it and waits for an RCU grace period first, so no
        // handler still uses the closure dropped after this.
        unsafe { bindings::nmiclock_bracket_free(self.ptr.as_ptr()) };
    }
}
