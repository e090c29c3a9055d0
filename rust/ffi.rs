// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over nmiclock's C glue (`rust/nmiclock_glue.c`).
//!
//! This is the only file that declares or calls the glue. It offers:
//!
//! - [`DebugfsDir`]: a directory at the debugfs root that removes itself and
//!   everything in it when dropped, and read-only files in it whose contents
//!   a plain Rust function renders through a [`SeqFile`];
//! - [`num_online_cpus`] and [`tsc_khz`].

use core::fmt;
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, Result};
use kernel::ffi::{c_char, c_int, c_uint, c_ushort, c_void};
use kernel::str::CStr;

/// Declarations matching `rust/nmiclock_glue.h`.
mod raw {
    use super::{c_char, c_int, c_uint, c_ushort, c_void};

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

    extern "C" {
        pub(super) fn nmiclock_debugfs_create_dir(name: *const c_char) -> *mut Dentry;
        pub(super) fn nmiclock_debugfs_create_file(
            name: *const c_char,
            mode: c_ushort,
            parent: *mut Dentry,
            private: *const c_void,
        ) -> *mut Dentry;
        pub(super) fn nmiclock_debugfs_remove(dentry: *mut Dentry);
        pub(super) fn nmiclock_seq_write(
            m: *mut SeqFileRaw,
            buf: *const c_char,
            len: usize,
        ) -> c_int;
        pub(super) fn nmiclock_num_online_cpus() -> c_uint;
        pub(super) fn nmiclock_tsc_khz() -> c_uint;
    }
}

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

    /// Creates a read-only file `name` with permissions `mode` whose contents
    /// `ops.show` renders on every read.
    ///
    /// The file goes when the directory is dropped; `ops` is `'static` so it
    /// outlives any read in flight.
    pub(crate) fn create_file(&self, name: &CStr, mode: u16, ops: &'static FileOps) -> Result {
        let private: *const FileOps = ops;
        // SAFETY: `name` is NUL-terminated, `self.dentry` is a live directory
        // (type invariant) and `private` is valid forever, as
        // `nmiclock_rs_show()` requires.
        let ptr = unsafe {
            raw::nmiclock_debugfs_create_file(
                name.as_char_ptr(),
                mode,
                self.dentry.as_ptr(),
                private.cast(),
            )
        };
        from_err_ptr(ptr).map(|_| ())
    }
}

impl Drop for DebugfsDir {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the directory is live; it is removed
        // once, here. debugfs waits for reads in flight before returning.
        unsafe { raw::nmiclock_debugfs_remove(self.dentry.as_ptr()) };
    }
}

/// Number of CPUs online right now.
pub(crate) fn num_online_cpus() -> u32 {
    // SAFETY: No preconditions; reads a counter.
    unsafe { raw::nmiclock_num_online_cpus() }
}

/// TSC frequency in kHz as the kernel calibrated it (0 when there is none).
pub(crate) fn tsc_khz() -> u32 {
    // SAFETY: No preconditions; reads a variable set during boot.
    unsafe { raw::nmiclock_tsc_khz() }
}
