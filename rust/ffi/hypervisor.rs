// SPDX-License-Identifier: GPL-2.0

//! The hypervisor the kernel runs under: its identity as the glue reads it
//! (`nmiclock_hypervisor_id()`: CPUID on x86, the SMCCC UID and the device
//! tree on arm64), told apart by [`crate::environment`], detected once at
//! load and kept.

use core::sync::atomic::{AtomicU8, Ordering};

use super::bindings;
use crate::environment::{Environment, HypervisorId, Signature};

/// [`KIND`] before [`detect`] ran.
const UNKNOWN: u8 = 0;
const QEMU_TCG: u8 = 1;
const KVM: u8 = 2;
const OTHER: u8 = 3;
const BARE_METAL: u8 = 4;

/// The [`Environment`] [`detect`] found, by kind; [`UNKNOWN`] before.
/// Stored after [`SIGNATURE`] (release), so that a reader that sees
/// [`OTHER`] sees the signature too.
static KIND: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The signature of [`Environment::OtherHypervisor`].
static SIGNATURE: [AtomicU8; 12] = [const { AtomicU8::new(0) }; 12];

/// What identifies the hypervisor, read now.
fn read_id() -> HypervisorId {
    let mut raw = bindings::nmiclock_hypervisor {
        cpuid_hypervisor: false,
        cpuid_max_leaf: 0,
        cpuid_signature: [0; 12],
        smccc_kvm: false,
        dt_dummy_virt: false,
    };
    // SAFETY: `raw` is a valid, initialised `struct nmiclock_hypervisor`
    // that the glue only writes to, for the length of the call; it may
    // trap to the hypervisor (CPUID), which task context allows.
    unsafe { bindings::nmiclock_hypervisor_id(&mut raw) };
    HypervisorId {
        cpuid_hypervisor: raw.cpuid_hypervisor,
        cpuid_max_leaf: raw.cpuid_max_leaf,
        cpuid_signature: raw.cpuid_signature,
        smccc_kvm: raw.smccc_kvm,
        dt_dummy_virt: raw.dt_dummy_virt,
    }
}

/// Finds where the kernel runs and keeps it for [`environment`]. At load,
/// in task context.
pub(crate) fn detect() -> Environment {
    let env = Environment::classify(&read_id());
    let kind = match env {
        Environment::QemuTcg => QEMU_TCG,
        Environment::Kvm => KVM,
        Environment::OtherHypervisor(Signature(sig)) => {
            for (a, b) in SIGNATURE.iter().zip(sig) {
                a.store(b, Ordering::Relaxed);
            }
            OTHER
        }
        Environment::BareMetal => BARE_METAL,
    };
    KIND.store(kind, Ordering::Release);
    env
}

/// Where the kernel runs, as [`detect`] found at load (or finds now, if it
/// has not run: the answer is the same). Task context.
pub(crate) fn environment() -> Environment {
    match KIND.load(Ordering::Acquire) {
        QEMU_TCG => Environment::QemuTcg,
        KVM => Environment::Kvm,
        OTHER => {
            let mut sig = [0u8; 12];
            for (b, a) in sig.iter_mut().zip(SIGNATURE.iter()) {
                *b = a.load(Ordering::Relaxed);
            }
            Environment::OtherHypervisor(Signature(sig))
        }
        BARE_METAL => Environment::BareMetal,
        _ => detect(),
    }
}
