// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over nmiclock's C glue (`rust/nmiclock_glue.c`).
//!
//! This is the only file that declares or calls the glue. It offers:
//!
//! - [`params`]: the module parameters as given at load;
//! - [`DebugfsDir`]: a directory at the debugfs root that removes itself and
//!   everything in it when dropped, with files whose contents a plain Rust
//!   function renders through a [`SeqFile`] and, optionally, whose writes a
//!   plain Rust function handles;
//! - [`HrTimer`]: a hard-IRQ hrtimer whose callback returns its next period;
//! - [`run_on_each_cpu`]: a function run in a kthread on every online CPU;
//! - small wrappers: CPU ids and counts, `tsc_khz`, `local_clock()`,
//!   `ktime_get_mono_fast_ns()` and the other kernel clocks the benchmark
//!   reads, interrupts or preemption off, `ndelay()`, `cond_resched()`,
//!   `TICK_NSEC`, whether we run in a VM.

use core::fmt;
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, to_result, Result};
use kernel::ffi::{c_char, c_int, c_uint, c_ulong, c_ushort, c_void};
use kernel::str::CStr;

/// Declarations matching `rust/nmiclock_glue.h`.
mod raw {
    use super::{c_char, c_int, c_uint, c_ulong, c_ushort, c_void};

    /// `struct dentry`, only ever behind a pointer.
    #[repr(C)]
    pub(super) struct Dentry {
        _opaque: [u8; 0],
    }

    /// `struct seq_file`, only ever behind a pointer.
    #[repr(C)]
    pub(super) struct SeqFileRaw {
        _opaque: [u8; 0],
    }

    /// `struct nmiclock_timer`, only ever behind a pointer.
    #[repr(C)]
    pub(super) struct Timer {
        _opaque: [u8; 0],
    }

    /// `struct nmiclock_params`.
    #[repr(C)]
    pub(super) struct Params {
        pub(super) clock: *const c_char,
        pub(super) counter: *const c_char,
        pub(super) counter_bits: *const c_char,
        pub(super) tear_window_ns: *const c_char,
        pub(super) acct: *const c_char,
        pub(super) nmi_source: *const c_char,
        pub(super) period_us: *const c_char,
        pub(super) update_us: *const c_char,
        pub(super) duration_s: *const c_char,
        pub(super) autostart: *const c_char,
    }

    extern "C" {
        pub(super) fn nmiclock_get_params(p: *mut Params);
        pub(super) fn nmiclock_debugfs_create_dir(name: *const c_char) -> *mut Dentry;
        pub(super) fn nmiclock_debugfs_create_file(
            name: *const c_char,
            mode: c_ushort,
            parent: *mut Dentry,
            private: *const c_void,
            writable: bool,
        ) -> *mut Dentry;
        pub(super) fn nmiclock_debugfs_remove(dentry: *mut Dentry);
        pub(super) fn nmiclock_seq_write(
            m: *mut SeqFileRaw,
            buf: *const c_char,
            len: usize,
        ) -> c_int;
        pub(super) fn nmiclock_timer_new(f: extern "C" fn() -> u64) -> *mut Timer;
        pub(super) fn nmiclock_timer_start(t: *mut Timer, ns: u64);
        pub(super) fn nmiclock_timer_cancel(t: *mut Timer);
        pub(super) fn nmiclock_timer_free(t: *mut Timer);
        pub(super) fn nmiclock_run_on_each_cpu(f: extern "C" fn(cpu: c_uint)) -> c_int;
        pub(super) fn nmiclock_num_online_cpus() -> c_uint;
        pub(super) fn nmiclock_nr_cpu_ids() -> c_uint;
        pub(super) fn nmiclock_cpu() -> c_uint;
        pub(super) fn nmiclock_tsc_khz() -> c_uint;
        pub(super) fn nmiclock_local_clock() -> u64;
        pub(super) fn nmiclock_mono_fast_ns() -> u64;
        pub(super) fn nmiclock_sched_clock_kernel() -> u64;
        pub(super) fn nmiclock_real_fast_ns() -> u64;
        pub(super) fn nmiclock_ktime_get_ns() -> u64;
        pub(super) fn nmiclock_preempt_disable();
        pub(super) fn nmiclock_preempt_enable();
        pub(super) fn nmiclock_irq_save() -> c_ulong;
        pub(super) fn nmiclock_irq_restore(flags: c_ulong);
        pub(super) fn nmiclock_ndelay(ns: c_uint);
        pub(super) fn nmiclock_cond_resched();
        pub(super) fn nmiclock_tick_nsec() -> u64;
        pub(super) fn nmiclock_in_vm() -> bool;
    }
}

