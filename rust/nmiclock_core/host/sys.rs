// SPDX-License-Identifier: GPL-2.0

//! The host torture's operating-system layer: every `unsafe` call of the
//! host binary, each wrapped once in a small safe function or type.
//!
//! - [`pin_to`], [`cpus_allowed`]: a thread on one CPU;
//! - [`mono_raw_ns`], [`mono_ns`]: `CLOCK_MONOTONIC_RAW` and
//!   `CLOCK_MONOTONIC` (the vDSO's; async-signal-safe);
//! - [`on_signal`]: a handler (`SA_SIGINFO`, `SA_RESTART`);
//! - [`PerfSigtrap`]: a perf software-clock event on this thread whose
//!   every overflow sends it `SIGTRAP` (`attr.sigtrap`, Linux 5.13), the
//!   userspace twin of a perf NMI: it lands at any user instruction;
//! - [`ThreadTimer`]: the fallback where `perf_event_paranoid` is 3 (stock
//!   Debian and Ubuntu kernels): a POSIX timer signalling this thread
//!   (`SIGEV_THREAD_ID`);
//! - [`counter_after_barrier`]: the bare counter read (`rdtsc`, `mrs
//!   cntvct_el0`, no fence) as a compiler barrier, for the litmus: the
//!   compiler keeps it after earlier loads, the CPU need not.

use std::io;
use std::mem;

/// The CPUs this process may run on, in order.
pub fn cpus_allowed() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero `cpu_set_t` is an empty set, a valid value.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `set` is a live `cpu_set_t` of the size passed; the call
    // writes only into it.
    let rc = unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `CPU_ISSET` only reads `set`, for indices below its size.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: as in `cpus_allowed`.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `CPU_SET` writes only into `set`, at an index checked above
    // to be below its size.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live `cpu_set_t` of the size passed; 0 is this
    // thread.
    let rc = unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's id.
pub fn gettid() -> libc::pid_t {
    // SAFETY: `gettid` has no preconditions.
    unsafe { libc::gettid() }
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live `timespec`; the call writes only into it and
    // is async-signal-safe.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC_RAW`, ns: the reference, unslewed. Async-signal-safe.
#[inline]
pub fn mono_raw_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_RAW)
}

/// `CLOCK_MONOTONIC`, ns: the wait budget's clock. Async-signal-safe.
#[inline]
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A signal handler: called with the signal number only. It runs in
/// signal context and must do only what an NMI handler may.
pub type Handler = extern "C" fn(libc::c_int);

