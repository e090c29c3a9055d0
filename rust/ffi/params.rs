// SPDX-License-Identifier: GPL-2.0

//! The module parameters as given at load: each a string, or nothing when
//! not given. The glue declares them from the one list
//! `NMICLOCK_PARAMS` in `rust/nmiclock_glue.h`, in the order of the
//! settings table (`rust/settings.rs`), which validates them.

// `CStr` from the prelude: on 7.x it is `core::ffi::CStr`, whose
// `from_char_ptr`/`as_char_ptr` come from the prelude's `CStrExt`.
use kernel::prelude::*;

use super::bindings;

/// How many parameters the glue declares.
pub(crate) const COUNT: usize = bindings::nmiclock_params_NMICLOCK_NR_PARAMS as usize;

/// Converts a string the glue returned: `None` for NULL; one that is not
/// UTF-8 becomes "?", which no valid name or value is, so validation
/// rejects it.
fn text(ptr: *const kernel::ffi::c_char) -> Option<&'static str> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: The glue returns pointers to NUL-terminated strings that live
    // unchanged until the module is unloaded: parameter names are string
    // literals, and the parameters are read-only (mode 0444) and freed only
    // after the module's exit.
    let s = unsafe { CStr::from_char_ptr(ptr) };
    Some(s.to_str().unwrap_or("?"))
}

/// The name of parameter `i`, `None` past the last.
pub(crate) fn name(i: usize) -> Option<&'static str> {
    let i = u32::try_from(i).ok()?;
    // SAFETY: No preconditions: out-of-range indices give NULL.
    text(unsafe { bindings::nmiclock_param_name(i) })
}

/// The value given at load for parameter `i`, `None` if it was not given
/// (or `i` is past the last).
pub(crate) fn value(i: usize) -> Option<&'static str> {
    let i = u32::try_from(i).ok()?;
    // SAFETY: No preconditions: out-of-range indices give NULL.
    text(unsafe { bindings::nmiclock_param_value(i) })
}