// ---- module parameters -------------------------------------------------------

/// The module parameters as given at load, as strings, not yet validated.
pub(crate) struct Params {
    /// `clock=`
    pub(crate) clock: &'static str,
    /// `counter=`
    pub(crate) counter: &'static str,
    /// `counter_bits=`
    pub(crate) counter_bits: &'static str,
    /// `tear_window_ns=`
    pub(crate) tear_window_ns: &'static str,
    /// `acct=`
    pub(crate) acct: &'static str,
    /// `nmi_source=`
    pub(crate) nmi_source: &'static str,
    /// `period_us=`
    pub(crate) period_us: &'static str,
    /// `update_us=`
    pub(crate) update_us: &'static str,
    /// `duration_s=`
    pub(crate) duration_s: &'static str,
    /// `autostart=`
    pub(crate) autostart: &'static str,
}

/// Converts a parameter string; one that is not UTF-8 becomes "?", which no
/// valid value is, so validation rejects it.
fn param_str(ptr: *const c_char) -> &'static str {
    if ptr.is_null() {
        return "";
    }
    // SAFETY: The glue returns pointers to NUL-terminated parameter strings,
    // which live (unchanged: the parameters are read-only) until the module
    // is unloaded, longer than any user of `Params`.
    let s = unsafe { CStr::from_char_ptr(ptr) };
    s.to_str().unwrap_or("?")
}

/// Reads the module parameters.
pub(crate) fn params() -> Params {
    let mut p = raw::Params {
        clock: core::ptr::null(),
        counter: core::ptr::null(),
        counter_bits: core::ptr::null(),
        tear_window_ns: core::ptr::null(),
        acct: core::ptr::null(),
        nmi_source: core::ptr::null(),
        period_us: core::ptr::null(),
        update_us: core::ptr::null(),
        duration_s: core::ptr::null(),
        autostart: core::ptr::null(),
    };
    // SAFETY: `p` is a valid, writable `struct nmiclock_params`.
    unsafe { raw::nmiclock_get_params(&mut p) };
    Params {
        clock: param_str(p.clock),
        counter: param_str(p.counter),
        counter_bits: param_str(p.counter_bits),
        tear_window_ns: param_str(p.tear_window_ns),
        acct: param_str(p.acct),
        nmi_source: param_str(p.nmi_source),
        period_us: param_str(p.period_us),
        update_us: param_str(p.update_us),
        duration_s: param_str(p.duration_s),
        autostart: param_str(p.autostart),
    }
}

// ---- debugfs -------------------------------------------------------------------

/// The output buffer of a debugfs file being read.
///
/// Formatting into it with `write!` appends text. When the buffer is full
/// the write fails with [`fmt::Error`]; `seq_file` notices the overflow by
/// itself and calls the file's show function again with a larger buffer, so
/// a show function only needs to pass the error up.
///
/// # Invariants
///
/// `ptr` is the `seq_file` of a `->show()` call in progress; a `SeqFile` only
/// exists (behind a `&mut`) for the duration of that call.
pub(crate) struct SeqFile {
    ptr: *mut raw::SeqFileRaw,
}

impl fmt::Write for SeqFile {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // SAFETY: By the type invariant `self.ptr` is a live `seq_file`, and
        // `s` is valid for reads of `s.len()` bytes.
        let ret = unsafe { raw::nmiclock_seq_write(self.ptr, s.as_ptr(), s.len()) };
        if ret == 0 {
            Ok(())
        } else {
            Err(fmt::Error)
        }
    }
}

/// What a debugfs file does; the file's private data points at one of these.
pub(crate) struct FileOps {
    /// Renders the whole file.
    pub(crate) show: fn(&mut SeqFile) -> fmt::Result,
    /// Handles one write (at most 256 bytes, never empty); `None` for a
    /// read-only file. An error is returned to the writer as is.
    pub(crate) write: Option<fn(&[u8]) -> Result>,
}