/// Installs `handler` for `sig` (`SA_RESTART`, the signal itself blocked
/// while it runs).
pub fn on_signal(sig: libc::c_int, handler: Handler) -> io::Result<()> {
    // SAFETY: an all-zero `sigaction` is valid (no flags, empty mask).
    let mut sa: libc::sigaction = unsafe { mem::zeroed() };
    sa.sa_sigaction = handler as usize;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `sa` is a live `sigaction` whose handler is an `extern "C"
    // fn(c_int)`, the form `sa_handler` expects without `SA_SIGINFO`.
    let rc = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct perf_event_attr` up to `config3` (`PERF_ATTR_SIZE_VER8`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
    config3: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_REMOVE_ON_EXEC: u64 = 1 << 36;
const FLAG_SIGTRAP: u64 = 1 << 37;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// A perf task-clock event on the calling thread that sends it `SIGTRAP`
/// every `period_ns` of its CPU time, at whatever user instruction it is.
/// Closed on drop.
pub struct PerfSigtrap(libc::c_int);

impl PerfSigtrap {
    /// Opens it on the calling thread; fails with the errno where perf is
    /// not allowed (`perf_event_paranoid` 3) or `sigtrap` is unknown.
    pub fn open(period_ns: u64) -> io::Result<Self> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            sample_period: period_ns,
            flags: FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | FLAG_REMOVE_ON_EXEC | FLAG_SIGTRAP,
            wakeup_events: 1,
            ..Default::default()
        };
        // SAFETY: `attr` is a live, fully initialised `perf_event_attr`
        // whose `size` field says how much of it the kernel may read; pid 0
        // and cpu -1 are this thread on any CPU, no group.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self(fd as libc::c_int))
    }
}

impl Drop for PerfSigtrap {
    fn drop(&mut self) {
        // SAFETY: the fd is this object's own, open, and closed only here.
        unsafe { libc::close(self.0) };
    }
}

/// A POSIX timer that sends `sig` to the calling thread every `period_ns`
/// of `CLOCK_MONOTONIC`. Deleted on drop.
pub struct ThreadTimer(libc::timer_t);

impl ThreadTimer {
    /// Creates and arms it.
    pub fn new(sig: libc::c_int, period_ns: u64) -> io::Result<Self> {
        // SAFETY: an all-zero `sigevent` is valid before its fields are set.
        let mut sev: libc::sigevent = unsafe { mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = sig;
        sev.sigev_notify_thread_id = gettid();
        let mut id: libc::timer_t = std::ptr::null_mut();
        // SAFETY: `sev` and `id` are live; the call writes only `id`.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let ts = libc::timespec {
            tv_sec: (period_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (period_ns % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: ts,
            it_value: ts,
        };
        // SAFETY: `id` is the timer just created; `spec` is live.
        if unsafe { libc::timer_settime(id, 0, &spec, std::ptr::null_mut()) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: `id` is ours and deleted once, here.
            unsafe { libc::timer_delete(id) };
            return Err(e);
        }
        Ok(Self(id))
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: the timer is this object's own, and deleted only here.
        unsafe { libc::timer_delete(self.0) };
    }
}

/// The C library's `errno` of this thread, saved and restored around a
/// signal handler's work so that the code it interrupted never sees it
/// change.
pub struct SavedErrno(libc::c_int);

impl SavedErrno {
    /// Saves it.
    #[inline]
    pub fn save() -> Self {
        // SAFETY: `__errno_location` returns this thread's errno slot,
        // valid for the thread's life.
        Self(unsafe { *libc::__errno_location() })
    }
}

impl Drop for SavedErrno {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as in `save`.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// Restores `SIGPIPE`'s default action (Rust's runtime ignores it), so
/// that output into a closed pipe (`| head`) ends the program quietly, as
/// it ends a C tool, instead of a panic on the failed print.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to `SIG_DFL` has no memory
    // preconditions; nothing of this program relies on `SIGPIPE` ignored.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// The counter read with no CPU fence (`rdtsc`; arm64 `mrs cntvct_el0`,
/// no `isb`) but, unlike the core's bare [`nmiclock_core::counter`] reads,
/// without `nomem`: to the compiler it may read and write memory, so it
/// stays after every load before it in program order, as if by a
/// compiler barrier. Whatever reordering the litmus then sees is the
/// CPU's. The core's bare read keeps `nomem`, like the kernel's plain
/// `rdtsc()`.
#[inline(always)]
pub(crate) fn counter_after_barrier() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let (lo, hi): (u32, u32);
        // SAFETY: `rdtsc` only reads the time stamp counter into EDX:EAX;
        // it touches no memory and no stack and leaves the flags alone.
        // Without `nomem` the compiler assumes it may touch memory, which
        // only keeps it in program order.
        unsafe {
            core::arch::asm!(
                "rdtsc",
                out("eax") lo,
                out("edx") hi,
                options(nostack, preserves_flags)
            );
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: `mrs` of CNTVCT_EL0 (readable at EL0 under Linux, which
        // enables it for its vDSO) only reads the virtual counter into a
        // register; no memory, no stack, flags untouched. Without `nomem`
        // the compiler keeps it in program order.
        unsafe {
            core::arch::asm!(
                "mrs {v}, cntvct_el0",
                v = out(reg) v,
                options(nostack, preserves_flags)
            );
        }
        v
    }
}
