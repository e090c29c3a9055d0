// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_trace_clocks: the tracers' clocks (kernel/trace/trace_clock.c)
 * as nmiclock targets, read as the kernel exports them: nothing is
 * modelled here.  Built only for a kernel with CONFIG_TRACE_CLOCK, the only
 * one that has them (the suite's default kernels do not; its debug kernel
 * does).
 *
 *  - trace_clock_local: sched_clock() with preemption off, "not guaranteed
 *    to be coherent across CPUs, nor across CPU idle events": it promises
 *    nothing, so a run measures it and reports what it finds.  It has no
 *    update of its own to call: sched_clock()'s runs where the kernel
 *    runs it (target=sched_clock's kernel_update says where).
 *  - trace_clock_global: sched_clock_cpu() clamped to prev_time, the
 *    highest time handed out, which a caller outside NMI raises under an
 *    arch_spin_trylock() (aafe104aa909: never block; 89529d8b8f8d: no
 *    "+1", which let a nested reader go 1 ns back).  It promises that "the
 *    same CPU will always show a monotonic clock", nothing across CPUs,
 *    nothing of its rate.  Its update, for nmiclock's writers, is a call
 *    of trace_clock_global() itself, from task or hard-IRQ context: the
 *    stretch in which that call holds the lock and raises prev_time is the
 *    window an NMI reader must survive.
 *
 * Load nmiclock.ko first, then this module; select one with
 * "echo target=trace_clock_global > /sys/kernel/debug/nmiclock/config".
 */
#include <linux/module.h>
#include <linux/trace_clock.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static void global_update(void)
{
	trace_clock_global();
}

static struct nmiclock_target targets[] = {
	{
		.name = "trace_clock_local",
		.read = trace_clock_local,
		.owner = THIS_MODULE,
		.back_cpu_ns = NMICLOCK_ANY,
		.back_cross_ns = NMICLOCK_ANY,
		.any_rate = true,
	},
	{
		.name = "trace_clock_global",
		.read = trace_clock_global,
		.update = global_update,
		.owner = THIS_MODULE,
		.back_cpu_ns = 0,
		.back_cross_ns = NMICLOCK_ANY,
		.any_rate = true,
	},
};

static int __init trace_clocks_init(void)
{
	int i, ret;

	for (i = 0; i < ARRAY_SIZE(targets); i++) {
		ret = nmiclock_register_target(&targets[i]);
		if (ret) {
			while (i--)
				nmiclock_unregister_target(&targets[i]);
			return ret;
		}
	}
	return 0;
}

static void __exit trace_clocks_exit(void)
{
	int i;

	for (i = ARRAY_SIZE(targets); i--;)
		nmiclock_unregister_target(&targets[i]);
}

module_init(trace_clocks_init);
module_exit(trace_clocks_exit);
MODULE_DESCRIPTION("The tracers' clocks as nmiclock targets");
MODULE_LICENSE("GPL");
