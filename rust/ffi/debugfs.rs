// SPDX-License-Identifier: GPL-2.0

//! debugfs: a directory ([`Dir`]) of files whose contents a closure renders
//! through a [`SeqFile`] and whose writes, optionally, a closure handles.

use core::fmt;
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, Result};
use kernel::ffi::{c_char, c_int, c_void};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::uaccess::UserSlice;

use super::{bindings, erase, Owned};

/// The output buffer of a debugfs file being read.
///
/// Formatting into it with `write!` appends text. When the buffer is full
/// the write fails with [`fmt::Error`]; `seq_file` notices the overflow by
/// itself and calls the file's show closure again with a larger buffer, so
/// a show closure only needs to pass the error up.
///
/// # Invariants
///
/// `ptr` is the `seq_file` of a `->show()` call in progress; a `SeqFile`
/// only exists (behind a `&mut`) for the duration of that call.
pub(crate) struct SeqFile {
    ptr: *mut bindings::seq_file,
}

impl fmt::Write for SeqFile {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // SAFETY: By the type invariant `self.ptr` is a live `seq_file`, and
        // `s` is valid for reads of `s.len()` bytes.
        let ret = unsafe { bindings::nmiclock_seq_write(self.ptr, s.as_ptr().cast(), s.len()) };
        if ret == 0 {
            Ok(())
        } else {
            Err(fmt::Error)
        }
    }
}

/// One file: the C description (first, so its address is the node's) and
/// the closures it points at.
#[repr(C)]
struct Node<S, W> {
    raw: bindings::nmiclock_file,
    /// The file's name, for the log line of a refused write.
    name: &'static CStr,
    show: S,
    write: Option<W>,
}

/// The longest write a file takes, in bytes: a longer one (or an empty
/// one) gets `EINVAL` and one log line, before anything is copied.
pub(crate) const WRITE_MAX: usize = 256;

// SAFETY: `raw` only points at the node itself; the closures are
// `Send + Sync` (see `Dir::add`).
unsafe impl<S: Send, W: Send> Send for Node<S, W> {}
// SAFETY: As above.
unsafe impl<S: Sync, W: Sync> Sync for Node<S, W> {}

/// The glue's `->show()` for a file made by [`Dir::add`].
///
/// # Safety
///
/// `m` is the `seq_file` of a `->show()` call in progress and `data` the
/// `Node<S, W>` of a file of a live [`Dir`].
unsafe extern "C" fn show_trampoline<S, W>(m: *mut bindings::seq_file, data: *const c_void) -> c_int
where
    S: Fn(&mut SeqFile) -> fmt::Result,
{
    // SAFETY: The caller's contract: the directory owns the node until the
    // file is removed, which waits for this call.
    let node = unsafe { &*data.cast::<Node<S, W>>() };
    // INVARIANT: `m` is live for this call, and the `SeqFile` does not
    // outlive it.
    let mut seq = SeqFile { ptr: m };
    // A full buffer is not an error: seq_file retries with a larger one.
    let _ = (node.show)(&mut seq);
    0
}

