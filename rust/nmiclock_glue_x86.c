// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_glue_x86.c: the x86 part of the glue (see nmiclock_glue.h, the
 * declarations marked "per architecture"): the NMI_LOCAL handler, NMI IPIs
 * through the local APIC, the TSC's rate, the hypervisor's CPUID signature.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <asm/apic.h>
#include <asm/cpufeature.h>
/* 7.x moved the CPUID accessors to <asm/cpuid/api.h>. */
#if __has_include(<asm/cpuid/api.h>)
#include <asm/cpuid/api.h>
#else
#include <asm/cpuid.h>
#endif
#include <asm/nmi.h>
#include <asm/tsc.h>

#include "nmiclock_glue.h"

static bool (*nmiclock_nmi_fn)(const void *data);
static const void *nmiclock_nmi_data;

static int nmiclock_nmi_handler(unsigned int type, struct pt_regs *regs)
{
	return nmiclock_nmi_fn(nmiclock_nmi_data) ? NMI_HANDLED : NMI_DONE;
}

int nmiclock_nmi_register(bool (*fn)(const void *data), const void *data)
{
	int ret;

	nmiclock_nmi_fn = fn;
	nmiclock_nmi_data = data;
	ret = register_nmi_handler(NMI_LOCAL, nmiclock_nmi_handler, 0, "nmiclock");
	if (ret)
		nmiclock_nmi_fn = NULL;
	return ret;
}

/* Waits for handlers in flight (unregister_nmi_handler() does). */
void nmiclock_nmi_unregister(void)
{
	unregister_nmi_handler(NMI_LOCAL, "nmiclock");
	nmiclock_nmi_fn = NULL;
	nmiclock_nmi_data = NULL;
}

struct nmiclock_ipi {
	struct cpumask mask;
};

struct nmiclock_ipi *nmiclock_ipi_new(void)
{
	return kzalloc(sizeof(struct nmiclock_ipi), GFP_KERNEL);
}

void nmiclock_ipi_clear(struct nmiclock_ipi *ipi)
{
	cpumask_clear(&ipi->mask);
}

void nmiclock_ipi_add(struct nmiclock_ipi *ipi, unsigned int cpu)
{
	if (cpu < nr_cpu_ids)
		cpumask_set_cpu(cpu, &ipi->mask);
}

void nmiclock_ipi_send(struct nmiclock_ipi *ipi)
{
	cpumask_and(&ipi->mask, &ipi->mask, cpu_online_mask);
	if (!cpumask_empty(&ipi->mask))
		__apic_send_IPI_mask(&ipi->mask, NMI_VECTOR);
}

void nmiclock_ipi_free(struct nmiclock_ipi *ipi)
{
	kfree(ipi);
}

unsigned int nmiclock_counter_khz(void)
{
	return tsc_khz;
}

/*
 * The hypervisor bit, and the signature at the base of the hypervisor
 * leaves (where arch/x86/kernel/cpu/hypervisor.c looks first), laid out as
 * hypervisor_cpuid_base() compares it.
 */
void nmiclock_hypervisor_id(struct nmiclock_hypervisor *id)
{
	u32 eax, ebx, ecx, edx;

	id->cpuid_hypervisor = boot_cpu_has(X86_FEATURE_HYPERVISOR);
	if (!id->cpuid_hypervisor)
		return;
	cpuid(0x40000000, &eax, &ebx, &ecx, &edx);
	id->cpuid_max_leaf = eax;
	memcpy(&id->cpuid_signature[0], &ebx, 4);
	memcpy(&id->cpuid_signature[4], &ecx, 4);
	memcpy(&id->cpuid_signature[8], &edx, 4);
}
