// SPDX-License-Identifier: GPL-2.0

//! Targets other modules register (`include/nmiclock.h`): the two exported
//! functions, handles on a registered `struct nmiclock_target` that are
//! valid by construction, and the registry's mutex. The registry itself is
//! the caller's, which defines the exported functions over it with
//! [`export_registry`].
//!
//! A provider's structure stays in place until its
//! `nmiclock_unregister_target()` call returns, and no longer: every
//! handle here is valid for as long as the Rust lifetime it carries, and
//! the exported unregister function does not return while one may exist.
//!
//! - [`Registering`] and [`Unregistering`]: the target of one call of the
//!   exported functions, for the call;
//! - [`RegisteredCell`]: a registry slot's target, handed out as a
//!   [`TargetRef`] only while the registry's mutex ([`Locked`]) is held;
//!   a private list of the targets registered now ([`MAX_REGISTERED`] of
//!   them) checks every such load, so that a slot the registry left stale
//!   yields nothing;
//! - [`TargetPin`]: a run's reference on a target's owner, which also
//!   publishes the target to the run's readers ([`with_pinned`], an RCU
//!   read side, NMI context included); unregistration waits for the pin
//!   to go, and the pin waits for an RCU grace period before it goes;
//! - [`Updating`]: the one `update` call in progress, so that the calls
//!   never overlap, as the header promises.

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use kernel::prelude::*;

use super::bindings;
use super::cpu;

/// Targets registered at once, at most (the header's limit).
pub(crate) const MAX_REGISTERED: usize = 8;

/// What a target promises, as it declared it (`include/nmiclock.h`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Declared {
    /// The step back on one CPU it allows itself, ns; `None`: any.
    pub(crate) back_cpu_ns: Option<u64>,
    /// The same across CPUs.
    pub(crate) back_cross_ns: Option<u64>,
    /// Its rate is promised (checked against `CLOCK_MONOTONIC_RAW`).
    pub(crate) rate: bool,
}

impl Declared {
    /// The default promise: no step back of either, the rate checked.
    pub(crate) const DEFAULT: Self = Self {
        back_cpu_ns: Some(0),
        back_cross_ns: Some(0),
        rate: true,
    };
}

/// `NMICLOCK_ANY` as `None`.
fn allowance(ns: u64) -> Option<u64> {
    (ns != u64::MAX).then_some(ns)
}

/// The identity of a target, by address: to compare, never to reach it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct TargetId(usize);

impl TargetId {
    fn of(p: *const bindings::nmiclock_target) -> Self {
        Self(p as usize)
    }
}

/// The registry's mutex, held while the guard lives. Task context. Neither
/// `Send` nor `Sync`: a mutex is released by the task that took it, and a
/// `&Locked` proves to the code it is lent to that its task holds it.
pub(crate) struct Locked(PhantomData<*const ()>);

impl Locked {
    /// Takes the mutex (may sleep).
    pub(crate) fn new() -> Self {
        // SAFETY: Task context (every caller is); released by `drop`.
        unsafe { bindings::nmiclock_targets_lock() };
        Self(PhantomData)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: `new()` took it, on this task (the guard is not `Send`).
        unsafe { bindings::nmiclock_targets_unlock() };
    }
}

/// The targets registered now: those a [`RegisteredCell::set`] stored
/// whose slot was not cleared since and whose unregistration has not
/// returned. Written and read only with the mutex held (a `&Locked`); the
/// atomics only make the static shareable.
static LIVE: [AtomicPtr<bindings::nmiclock_target>; MAX_REGISTERED] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_REGISTERED];

/// Whether `p` (not null) is registered now.
fn is_live(_: &Locked, p: *mut bindings::nmiclock_target) -> bool {
    LIVE.iter().any(|l| l.load(Ordering::Relaxed) == p)
}

/// Adds `p` (not null) to [`LIVE`]: `EEXIST` if it is there, `ENOSPC` if
/// the list is full.
fn live_add(l: &Locked, p: *mut bindings::nmiclock_target) -> Result {
    if is_live(l, p) {
        return Err(EEXIST);
    }
    let free = LIVE
        .iter()
        .find(|e| e.load(Ordering::Relaxed).is_null())
        .ok_or(ENOSPC)?;
    free.store(p, Ordering::Relaxed);
    Ok(())
}

