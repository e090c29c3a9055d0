// SPDX-License-Identifier: GPL-2.0

//! Host tests of `environment`: QEMU TCG, KVM, other hypervisors and the
//! hardware, told apart from what the glue reads, and their names.

use nmiclock_core::environment::{Environment, HypervisorId, Signature};

fn x86(signature: &[u8; 12]) -> HypervisorId {
    HypervisorId {
        cpuid_hypervisor: true,
        cpuid_max_leaf: 0x4000_0001,
        cpuid_signature: *signature,
        ..HypervisorId::default()
    }
}

fn name(id: &HypervisorId) -> String {
    Environment::classify(id).to_string()
}

#[test]
fn x86_signatures() {
    assert_eq!(
        Environment::classify(&x86(b"TCGTCGTCGTCG")),
        Environment::QemuTcg
    );
    assert_eq!(
        Environment::classify(&x86(b"KVMKVMKVM\0\0\0")),
        Environment::Kvm
    );
    assert_eq!(name(&x86(b"TCGTCGTCGTCG")), "qemu-tcg");
    assert_eq!(name(&x86(b"KVMKVMKVM\0\0\0")), "kvm");
    assert_eq!(name(&x86(b"Microsoft Hv")), "hypervisor:Microsoft_Hv");
    assert_eq!(name(&x86(b"VMwareVMware")), "hypervisor:VMwareVMware");
    assert_eq!(name(&x86(b"XenVMMXenVMM")), "hypervisor:XenVMMXenVMM");
    assert_eq!(name(&x86(b"ACRNACRNACRN")), "hypervisor:ACRNACRNACRN");
    // KVM's signature without its NULs, or with other bytes, is not KVM's.
    assert_eq!(name(&x86(b"KVMKVMKVMKVM")), "hypervisor:KVMKVMKVMKVM");
    assert_eq!(name(&x86(b"KVMKVMKVM\0\x01\0")), "hypervisor:KVMKVMKVM__");
}

#[test]
fn x86_without_a_hypervisor_or_its_leaves() {
    let mut id = x86(b"TCGTCGTCGTCG");
    id.cpuid_hypervisor = false;
    assert_eq!(Environment::classify(&id), Environment::BareMetal);
    assert_eq!(name(&id), "bare-metal");
    assert_eq!(name(&HypervisorId::default()), "bare-metal");
    // The bit, but no hypervisor leaves: what leaf 0x40000000 returned is
    // not a signature.
    let mut id = x86(b"TCGTCGTCGTCG");
    id.cpuid_max_leaf = 0x16;
    assert_eq!(name(&id), "hypervisor:unknown");
    assert_eq!(name(&x86(&[0; 12])), "hypervisor:unknown");
}

#[test]
fn arm64() {
    let id = |smccc_kvm, dt_dummy_virt| HypervisorId {
        smccc_kvm,
        dt_dummy_virt,
        ..HypervisorId::default()
    };
    // QEMU's virt machine under KVM has the UID; under TCG only the DT.
    assert_eq!(Environment::classify(&id(true, true)), Environment::Kvm);
    assert_eq!(Environment::classify(&id(true, false)), Environment::Kvm);
    assert_eq!(
        Environment::classify(&id(false, true)),
        Environment::QemuTcg
    );
    assert_eq!(
        Environment::classify(&id(false, false)),
        Environment::BareMetal
    );
}

#[test]
fn signatures_show_as_one_printable_word() {
    let s = |b: &[u8; 12]| Signature(*b).to_string();
    assert_eq!(s(b"\0\0\0\0\0\0\0\0\0\0\0\0"), "unknown");
    assert_eq!(s(b"bhyve bhyve "), "bhyve_bhyve_");
    assert_eq!(s(b" lrpepyh  vr"), "_lrpepyh__vr");
    assert_eq!(s(b"\0abc\0\0\0\0\0\0\0\0"), "_abc");
    assert_eq!(s(b"\xffQNXQVMBSQG\0"), "_QNXQVMBSQG");
    for b in [*b"Microsoft Hv", *b"\x7f\t\n\r\x80\xfe abcde", [1; 12]] {
        let shown = s(&b);
        assert!(
            !shown.is_empty() && shown.bytes().all(|c| c.is_ascii_graphic()),
            "{shown:?}"
        );
    }
}
