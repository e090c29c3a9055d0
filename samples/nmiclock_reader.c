// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_reader: reads nmiclock's exported clock in a loop on every CPU,
 * until unloaded, and counts every step back.
 *
 * A reader kthread bound to each CPU online at load reads
 * nmiclock_sched_clock() back to back and compares each value with:
 *  - its own previous read (a step back on that CPU), and
 *  - the highest value any reader had published before this read began
 *    (a step back across CPUs: that value was read earlier, so a clock
 *    whose counter reads are ordered, as nmiclock's default tsc_ordered
 *    and cntvct_ordered are, must not read less).
 *
 * What it is for: whatever nmiclock does to its clock while loaded (a
 * "config" write rebuilding it, a stress run moving its epoch), the modules
 * that read it must never see time go back.  The suite rebuilds the clock
 * while this runs and expects no step back.
 *
 * Results: the read-only parameter "report" (one line, readable at any
 * time), and the same line in the kernel log at unload:
 *   nmiclock_reader: reads=N cpus=C back_cpu=B max_back_cpu_ns=M back_cross=X max_back_cross_ns=Y per_cpu=0:b0,1:b1
 *
 * Load nmiclock.ko first; this module depends on it.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

/* One reader's counts: written only by that reader, read by "report". */
struct reader_counts {
	u64 reads;
	u64 back_cpu;		/* below its own previous read */
	u64 max_back_cpu_ns;
	u64 back_cross;		/* below a value published before the read */
	u64 max_back_cross_ns;
};

static DEFINE_PER_CPU(struct reader_counts, counts);
static DEFINE_PER_CPU(struct task_struct *, reader);

/* The highest value read so far, by any reader. */
static atomic64_t high_water = ATOMIC64_INIT(0);

/* Reads between two cond_resched() calls. */
#define BURST 256

static void note(u64 *count, u64 *max, u64 by)
{
	WRITE_ONCE(*count, *count + 1);
	if (by > *max)
		WRITE_ONCE(*max, by);
}

static int reader_fn(void *data)
{
	struct reader_counts *c = data;
	u64 prev = 0;
	unsigned int n = 0;

	while (!kthread_should_stop()) {
		/* Acquire: the value was read before our read below. */
		u64 seen = (u64)atomic64_read_acquire(&high_water);
		u64 t = nmiclock_sched_clock();

		WRITE_ONCE(c->reads, c->reads + 1);
		if (prev && t < prev)
			note(&c->back_cpu, &c->max_back_cpu_ns, prev - t);
		if (t < seen)
			note(&c->back_cross, &c->max_back_cross_ns, seen - t);
		while (t > seen &&
		       !atomic64_try_cmpxchg(&high_water, (s64 *)&seen, (s64)t))
			;
		prev = t;
		if (++n % BURST == 0)
			cond_resched();
	}
	return 0;
}

/* The report line, into @buf (a page). */
static int report(char *buf)
{
	u64 reads = 0, back_cpu = 0, max_cpu = 0, back_cross = 0, max_cross = 0;
	unsigned int cpu, cpus = 0;
	int len, at;

	for_each_possible_cpu(cpu) {
		const struct reader_counts *c = per_cpu_ptr(&counts, cpu);

		if (!per_cpu(reader, cpu))
			continue;
		cpus++;
		reads += READ_ONCE(c->reads);
		back_cpu += READ_ONCE(c->back_cpu);
		max_cpu = max(max_cpu, READ_ONCE(c->max_back_cpu_ns));
		back_cross += READ_ONCE(c->back_cross);
		max_cross = max(max_cross, READ_ONCE(c->max_back_cross_ns));
	}
	len = scnprintf(buf, PAGE_SIZE,
			"reads=%llu cpus=%u back_cpu=%llu max_back_cpu_ns=%llu back_cross=%llu max_back_cross_ns=%llu per_cpu=",
			reads, cpus, back_cpu, max_cpu, back_cross, max_cross);
	at = 0;
	for_each_possible_cpu(cpu) {
		if (!per_cpu(reader, cpu))
			continue;
		len += scnprintf(buf + len, PAGE_SIZE - len, "%s%u:%llu",
				 at++ ? "," : "", cpu,
				 READ_ONCE(per_cpu_ptr(&counts, cpu)->back_cpu));
	}
	len += scnprintf(buf + len, PAGE_SIZE - len, "\n");
	return len;
}

static int report_get(char *buf, const struct kernel_param *kp)
{
	return report(buf);
}

static const struct kernel_param_ops report_ops = {
	.get = report_get,
};
module_param_cb(report, &report_ops, NULL, 0444);
MODULE_PARM_DESC(report, "reads and steps back so far, on one line");

/* Stops every reader; the counts stay ("report" still sums them). */
static void stop_readers(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		struct task_struct *t = per_cpu(reader, cpu);

		if (t)
			kthread_stop(t);
	}
}

/* Drops the stopped readers' tasks. */
static void put_readers(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		struct task_struct *t = per_cpu(reader, cpu);

		if (t)
			put_task_struct(t);
		per_cpu(reader, cpu) = NULL;
	}
}

static int __init reader_init(void)
{
	unsigned int cpu;

	if (!nmiclock_sched_clock()) {
		pr_err("nmiclock_sched_clock() reads 0: is nmiclock's clock running?\n");
		return -EINVAL;
	}
	cpus_read_lock();
	for_each_online_cpu(cpu) {
		struct task_struct *t;

		t = kthread_create_on_cpu(reader_fn, per_cpu_ptr(&counts, cpu),
					  cpu, "nmiclock_rd/%u");
		if (IS_ERR(t)) {
			cpus_read_unlock();
			pr_err("cannot start the reader on cpu%u (error %ld)\n",
			       cpu, PTR_ERR(t));
			stop_readers();
			put_readers();
			return PTR_ERR(t);
		}
		/* Stopped with kthread_stop(): keep the task until then. */
		get_task_struct(t);
		per_cpu(reader, cpu) = t;
		wake_up_process(t);
	}
	cpus_read_unlock();
	pr_info("reading nmiclock_sched_clock() on %u CPUs until unloaded\n",
		num_online_cpus());
	return 0;
}

static void __exit reader_exit(void)
{
	char *buf = kmalloc(PAGE_SIZE, GFP_KERNEL);

	stop_readers();
	if (buf) {
		report(buf);
		pr_info("%s", buf);
		kfree(buf);
	}
	put_readers();
}

module_init(reader_init);
module_exit(reader_exit);

MODULE_AUTHOR("nmiclock developers");
MODULE_DESCRIPTION("Reads nmiclock's exported clock on every CPU and counts steps back");
MODULE_LICENSE("GPL");
