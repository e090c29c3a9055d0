// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_glue_arm64.c: the arm64 part of the glue (see nmiclock_glue.h,
 * the declarations marked "per architecture"): the arch timer's rate, the
 * hypervisor's identity (the SMCCC UID, the device tree), and no NMI IPIs
 * (arm64 sends its pseudo-NMI IPIs from the kernel's own code only), so
 * the `ipi` source reports -EOPNOTSUPP.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/arm-smccc.h>
#include <linux/errno.h>
#include <linux/module.h>
#include <linux/of.h>
#include <asm/arch_timer.h>
#include <asm/hypervisor.h>

#include "nmiclock_glue.h"

int nmiclock_nmi_register(bool (*fn)(const void *data), const void *data)
{
	return -EOPNOTSUPP;
}

void nmiclock_nmi_unregister(void)
{
}

struct nmiclock_ipi *nmiclock_ipi_new(void)
{
	return NULL;
}

void nmiclock_ipi_clear(struct nmiclock_ipi *ipi)
{
}

void nmiclock_ipi_add(struct nmiclock_ipi *ipi, unsigned int cpu)
{
}

void nmiclock_ipi_send(struct nmiclock_ipi *ipi)
{
}

void nmiclock_ipi_free(struct nmiclock_ipi *ipi)
{
}

/* CNTFRQ_EL0, which firmware sets to the counter's rate. */
unsigned int nmiclock_counter_khz(void)
{
	return arch_timer_get_cntfrq() / 1000;
}

/*
 * KVM says who it is through the SMCCC vendor hypervisor UID, which
 * drivers/firmware/smccc/kvm_guest.c reads at boot: its services are known
 * only if the UID was KVM's.  QEMU under TCG answers no such call, but its
 * virt machine names itself in the device tree.
 */
void nmiclock_hypervisor_id(struct nmiclock_hypervisor *id)
{
	id->smccc_kvm = kvm_arm_hyp_service_available(ARM_SMCCC_KVM_FUNC_FEATURES);
	id->dt_dummy_virt = of_machine_is_compatible("linux,dummy-virt");
}
