// SPDX-License-Identifier: GPL-2.0

//! Targets other modules register (`include/nmiclock.h`): the two exported
//! functions, a handle on a registered `struct nmiclock_target`, and the
//! registry's mutex. The registry itself is the caller's, which defines
//! the exported functions over it with [`export_registry`].

use super::bindings;

/// A registered `struct nmiclock_target`, by address. The provider keeps
/// it in place from `nmiclock_register_target()` until
/// `nmiclock_unregister_target()` returns, and the registry uses a
/// handle only in between (or while a reference on its owner pins it).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawTarget(*const bindings::nmiclock_target);

// SAFETY: The structure is the provider's, read-only for us, and valid from
// any CPU while registered; the calls through it are made from whatever
// context the header allows, on any CPU.
unsafe impl Send for RawTarget {}
// SAFETY: As above: nothing is written through a handle.
unsafe impl Sync for RawTarget {}

impl RawTarget {
    /// The handle on `t`; `None` for null.
    ///
    /// # Safety
    ///
    /// `t` is null, or points to a `struct nmiclock_target` that stays in
    /// place, unchanged, until `nmiclock_unregister_target(t)` returns.
    pub(crate) unsafe fn new(t: *mut bindings::nmiclock_target) -> Option<Self> {
        (!t.is_null()).then_some(Self(t))
    }

    /// The address, to keep in an atomic.
    pub(crate) fn addr(self) -> usize {
        self.0 as usize
    }

    /// The handle whose [`RawTarget::addr`] is `addr`.
    ///
    /// # Safety
    ///
    /// `addr` must come from [`RawTarget::addr`] of a target still
    /// registered, or pinned by a reference on its owner.
    pub(crate) unsafe fn from_addr(addr: usize) -> Self {
        Self(addr as *const bindings::nmiclock_target)
    }

    /// The target's name, as the provider gave it, and its length; `None`
    /// when it has none, or none shorter than `N` bytes.
    pub(crate) fn name<const N: usize>(self) -> Option<([u8; N], usize)> {
        // SAFETY: A handle points at a live target (see the type).
        let p = unsafe { (*self.0).name };
        if p.is_null() {
            return None;
        }
        let mut out = [0u8; N];
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: `p` is a NUL-terminated string (the header's
            // contract); we stop at its NUL, or at `N` bytes.
            let b = unsafe { *p.add(i) } as u8;
            if b == 0 {
                return Some((out, i));
            }
            *o = b;
        }
        None
    }

    /// Whether the target has a `read` (it must) and an `update`.
    pub(crate) fn has_read_update(self) -> (bool, bool) {
        // SAFETY: A handle points at a live target.
        let t = unsafe { &*self.0 };
        (t.read.is_some(), t.update.is_some())
    }

    /// Calls the target's `read`: any context, NMI included.
    #[inline]
    pub(crate) fn read(self) -> u64 {
        // SAFETY: A handle points at a live target, whose `read` is set
        // (checked at registration) and callable from any context (the
        // header's contract: the provider vouches for it, and that is what
        // is under test).
        unsafe { bindings::nmiclock_target_read(self.0) }
    }

    /// Calls the target's `update`, if it has one: task or hard-IRQ
    /// context, never concurrently with itself (the caller serializes).
    pub(crate) fn update(self) {
        // SAFETY: A handle points at a live target; the caller serializes
        // the calls and never makes them from NMI context.
        unsafe { bindings::nmiclock_target_update(self.0) }
    }

    /// Takes a reference on the target's owner: `false` if it is going
    /// away.
    pub(crate) fn get(self) -> bool {
        // SAFETY: A handle points at a live target.
        unsafe { bindings::nmiclock_target_get(self.0) }
    }

    /// Drops a reference [`RawTarget::get`] took.
    ///
    /// # Safety
    ///
    /// Once per successful [`RawTarget::get`].
    pub(crate) unsafe fn put(self) {
        // SAFETY: The caller took the reference we drop.
        unsafe { bindings::nmiclock_target_put(self.0) }
    }
}

/// The registry's mutex, held while the guard lives. Task context. Not
/// `Send`: a mutex is released by the task that took it.
pub(crate) struct Locked(core::marker::PhantomData<*const ()>);

impl Locked {
    /// Takes the mutex (may sleep).
    pub(crate) fn new() -> Self {
        // SAFETY: Task context (every caller is); released by `drop`.
        unsafe { bindings::nmiclock_targets_lock() };
        Self(core::marker::PhantomData)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: `new()` took it.
        unsafe { bindings::nmiclock_targets_unlock() };
    }
}

/// Defines the two functions `include/nmiclock.h` exports over a registry:
/// `$register`, a `fn(RawTarget) -> Result`, and `$unregister`, a
/// `fn(RawTarget)`. The registry's module invokes it, so that this layer
/// names nothing above it; the build fails if a definition's type is not
/// the header's.
macro_rules! export_registry {
    ($register:path, $unregister:path) => {
        /// Registers `t` (exported GPL by the glue; see
        /// `include/nmiclock.h`).
        ///
        /// # Safety
        ///
        /// `t` is null, or points to a `struct nmiclock_target` that stays
        /// in place, unchanged, until `nmiclock_unregister_target(t)`
        /// returns, as the header requires of its callers.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn nmiclock_register_target(
            t: *mut $crate::ffi::bindings::nmiclock_target,
        ) -> kernel::ffi::c_int {
            // SAFETY: The caller's contract is `RawTarget::new`'s.
            match unsafe { $crate::ffi::target::RawTarget::new(t) } {
                None => {
                    kernel::pr_err!("register_target: NULL target\n");
                    kernel::error::code::EINVAL.to_errno()
                }
                Some(raw) => match $register(raw) {
                    Ok(()) => 0,
                    Err(e) => e.to_errno(),
                },
            }
        }

        /// Unregisters `t` (exported GPL by the glue), stopping a run that
        /// uses it first.
        ///
        /// # Safety
        ///
        /// `t` is null, or was passed to `nmiclock_register_target()` and
        /// is still in place.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn nmiclock_unregister_target(
            t: *mut $crate::ffi::bindings::nmiclock_target,
        ) {
            // SAFETY: The caller's contract is `RawTarget::new`'s.
            if let Some(raw) = unsafe { $crate::ffi::target::RawTarget::new(t) } {
                $unregister(raw);
            }
        }

        // The header's declarations (generated) and these definitions
        // have one type.
        const _: () = {
            use $crate::ffi::bindings;
            let _: unsafe extern "C" fn(*mut bindings::nmiclock_target) -> kernel::ffi::c_int =
                bindings::nmiclock_register_target;
            let _: unsafe extern "C" fn(*mut bindings::nmiclock_target) -> kernel::ffi::c_int =
                nmiclock_register_target;
            let _: unsafe extern "C" fn(*mut bindings::nmiclock_target) =
                bindings::nmiclock_unregister_target;
            let _: unsafe extern "C" fn(*mut bindings::nmiclock_target) =
                nmiclock_unregister_target;
        };
    };
}
pub(crate) use export_registry;
