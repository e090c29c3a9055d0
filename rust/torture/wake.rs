// SPDX-License-Identifier: GPL-2.0

//! The wake-up latency probe of the stress run: on each CPU a sleeper
//! kthread, woken every [`PERIOD_NS`] by a controller hrtimer through the
//! scheduler, measures with nmiclock how long the wake-up took. One that
//! takes a tick or more is a `late_wakeup`, the symptom of an idle loop
//! that checked need-resched and then halted anyway (reported, not counted
//! as an error). The sleeper sleeps [`MAX_SLEEP_MS`] at most, so a lost
//! wake-up shows as a late one of about that long instead of silencing the
//! probe.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::prelude::*;

use super::{live, STRESS};
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::kthread::{Kthread, TaskSlot, Worker};
use crate::kclock;

/// Period of the controller.
pub(crate) const PERIOD_NS: u64 = 10_000_000;

/// Longest sleep of a sleeper.
const MAX_SLEEP_MS: u32 = 100;

/// One CPU's part of the probe.
#[derive(Default)]
pub(crate) struct Cpu {
    /// The sleeper's task, for the controller to wake.
    sleeper: TaskSlotCell,
    /// The sleeper is asleep, waiting for the controller.
    sleeping: AtomicBool,
    /// nmiclock time when the controller woke the sleeper.
    woken_at: AtomicU64,
    /// Wake-ups the controller issued (it took the flag of a published
    /// sleeper and woke it); each must be seen by the sleeper.
    pub(crate) issued: AtomicU64,
    pub(crate) wakeups: AtomicU64,
    pub(crate) late_wakeups: AtomicU64,
    pub(crate) max_wake_ns: AtomicU64,
}

/// A [`TaskSlot`] that can be derived `Default`.
struct TaskSlotCell(TaskSlot);

impl Default for TaskSlotCell {
    fn default() -> Self {
        Self(TaskSlot::new())
    }
}

impl Cpu {
    /// Zeroes the counts.
    pub(crate) fn reset(&self) {
        for a in [
            &self.issued,
            &self.wakeups,
            &self.late_wakeups,
            &self.max_wake_ns,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }

    /// Publishes this CPU's sleeper to the controller. Task context.
    pub(crate) fn publish(&self, sleeper: &Worker) {
        self.sleeper.0.publish(sleeper.handle());
    }

    /// Takes the sleeper back from the controller, waiting until the
    /// controller no longer uses it. Task context.
    pub(crate) fn unpublish(&self) {
        self.sleeper.0.clear();
    }
}

/// The sleeper of CPU `cpu`: sleeps until the controller wakes it, then
/// measures how long that took. It uses `cpu`'s part, not the one of the
/// CPU it runs on: once `cpu` is going down (inactive, before `detach()`
/// stops the sleeper), the scheduler moves a woken sleeper to another CPU.
pub(crate) fn sleeper(k: &Kthread, cpu: u32) {
    let tick = crate::ffi::time::tick_nsec();
    let Some(cpus) = STRESS.cpus.pin() else {
        return;
    };
    let Some(c) = cpus.get(cpu).map(|c| &c.wake) else {
        return;
    };
    while !k.should_stop() {
        k.sleep_until_woken(|| c.sleeping.store(true, Ordering::Release), MAX_SLEEP_MS);
        if c.sleeping.swap(false, Ordering::AcqRel) {
            // Not woken by the controller: a stop, the timeout, or a
            // spurious wake-up. (Woken by the controller but run only at the
            // timeout is a lost wake-up: measured below, as a late one.)
            continue;
        }
        let latency = kclock::read()
            .ns
            .saturating_sub(c.woken_at.load(Ordering::Acquire));
        c.wakeups.fetch_add(1, Ordering::Relaxed);
        if latency >= tick {
            c.late_wakeups.fetch_add(1, Ordering::Relaxed);
        }
        c.max_wake_ns.fetch_max(latency, Ordering::Relaxed);
    }
}

/// The controller (hard-IRQ): wakes every sleeping sleeper through the
/// scheduler, stamping the time first. A sleeper not published (before
/// `attach()` publishes it, after `detach()` unpublished it) keeps its
/// `sleeping`: taking it without a wake-up would leave it to time out.
fn tick() -> u64 {
    if !live() {
        return 0;
    }
    STRESS.cpus.with(|cpus| {
        for (_, c) in cpus.iter() {
            let c = &c.wake;
            c.sleeper.0.wake_if(|| {
                if !c.sleeping.load(Ordering::Acquire) {
                    return false;
                }
                c.woken_at.store(kclock::read().ns, Ordering::Release);
                let took = c.sleeping.swap(false, Ordering::AcqRel);
                if took {
                    c.issued.fetch_add(1, Ordering::Relaxed);
                }
                took
            });
        }
    });
    PERIOD_NS
}

/// Starts the controller (on this CPU).
pub(crate) fn start_controller() -> Result<HrTimer> {
    let t = HrTimer::new(tick)?;
    t.start(PERIOD_NS);
    Ok(t)
}
