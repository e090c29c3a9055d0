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
 *  - @read (or @read_status, below): required.  It must be callable from
 *    NMI context: that is what is under test, and nmiclock calls it from
 *    its NMI handler.
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
 *
 * A target may also say (left zero, these mean: a plain @read, and the
 * default promise):
 *  - @read_status: instead of @read (which may then be NULL), a read that
 *    also says whether it stalled: it stores the time in *@ns and returns
 *    0, or NMICLOCK_READ_STALLED when it gave up waiting for a writer (a
 *    bounded spin standing in for a wait that, in NMI context over that
 *    writer, would never end) and *@ns is only what it had then.  A run
 *    counts each as target_stalls, an anomaly, as it counts its own
 *    clock's stalls; the value is judged as any other.
 *  - its promise, what the run judges it by (default: none of either, the
 *    rate checked): @back_cpu_ns, the step back on one CPU it allows
 *    itself, and @back_cross_ns, across CPUs (NMICLOCK_ANY: not promised
 *    at all: counted, never an anomaly); @any_rate: its rate is not
 *    promised (not checked against CLOCK_MONOTONIC_RAW).  So a clock
 *    whose fast path is documented to step back by a few ns across an
 *    update declares that, as the table of the kernel's own clocks does.
 *
 * nmiclock_register_target() passes the size of the structure the caller
 * was built with: a provider built against another nmiclock.h than the
 * module's is refused with -EINVAL and one line saying so (rebuild it
 * against this header), as is one that calls the 0.6 function of that
 * name.  In-kernel interfaces keep no old layouts alive.
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
	int (*read_status)(u64 *ns);	/* optional, instead of @read:
					   0, or NMICLOCK_READ_STALLED */
	u64 back_cpu_ns;	/* allowed step back on one CPU, ns */
	u64 back_cross_ns;	/* allowed step back across CPUs, ns */
	bool any_rate;		/* the rate is not promised */
};

/* @read_status gave up waiting: the value is what it had. */
#define NMICLOCK_READ_STALLED	1
/* @back_cpu_ns, @back_cross_ns: no promise at all. */
#define NMICLOCK_ANY		(~0ULL)

u64 nmiclock_sched_clock(void);

/* Registers @t, built as @size bytes: use nmiclock_register_target(). */
int __nmiclock_register_target(struct nmiclock_target *t, size_t size);
/* The 0.6 entry point, exported only to refuse its callers. */
int nmiclock_register_target(struct nmiclock_target *t);
void nmiclock_unregister_target(struct nmiclock_target *t);

#define nmiclock_register_target(t) __nmiclock_register_target((t), sizeof(*(t)))

#endif /* NMICLOCK_H */
