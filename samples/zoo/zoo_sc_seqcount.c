// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_sc_seqcount: generic sched_clock() read under a seqcount from NMI.
 *
 * Fixed by 1809bfa44e10 ("timers, sched/clock: Avoid deadlock during read
 * from NMI"), v4.1, kernel/time/sched_clock.c.  Before it, sched_clock()
 * read epoch_ns and epoch_cyc inside raw_read_seqcount_begin() /
 * read_seqcount_retry(), and update_sched_clock() (the wrap timer) wrote
 * them between raw_write_seqcount_begin() and _end() with interrupts off.
 * An NMI (perf calls sched_clock() from one) that lands on the CPU whose
 * writer holds the count odd spins in raw_read_seqcount_begin() for a
 * writer that cannot go on until the NMI returns: the CPU deadlocks.  The
 * fix keeps two copies of the read data behind a latch
 * (raw_write_seqcount_latch()); a reader takes the copy the count's low bit
 * names and never waits.
 *
 * Registered here side by side:
 *  - zoo_sc_seqcount: the v4.0 code.  Its read spins for the count to be
 *    even, but only for a budget (50 us plus twice the window, as nmiclock's
 *    own clock=seqcount does), then says it stalled (NMICLOCK_READ_STALLED)
 *    and returns what it read: a literal spin would hang the guest, and a
 *    real lock would splat under lockdep.  nmiclock reports the stall
 *    (target_stalls), and the value read in the middle of the update (the
 *    new epoch_ns with the old epoch_cyc: ahead by the time since the last
 *    update) as a step back on the next read.
 *  - zoo_sc_seqcount_fixed: the v4.1 latch (as in 6.12): no stall, no step.
 *
 * The counter is ktime_get_raw_fast_ns() (mult 1, shift 0: the model keeps
 * the conversion out of the picture), masked to @counter_bits, so readers
 * must move the epoch before a wrap as the real clock does.
 *
 * What was scaled: the writer pauses @window_ns (default 20 us) between
 * the two stores, inside the odd count (the latch: inside each copy's
 * write), so that under emulation an NMI lands there; the kernel's window
 * is a few stores.  The update runs whenever nmiclock's writers call it,
 * not once per wrap.
 *
 * Architectures: the generic sched_clock is arm64's (and other
 * GENERIC_SCHED_CLOCK ones'), not x86's; the race is program order (an NMI
 * on the writer's CPU), so the model shows it on both.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the writer's pause inside its update, ns (default 20000, at most 1000000)");

static unsigned int counter_bits = 40;
module_param(counter_bits, uint, 0444);
MODULE_PARM_DESC(counter_bits, "width of the counter, 32..64 (default 40: a wrap every 18 minutes)");

#define WAIT_BUDGET_NS 50000ULL

static u64 mask;

static u64 counter(void)
{
	return ktime_get_raw_fast_ns() & mask;
}

/* ---- v4.0: one copy under a seqcount ---------------------------------- */

static struct {
	unsigned int seq;
	u64 epoch_ns;
	u64 epoch_cyc;
} cd;

static int seqcount_read(u64 *ns)
{
	u64 start = 0, epoch_ns, epoch_cyc;
	unsigned int seq;
	int stalled = 0;

	do {
		/* raw_read_seqcount_begin(), with a budget. */
		while ((seq = READ_ONCE(cd.seq)) & 1) {
			u64 now = ktime_get_raw_fast_ns();

			if (!start)
				start = now;
			else if (now - start > WAIT_BUDGET_NS + 2ULL * window_ns) {
				stalled = NMICLOCK_READ_STALLED;
				break;
			}
			cpu_relax();
		}
		smp_rmb();
		epoch_cyc = READ_ONCE(cd.epoch_cyc);
		epoch_ns = READ_ONCE(cd.epoch_ns);
		smp_rmb();
	} while (!stalled && READ_ONCE(cd.seq) != seq);
	*ns = epoch_ns + ((counter() - epoch_cyc) & mask);
	return stalled;
}

static void seqcount_update(void)
{
	unsigned long flags;
	u64 cyc, ns;

	raw_local_irq_save(flags);
	cyc = counter();
	ns = cd.epoch_ns + ((cyc - cd.epoch_cyc) & mask);
	WRITE_ONCE(cd.seq, cd.seq + 1);		/* raw_write_seqcount_begin() */
	smp_wmb();
	WRITE_ONCE(cd.epoch_ns, ns);
	ndelay(window_ns);
	WRITE_ONCE(cd.epoch_cyc, cyc);
	smp_wmb();
	WRITE_ONCE(cd.seq, cd.seq + 1);		/* raw_write_seqcount_end() */
	raw_local_irq_restore(flags);
}

/* ---- v4.1: two copies behind a latch ------------------------------------ */

struct clock_read_data {
	u64 epoch_ns;
	u64 epoch_cyc;
};

static struct {
	unsigned int seq;
	struct clock_read_data read_data[2];
} cl;

static int latch_read(u64 *ns)
{
	const struct clock_read_data *rd;
	u64 epoch_ns, epoch_cyc;
	unsigned int seq;

	do {
		seq = smp_load_acquire(&cl.seq);	/* raw_read_seqcount_latch() */
		rd = cl.read_data + (seq & 1);
		epoch_ns = READ_ONCE(rd->epoch_ns);
		epoch_cyc = READ_ONCE(rd->epoch_cyc);
		smp_rmb();
	} while (READ_ONCE(cl.seq) != seq);		/* ..._latch_retry() */
	*ns = epoch_ns + ((counter() - epoch_cyc) & mask);
	return 0;
}

/* raw_write_seqcount_latch(): readers move to the other copy. */
static void latch(void)
{
	smp_wmb();
	WRITE_ONCE(cl.seq, cl.seq + 1);
	smp_wmb();
}

static void latch_write(struct clock_read_data *copy, const struct clock_read_data *rd)
{
	WRITE_ONCE(copy->epoch_ns, rd->epoch_ns);
	ndelay(window_ns);
	WRITE_ONCE(copy->epoch_cyc, rd->epoch_cyc);
}

static void latch_update(void)
{
	struct clock_read_data rd = cl.read_data[0];
	unsigned long flags;
	u64 cyc;

	raw_local_irq_save(flags);
	cyc = counter();
	rd.epoch_ns += (cyc - rd.epoch_cyc) & mask;
	rd.epoch_cyc = cyc;
	/* The odd copy while readers use the even one, then the even one. */
	latch_write(&cl.read_data[1], &rd);
	latch();
	latch_write(&cl.read_data[0], &rd);
	latch();
	raw_local_irq_restore(flags);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_sc_seqcount",
	.read_status = seqcount_read,
	.update = seqcount_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_sc_seqcount_fixed",
	.read_status = latch_read,
	.update = latch_update,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	u64 now;
	int ret;

	if (window_ns > 1000000 || counter_bits < 32 || counter_bits > 64) {
		pr_err("window_ns=%u counter_bits=%u: want window_ns at most 1000000, counter_bits 32..64\n",
		       window_ns, counter_bits);
		return -EINVAL;
	}
	mask = counter_bits == 64 ? ~0ULL : (1ULL << counter_bits) - 1;
	/* Both start at the raw clock's time, so both read CLOCK_MONOTONIC_RAW. */
	now = ktime_get_raw_fast_ns();
	cd.epoch_ns = now;
	cd.epoch_cyc = now & mask;
	cl.read_data[0].epoch_ns = now;
	cl.read_data[0].epoch_cyc = now & mask;
	cl.read_data[1] = cl.read_data[0];
	ret = nmiclock_register_target(&buggy);
	if (ret)
		return ret;
	ret = nmiclock_register_target(&fixed);
	if (ret)
		nmiclock_unregister_target(&buggy);
	return ret;
}

static void __exit zoo_exit(void)
{
	nmiclock_unregister_target(&fixed);
	nmiclock_unregister_target(&buggy);
}

module_init(zoo_init);
module_exit(zoo_exit);
MODULE_DESCRIPTION("nmiclock zoo: 1809bfa44e10, generic sched_clock() under a seqcount read from NMI");
MODULE_LICENSE("GPL");
