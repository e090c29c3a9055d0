// SPDX-License-Identifier: GPL-2.0

//! Where the kernel runs: under QEMU's emulator (TCG), under KVM, under
//! another hypervisor, or on the hardware, told apart by what identifies
//! the hypervisor ([`HypervisorId`], read by the glue at load).
//!
//! - x86: without the hypervisor bit (`X86_FEATURE_HYPERVISOR`), the
//!   hardware. With it, the vendor signature of CPUID leaf `0x40000000`:
//!   `TCGTCGTCGTCG` is QEMU TCG, `KVMKVMKVM\0\0\0` is KVM, anything else
//!   another hypervisor, named by its signature (`Microsoft Hv`,
//!   `VMwareVMware`, `XenVMMXenVMM`, ...). Only that first leaf is read: a
//!   KVM that puts Hyper-V's signature there and its own further up
//!   (QEMU's `hv-*` enlightenments) shows as Hyper-V.
//! - arm64: the SMCCC vendor hypervisor UID of KVM, KVM (QEMU's virt
//!   machine under KVM included); else QEMU's virt machine (device tree
//!   root `linux,dummy-virt`), QEMU TCG; else the hardware, as far as
//!   anything tells (a hypervisor that says nothing goes unseen).
//!
//! Under TCG time is emulated: only ratios taken in one run mean anything.
//! Under KVM the counters are the host's and times close to its own, but
//! NMIs are injected by the hypervisor.

use core::fmt;

/// What identifies the hypervisor, as the glue reads it
/// (`struct nmiclock_hypervisor`); the other architecture's fields are
/// false and 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HypervisorId {
    /// x86: CPUID.1:ECX\[31\] (`X86_FEATURE_HYPERVISOR`).
    pub cpuid_hypervisor: bool,
    /// x86, with that bit: CPUID `0x40000000`'s `eax`, the highest
    /// hypervisor leaf.
    pub cpuid_max_leaf: u32,
    /// x86, with that bit: its `ebx`, `ecx`, `edx`, the vendor signature.
    pub cpuid_signature: [u8; 12],
    /// arm64: the SMCCC vendor hypervisor UID was KVM's.
    pub smccc_kvm: bool,
    /// arm64: the device tree's root is compatible with `linux,dummy-virt`.
    pub dt_dummy_virt: bool,
}

/// The first hypervisor CPUID leaf, whose `eax` is at least itself when
/// a hypervisor implements it.
pub const CPUID_HYPERVISOR_BASE: u32 = 0x4000_0000;
/// QEMU TCG's CPUID signature.
pub const SIGNATURE_TCG: [u8; 12] = *b"TCGTCGTCGTCG";
/// KVM's CPUID signature.
pub const SIGNATURE_KVM: [u8; 12] = *b"KVMKVMKVM\0\0\0";

/// A hypervisor's 12-byte CPUID vendor signature. Shown as one word:
/// trailing NULs dropped, any other byte but printable ASCII (space
/// included) as `_`, and `unknown` when nothing is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature(pub [u8; 12]);

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let Some(bytes) = self.0.get(..len).filter(|b| !b.is_empty()) else {
            return f.write_str("unknown");
        };
        for &b in bytes {
            let c = if b.is_ascii_graphic() { b } else { b'_' };
            fmt::Write::write_char(f, char::from(c))?;
        }
        Ok(())
    }
}

/// Where the kernel runs. Shown as `qemu-tcg`, `kvm`,
/// `hypervisor:<signature>` or `bare-metal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Environment {
    /// QEMU's emulator: time is emulated.
    QemuTcg,
    /// KVM: hardware virtualization.
    Kvm,
    /// Another hypervisor (x86), by its CPUID signature (all zeros when
    /// it has no hypervisor leaves).
    OtherHypervisor(Signature),
    /// No hypervisor that says so.
    BareMetal,
}

impl Environment {
    /// Tells where the kernel runs from `id` (see the module's summary).
    pub fn classify(id: &HypervisorId) -> Self {
        if id.cpuid_hypervisor {
            if id.cpuid_max_leaf < CPUID_HYPERVISOR_BASE {
                Self::OtherHypervisor(Signature([0; 12]))
            } else if id.cpuid_signature == SIGNATURE_TCG {
                Self::QemuTcg
            } else if id.cpuid_signature == SIGNATURE_KVM {
                Self::Kvm
            } else {
                Self::OtherHypervisor(Signature(id.cpuid_signature))
            }
        } else if id.smccc_kvm {
            Self::Kvm
        } else if id.dt_dummy_virt {
            Self::QemuTcg
        } else {
            Self::BareMetal
        }
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::QemuTcg => f.write_str("qemu-tcg"),
            Self::Kvm => f.write_str("kvm"),
            Self::OtherHypervisor(s) => write!(f, "hypervisor:{s}"),
            Self::BareMetal => f.write_str("bare-metal"),
        }
    }
}
