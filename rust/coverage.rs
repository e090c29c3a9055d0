// SPDX-License-Identifier: GPL-2.0

//! Coverage: did a reader really meet a writer inside its update?
//!
//! A tear can only happen while a writer is inside its update. The clock's
//! writers mark that stretch, the *window* ([`crate::clock::Window`]), on
//! their CPU through a [`Marker`], their [`crate::clock::Writer`]; a reader
//! takes a [`View`] before and after its read, and [`Hit::between`] says
//! whether the read met a window: its own CPU's (a *local* hit: the read
//! interrupted the writer, the case of an NMI on the writer's CPU) or
//! another CPU's (a *remote* hit), and whether it lay wholly inside one.
//!
//! A window is named after what is being written: `first_copy` and
//! `second_copy` (the latch's odd, then even copy), `seq_odd` (the
//! seqcount's whole odd phase), `bare` (the unprotected clock's one copy),
//! `target_update` (a registered target's `update`). A read met a remote
//! window if another CPU's writer was inside one at either look, or if one
//! opened between the two (the count of windows entered moved); the
//! clock's writers exclude each other, so the window entered last is the
//! one met.
//!
//! The window encloses every instant at which a copy is half written, so a
//! read that could have seen a tear always counts (and so may a few that
//! landed just before the first store). The stress run counts local and
//! remote hits, and the latch reads among them served by the copy not
//! being written (`stable_copy_reads`: the latch at work); `check` counts
//! the distinct windows a read lay wholly inside ([`Hit::inside`],
//! [`Hit::seq`]).
//!
//! The kernel's own clocks are updated by the kernel: where the function
//! that updates one can be bracketed (a kretprobe, [`crate::target`]), its
//! entry and return mark a *kernel window* on its CPU ([`kernel_enter`],
//! [`kernel_leave`]), kept apart from the writers' marks since nmiclock's
//! own writers keep running beside it; a reader of a kernel clock looks at
//! them with a [`KernelView`] on each side of its read
//! ([`kernel_hit`]).
//!
//! Under QEMU TCG an interrupt is taken only between translated blocks, so
//! an NMI lands inside a window at a block boundary there (the writer's
//! calls inside its window make some) or when the host preempts the vCPU
//! mid-window. How many windows a run meets thus depends on the emulator
//! and the host's load, which is why a verdict asks for a count of them.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use crate::clock::{Window, Writer};
use crate::ffi;
use crate::percpu::PerCpu;

/// One CPU's writer marks, in its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct Slot {
    /// The window this CPU's writer is in (`Window as u32`), 0 if none.
    window: AtomicU32,
    /// Windows entered on this CPU.
    entered: AtomicU64,
    /// This CPU is inside the bracketed kernel update (1), or not (0).
    kernel: AtomicU32,
}

/// The writers' marks: each CPU's slot, and the windows of all CPUs.
struct Marks {
    slots: PerCpu<Slot>,
    /// Writer windows open right now, on all CPUs.
    open: AtomicU32,
    /// Windows entered since load, on all CPUs: a reader that sees it change
    /// across its read overlapped a window that opened meanwhile.
    seq: AtomicU32,
    /// The window entered last, on any CPU (`Window as u32`): the clock's
    /// writers exclude each other, so it is the one open, if one is.
    last: AtomicU32,
    /// Kernel windows open right now, on all CPUs.
    kernel_open: AtomicU32,
    /// Kernel windows entered since the last [`kernel_reset`], on all CPUs.
    kernel_seq: AtomicU32,
    /// The same, counted wide (the run's `kernel_update_calls`).
    kernel_calls: AtomicU64,
}

static MARKS: Marks = Marks {
    slots: PerCpu::new(),
    open: AtomicU32::new(0),
    seq: AtomicU32::new(0),
    last: AtomicU32::new(0),
    kernel_open: AtomicU32::new(0),
    kernel_seq: AtomicU32::new(0),
    kernel_calls: AtomicU64::new(0),
};

/// The marks' per-CPU slots, installed at load; dropping it removes them.
pub(crate) struct MarkSlots(());

impl MarkSlots {
    /// Installs the slots.
    pub(crate) fn new() -> Result<Self> {
        MARKS.slots.install(Slot::default)?;
        Ok(Self(()))
    }
}

impl Drop for MarkSlots {
    fn drop(&mut self) {
        MARKS.slots.uninstall();
    }
}

/// The module's [`Writer`]: marks the window on the writer's CPU and pauses
/// `pause_ns` inside it (the `tear_window_ns` fault injection).
pub(crate) struct Marker {
    pause_ns: u32,
    /// The writer's CPU.
    cpu: u32,
}

impl Marker {
    /// A marker for a writer on this CPU, which must not migrate until it
    /// is done: hard-IRQ context, or a kthread bound to the CPU.
    pub(crate) fn here(pause_ns: u32) -> Self {
        Self {
            pause_ns,
            cpu: ffi::cpu::this(),
        }
    }
}

impl Writer for Marker {
    fn enter(&mut self, window: Window) {
        MARKS.slots.with_cpu(self.cpu, |s| {
            s.window.store(window as u32, Ordering::Release);
            s.entered.fetch_add(1, Ordering::Relaxed);
        });
        MARKS.last.store(window as u32, Ordering::Release);
        MARKS.open.fetch_add(1, Ordering::AcqRel);
        MARKS.seq.fetch_add(1, Ordering::AcqRel);
    }

