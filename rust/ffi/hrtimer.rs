// SPDX-License-Identifier: GPL-2.0

//! [`HrTimer`]: a hard-IRQ `CLOCK_MONOTONIC` hrtimer, pinned to the CPU
//! that starts it, running a closure that returns the next period.

use core::ptr::NonNull;

use kernel::ffi::c_void;
use kernel::prelude::*;

use super::{bindings, erase, Owned};

/// A hard-IRQ hrtimer pinned to the CPU that starts it, whose closure
/// returns the next period in ns, or 0 to stop. Cancelled (waiting for a
/// callback in flight) and freed on drop.
///
/// The closure is `FnMut`: the kernel never runs one hrtimer's callback
/// twice at once (a timer restarted while its callback runs stays on that
/// CPU's base, which runs one callback at a time), so the closure may own
/// what only the callback uses.
///
/// # Invariants
///
/// `ptr` was returned by `nmiclock_timer_new()` with data pointing at the
/// closure in `_owned`, and has not been freed.
pub(crate) struct HrTimer {
    ptr: NonNull<bindings::nmiclock_timer>,
    _owned: Owned,
}

// SAFETY: hrtimers may be started, cancelled and freed from any thread;
// the closure is `Send`.
unsafe impl Send for HrTimer {}
// SAFETY: `start` and `cancel` take the hrtimer's own lock; the closure is
// only ever run by the timer itself.
unsafe impl Sync for HrTimer {}

/// A closure whose calls are serialised by its owner (see [`HrTimer`]).
struct Serialised<F>(core::cell::UnsafeCell<F>);

// SAFETY: The closure is only reached through `timer_trampoline`, which the
// kernel never runs concurrently for one timer, so sharing the cell between
// threads never gives two `&mut` at once; `F: Send` lets it move.
unsafe impl<F: Send> Sync for Serialised<F> {}

/// The glue's timer callback: a hard-IRQ entry point of the module.
///
/// # Safety
///
/// `data` points at the `Serialised<F>` of a live [`HrTimer`], and the
/// call is not concurrent with another call for the same timer.
unsafe extern "C" fn timer_trampoline<F: FnMut() -> u64>(data: *const c_void) -> u64 {
    // SAFETY: By the caller's contract the cell is live and nothing else
    // reaches into it during this call.
    let f = unsafe { &mut *(*data.cast::<Serialised<F>>()).0.get() };
    f()
}

impl HrTimer {
    /// Creates a stopped timer running `callback` (hard-IRQ context).
    pub(crate) fn new<F>(callback: F) -> Result<Self>
    where
        F: FnMut() -> u64 + Send + 'static,
    {
        let cell = KBox::new(
            Serialised(core::cell::UnsafeCell::new(callback)),
            GFP_KERNEL,
        )?;
        let data: *const Serialised<F> = &*cell;
        // SAFETY: The trampoline matches the cell's type, and the cell is
        // owned by the `HrTimer`, which frees the timer (waiting for its
        // callback) before the cell.
        let ptr = unsafe { bindings::nmiclock_timer_new(Some(timer_trampoline::<F>), data.cast()) };
        // INVARIANT: Non-null means a live timer with `data`.
        NonNull::new(ptr)
            .map(|ptr| Self {
                ptr,
                _owned: erase(cell),
            })
            .ok_or(ENOMEM)
    }

    /// (Re)starts the timer to fire `ns` from now, on this CPU.
    pub(crate) fn start(&self, ns: u64) {
        // SAFETY: The timer is live (type invariant).
        unsafe { bindings::nmiclock_timer_start(self.ptr.as_ptr(), ns) };
    }

    /// Stops the timer, waiting for a callback in flight.
    pub(crate) fn cancel(&self) {
        // SAFETY: The timer is live (type invariant).
        unsafe { bindings::nmiclock_timer_cancel(self.ptr.as_ptr()) };
    }
}

impl Drop for HrTimer {
    fn drop(&mut self) {
        // SAFETY: The timer is live and freed once, here; the glue cancels
        // it (waiting for a running callback) first, so the closure, dropped
        // after this, is no longer in use.
        unsafe { bindings::nmiclock_timer_free(self.ptr.as_ptr()) };
    }
}
