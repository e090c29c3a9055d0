// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_cpufreq: sched_clock() = cycles * scale, and cpufreq changes the scale.
 *
 * Fixed by 84599f8a59e7 ("sched, x86: Fix cpufreq + sched_clock() TSC
 * scaling"), 2009, for v2.6.30 (release and date unverified),
 * arch/x86/include/asm/timer.h (and, as recalled but not verified,
 * arch/x86/kernel/tsc.c's set_cyc2ns_scale()).  On a TSC whose rate
 * follows the CPU's frequency, the cpufreq notifier gives the CPU a new
 * per-CPU cyc2ns scale at each transition, and sched_clock() was
 * cyc * per_cpu(cyc2ns) >> CYC2NS_SCALE_FACTOR: the absolute value jumps.
 * "Suppose our current cycle count is 10, and we have a multiplier of 5
 * ... changes the multiplier to say 3 or 7, which would result in our time
 * being resp. 30 or 70."  The fix adds a per-CPU offset chosen at each
 * change so that the time before and after it is the same:
 * ns = per_cpu(cyc2ns_offset) + (cyc * per_cpu(cyc2ns) >> 10).
 *
 * The model's TSC is ktime_get_raw_fast_ns() since the CPU's last frequency
 * change, times the frequency (1 or 2 GHz), plus the cycles counted until
 * then, all since module load.  update() is a transition of this CPU to the
 * other frequency, and the notifier's set_cyc2ns_scale() for it.  The model
 * keeps the frequency (and where the counter took it) with the scale, which
 * names it (1024 is 1 GHz, 512 is 2 GHz), so the counter changes frequency
 * at the instant its scale is published (see zoo_cyc2ns on why).
 *
 * Registered here side by side:
 *  - zoo_cpufreq: the code before the fix, no offset.  Its time is ns
 *    since load until the first transition; then each transition of a CPU
 *    multiplies its time by 2 or by 1/2 at once: going to 2 GHz, cycles
 *    counted at 1 GHz now count half; going to 1 GHz, cycles counted at
 *    2 GHz now count double.  Every update steps the updating CPU's time
 *    back or forward by half its cycle count, seconds, with no race
 *    needed: nmiclock reports backwards, cross_cpu_backwards (the CPUs'
 *    times part too) and reference_mismatches from the first update on.
 *  - zoo_cpufreq_fixed: the fix's offset.  84599f8a59e7 stored the scale
 *    and then the offset as two words: an NMI in between sees the new scale
 *    with the old offset, the bug 20d1c86a5776 fixed (zoo_cyc2ns).  So that
 *    this form shows only this commit's fix, it publishes {scale, offset}
 *    behind a latch of two copies per CPU, as 59eaef78bfea does: no step,
 *    no rate error.
 *
 * What was scaled: nothing needs widening, the jump is the update itself.
 * Transitions come as often as nmiclock's writers call update(), each one
 * doubling or halving the frequency, on the CPU the writer runs on; each
 * takes @window_ns with interrupts off (the buggy form's before its one
 * store, as if the transition took that long; the latch: inside each
 * copy's write), so that the fixed form's run meets its updates.  Cycles
 * count from module load, so that the jump is seconds rather than years.
 *
 * Architectures: x86 with a TSC that is not constant_tsc (older CPUs); the
 * bug is arithmetic, so the model shows it on any.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the writer's pause inside its update, ns (default 20000, at most 1000000)");

/* The two frequencies a transition switches between, kHz, and cycles/ns. */
static const unsigned long khz[2] = { 1000000, 2000000 };
static const u64 cycles_per_ns[2] = { 1, 2 };

#define CYC2NS_SCALE_FACTOR 10	/* 2^10, carefully chosen */

static unsigned long scale_of[2];
static u64 load_ns;

/* Which frequency a scale is the one of. */
static int freq_of(unsigned long scale)
{
	return scale == scale_of[1];
}

/* Where the counter was when the CPU last took a frequency. */
struct tsc_start {
	u64 t0;			/* ktime_get_raw_fast_ns() then */
	u64 cyc0;		/* the counter then */
};

/* The model's rdtsc(): @s's cycles plus those at frequency @f since. */
static u64 tsc_at(const struct tsc_start *s, int f, u64 now)
{
	s64 d = now - s->t0;

	return s->cyc0 + (d > 0 ? d : 0) * cycles_per_ns[f];
}

/* ---- before the fix: the scale alone ---------------------------------- */

struct c2n_nooff {
	unsigned long cyc2ns;		/* per_cpu(cyc2ns): the scale */
	struct tsc_start tsc[2];	/* the model's TSC, per frequency */
};

static DEFINE_PER_CPU(struct c2n_nooff, c2n_nooff);

/* sched_clock(): cycles_2_ns(rdtsc()), interrupts off. */
static u64 nooff_read(void)
{
	struct c2n_nooff *c;
	struct tsc_start s;
	unsigned long flags, scale;
	u64 cyc;
	int f;

	raw_local_irq_save(flags);
	c = this_cpu_ptr(&c2n_nooff);
	scale = READ_ONCE(c->cyc2ns);
	f = freq_of(scale);
	s.t0 = READ_ONCE(c->tsc[f].t0);
	s.cyc0 = READ_ONCE(c->tsc[f].cyc0);
	cyc = tsc_at(&s, f, ktime_get_raw_fast_ns());
	raw_local_irq_restore(flags);
	return cyc * scale >> CYC2NS_SCALE_FACTOR;
}

/* A transition of this CPU, then set_cyc2ns_scale(khz, this CPU). */
static void nooff_update(void)
{
	struct c2n_nooff *c;
	unsigned long flags;
	u64 now, tsc_now;
	int f;

	raw_local_irq_save(flags);
	ndelay(window_ns);
	c = this_cpu_ptr(&c2n_nooff);
	f = !freq_of(c->cyc2ns);
	now = ktime_get_raw_fast_ns();
	tsc_now = tsc_at(&c->tsc[!f], !f, now);
	/* Not named by the scale yet: no reader looks at it. */
	WRITE_ONCE(c->tsc[f].t0, now);
	WRITE_ONCE(c->tsc[f].cyc0, tsc_now);
	barrier();		/* an NMI on this CPU sees program order */
	WRITE_ONCE(c->cyc2ns, scale_of[f]);	/* and the new frequency */
	raw_local_irq_restore(flags);
}

/* ---- the fix: scale and offset, behind a latch ---------------------- */

struct c2n_data {
	unsigned long cyc2ns;		/* the scale, naming the frequency */
	unsigned long long cyc2ns_offset;
	struct tsc_start tsc;		/* the model's TSC at that frequency */
};

struct c2n_latch {
	unsigned int seq;
	struct c2n_data data[2];
};

static DEFINE_PER_CPU(struct c2n_latch, c2n_latch);

/* __cycles_2_ns() of 84599f8a59e7, on one whole copy. */
static u64 cycles_2_ns(const struct c2n_data *d, u64 cyc)
{
	return d->cyc2ns_offset + (cyc * d->cyc2ns >> CYC2NS_SCALE_FACTOR);
}

static u64 latch_read(void)
{
	const struct c2n_data *copy;
	struct c2n_latch *l;
	struct c2n_data d;
	unsigned int seq;
	u64 ns;

	preempt_disable_notrace();
	l = this_cpu_ptr(&c2n_latch);
	do {
		seq = smp_load_acquire(&l->seq);	/* raw_read_seqcount_latch() */
		copy = l->data + (seq & 1);
		d.cyc2ns = READ_ONCE(copy->cyc2ns);
		d.cyc2ns_offset = READ_ONCE(copy->cyc2ns_offset);
		d.tsc.t0 = READ_ONCE(copy->tsc.t0);
		d.tsc.cyc0 = READ_ONCE(copy->tsc.cyc0);
		smp_rmb();
	} while (READ_ONCE(l->seq) != seq);		/* ..._latch_retry() */
	ns = cycles_2_ns(&d, tsc_at(&d.tsc, freq_of(d.cyc2ns), ktime_get_raw_fast_ns()));
	preempt_enable_notrace();
	return ns;
}

/* raw_write_seqcount_latch(): readers move to the other copy. */
static void latch(struct c2n_latch *l)
{
	smp_wmb();
	WRITE_ONCE(l->seq, l->seq + 1);
	smp_wmb();
}

static void copy_write(struct c2n_data *copy, const struct c2n_data *d)
{
	WRITE_ONCE(copy->cyc2ns, d->cyc2ns);
	ndelay(window_ns);
	WRITE_ONCE(copy->cyc2ns_offset, d->cyc2ns_offset);
	WRITE_ONCE(copy->tsc.t0, d->tsc.t0);
	WRITE_ONCE(copy->tsc.cyc0, d->tsc.cyc0);
}

static void latch_update(void)
{
	struct c2n_latch *l;
	struct c2n_data d;
	unsigned long flags;
	u64 now, tsc_now, ns_now;
	int f;

	raw_local_irq_save(flags);
	l = this_cpu_ptr(&c2n_latch);
	d = l->data[0];		/* both copies agree between updates */
	f = !freq_of(d.cyc2ns);
	now = ktime_get_raw_fast_ns();
	tsc_now = tsc_at(&d.tsc, !f, now);
	ns_now = cycles_2_ns(&d, tsc_now);
	d.cyc2ns = scale_of[f];
	d.cyc2ns_offset = ns_now - (tsc_now * d.cyc2ns >> CYC2NS_SCALE_FACTOR);
	d.tsc.t0 = now;
	d.tsc.cyc0 = tsc_now;
	latch(l);
	copy_write(&l->data[0], &d);
	latch(l);
	copy_write(&l->data[1], &d);
	raw_local_irq_restore(flags);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_cpufreq",
	.read = nooff_read,
	.update = nooff_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_cpufreq_fixed",
	.read = latch_read,
	.update = latch_update,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	int cpu, f, ret;

	if (window_ns > 1000000) {
		pr_err("window_ns=%u: want at most 1000000\n", window_ns);
		return -EINVAL;
	}
	/* set_cyc2ns_scale(): 1024 at 1 GHz, 512 at 2 GHz */
	for (f = 0; f < 2; f++)
		scale_of[f] = (NSEC_PER_MSEC << CYC2NS_SCALE_FACTOR) / khz[f];
	/* Every CPU at 1 GHz from cycle 0 now: both forms read ns since load. */
	load_ns = ktime_get_raw_fast_ns();
	for_each_possible_cpu(cpu) {
		struct c2n_nooff *c = per_cpu_ptr(&c2n_nooff, cpu);
		struct c2n_latch *l = per_cpu_ptr(&c2n_latch, cpu);

		c->cyc2ns = scale_of[0];
		c->tsc[0].t0 = load_ns;
		c->tsc[0].cyc0 = 0;
		c->tsc[1] = c->tsc[0];
		l->seq = 0;
		l->data[0].cyc2ns = scale_of[0];
		l->data[0].cyc2ns_offset = 0;
		l->data[0].tsc = c->tsc[0];
		l->data[1] = l->data[0];
	}
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
MODULE_DESCRIPTION("nmiclock zoo: 84599f8a59e7, sched_clock() TSC scaled by cpufreq without an offset");
MODULE_LICENSE("GPL");
