// SPDX-License-Identifier: GPL-2.0

//! Shared state reachable from a `static`: per-CPU slots ([`PerCpu`]) and a
//! slot owning one boxed value ([`BoxSlot`]).
//!
//! [`PerCpu`] holds one `T` for each possible CPU id, allocated at load, so
//! that NMI, IRQ and task context can all get at their CPU's slot without
//! locks or allocation. It is published through one pointer and
//! unpublished with the kernel's guarantee that no reader still runs: every
//! lookup runs inside an RCU read side ([`PerCpu::with`]: an NMI or hard-IRQ
//! handler is one by itself) or holds a reference count ([`PerCpu::pin`],
//! task context, for code that sleeps), and [`PerCpu::uninstall`] waits for
//! a grace period before it drops its own count. A lookup after that finds
//! nothing; memory is never freed under a reader, whatever order the
//! module tears down in.
//!
//! `T` is made of atomics: a context that migrates between looking up its
//! slot and updating it updates another CPU's slot, which stays correct for
//! totals. Readers sum with [`Slots::sum`] (or take [`Slots::max`]).

use core::marker::PhantomData;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

use crate::ffi;

/// The slots of every possible CPU id, as installed.
pub(crate) struct Slots<T> {
    v: KVec<T>,
}

impl<T> Slots<T> {
    /// The slot of CPU `cpu`, if `cpu` is a possible CPU id.
    #[inline]
    pub(crate) fn get(&self, cpu: u32) -> Option<&T> {
        self.v.get(cpu as usize)
    }

    /// The slot of the CPU this runs on.
    #[inline]
    pub(crate) fn this_cpu(&self) -> Option<&T> {
        self.get(ffi::cpu::this())
    }

    /// Every slot with its CPU id, in CPU order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        // A `Range` steps without an overflow check (a `RangeFrom` or
        // `enumerate()` would bring one into interrupt context).
        let n = u32::try_from(self.v.len()).unwrap_or(u32::MAX);
        (0..n).filter_map(move |cpu| self.get(cpu).map(|slot| (cpu, slot)))
    }

    /// The total over every CPU of the counter `f` picks (wrapping).
    pub(crate) fn sum(&self, f: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.v.iter().fold(0u64, |acc, slot| {
            acc.wrapping_add(f(slot).load(Ordering::Relaxed))
        })
    }

    /// The largest value over every CPU of the counter `f` picks.
    pub(crate) fn max(&self, f: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.v
            .iter()
            .map(|slot| f(slot).load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }
}

/// One `T` per possible CPU id, installed at load and removed at unload.
///
/// # Invariants
///
/// `ptr` is null or comes from [`Arc::into_raw`] of an `Arc<Slots<T>>`
/// whose reference this `PerCpu` owns. Once that reference is given up
/// (`ptr` swapped to null), it is dropped only after an RCU grace period.
pub(crate) struct PerCpu<T> {
    ptr: AtomicPtr<Slots<T>>,
    /// It owns a reference on the slots: it is `Send` and `Sync` only if
    /// an `Arc` of them is.
    _owns: PhantomData<Arc<Slots<T>>>,
}