/// Removes `p` from [`LIVE`], if it is there.
fn live_remove(_: &Locked, p: *mut bindings::nmiclock_target) {
    for e in LIVE.iter().filter(|e| e.load(Ordering::Relaxed) == p) {
        e.store(ptr::null_mut(), Ordering::Relaxed);
    }
}

/// The target of one `nmiclock_register_target()` call, for the call.
///
/// # Invariants
///
/// `ptr` points at a `struct nmiclock_target` of this module's header
/// that stays in place, unchanged, until `nmiclock_unregister_target()` of
/// it returns, and beyond `'a`. `added` is true once
/// [`RegisteredCell::set`] put it in [`LIVE`].
pub(crate) struct Registering<'a> {
    ptr: NonNull<bindings::nmiclock_target>,
    added: Cell<bool>,
    _call: PhantomData<&'a bindings::nmiclock_target>,
}

/// Why a registration is refused before its fields are read.
pub(crate) enum Refused {
    /// A null target.
    Null,
    /// A structure of another size than this header's, in bytes: a
    /// provider built against another `nmiclock.h`.
    OtherHeader(usize),
}

impl Registering<'_> {
    /// The handle on `t`, which the caller built as `size` bytes: refused
    /// for null, or for a size other than this header's structure's.
    ///
    /// # Safety
    ///
    /// `t` is null, or points to `size` bytes of a `struct
    /// nmiclock_target` that stay in place, unchanged, until
    /// `nmiclock_unregister_target(t)` returns, and that is not being
    /// unregistered meanwhile.
    pub(crate) unsafe fn new(
        t: *mut bindings::nmiclock_target,
        size: usize,
    ) -> core::result::Result<Self, Refused> {
        let ptr = NonNull::new(t).ok_or(Refused::Null)?;
        if size != core::mem::size_of::<bindings::nmiclock_target>() {
            return Err(Refused::OtherHeader(size));
        }
        // INVARIANT: The caller's contract, for a whole structure of this
        // header; not yet in `LIVE`.
        Ok(Self {
            ptr,
            added: Cell::new(false),
            _call: PhantomData,
        })
    }

    /// Registers the target with `register`, then, if that failed, takes
    /// it out of [`LIVE`] again if `register` put it there: the provider
    /// of a target whose registration failed need not unregister it.
    pub(crate) fn run(self, register: impl FnOnce(&Self) -> Result) -> Result {
        let r = register(&self);
        if r.is_err() && self.added.get() {
            live_remove(&Locked::new(), self.ptr.as_ptr());
        }
        r
    }

    /// Its identity.
    pub(crate) fn id(&self) -> TargetId {
        TargetId::of(self.ptr.as_ptr())
    }

    /// The target's name, as the provider gave it, and its length; `None`
    /// when it has none, or none shorter than `N` bytes.
    pub(crate) fn name<const N: usize>(&self) -> Option<([u8; N], usize)> {
        // SAFETY: `ptr` points at a live target (type invariant).
        let p = unsafe { (*self.ptr.as_ptr()).name };
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

    /// Whether the target has a `read` or a `read_status` (it must), and
    /// an `update`.
    pub(crate) fn has_read_update(&self) -> (bool, bool) {
        let p = self.ptr.as_ptr();
        // SAFETY: `p` points at a live target (type invariant), which
        // nothing writes. Each field is read alone, never the whole
        // structure.
        let (read, status, update) = unsafe {
            (
                (*p).read.is_some(),
                (*p).read_status.is_some(),
                (*p).update.is_some(),
            )
        };
        (read || status, update)
    }

    /// What the target promises, as it declared it.
    pub(crate) fn declared(&self) -> Declared {
        let p = self.ptr.as_ptr();
        // SAFETY: `p` points at a live target (type invariant), and nothing
        // writes it; each field is read alone.
        let (cpu, cross, any_rate) =
            unsafe { ((*p).back_cpu_ns, (*p).back_cross_ns, (*p).any_rate) };
        Declared {
            back_cpu_ns: allowance(cpu),
            back_cross_ns: allowance(cross),
            rate: !any_rate,
        }
    }
}

