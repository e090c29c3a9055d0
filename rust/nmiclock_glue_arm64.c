// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_glue_arm64.c: the arm64 part of the glue (see nmiclock_glue.h,
 * the declarations marked "per architecture"): the arch timer's rate, and
 * no NMI IPIs (arm64 sends its pseudo-NMI IPIs from the kernel's own code
 * only), so the `ipi` source reports -EOPNOTSUPP.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>
#include <linux/module.h>
#include <asm/arch_timer.h>
#include <asm/virt.h>

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
 * A kernel running at EL2 (VHE) runs on the hardware; one at EL1 may be a
 * guest (or a non-VHE host), and is taken as one: the bench then asks for
 * ratios only, which is never wrong.
 */
bool nmiclock_in_vm(void)
{
	return !is_kernel_in_hyp_mode();
}