impl<T> PerCpu<T> {
    /// Nothing installed yet: every lookup finds nothing.
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Allocates one `make()` per possible CPU id. `EBUSY` if already
    /// installed: the pointer is set with a compare-exchange, so of two
    /// installs one wins (the other's slots are freed).
    pub(crate) fn install(&self, make: impl Fn() -> T) -> Result {
        let n = ffi::cpu::nr_cpu_ids() as usize;
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            v.push(make(), GFP_KERNEL)?;
        }
        let p = Arc::into_raw(Arc::new(Slots { v }, GFP_KERNEL)?).cast_mut();
        // INVARIANT: `p` is an `Arc`'s, whose reference passes to `ptr`.
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(_) => {
                // SAFETY: `p` came from `Arc::into_raw` above and was never
                // published: this gives its reference back, once.
                drop(unsafe { Arc::from_raw(p) });
                Err(EBUSY)
            }
        }
    }

    /// Unpublishes the slots, waits until no RCU read side that could have
    /// found them still runs, and drops this `PerCpu`'s reference (the
    /// slots go when the last [`PerCpu::pin`] does). Task context; may
    /// sleep. Nothing installed: nothing happens.
    pub(crate) fn uninstall(&self) {
        let p = self.ptr.swap(ptr::null_mut(), Ordering::AcqRel);
        if p.is_null() {
            return;
        }
        ffi::cpu::synchronize_rcu();
        // SAFETY: By the type invariant `p` is an `Arc`'s whose reference
        // this `PerCpu` owned; the swap took it out, so it is dropped once.
        // Every `with()` that saw `p` ran in a read side the grace period
        // waited for; every `pin()` holds its own reference.
        drop(unsafe { Arc::from_raw(p) });
    }

    /// Runs `f` on the slots, if installed: any context, NMI included.
    /// `f` runs inside an RCU read side and must not sleep.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Slots<T>) -> R) -> Option<R> {
        ffi::cpu::read_side(|| {
            let p = self.ptr.load(Ordering::Acquire);
            // SAFETY: A non-null `p` is an `Arc`'s (type invariant) whose
            // reference `uninstall()` drops only after a grace period that
            // waits for this read side: the slots live until `f` returns,
            // and the reference given to `f` cannot escape it.
            (!p.is_null()).then(|| f(unsafe { &*p }))
        })
    }

    /// Runs `f` on the slot of CPU `cpu` (see [`PerCpu::with`]).
    #[inline]
    pub(crate) fn with_cpu<R>(&self, cpu: u32, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.with(|s| s.get(cpu).map(f)).flatten()
    }

    /// Runs `f` on the slot of the CPU this runs on (see [`PerCpu::with`]).
    #[inline]
    pub(crate) fn with_this_cpu<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.with(|s| s.this_cpu().map(f)).flatten()
    }

    /// A reference on the slots, if installed, for code that sleeps while
    /// it uses them (a kthread, a debugfs handler): they stay allocated
    /// until it is dropped, even past [`PerCpu::uninstall`]. Task context
    /// (dropping the last reference frees them).
    pub(crate) fn pin(&self) -> Option<Arc<Slots<T>>> {
        let _rcu = ffi::cpu::RcuReadLock::new();
        let p = self.ptr.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: A non-null `p` is an `Arc`'s (type invariant), whose
        // reference `uninstall()` drops only after a grace period that
        // waits for this read side: the count is above zero while the
        // borrow is turned into a reference of our own.
        let borrowed = unsafe { ArcBorrow::from_raw(p) };
        Some(borrowed.into())
    }

    /// The total over every CPU of the counter `f` picks (wrapping); 0 if
    /// nothing is installed. Any context.
    pub(crate) fn sum(&self, f: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.with(|s| s.sum(f)).unwrap_or(0)
    }

    /// The largest value over every CPU of the counter `f` picks; 0 if
    /// nothing is installed. Any context.
    pub(crate) fn max(&self, f: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.with(|s| s.max(f)).unwrap_or(0)
    }
}

// SAFETY: `PerCpu` is a shared handle on an `Arc<Slots<T>>` (it hands out
// `&Slots<T>` and clones of the `Arc` to any thread): it is `Sync` when the
// `Arc` is, that is when `T` is `Send + Sync`.
unsafe impl<T: Send + Sync> Sync for PerCpu<T> {}

/// A slot that owns one boxed `T` or nothing, swapped in and out whole:
/// it never lends the value, so a value put in is dropped exactly once, by
/// whoever takes it out (or by the slot's own drop).
///
/// # Invariants
///
/// `ptr` is null or comes from [`KBox::into_raw`], and the box is owned by
/// this slot.
pub(crate) struct BoxSlot<T> {
    ptr: AtomicPtr<T>,
    _owns: PhantomData<KBox<T>>,
}

impl<T> BoxSlot<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Puts `b` in, returning what was there.
    pub(crate) fn put(&self, b: KBox<T>) -> Option<KBox<T>> {
        // INVARIANT: The box's ownership passes to the slot.
        Self::own(self.ptr.swap(KBox::into_raw(b), Ordering::AcqRel))
    }

    /// Takes out what is there.
    pub(crate) fn take(&self) -> Option<KBox<T>> {
        Self::own(self.ptr.swap(ptr::null_mut(), Ordering::AcqRel))
    }

    /// Whether a value is in.
    pub(crate) fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::Acquire).is_null()
    }

    /// The box a swap took out of the slot.
    fn own(p: *mut T) -> Option<KBox<T>> {
        // SAFETY: By the type invariant a non-null `p` is a box the slot
        // owned; the swap that returned it took it out, so it is owned once.
        (!p.is_null()).then(|| unsafe { KBox::from_raw(p) })
    }
}

impl<T> Default for BoxSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for BoxSlot<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

// SAFETY: The slot hands its value over whole (never `&T`), between any
// threads: it is `Send` and `Sync` when `KBox<T>` is `Send`.
unsafe impl<T: Send> Sync for BoxSlot<T> {}
// SAFETY: As above: sending the slot sends the box.
unsafe impl<T: Send> Send for BoxSlot<T> {}
