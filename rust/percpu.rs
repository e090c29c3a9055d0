// SPDX-License-Identifier: GPL-2.0

//! Per-CPU slots: one `T` for each possible CPU id, allocated once at load,
//! reachable from a `static` so that NMI, IRQ and task context can all get
//! at their CPU's slot without locks or allocation.
//!
//! `T` is made of atomics: a context that migrates between looking up its
//! slot and updating it updates another CPU's slot, which stays correct for
//! totals. Readers sum with [`PerCpu::sum`] (or take [`PerCpu::max`]).

use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use kernel::prelude::*;

use crate::ffi;

/// One `T` per possible CPU id, installed at load and removed at unload.
///
/// # Invariants
///
/// While `ptr` is neither null nor [`PerCpu::INSTALLING`] it points to
/// `len` initialised `T`s in a `KVec` allocation of capacity `cap`, owned
/// by this `PerCpu`.
pub(crate) struct PerCpu<T> {
    ptr: AtomicPtr<T>,
    len: AtomicUsize,
    cap: AtomicUsize,
    /// It owns `T`s: it is `Send` only if they are.
    _owns: PhantomData<T>,
}

// SAFETY: `PerCpu` hands out `&T` to any thread, so it is `Sync` exactly when
// `T` is; it owns the `T`s, so sending it sends them.
unsafe impl<T: Sync + Send> Sync for PerCpu<T> {}

impl<T> PerCpu<T> {
    /// `ptr` while an [`Self::install`] fills in the lengths: not
    /// installed yet, but taken (no allocation is at this address).
    const INSTALLING: *mut T = NonNull::dangling().as_ptr();

    /// Nothing installed yet: every lookup gives `None`.
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
            len: AtomicUsize::new(0),
            cap: AtomicUsize::new(0),
            _owns: PhantomData,
        }
    }

    /// Allocates one `make()` per possible CPU id. `EBUSY` if already
    /// installed (or being installed): the slot is taken with a
    /// compare-exchange, so of two installs one wins.
    pub(crate) fn install(&self, make: impl Fn() -> T) -> Result {
        let n = ffi::cpu::nr_cpu_ids() as usize;
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            v.push(make(), GFP_KERNEL)?;
        }
        if self
            .ptr
            .compare_exchange(
                ptr::null_mut(),
                Self::INSTALLING,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Err(EBUSY);
        }
        let (p, len, cap) = v.into_raw_parts();
        self.len.store(len, Ordering::Relaxed);
        self.cap.store(cap, Ordering::Relaxed);
        // INVARIANT: `p` holds `len` initialised `T`s of a `KVec` of
        // capacity `cap`; readers that see `p` (acquire) see the lengths.
        self.ptr.store(p, Ordering::Release);
        Ok(())
    }

    /// Frees the slots.
    ///
    /// # Safety
    ///
    /// No reference obtained from [`Self::get`], [`Self::this_cpu`] or
    /// [`Self::iter`] may be alive, and none may be taken concurrently.
    pub(crate) unsafe fn uninstall(&self) {
        let p = self.ptr.swap(ptr::null_mut(), Ordering::Acquire);
        if p.is_null() || p == Self::INSTALLING {
            return;
        }
        let len = self.len.swap(0, Ordering::Relaxed);
        let cap = self.cap.swap(0, Ordering::Relaxed);
        // SAFETY: By the type invariant `p`, `len`, `cap` describe a `KVec`
        // this `PerCpu` owned; it is no longer reachable (`ptr` is null) and
        // the caller guarantees no reference into it is alive.
        drop(unsafe { KVec::from_raw_parts(p, len, cap) });
    }

    /// The slot of CPU `cpu`, if installed and `cpu` is a possible CPU id.
    #[inline]
    pub(crate) fn get(&self, cpu: u32) -> Option<&T> {
        let p = self.ptr.load(Ordering::Acquire);
        if p.is_null() || p == Self::INSTALLING {
            return None;
        }
        let i = cpu as usize;
        if i >= self.len.load(Ordering::Relaxed) {
            return None;
        }
        // SAFETY: By the type invariant `p` points to `len` initialised `T`s
        // and `i < len`; `uninstall()`'s contract keeps them alive for as
        // long as the reference is used.
        Some(unsafe { &*p.add(i) })
    }

    /// The slot of the CPU this runs on.
    #[inline]
    pub(crate) fn this_cpu(&self) -> Option<&T> {
        self.get(ffi::cpu::this())
    }

    /// Every slot with its CPU id, in CPU order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        let n = self.len.load(Ordering::Relaxed) as u32;
        (0..n).filter_map(move |cpu| self.get(cpu).map(|slot| (cpu, slot)))
    }

    /// The total over every CPU of the counter `f` picks (wrapping).
    pub(crate) fn sum(&self, f: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.iter().fold(0u64, |acc, (_, slot)| {
            acc.wrapping_add(f(slot).load(Ordering::Relaxed))
        })
    }

    /// The largest value over every CPU of the counter `f` picks.
    pub(crate) fn max(&self, f: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.iter()
            .map(|(_, slot)| f(slot).load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }
}