/// The `->show()` of every file the glue creates (called from C).
///
/// # Safety
///
/// `m` must be the `seq_file` of a `->show()` call in progress, and
/// `private` the private data of a file created by
/// [`DebugfsDir::create_file`], i.e. a `&'static FileOps`.
#[no_mangle]
unsafe extern "C" fn nmiclock_rs_show(m: *mut raw::SeqFileRaw, private: *const c_void) -> c_int {
    // SAFETY: The caller guarantees `private` came from `create_file`, which
    // only accepts a `&'static FileOps`.
    let ops = unsafe { &*private.cast::<FileOps>() };
    // INVARIANT: The caller guarantees `m` is live for this call, and the
    // `SeqFile` does not outlive it.
    let mut seq = SeqFile { ptr: m };
    // A full buffer is not an error: seq_file retries with a larger one.
    let _ = (ops.show)(&mut seq);
    0
}

/// The `->write()` of every writable file the glue creates (called from C).
///
/// # Safety
///
/// `private` must be the private data of a file created by
/// [`DebugfsDir::create_file`], and `buf` valid for reads of `len` bytes
/// for the duration of the call.
#[no_mangle]
unsafe extern "C" fn nmiclock_rs_write(
    private: *const c_void,
    buf: *const u8,
    len: usize,
) -> c_int {
    // SAFETY: As in `nmiclock_rs_show()`.
    let ops = unsafe { &*private.cast::<FileOps>() };
    // SAFETY: The caller guarantees `buf` is valid for `len` bytes.
    let bytes = unsafe { core::slice::from_raw_parts(buf, len) };
    match ops.write {
        Some(write) => match write(bytes) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        },
        None => kernel::error::code::EINVAL.to_errno(),
    }
}

/// A debugfs directory at the debugfs root, removed recursively on drop.
///
/// # Invariants
///
/// `dentry` was returned by `debugfs_create_dir()` and has not been removed.
pub(crate) struct DebugfsDir {
    dentry: NonNull<raw::Dentry>,
}

// SAFETY: debugfs dentries may be used and removed from any thread.
unsafe impl Send for DebugfsDir {}
// SAFETY: The only `&self` operation, creating a file, is thread-safe in
// debugfs.
unsafe impl Sync for DebugfsDir {}

impl DebugfsDir {
    /// Creates `/sys/kernel/debug/<name>/`.
    pub(crate) fn new(name: &CStr) -> Result<Self> {
        // SAFETY: `name` is a valid NUL-terminated string; debugfs copies it.
        let ptr = unsafe { raw::nmiclock_debugfs_create_dir(name.as_char_ptr()) };
        let ptr = from_err_ptr(ptr)?;
        // INVARIANT: `ptr` is not an error pointer, so a live directory.
        NonNull::new(ptr)
            .map(|dentry| Self { dentry })
            .ok_or(kernel::error::code::ENOMEM)
    }

    /// Creates a file `name` with permissions `mode`: `ops.show` renders it
    /// on every read, `ops.write` (if any) handles writes.
    ///
    /// The file goes when the directory is dropped; `ops` is `'static` so it
    /// outlives any read or write in flight.
    pub(crate) fn create_file(&self, name: &CStr, mode: u16, ops: &'static FileOps) -> Result {
        let private: *const FileOps = ops;
        // SAFETY: `name` is NUL-terminated, `self.dentry` is a live directory
        // (type invariant) and `private` is valid forever, as the
        // `nmiclock_rs_*()` callbacks require.
        let ptr = unsafe {
            raw::nmiclock_debugfs_create_file(
                name.as_char_ptr(),
                mode,
                self.dentry.as_ptr(),
                private.cast(),
                ops.write.is_some(),
            )
        };
        from_err_ptr(ptr).map(|_| ())
    }
}

impl Drop for DebugfsDir {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the directory is live; it is removed
        // once, here. debugfs waits for reads and writes in flight.
        unsafe { raw::nmiclock_debugfs_remove(self.dentry.as_ptr()) };
    }
}

// ---- hrtimer --------------------------------------------------------------------

/// A hard-IRQ `CLOCK_MONOTONIC` hrtimer, pinned to the CPU that starts it.
/// Its callback runs in hard-IRQ context and returns the next period in ns,
/// or 0 to stop. Cancelled and freed on drop.
///
/// # Invariants
///
/// `ptr` was returned by `nmiclock_timer_new()` and not freed.
pub(crate) struct HrTimer {
    ptr: NonNull<raw::Timer>,
}