    fn pause(&mut self) {
        if self.pause_ns != 0 {
            ffi::cpu::ndelay(self.pause_ns);
        }
    }

    fn leave(&mut self) {
        MARKS.open.fetch_sub(1, Ordering::AcqRel);
        MARKS
            .slots
            .with_cpu(self.cpu, |s| s.window.store(0, Ordering::Release));
    }
}

/// What a reader sees of the writers' windows at one instant.
#[derive(Clone, Copy)]
pub(crate) struct View {
    local: u32,
    open: u32,
    seq: u32,
    last: u32,
}

impl View {
    /// Looks now. Any context, NMI included.
    #[inline]
    pub(crate) fn now() -> Self {
        Self {
            local: MARKS
                .slots
                .with_this_cpu(|s| s.window.load(Ordering::Acquire))
                .unwrap_or(0),
            open: MARKS.open.load(Ordering::Acquire),
            seq: MARKS.seq.load(Ordering::Acquire),
            last: MARKS.last.load(Ordering::Acquire),
        }
    }
}

/// Whether a read between two [`View`]s (on one CPU) met a window.
#[derive(Clone, Copy, Default)]
pub(crate) struct Hit {
    /// This CPU's writer was inside this window: the read interrupted it.
    pub(crate) local: Option<Window>,
    /// Another CPU's writer was inside its window during the read.
    pub(crate) remote: bool,
    /// The window met, when known: the local one, or the one entered last.
    pub(crate) window: Option<Window>,
    /// The whole read lay inside one window: open before and after it,
    /// with no other opening meanwhile.
    pub(crate) inside: bool,
    /// A number for the window met (windows entered so far), to count
    /// distinct windows.
    pub(crate) seq: u32,
}

impl Hit {
    /// Classifies a read taken between `before` and `after`.
    #[inline]
    pub(crate) fn between(before: View, after: View) -> Self {
        let local = Window::from_u32(before.local).or_else(|| Window::from_u32(after.local));
        let mine = u32::from(local.is_some());
        let remote = before.open > mine || after.open > mine || before.seq != after.seq;
        Self {
            local,
            remote,
            window: local.or_else(|| {
                if remote {
                    Window::from_u32(after.last)
                } else {
                    None
                }
            }),
            inside: local.is_some()
                || (before.open > 0 && after.open > 0 && before.seq == after.seq),
            seq: after.seq,
        }
    }

    /// Whether the read met any window.
    pub(crate) fn any(&self) -> bool {
        self.local.is_some() || self.remote
    }
}

/// This CPU enters the bracketed kernel update. Any context, the probed
/// function's included.
pub(crate) fn kernel_enter() {
    MARKS
        .slots
        .with_this_cpu(|s| s.kernel.store(1, Ordering::Release));
    MARKS.kernel_calls.fetch_add(1, Ordering::Relaxed);
    MARKS.kernel_open.fetch_add(1, Ordering::AcqRel);
    MARKS.kernel_seq.fetch_add(1, Ordering::AcqRel);
}

/// This CPU leaves the bracketed kernel update.
pub(crate) fn kernel_leave() {
    // Only an entry still marked is closed: one that kernel_reset()
    // forgot is not counted twice.
    let was = MARKS
        .slots
        .with_this_cpu(|s| s.kernel.swap(0, Ordering::AcqRel))
        .unwrap_or(0);
    if was != 0 {
        MARKS.kernel_open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Forgets the kernel windows, before a bracket is registered: one torn
/// down inside the update never saw its return.
pub(crate) fn kernel_reset() {
    MARKS.slots.with(|slots| {
        for (_, s) in slots.iter() {
            s.kernel.store(0, Ordering::Relaxed);
        }
    });
    MARKS.kernel_open.store(0, Ordering::Relaxed);
    MARKS.kernel_seq.store(0, Ordering::Relaxed);
    MARKS.kernel_calls.store(0, Ordering::Relaxed);
}

/// Kernel windows entered since the last [`kernel_reset`].
pub(crate) fn kernel_calls() -> u64 {
    MARKS.kernel_calls.load(Ordering::Relaxed)
}

/// What a reader sees of the kernel windows at one instant.
#[derive(Clone, Copy)]
pub(crate) struct KernelView {
    local: u32,
    open: u32,
    seq: u32,
}

impl KernelView {
    /// Looks now. Any context, NMI included.
    #[inline]
    pub(crate) fn now() -> Self {
        Self {
            local: MARKS
                .slots
                .with_this_cpu(|s| s.kernel.load(Ordering::Acquire))
                .unwrap_or(0),
            open: MARKS.kernel_open.load(Ordering::Acquire),
            seq: MARKS.kernel_seq.load(Ordering::Acquire),
        }
    }
}

/// Whether a read between two [`KernelView`]s (on one CPU) met a kernel
/// window: `Some(true)` on its own CPU (the read interrupted the update),
/// `Some(false)` on another CPU, `None` if not.
#[inline]
pub(crate) fn kernel_hit(before: KernelView, after: KernelView) -> Option<bool> {
    let mine = before.local | after.local;
    if mine != 0 {
        Some(true)
    } else if before.open > 0 || after.open > 0 || before.seq != after.seq {
        Some(false)
    } else {
        None
    }
}

/// Windows entered since load, on all CPUs.
pub(crate) fn windows_entered() -> u64 {
    MARKS.slots.sum(|s| &s.entered)
}
