// SPDX-License-Identifier: GPL-2.0

//! A spin-wait with a time budget: the idea of the kernel's proposed
//! `smp_cond_load_acquire_timeout()`.
//!
//! [`cond_load_acquire_timeout`] spins on an atomic with a CPU relax hint
//! until a condition on its value holds or a time budget is spent. Reading
//! the time costs more than a spin, so it is read only every
//! [`SpinBudget::poll_count`] spins (the kernel's `SMP_TIMEOUT_POLL_COUNT`).
//! Used where waiting for another context could otherwise hang the CPU: the
//! `seqcount` clock reader, which an NMI can run while the writer it waits
//! for is the very code the NMI interrupted.
//!
//! Kernel-independent: the time source is any `FnMut() -> u64` of
//! nanoseconds; in NMI context it must itself be NMI-safe. `tests/spin.rs`
//! covers the timeout, the poll count and a time source going backwards.

use crate::sync::{spin_loop, AtomicU32, Ordering};

/// How long [`cond_load_acquire_timeout`] may spin.
#[derive(Clone, Copy, Debug)]
pub struct SpinBudget {
    /// Give up once this many nanoseconds have passed since the first
    /// failed check.
    pub timeout_ns: u64,
    /// Spins between two reads of the time; 0 is taken as 1.
    pub poll_count: u32,
}

/// Default spins between time checks, as the kernel's generic
/// `SMP_TIMEOUT_POLL_COUNT`.
pub const DEFAULT_POLL_COUNT: u32 = 200;

/// Loads `v` with acquire ordering until `cond` holds for the value, and
/// returns `Ok(value)`; or, once `budget.timeout_ns` has passed by `now()`,
/// returns `Err(last value seen)`.
///
/// `now` is not called at all when `cond` holds at once (the fast path of
/// every clock read: reading the time there doubled the cost of a
/// `seqcount` read, as `bench` showed); otherwise once when the first check
/// fails, starting the budget, and then every `poll_count` spins. A time
/// source that goes backwards only lengthens the wait (elapsed time is
/// computed with wrapping subtraction and compared unsigned).
pub fn cond_load_acquire_timeout<C, N>(
    v: &AtomicU32,
    mut cond: C,
    budget: SpinBudget,
    mut now: N,
) -> Result<u32, u32>
where
    C: FnMut(u32) -> bool,
    N: FnMut() -> u64,
{
    let poll = if budget.poll_count == 0 {
        1
    } else {
        budget.poll_count
    };
    let first = v.load(Ordering::Acquire);
    if cond(first) {
        return Ok(first);
    }
    let start = now();
    let mut spins: u32 = 0;
    loop {
        let val = v.load(Ordering::Acquire);
        if cond(val) {
            return Ok(val);
        }
        spin_loop();
        spins = spins.wrapping_add(1);
        if spins >= poll {
            spins = 0;
            let elapsed = now().wrapping_sub(start);
            if elapsed >= budget.timeout_ns && elapsed < u64::MAX / 2 {
                return Err(val);
            }
        }
    }
}