// SAFETY: hrtimers may be started and cancelled from any thread.
unsafe impl Send for HrTimer {}
// SAFETY: As above; the glue's operations take the hrtimer's own lock.
unsafe impl Sync for HrTimer {}

impl HrTimer {
    /// Creates a stopped timer running `callback`.
    pub(crate) fn new(callback: extern "C" fn() -> u64) -> Result<Self> {
        // SAFETY: Any `extern "C" fn() -> u64` is a valid callback.
        let ptr = unsafe { raw::nmiclock_timer_new(callback) };
        // INVARIANT: Non-null means a live timer.
        NonNull::new(ptr)
            .map(|ptr| Self { ptr })
            .ok_or(kernel::error::code::ENOMEM)
    }

    /// (Re)starts the timer to fire `ns` from now.
    pub(crate) fn start(&self, ns: u64) {
        // SAFETY: The timer is live (type invariant).
        unsafe { raw::nmiclock_timer_start(self.ptr.as_ptr(), ns) };
    }

    /// Stops the timer, waiting for a callback in flight.
    pub(crate) fn cancel(&self) {
        // SAFETY: The timer is live (type invariant).
        unsafe { raw::nmiclock_timer_cancel(self.ptr.as_ptr()) };
    }
}

impl Drop for HrTimer {
    fn drop(&mut self) {
        // SAFETY: The timer is live and freed once, here; the glue cancels it
        // (waiting for a running callback) first.
        unsafe { raw::nmiclock_timer_free(self.ptr.as_ptr()) };
    }
}

// ---- per-CPU kthreads ------------------------------------------------------------

/// Runs `f(cpu)` in a kthread bound to each online CPU, all at once, and
/// returns when all have finished. CPU hotplug waits meanwhile.
pub(crate) fn run_on_each_cpu(f: extern "C" fn(cpu: c_uint)) -> Result {
    // SAFETY: Any `extern "C" fn(c_uint)` is a valid callback.
    to_result(unsafe { raw::nmiclock_run_on_each_cpu(f) })
}

// ---- small wrappers ----------------------------------------------------------------

/// Number of CPUs online right now.
pub(crate) fn num_online_cpus() -> u32 {
    // SAFETY: No preconditions; reads a counter.
    unsafe { raw::nmiclock_num_online_cpus() }
}

/// One more than the highest possible CPU id.
pub(crate) fn nr_cpu_ids() -> u32 {
    // SAFETY: No preconditions; reads a variable set during boot.
    unsafe { raw::nmiclock_nr_cpu_ids() }
}

/// The CPU this runs on (may change right after, unless preemption is off).
#[inline]
pub(crate) fn cpu() -> u32 {
    // SAFETY: No preconditions (`raw_smp_processor_id()`).
    unsafe { raw::nmiclock_cpu() }
}

/// TSC frequency in kHz as the kernel calibrated it (0 when there is none).
pub(crate) fn tsc_khz() -> u32 {
    // SAFETY: No preconditions; reads a variable set during boot.
    unsafe { raw::nmiclock_tsc_khz() }
}

/// The kernel's `local_clock()`, in ns.
#[inline]
pub(crate) fn local_clock() -> u64 {
    // SAFETY: No preconditions; callable from any context.
    unsafe { raw::nmiclock_local_clock() }
}

/// The kernel's NMI-safe `ktime_get_mono_fast_ns()`.
#[inline]
pub(crate) fn mono_fast_ns() -> u64 {
    // SAFETY: No preconditions; callable from any context, NMI included.
    unsafe { raw::nmiclock_mono_fast_ns() }
}

/// The kernel's `sched_clock()`, in ns.
#[inline]
pub(crate) fn kernel_sched_clock() -> u64 {
    // SAFETY: No preconditions; callable from any context.
    unsafe { raw::nmiclock_sched_clock_kernel() }
}

/// The kernel's NMI-safe `ktime_get_real_fast_ns()` (what refscale's
/// `scale_type=clock` reads).
#[inline]
pub(crate) fn real_fast_ns() -> u64 {
    // SAFETY: No preconditions; callable from any context, NMI included.
    unsafe { raw::nmiclock_real_fast_ns() }
}