/// The target of one `nmiclock_unregister_target()` call, for the call:
/// only its identity, to find it by.
pub(crate) struct Unregistering<'a> {
    ptr: *mut bindings::nmiclock_target,
    _call: PhantomData<&'a bindings::nmiclock_target>,
}

impl Unregistering<'_> {
    /// The handle on `t`; `None` for null. Only the address is kept: the
    /// handle reaches nothing through it, so any pointer will do.
    pub(crate) fn new(t: *mut bindings::nmiclock_target) -> Option<Self> {
        (!t.is_null()).then_some(Self {
            ptr: t,
            _call: PhantomData,
        })
    }

    /// Unregisters the target with `unregister`, then makes sure nothing
    /// can reach it once this returns, whatever `unregister` did: takes it
    /// out of [`LIVE`] (no [`TargetRef`] from a slot, no new [`TargetPin`]), and
    /// waits for a [`TargetPin`] of it to go (task context; may sleep). The
    /// caller's structure may go away after.
    pub(crate) fn run(self, unregister: impl FnOnce(&Self)) {
        unregister(&self);
        live_remove(&Locked::new(), self.ptr);
        while self.is_pinned() {
            cpu::sleep_us(1_000);
        }
    }

    /// Its identity.
    pub(crate) fn id(&self) -> TargetId {
        TargetId::of(self.ptr)
    }

    /// Whether a [`TargetPin`] holds it (until the pin has gone, grace period
    /// and reference included).
    pub(crate) fn is_pinned(&self) -> bool {
        PINNED.load(Ordering::Acquire) == self.ptr
    }
}

/// A registry slot's target: empty, or a target a registration stored.
///
/// # Invariants
///
/// `ptr` is null or was stored by [`RegisteredCell::set`] with the mutex
/// held. A [`TargetRef`] is made from it only with the mutex held and
/// while it is in [`LIVE`], from which its unregistration takes it (with
/// the mutex held) before it returns.
pub(crate) struct RegisteredCell {
    ptr: AtomicPtr<bindings::nmiclock_target>,
}

impl RegisteredCell {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Whether it holds a target. Any context, no lock: the answer may be
    /// stale by the time it is used; what was stored before
    /// [`RegisteredCell::set`] is visible once this is true.
    pub(crate) fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::Acquire).is_null()
    }

    /// Whether it holds the target `id`. No lock, as for
    /// [`RegisteredCell::is_set`].
    pub(crate) fn holds(&self, id: TargetId) -> bool {
        let p = self.ptr.load(Ordering::Acquire);
        !p.is_null() && TargetId::of(p) == id
    }

    /// Stores the target `t` registers: `EINVAL` if it has no `read`,
    /// `EBUSY` if the slot holds one, `EEXIST` if `t` is registered
    /// already, `ENOSPC` if [`MAX_REGISTERED`] are.
    pub(crate) fn set(&self, l: &Locked, t: &Registering<'_>) -> Result {
        if !t.has_read_update().0 {
            return Err(EINVAL);
        }
        if self.is_set() {
            return Err(EBUSY);
        }
        live_add(l, t.ptr.as_ptr())?;
        t.added.set(true);
        // INVARIANT: Stored with the mutex held, and now in `LIVE`; its
        // `read` (or `read_status`) is set.
        self.ptr.store(t.ptr.as_ptr(), Ordering::Release);
        Ok(())
    }

    /// Empties the slot; its target is no longer registered, so nothing
    /// can load it from any slot.
    pub(crate) fn clear(&self, l: &Locked) {
        let old = self.ptr.swap(ptr::null_mut(), Ordering::AcqRel);
        if !old.is_null() {
            live_remove(l, old);
        }
    }

    /// The target, valid while the mutex is held; `None` for an empty
    /// slot, or one whose target is no longer registered.
    pub(crate) fn load<'l>(&self, l: &'l Locked) -> Option<TargetRef<'l>> {
        let p = self.ptr.load(Ordering::Acquire);
        let ptr = NonNull::new(p).filter(|_| is_live(l, p))?;
        // INVARIANT: In `LIVE` while the mutex is held, so registered for
        // `'l` at least: its unregistration cannot return before it takes
        // the mutex, which `l` holds for `'l`. `set()` checked that its
        // `read` (or `read_status`) is set.
        Some(TargetRef {
            ptr,
            _valid: PhantomData,
        })
    }
}

