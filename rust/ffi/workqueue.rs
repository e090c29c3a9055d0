// SPDX-License-Identifier: GPL-2.0

//! [`Work`]: a work item running a closure in process context, on the
//! kernel's system workqueue.

use core::ptr::NonNull;

use kernel::ffi::c_void;
use kernel::prelude::*;

use super::{bindings, closure, erase, Callback, Owned};

/// A work item whose closure runs in process context each time it is
/// queued (once per queueing that finds it idle). Cancelled, waiting for a
/// run in flight, and freed on drop.
///
/// # Invariants
///
/// `ptr` was returned by `nmiclock_work_new()` with the callback in
/// `_owned`, and has not been freed.
pub(crate) struct Work {
    ptr: NonNull<bindings::nmiclock_work>,
    _owned: Owned,
}

// SAFETY: Work items may be queued and freed from any thread; the closure
// is `Send + Sync`.
unsafe impl Send for Work {}
// SAFETY: `queue` is safe to call concurrently (`schedule_work()`).
unsafe impl Sync for Work {}

/// The glue's work function.
///
/// # Safety
///
/// `data` points at the closure of a live [`Work`].
unsafe extern "C" fn work_trampoline<F: Fn()>(data: *const c_void) {
    // SAFETY: The caller's contract: the work item outlives its runs.
    let f = unsafe { closure::<F>(data) };
    f();
}

impl Work {
    /// A work item running `f`.
    pub(crate) fn new<F: Fn() + Send + Sync + 'static>(f: F) -> Result<Self> {
        let cb = Callback::new(f, work_trampoline::<F>)?;
        // SAFETY: The callback's trampoline matches its closure; the glue
        // copies the callback, whose data the `Work` keeps until after the
        // item is cancelled and freed.
        let ptr = unsafe { bindings::nmiclock_work_new(cb.raw()) };
        // INVARIANT: Non-null means a live work item running `cb`.
        NonNull::new(ptr)
            .map(|ptr| Self {
                ptr,
                _owned: erase(cb),
            })
            .ok_or(ENOMEM)
    }

    /// Queues the work item. Any context but NMI.
    pub(crate) fn queue(&self) {
        // SAFETY: Live (type invariant).
        unsafe { bindings::nmiclock_work_queue(self.ptr.as_ptr()) };
    }

    /// Cancels a queued run and waits for one in flight to finish (task
    /// context; not from the closure itself).
    pub(crate) fn cancel_sync(&self) {
        // SAFETY: Live (type invariant).
        unsafe { bindings::nmiclock_work_cancel(self.ptr.as_ptr()) };
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // SAFETY: Live and freed once, here; the glue cancels it and waits
        // for a run in flight first, so the closure is unused after.
        unsafe { bindings::nmiclock_work_free(self.ptr.as_ptr()) };
    }
}