/// The glue's `->write()` for a writable file made by [`Dir::add`].
///
/// # Safety
///
/// `data` is the `Node<S, W>` of a file of a live [`Dir`], and `ubuf` the
/// user address of a `write(2)` in progress, in this task (it is checked
/// and copied as user memory).
unsafe extern "C" fn write_trampoline<S, W>(
    data: *const c_void,
    ubuf: *const c_char,
    len: usize,
) -> c_int
where
    W: Fn(&[u8]) -> Result,
{
    // SAFETY: As in `show_trampoline()`.
    let node = unsafe { &*data.cast::<Node<S, W>>() };
    let Some(write) = &node.write else {
        return EINVAL.to_errno();
    };
    if len == 0 || len > WRITE_MAX {
        pr_err!(
            "{}: a write of {} bytes; want 1..{}\n",
            node.name,
            len,
            WRITE_MAX
        );
        return EINVAL.to_errno();
    }
    let mut bytes = KVec::new();
    // A `UserPtr` is the address on 6.12, a type of its own on 7.x.
    #[cfg(not(nmiclock_kernel_7))]
    let ubuf = ubuf as usize;
    #[cfg(nmiclock_kernel_7)]
    let ubuf = kernel::uaccess::UserPtr::from_addr(ubuf as usize);
    let copied = UserSlice::new(ubuf, len).read_all(&mut bytes, GFP_KERNEL);
    match copied.and_then(|()| write(&bytes)) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// A write closure for read-only files, never called.
type NoWrite = fn(&[u8]) -> Result;

/// A debugfs directory at the debugfs root, removed with everything in it
/// when dropped, then its files' closures.
///
/// # Invariants
///
/// `dentry` was returned by `debugfs_create_dir()` and has not been
/// removed; `files` holds the nodes of the files created in it.
pub(crate) struct Dir {
    dentry: NonNull<bindings::dentry>,
    files: KVec<Owned>,
}

// SAFETY: debugfs dentries may be used and removed from any thread; the
// nodes are `Send + Sync`.
unsafe impl Send for Dir {}
// SAFETY: `Dir` offers no `&self` operations that touch the kernel.
unsafe impl Sync for Dir {}

impl Dir {
    /// Creates `/sys/kernel/debug/<name>/`.
    pub(crate) fn new(name: &CStr) -> Result<Self> {
        // SAFETY: `name` is a valid NUL-terminated string; debugfs copies it.
        let ptr = unsafe { bindings::nmiclock_debugfs_create_dir(name.as_char_ptr()) };
        let ptr = from_err_ptr(ptr)?;
        // INVARIANT: Not an error pointer, so a live directory; no files yet.
        NonNull::new(ptr)
            .map(|dentry| Self {
                dentry,
                files: KVec::new(),
            })
            .ok_or(ENOMEM)
    }

    /// Creates a read-only file `name` with permissions `mode`, which
    /// `show` renders on every read.
    pub(crate) fn add_ro<S>(&mut self, name: &'static CStr, mode: u16, show: S) -> Result
    where
        S: Fn(&mut SeqFile) -> fmt::Result + Send + Sync + 'static,
    {
        self.add::<S, NoWrite>(name, mode, show, None)
    }

    /// Creates a file `name` with permissions `mode`: `show` renders it on
    /// every read, `write` handles each write (1..[`WRITE_MAX`] bytes; its
    /// error goes back to the writer as is).
    pub(crate) fn add_rw<S, W>(
        &mut self,
        name: &'static CStr,
        mode: u16,
        show: S,
        write: W,
    ) -> Result
    where
        S: Fn(&mut SeqFile) -> fmt::Result + Send + Sync + 'static,
        W: Fn(&[u8]) -> Result + Send + Sync + 'static,
    {
        self.add(name, mode, show, Some(write))
    }

    fn add<S, W>(&mut self, name: &'static CStr, mode: u16, show: S, write: Option<W>) -> Result
    where
        S: Fn(&mut SeqFile) -> fmt::Result + Send + Sync + 'static,
        W: Fn(&[u8]) -> Result + Send + Sync + 'static,
    {
        self.files.reserve(1, GFP_KERNEL)?;
        let writable = write.is_some();
        let mut node = KBox::new(
            Node {
                raw: bindings::nmiclock_file {
                    show: Some(show_trampoline::<S, W>),
                    write: if writable {
                        Some(write_trampoline::<S, W>)
                    } else {
                        None
                    },
                    data: core::ptr::null(),
                },
                name,
                show,
                write,
            },
            GFP_KERNEL,
        )?;
        let data: *const Node<S, W> = &*node;
        node.raw.data = data.cast();
        // SAFETY: `name` is NUL-terminated, `self.dentry` is a live directory
        // (type invariant), and the node, whose trampolines match its
        // closures, stays in `self.files` until after the directory is
        // removed.
        let ptr = unsafe {
            bindings::nmiclock_debugfs_create_file(
                name.as_char_ptr(),
                mode,
                self.dentry.as_ptr(),
                &node.raw,
            )
        };
        from_err_ptr(ptr)?;
        // INVARIANT: The node of the new file joins `files`; the space was
        // reserved above, so this cannot fail.
        self.files.push(erase(node), GFP_KERNEL)?;
        Ok(())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the directory is live; it is removed
        // once, here. debugfs waits for reads and writes in flight, so the
        // nodes (dropped with `files` after this) are unused.
        unsafe { bindings::nmiclock_debugfs_remove(self.dentry.as_ptr()) };
    }
}