/// A registered target, valid for `'a`.
///
/// # Invariants
///
/// `ptr` points at a target passed to `nmiclock_register_target()` whose
/// `nmiclock_unregister_target()` does not return within `'a`, a whole
/// structure of this header; its `read` or `read_status` is set
/// ([`RegisteredCell::set`] refuses a target without).
#[derive(Clone, Copy)]
pub(crate) struct TargetRef<'a> {
    ptr: NonNull<bindings::nmiclock_target>,
    _valid: PhantomData<&'a bindings::nmiclock_target>,
}

impl<'a> TargetRef<'a> {
    /// Whether the target has an `update`.
    pub(crate) fn has_update(self) -> bool {
        // SAFETY: Valid for `'a` (type invariant), and nothing writes it.
        unsafe { self.ptr.as_ref() }.update.is_some()
    }

    /// Reads the target (its `read_status`, or its `read`): any context,
    /// NMI included. The time, and whether the read says it stalled.
    #[inline]
    pub(crate) fn read(self) -> (u64, bool) {
        let mut ns = 0u64;
        // SAFETY: Valid for `'a` (type invariant), its `read` or
        // `read_status` set and callable from any context (the header's
        // contract: the provider vouches for it, and that is what is under
        // test); `ns` is ours for the call.
        let r = unsafe { bindings::nmiclock_target_read(self.ptr.as_ptr(), &mut ns) };
        (
            ns,
            r == bindings::NMICLOCK_READ_STALLED as kernel::ffi::c_int,
        )
    }

    /// Begins the one `update` call in progress: `None` if another's is
    /// (whatever its target, on whatever CPU), or in NMI context, where
    /// the header allows none.
    pub(crate) fn begin_update(self) -> Option<Updating<'a>> {
        if cpu::in_nmi()
            || UPDATING
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        // INVARIANT: `UPDATING` was false and this made it true.
        Some(Updating {
            target: self,
            _not_send: PhantomData,
        })
    }
}

/// An `update` call is in progress: one at a time, as the header promises.
static UPDATING: AtomicBool = AtomicBool::new(false);

/// The right to call a target's `update`, until dropped.
///
/// # Invariants
///
/// This one set [`UPDATING`], which is clear again only once it is
/// dropped.
pub(crate) struct Updating<'a> {
    target: TargetRef<'a>,
    _not_send: PhantomData<*const ()>,
}

impl Updating<'_> {
    /// Calls the target's `update`, if it has one; nothing in NMI context.
    pub(crate) fn call(&self) {
        if cpu::in_nmi() {
            return;
        }
        // SAFETY: The target is valid for the borrow (`TargetRef`); no
        // other call is in progress (`UPDATING`, type invariant), and this
        // is not NMI context (checked above).
        unsafe { bindings::nmiclock_target_update(self.target.ptr.as_ptr()) }
    }
}

impl Drop for Updating<'_> {
    fn drop(&mut self) {
        UPDATING.store(false, Ordering::Release);
    }
}

/// The target of the [`TargetPin`] in place, for the run's readers; null
/// when none or while the pin goes. RCU-published: a reader loads it and
/// uses it inside one read side ([`with_pinned`]).
static READ: AtomicPtr<bindings::nmiclock_target> = AtomicPtr::new(ptr::null_mut());

/// The target of the [`TargetPin`] in place, from its making until it has
/// gone (grace period and reference included); null when none.
static PINNED: AtomicPtr<bindings::nmiclock_target> = AtomicPtr::new(ptr::null_mut());

