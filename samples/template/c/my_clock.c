// SPDX-License-Identifier: GPL-2.0
/*
 * my_clock: the shortest complete nmiclock provider, to copy and make your
 * own.  It registers one clock, "my_clock", which nmiclock's stress run
 * reads from NMI, hard-IRQ and task context while its writers call the
 * clock's update, and judges as it judges its own clock.
 *
 * The clock here: CLOCK_MONOTONIC_RAW rebased at every update (an epoch of
 * raw time and clock time, as a sched_clock keeps an epoch of counter
 * cycles and ns), the epoch in two copies behind a seqcount latch so that
 * a read, even an NMI's over the update on its own CPU, reads one whole
 * copy.  Replace the read and the update with yours; keep their contexts:
 * the read is called from NMI, the update never is.
 *
 *	scripts/run-main --with samples/template/c --params target=my_clock
 */
#include <linux/module.h>
#include <linux/seqlock.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>

struct my_epoch {
	u64 raw;	/* CLOCK_MONOTONIC_RAW when the epoch was taken */
	u64 ns;		/* the clock's time then */
};

static seqcount_latch_t my_seq = SEQCNT_LATCH_ZERO(my_seq);
static struct my_epoch my_copies[2];

/* The read under test: any context, NMI included. No locks, no sleeping. */
static u64 notrace my_clock_read(void)
{
	const struct my_epoch *e;
	unsigned int seq;
	u64 now, ns;

	do {
		seq = raw_read_seqcount_latch(&my_seq);
		e = &my_copies[seq & 1];
		now = ktime_get_raw_fast_ns();
		ns = e->ns + (now - e->raw);
	} while (raw_read_seqcount_latch_retry(&my_seq, seq));
	return ns;
}

/*
 * One update, called by nmiclock's writers from task and hard-IRQ context,
 * one call at a time. nmiclock counts the reads that met it in progress:
 * the run's coverage, which its verdict needs.
 */
static void my_clock_update(void)
{
	u64 now = ktime_get_raw_fast_ns();
	struct my_epoch next = {
		.raw = now,
		.ns = my_copies[0].ns + (now - my_copies[0].raw),
	};

	raw_write_seqcount_latch(&my_seq);	/* readers to copy 1 */
	my_copies[0] = next;
	raw_write_seqcount_latch(&my_seq);	/* readers to copy 0 */
	my_copies[1] = next;
}

static struct nmiclock_target my_clock = {
	.name = "my_clock",
	.read = my_clock_read,
	.update = my_clock_update,
	.owner = THIS_MODULE,
	/* The promise the run judges: never a step back, on one CPU or
	 * across CPUs, and the rate of CLOCK_MONOTONIC_RAW. */
	.back_cpu_ns = 0,
	.back_cross_ns = 0,
	.any_rate = false,
};

static int __init my_clock_init(void)
{
	u64 now = ktime_get_raw_fast_ns();

	my_copies[0] = (struct my_epoch){ .raw = now, .ns = now };
	my_copies[1] = my_copies[0];
	return nmiclock_register_target(&my_clock);
}

static void __exit my_clock_exit(void)
{
	nmiclock_unregister_target(&my_clock);
}

module_init(my_clock_init);
module_exit(my_clock_exit);
MODULE_DESCRIPTION("my_clock: a clock registered with nmiclock, to be judged NMI-safe");
MODULE_LICENSE("GPL");
