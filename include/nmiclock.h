/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nmiclock.h: what nmiclock.ko offers other modules.
 *
 * Read its clock: nmiclock_sched_clock() gives nmiclock's time in ns, from
 * any context, NMI included; it never steps back, across a "config"
 * rebuild of the clock too (samples/nmiclock_reader.c checks that on every
 * CPU).  It reads 0 only while no clock runs (never while loaded).
 *
 * Register a clock of your own as a target, select it with the setting
 * target=NAME (debugfs "config", while nothing runs), and nmiclock's stress
 * run reads it from NMI, hard-IRQ and task context while its writers drive
 * your update, judging every read as it judges its own clock: per-CPU and
 * cross-CPU monotonicity, the rate against CLOCK_MONOTONIC_RAW, and how
 * many reads met one of your updates in progress (the run's coverage).
 * See Documentation/nmiclock.rst, "Targets".
 *
 * Rules:
 *  - @name: 1 to 31 characters of [a-z0-9_], unique, and none of the
 *    built-in target names (nmiclock, sched_clock, local_clock,
 *    ktime_get_*_fast_ns).  Otherwise registration fails with -EINVAL
 *    (bad name) or -EEXIST (taken), and one log line says why.
 *  - @read: required.  It must be callable from NMI context: that is what
 *    is under test, and nmiclock calls it from its NMI handler.
 *  - @update: optional; called from task and hard-IRQ context, never NMI,
 *    and never concurrently with itself: nmiclock serializes the calls,
 *    as the kernel serializes a clock's epoch updates.
 *  - @owner: THIS_MODULE.  A run pins it for as long as it uses the
 *    target, so the module cannot go away under the run.
 *  - The structure must stay in place until nmiclock_unregister_target()
 *    returns.  Unregistering a target a run is using stops the run first
 *    (its End of test line says so).  At most 8 targets are registered at
 *    once (-ENOSPC beyond).
 *
 * Both functions may sleep: call them from task context (module init and
 * exit are the usual places).
 */
#ifndef NMICLOCK_H
#define NMICLOCK_H

#include <linux/types.h>

struct module;

struct nmiclock_target {
	const char *name;	/* selected with target=NAME */
	u64 (*read)(void);	/* the read under test, in ns: called from
				   NMI, hard-IRQ and task context */
	void (*update)(void);	/* optional: one writer step, called by
				   nmiclock's writers (task and hard-IRQ
				   context, never NMI) during a run */
	struct module *owner;
};

u64 nmiclock_sched_clock(void);

int nmiclock_register_target(struct nmiclock_target *t);
void nmiclock_unregister_target(struct nmiclock_target *t);

#endif /* NMICLOCK_H */