/// A run's pin on a registered target: a reference on its owner module,
/// and the target published to the run's readers ([`with_pinned`]). One
/// at a time. Task context.
///
/// # Invariants
///
/// `ptr` is [`PINNED`]'s value, set by [`TargetPin::new`] with the mutex
/// held while the target was registered, so its unregistration (which
/// waits for [`PINNED`] to change) does not return while the pin lives;
/// this holds the reference on its owner that [`TargetPin::new`] took. [`READ`] holds `ptr` or null.
pub(crate) struct TargetPin {
    ptr: NonNull<bindings::nmiclock_target>,
}

// SAFETY: A pin may be dropped by any task: the reference it holds is
// released, and `synchronize_rcu()` called, from whichever task does it.
unsafe impl Send for TargetPin {}
// SAFETY: `TargetPin` has no `&self` operations.
unsafe impl Sync for TargetPin {}

impl TargetPin {
    /// Pins `t` and publishes it to [`with_pinned`]: `EBUSY` if a pin is in
    /// place already (so also for a `t` that [`with_pinned`] gave), or if
    /// `t`'s module is going away.
    pub(crate) fn new<'l>(_: &'l Locked, t: TargetRef<'l>) -> Result<Self> {
        let p = t.ptr.as_ptr();
        PINNED
            .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
            .map_err(|_| EBUSY)?;
        // SAFETY: `t` is valid (`TargetRef`, for the mutex held), and its
        // `owner` (null for built-in code) a live module while it is
        // registered; `try_module_get()` refuses one going away.
        if !unsafe { kernel::bindings::try_module_get(owner(p)) } {
            PINNED.store(ptr::null_mut(), Ordering::Release);
            return Err(EBUSY);
        }
        READ.store(p, Ordering::Release);
        // INVARIANT: `PINNED` is `p`, set with the mutex held while `t` was
        // registered: a `t` valid for the mutex's hold comes from a slot,
        // checked against `LIVE`, since one from `with_pinned` is
        // `PINNED`'s own, which the exchange above refuses. The reference
        // is taken.
        Ok(Self { ptr: t.ptr })
    }
}

/// The module that provides target `p`, as the `kernel` crate's bindings
/// type it (the same `struct module`).
///
/// # Safety
///
/// `p` must point to a registered target.
unsafe fn owner(p: *const bindings::nmiclock_target) -> *mut kernel::bindings::module {
    // SAFETY: The caller's contract: `p` is valid for reads.
    unsafe { (*p).owner }.cast()
}

impl Drop for TargetPin {
    fn drop(&mut self) {
        // The readers first: once the grace period has passed, none still
        // uses the target.
        READ.store(ptr::null_mut(), Ordering::Release);
        cpu::synchronize_rcu();
        // SAFETY: Still valid: its unregistration waits for `PINNED` to
        // change (type invariant); `new()` took the reference dropped here.
        unsafe { kernel::bindings::module_put(owner(self.ptr.as_ptr())) };
        PINNED.store(ptr::null_mut(), Ordering::Release);
    }
}

/// Runs `f` with the target a [`TargetPin`] publishes (`None` if none), in
/// an RCU read side: any context, NMI included. `f` must not sleep; the
/// target is valid until it returns, and cannot outlive it.
#[inline]
pub(crate) fn with_pinned<R>(f: impl for<'r> FnOnce(Option<TargetRef<'r>>) -> R) -> R {
    cpu::read_side(|| {
        // INVARIANT: Published by a pin, whose drop unpublishes it and
        // waits for this read side before releasing the target.
        let t = NonNull::new(READ.load(Ordering::Acquire)).map(|ptr| TargetRef {
            ptr,
            _valid: PhantomData,
        });
        f(t)
    })
}

