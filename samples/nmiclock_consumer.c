// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_consumer: what nmiclock_sched_clock() costs a module that calls
 * it, against sched_clock(), timed the way a caller pays for both: a call
 * from this module into another (nmiclock.ko, the kernel), nothing inlined.
 *
 * At load it times "runs" runs; each calls sched_clock() "calls" times in
 * a row and nmiclock_sched_clock() as many, with interrupts off, the order
 * alternating from run to run so that neither always goes first.  Each
 * run gives both functions' ns per call and their ratio; the module
 * reports the medians over the runs, and the ratios' 10th to 90th
 * percentile, in the read-only parameter "report" and in the kernel log:
 *   nmiclock_consumer: nmiclock_sched_clock() N.NNN ns, sched_clock() N.NNN ns per call, ratio R.RRR (runs 0.NNN-0.NNN), median of 31 runs of 10000 calls, interrupts off
 *
 * Written only against include/nmiclock.h, as any consumer is; load
 * nmiclock.ko first.  scripts/run-bench loads it after its table.  The
 * batches are timed with ktime_get_mono_fast_ns(); in a QEMU TCG guest
 * time is emulated, and only the ratio, taken within each run, compares.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/irqflags.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched/clock.h>
#include <linux/sort.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

#define MAX_RUNS 101
#define MAX_CALLS 1000000

static unsigned int runs = 31;
module_param(runs, uint, 0444);
MODULE_PARM_DESC(runs, "runs of each function (1 to 101, default 31)");

static unsigned int calls = 10000;
module_param(calls, uint, 0444);
MODULE_PARM_DESC(calls, "calls in a row per run (1 to 1000000, default 10000)");

static char report[256];
module_param_string(report, report, sizeof(report), 0444);
MODULE_PARM_DESC(report, "the measurement, one line (read-only)");

/* Per run, in ps per call (ns * 1000), and the ratio in thousandths. */
static u64 ours_ps[MAX_RUNS], theirs_ps[MAX_RUNS], ratio_milli[MAX_RUNS];

/* What the calls returned, summed, so that none is dropped. */
static u64 sink;

/*
 * One function per clock, not one taking a pointer: a call through a
 * pointer (a retpoline, on many kernels) is not what a caller pays.
 */
static noinline u64 time_sched_clock(unsigned int n)
{
	u64 t0, t1, sum = 0;
	unsigned int i;

	t0 = ktime_get_mono_fast_ns();
	for (i = 0; i < n; i++)
		sum += sched_clock();
	t1 = ktime_get_mono_fast_ns();
	WRITE_ONCE(sink, sink + sum);
	return t1 - t0;
}

static noinline u64 time_nmiclock(unsigned int n)
{
	u64 t0, t1, sum = 0;
	unsigned int i;

	t0 = ktime_get_mono_fast_ns();
	for (i = 0; i < n; i++)
		sum += nmiclock_sched_clock();
	t1 = ktime_get_mono_fast_ns();
	WRITE_ONCE(sink, sink + sum);
	return t1 - t0;
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The value at percentile pct of sorted v[0..n). */
static u64 at(const u64 *v, unsigned int n, unsigned int pct)
{
	return v[(n - 1) * pct / 100];
}

static int __init consumer_init(void)
{
	unsigned long flags;
	unsigned int r;
	u64 ours, theirs;

	if (runs < 1 || runs > MAX_RUNS || calls < 1 || calls > MAX_CALLS) {
		pr_err("runs=%u calls=%u: want runs 1 to %u and calls 1 to %u\n",
		       runs, calls, MAX_RUNS, MAX_CALLS);
		return -EINVAL;
	}
	for (r = 0; r < runs; r++) {
		local_irq_save(flags);
		if (r & 1) {
			ours = time_nmiclock(calls);
			theirs = time_sched_clock(calls);
		} else {
			theirs = time_sched_clock(calls);
			ours = time_nmiclock(calls);
		}
		local_irq_restore(flags);
		ours_ps[r] = div_u64(ours * 1000, calls);
		theirs_ps[r] = div_u64(theirs * 1000, calls);
		ratio_milli[r] = div64_u64(ours * 1000, theirs ? theirs : 1);
		cond_resched();
	}
	sort(ours_ps, runs, sizeof(u64), cmp_u64, NULL);
	sort(theirs_ps, runs, sizeof(u64), cmp_u64, NULL);
	sort(ratio_milli, runs, sizeof(u64), cmp_u64, NULL);
	ours = at(ours_ps, runs, 50);
	theirs = at(theirs_ps, runs, 50);
	scnprintf(report, sizeof(report),
		  "nmiclock_sched_clock() %llu.%03llu ns, sched_clock() %llu.%03llu ns per call, ratio %llu.%03llu (runs %llu.%03llu-%llu.%03llu), median of %u runs of %u calls, interrupts off",
		  ours / 1000, ours % 1000, theirs / 1000, theirs % 1000,
		  at(ratio_milli, runs, 50) / 1000, at(ratio_milli, runs, 50) % 1000,
		  at(ratio_milli, runs, 10) / 1000, at(ratio_milli, runs, 10) % 1000,
		  at(ratio_milli, runs, 90) / 1000, at(ratio_milli, runs, 90) % 1000,
		  runs, calls);
	pr_info("%s\n", report);
	return 0;
}

static void __exit consumer_exit(void)
{
}

module_init(consumer_init);
module_exit(consumer_exit);
MODULE_DESCRIPTION("Times nmiclock_sched_clock() against sched_clock() from another module");
MODULE_LICENSE("GPL");