/// The kernel's `ktime_get_ns()` (`CLOCK_MONOTONIC`, seqcount-protected:
/// not for NMI context).
#[inline]
pub(crate) fn ktime_get_ns() -> u64 {
    // SAFETY: No memory-safety preconditions. (In NMI context it could
    // spin forever on a writer it interrupted; its only caller is the
    // benchmark's readers, in task context.)
    unsafe { raw::nmiclock_ktime_get_ns() }
}

/// Runs `f` with preemption disabled (interrupts still arrive).
#[inline]
pub(crate) fn with_preemption_disabled<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: Disabling preemption has no preconditions.
    unsafe { raw::nmiclock_preempt_disable() };
    let r = f();
    // SAFETY: Matches the disable above, on this CPU (no migration while
    // preemption is off).
    unsafe { raw::nmiclock_preempt_enable() };
    r
}

/// Runs `f` with local interrupts disabled (NMIs still arrive).
#[inline]
pub(crate) fn with_irqs_disabled<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: Saving and disabling interrupts has no preconditions.
    let flags = unsafe { raw::nmiclock_irq_save() };
    let r = f();
    // SAFETY: `flags` came from the matching save on this CPU (interrupts
    // were off in between, so no migration).
    unsafe { raw::nmiclock_irq_restore(flags) };
    r
}

/// Busy-waits about `ns` nanoseconds.
pub(crate) fn ndelay(ns: u32) {
    // SAFETY: No preconditions.
    unsafe { raw::nmiclock_ndelay(ns) };
}

/// Lets the scheduler run something else if it needs to. Task context
/// only: elsewhere the kernel warns (`might_sleep()`).
pub(crate) fn cond_resched() {
    // SAFETY: No memory-safety preconditions.
    unsafe { raw::nmiclock_cond_resched() };
}

/// The kernel's tick, in ns (`TICK_NSEC`).
pub(crate) fn tick_nsec() -> u64 {
    // SAFETY: No preconditions; a constant.
    unsafe { raw::nmiclock_tick_nsec() }
}

/// Whether this runs under a hypervisor (`X86_FEATURE_HYPERVISOR`): then
/// times may be emulated, and only ratios taken in one run mean anything.
pub(crate) fn in_vm() -> bool {
    // SAFETY: No preconditions; reads boot CPU features.
    unsafe { raw::nmiclock_in_vm() }
}

// ---- the stress run's sources and workers ----------------------------------------

mod raw_stress {
    use super::{c_int, c_uint};

    /// `struct perf_event`, only ever behind a pointer.
    #[repr(C)]
    pub(super) struct PerfEventRaw {
        _opaque: [u8; 0],
    }

    /// `struct task_struct`, only ever behind a pointer.
    #[repr(C)]
    pub(super) struct TaskRaw {
        _opaque: [u8; 0],
    }

    extern "C" {
        pub(super) fn nmiclock_perf_create(cpu: c_uint, hw: bool, period: u64)
            -> *mut PerfEventRaw;
        pub(super) fn nmiclock_perf_release(event: *mut PerfEventRaw);
        pub(super) fn nmiclock_nmi_register() -> c_int;
        pub(super) fn nmiclock_nmi_unregister();
        pub(super) fn nmiclock_nmi_send(self_too: bool);
        pub(super) fn nmiclock_worker_start(
            cpu: c_uint,
            f: extern "C" fn(cpu: c_uint),
        ) -> *mut TaskRaw;
        pub(super) fn nmiclock_worker_stop(t: *mut TaskRaw);
        pub(super) fn nmiclock_prepare_to_sleep();
        pub(super) fn nmiclock_sleep();
        pub(super) fn nmiclock_wake(t: *mut TaskRaw);
        pub(super) fn nmiclock_synchronize_rcu();
        pub(super) fn nmiclock_cpuhp_setup() -> c_int;
        pub(super) fn nmiclock_cpuhp_remove(state: c_int);
        pub(super) fn nmiclock_cpus_read_lock();
        pub(super) fn nmiclock_cpus_read_unlock();
        pub(super) fn nmiclock_should_stop() -> bool;
        pub(super) fn nmiclock_sleep_us(us: c_uint);
        pub(super) fn nmiclock_work_queue();
        pub(super) fn nmiclock_work_cancel();
        pub(super) fn nmiclock_in_nmi() -> bool;
        pub(super) fn nmiclock_in_hardirq() -> bool;
        pub(super) fn nmiclock_cpu_online(cpu: c_uint) -> bool;
    }
}

