// SPDX-License-Identifier: GPL-2.0

//! `nmiclock-host`: nmiclock's core tortured on the host CPU, with POSIX
//! signals standing in for NMIs (`scripts/run-host` builds and runs it).
//!
//! The clock, its three protections, the counters, the exact tear bound
//! and the per-read checks are the files nmiclock.ko compiles
//! (`src/clock.rs`, `src/counter.rs`, `src/read_check.rs`, `src/high_water.rs`).
//! On every CPU a pinned writer thread moves the clock's epoch in a loop
//! (or, with `disturb=conversion`, switches its conversion every 16th
//! update) and is interrupted by a signal every `period_us` of its CPU
//! time: a perf software-clock event with `sigtrap` (perf-driven, as the
//! module's samples are), or where perf is not allowed a POSIX timer. The
//! handler reads the clock and checks the read; it may do only what an
//! NMI handler may (no allocation, no lock, no lazily initialised
//! thread-local, nothing that panics). A reader thread on every CPU reads
//! and checks in a loop. A read met a writer's window when the handler
//! interrupted its own writer inside an update (local) or any writer was
//! inside one while it read (remote): the run's coverage.
//!
//! What it proves: the protocol on this CPU's memory model, interrupted at
//! any user instruction (not only between QEMU's translation blocks), and
//! the counter's ordering on this CPU (`counter=tsc` against
//! `tsc_ordered`; `--litmus`, the rdtsc-ordering thread's experiment (x86/vdso: use non-serializing rdtsc)). What it does not:
//! NMI entry, the kernel's clocks, perf NMIs; the guest runs are for those.
//!
//! Its End of test line and exit status follow the module's: 0 `SUCCESS`,
//! 1 `FAILURE`, 4 `INCONCLUSIVE` (too few window hits), 2 bad usage.
//!
//! A loom build of the crate's tests (`--cfg loom`) compiles this binary
//! too; it is no model, so it is empty there.

#[cfg(not(loom))]
mod litmus;
#[cfg(not(loom))]
mod sys;
#[cfg(not(loom))]
mod torture;

#[cfg(not(loom))]
fn main() -> std::process::ExitCode {
    torture::main()
}

#[cfg(loom)]
fn main() {}