/// Defines the two functions `include/nmiclock.h` exports over a registry:
/// `$register`, a `fn(&Registering<'_>) -> Result`, and `$unregister`, a
/// `fn(&Unregistering<'_>)`. The registry's module invokes it, so that this
/// layer names nothing above it; the build fails if a definition's type is
/// not the header's.
macro_rules! export_registry {
    ($register:path, $unregister:path) => {
        /// Registers `t` (exported GPL by the glue; see
        /// `include/nmiclock.h`).
        ///
        /// # Safety
        ///
        /// `t` is null, or points to a `struct nmiclock_target` that stays
        /// in place, unchanged, until `nmiclock_unregister_target(t)`
        /// returns, as the header requires of its callers; its
        /// unregistration does not begin before this returns.
        // Expanded in the registry's module, under the crate's
        // `deny(unsafe_code)`: this layer's `unsafe`, where it is used.
        #[allow(unsafe_code)]
        #[no_mangle]
        pub(crate) unsafe extern "C" fn __nmiclock_register_target(
            t: *mut $crate::ffi::bindings::nmiclock_target,
            size: usize,
        ) -> kernel::ffi::c_int {
            // SAFETY: The caller's contract is `Registering::new`'s.
            match unsafe { $crate::ffi::target::Registering::new(t, size) } {
                Err($crate::ffi::target::Refused::Null) => {
                    kernel::pr_err!("register_target: NULL target\n");
                    kernel::error::code::EINVAL.to_errno()
                }
                Err($crate::ffi::target::Refused::OtherHeader(size)) => {
                    kernel::pr_err!(
                        "register_target: a structure of {} bytes, this nmiclock.h's is {}: rebuild the provider against the module's include/nmiclock.h\n",
                        size,
                        core::mem::size_of::<$crate::ffi::bindings::nmiclock_target>()
                    );
                    kernel::error::code::EINVAL.to_errno()
                }
                Ok(r) => match r.run($register) {
                    Ok(()) => 0,
                    Err(e) => e.to_errno(),
                },
            }
        }

        /// The 0.6 entry point, exported (GPL, by the glue) so that a
        /// provider built against that header loads and is refused with
        /// one line, not an unknown symbol: nothing of `t` is read.
        // Expanded in the registry's module, under the crate's
        // `deny(unsafe_code)`: an exported symbol.
        #[allow(unsafe_code)]
        #[no_mangle]
        pub(crate) extern "C" fn nmiclock_register_target(
            _t: *mut $crate::ffi::bindings::nmiclock_target,
        ) -> kernel::ffi::c_int {
            kernel::pr_err!(
                "register_target: a provider built against the 0.6 nmiclock.h: rebuild it against the module's include/nmiclock.h\n"
            );
            kernel::error::code::EINVAL.to_errno()
        }

        /// Unregisters `t` (exported GPL by the glue), stopping a run that
        /// uses it first; once this returns, nothing reaches it.
        ///
        /// # Safety
        ///
        /// `t` is null, or was passed to `nmiclock_register_target()`, as
        /// the header requires of its callers; only its address is used
        /// here, to find it by.
        // Expanded in the registry's module, under the crate's
        // `deny(unsafe_code)`: this layer's `unsafe`, where it is used.
        #[allow(unsafe_code)]
        #[no_mangle]
        pub(crate) unsafe extern "C" fn nmiclock_unregister_target(
            t: *mut $crate::ffi::bindings::nmiclock_target,
        ) {
            if let Some(u) = $crate::ffi::target::Unregistering::new(t) {
                u.run($unregister);
            }
        }

        // The header's declarations (generated) and these definitions
        // have one type.
        const _: () = {
            use $crate::ffi::bindings;
            let _: unsafe extern "C" fn(*mut bindings::nmiclock_target) -> kernel::ffi::c_int =
                bindings::nmiclock_register_target;
            let _: extern "C" fn(*mut bindings::nmiclock_target) -> kernel::ffi::c_int =
                nmiclock_register_target;
            let _: unsafe extern "C" fn(
                *mut bindings::nmiclock_target,
                usize,
            ) -> kernel::ffi::c_int = bindings::__nmiclock_register_target;
            let _: unsafe extern "C" fn(
                *mut bindings::nmiclock_target,
                usize,
            ) -> kernel::ffi::c_int = __nmiclock_register_target;
            let _: unsafe extern "C" fn(*mut bindings::nmiclock_target) =
                bindings::nmiclock_unregister_target;
            let _: unsafe extern "C" fn(*mut bindings::nmiclock_target) =
                nmiclock_unregister_target;
        };
    };
}
pub(crate) use export_registry;