/// A kernel perf counter on one CPU whose overflows call the module's
/// `nmiclock_rs_sample()`; released on drop.
///
/// # Invariants
///
/// `ptr` was returned by `perf_event_create_kernel_counter()` and not
/// released.
pub(crate) struct PerfEvent {
    ptr: NonNull<raw_stress::PerfEventRaw>,
}

// SAFETY: A perf event may be released from any thread.
unsafe impl Send for PerfEvent {}
// SAFETY: `PerfEvent` offers no `&self` operations.
unsafe impl Sync for PerfEvent {}

impl PerfEvent {
    /// A pinned counter on `cpu`: CPU cycles overflowing every `period`
    /// cycles (`hw`: an NMI on x86; needs a PMU) or the cpu-clock software
    /// event every `period` ns (hard-IRQ context).
    pub(crate) fn new(cpu: u32, hw: bool, period: u64) -> Result<Self> {
        // SAFETY: No preconditions; the glue passes a valid attr.
        let ptr = unsafe { raw_stress::nmiclock_perf_create(cpu, hw, period) };
        let ptr = from_err_ptr(ptr)?;
        // INVARIANT: Not an error pointer, so a live event.
        NonNull::new(ptr)
            .map(|ptr| Self { ptr })
            .ok_or(kernel::error::code::ENOMEM)
    }
}

impl Drop for PerfEvent {
    fn drop(&mut self) {
        // SAFETY: The event is live (type invariant) and released once.
        unsafe { raw_stress::nmiclock_perf_release(self.ptr.as_ptr()) };
    }
}

/// The module's `NMI_LOCAL` handler (`nmiclock_rs_nmi()`), registered
/// while this lives.
pub(crate) struct NmiHandler(());

impl NmiHandler {
    /// Registers the handler.
    pub(crate) fn register() -> Result<Self> {
        // SAFETY: No preconditions; the glue registers a fixed handler.
        to_result(unsafe { raw_stress::nmiclock_nmi_register() })?;
        Ok(Self(()))
    }
}

impl Drop for NmiHandler {
    fn drop(&mut self) {
        // SAFETY: Registered in `register()`; unregistered once, here. The
        // kernel waits for handlers in flight.
        unsafe { raw_stress::nmiclock_nmi_unregister() };
    }
}

/// Sends an NMI IPI to every online CPU (`self_too`) or every other one.
/// Hard-IRQ or task context; one sender at a time.
pub(crate) fn nmi_send(self_too: bool) {
    // SAFETY: No memory-safety preconditions; the caller is the only sender.
    unsafe { raw_stress::nmiclock_nmi_send(self_too) };
}

/// A kthread bound to one CPU running a function until stopped (the
/// function polls [`should_stop`]); stopped on drop.
///
/// # Invariants
///
/// `ptr` is a kthread created by `nmiclock_worker_start()`, not stopped.
pub(crate) struct Worker {
    ptr: NonNull<raw_stress::TaskRaw>,
}

// SAFETY: Kthreads may be stopped from any thread.
unsafe impl Send for Worker {}
// SAFETY: `Worker` offers no `&self` operations.
unsafe impl Sync for Worker {}

impl Worker {
    /// Starts `f(cpu)` in a kthread bound to `cpu`.
    pub(crate) fn start(cpu: u32, f: extern "C" fn(cpu: c_uint)) -> Result<Self> {
        // SAFETY: Any `extern "C" fn(c_uint)` is a valid thread function.
        let ptr = from_err_ptr(unsafe { raw_stress::nmiclock_worker_start(cpu, f) })?;
        // INVARIANT: Not an error pointer: a live kthread.
        NonNull::new(ptr)
            .map(|ptr| Self { ptr })
            .ok_or(kernel::error::code::ENOMEM)
    }
}

impl Worker {
    /// A handle to wake this worker with [`TaskHandle::wake`].
    pub(crate) fn handle(&self) -> TaskHandle {
        TaskHandle(self.ptr)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: Live (type invariant); stopped once, here.
        unsafe { raw_stress::nmiclock_worker_stop(self.ptr.as_ptr()) };
    }
}

/// A worker's task, to wake it from interrupt context.
///
/// It stays valid only while its [`Worker`] lives; whoever publishes one to
/// interrupt context must unpublish it and [`synchronize_rcu`] before
/// dropping the `Worker` (an interrupt handler is an RCU read side).
#[derive(Clone, Copy)]
pub(crate) struct TaskHandle(NonNull<raw_stress::TaskRaw>);

impl TaskHandle {
    /// The raw pointer, to publish in an `AtomicPtr`.
    pub(crate) fn as_ptr(self) -> *mut c_void {
        self.0.as_ptr().cast()
    }

    /// Wakes the task through the scheduler.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`TaskHandle::as_ptr`], and its `Worker` is not
    /// dropped before the caller's RCU read side (e.g. its interrupt
    /// handler) ends.
    pub(crate) unsafe fn wake(ptr: *mut c_void) {
        // SAFETY: By the caller's guarantee the task is alive.
        unsafe { raw_stress::nmiclock_wake(ptr.cast()) };
    }
}

/// In a worker: sleeps until woken (or asked to stop), 100 ms at most.
/// `announce` runs
/// after the task is marked sleeping and before it sleeps, so a wake-up
/// by whoever sees the announcement is never lost.
pub(crate) fn sleep_until_woken(announce: impl FnOnce()) {
    // SAFETY: Called from a worker kthread.
    unsafe { raw_stress::nmiclock_prepare_to_sleep() };
    announce();
    // SAFETY: As above, after `nmiclock_prepare_to_sleep()`.
    unsafe { raw_stress::nmiclock_sleep() };
}

/// Waits for an RCU grace period (task context).
pub(crate) fn synchronize_rcu() {
    // SAFETY: No preconditions (task context).
    unsafe { raw_stress::nmiclock_synchronize_rcu() };
}

/// A dynamic CPU hotplug state whose callbacks are the module's
/// `nmiclock_rs_cpu_online()`/`_offline()`; removed on drop.
pub(crate) struct CpuHotplug(c_int);

impl CpuHotplug {
    /// Sets up the state (no callbacks run for CPUs already online).
    pub(crate) fn setup() -> Result<Self> {
        // SAFETY: No preconditions; the glue passes fixed callbacks.
        let state = unsafe { raw_stress::nmiclock_cpuhp_setup() };
        to_result(state.min(0))?;
        Ok(Self(state))
    }
}

impl Drop for CpuHotplug {
    fn drop(&mut self) {
        // SAFETY: `self.0` is the state `setup()` got; removed once, here.
        unsafe { raw_stress::nmiclock_cpuhp_remove(self.0) };
    }
}

/// Runs `f` with CPU hotplug held off (`cpus_read_lock()`); `f` may sleep
/// but must not wait for a hotplug operation.
pub(crate) fn with_cpus_held<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: Task context; paired with the unlock below.
    unsafe { raw_stress::nmiclock_cpus_read_lock() };
    let r = f();
    // SAFETY: Paired with the lock above.
    unsafe { raw_stress::nmiclock_cpus_read_unlock() };
    r
}

/// Whether this worker kthread has been asked to stop.
pub(crate) fn should_stop() -> bool {
    // SAFETY: Called from a worker kthread, as `kthread_should_stop()` wants.
    unsafe { raw_stress::nmiclock_should_stop() }
}

/// Sleeps about `us` microseconds (task context).
pub(crate) fn sleep_us(us: u32) {
    // SAFETY: No memory-safety preconditions.
    unsafe { raw_stress::nmiclock_sleep_us(us) };
}

/// Queues the module's work item (`nmiclock_rs_work()`); any context but NMI.
pub(crate) fn work_queue() {
    // SAFETY: No preconditions.
    unsafe { raw_stress::nmiclock_work_queue() };
}

/// Cancels the work item and waits for it to finish.
pub(crate) fn work_cancel() {
    // SAFETY: No preconditions (task context).
    unsafe { raw_stress::nmiclock_work_cancel() };
}

/// Whether this runs in NMI context.
#[inline]
pub(crate) fn in_nmi() -> bool {
    // SAFETY: No preconditions.
    unsafe { raw_stress::nmiclock_in_nmi() }
}

/// Whether this runs in hard-IRQ context.
#[inline]
pub(crate) fn in_hardirq() -> bool {
    // SAFETY: No preconditions.
    unsafe { raw_stress::nmiclock_in_hardirq() }
}

/// Whether CPU `cpu` is online.
pub(crate) fn cpu_online(cpu: u32) -> bool {
    // SAFETY: No preconditions.
    unsafe { raw_stress::nmiclock_cpu_online(cpu) }
}
