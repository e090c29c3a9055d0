// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_cyc2ns: x86 cyc2ns scale and offset, two words an NMI can land between.
 *
 * Fixed by 20d1c86a5776 ("sched/clock, x86: Rewrite cyc2ns() to avoid the
 * need to disable IRQs"), v3.14, arch/x86/include/asm/timer.h (and,
 * unverified, arch/x86/kernel/tsc.c).  Before it, sched_clock() turned TSC
 * cycles into ns as per_cpu(cyc2ns_offset) + mult_frac(cyc,
 * per_cpu(cyc2ns), 1 << 10), and set_cyc2ns_scale() (a cpufreq
 * transition, a recalibration) stored the new scale and then the new
 * offset, two per-CPU words, with interrupts off.
 * Interrupts off does not hold off an NMI, and perf calls sched_clock() from
 * one: an NMI between the two stores converts with the new scale and the
 * old offset.  The commit "avoids a problem when getting an NMI while
 * changing the cyc2ns data" by keeping whole versions of {mul, shift,
 * offset}, a reader always taking a coherent one.  The commit itself used a
 * two-entry ring whose writers wait for readers (as recalled; its successor
 * says "the writers block"); that successor, 59eaef78bfea ("x86/tsc:
 * Remodel cyc2ns to use seqcount_latch()"), made it the latch 6.12 has,
 * and that is what the fixed form models.
 *
 * The model's TSC is one that changes rate with the CPU's frequency (no
 * constant_tsc): update() is a cpufreq transition of this CPU between 1 and
 * 2 GHz followed by set_cyc2ns_scale(), which keeps ns continuous through
 * the offset (84599f8a59e7, see zoo_cpufreq).  The counter is not a
 * register: it is ktime_get_raw_fast_ns() since the last frequency change,
 * times the frequency, plus the cycles counted until then, all since module
 * load.  The model keeps the frequency and that starting point in the
 * cyc2ns data (v3.13: the scale names the frequency, 1024 is 1 GHz and 512
 * 2 GHz; the latch: each copy), so the counter changes frequency at the
 * instant the data naming it is published.  A real TSC changes when the
 * hardware does, a little apart from the notifier, and sched_clock() is off
 * by what it counts in between: small, not this bug, and left out so that
 * a whole version of the data always gives the raw clock's time exactly.
 *
 * Registered here side by side:
 *  - zoo_cyc2ns: the v3.13 code.  Read with interrupts off (as
 *    cycles_2_ns() did), updated as set_cyc2ns_scale() did, with a pause of
 *    @window_ns between the scale's store and the offset's.  An NMI on the
 *    updating CPU inside the pause reads the new scale with the old offset,
 *    off by tsc_now * (new - old scale) >> 10: half the cycles counted
 *    since load, between half and all of the time since load.  Going to
 *    2 GHz that is a step back in the NMI itself; going to 1 GHz a jump
 *    forward, and the next read steps back.  nmiclock reports backwards and
 *    cross_cpu_backwards of that size, and reference_mismatches.
 *  - zoo_cyc2ns_fixed: the 6.12 code (cyc2ns_read_begin(), a latch of two
 *    copies of {mul, shift, offset} per CPU, mul_u64_u32_shr()): no step,
 *    no rate error, its time is the raw clock's.
 *
 * What was scaled: the writer pauses @window_ns (default 20 us) between the
 * stores (the latch: inside each copy's write), so that under emulation an
 * NMI lands there; the kernel's window is one store.  Transitions come as
 * often as nmiclock's writers call update(), each one doubling or halving
 * the frequency, on the CPU the writer runs on (set_cyc2ns_scale() updates
 * that CPU's data).  Cycles count from module load, so that the torn value
 * is off by seconds rather than by years.
 *
 * Architectures: x86 only (cyc2ns is the TSC's); the race is program order
 * (an NMI on the writer's CPU), so the model shows it on any.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/clocksource.h>
#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/math.h>
#include <linux/math64.h>
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

#define CYC2NS_SCALE_FACTOR 10	/* 2^10, carefully chosen (v3.13) */

static u64 load_ns;

/* Where the counter was when the CPU last took a frequency. */
struct tsc_start {
	u64 t0;			/* ktime_get_raw_fast_ns() then */
	u64 cyc0;		/* the counter then */
};

/* The model's rdtsc(): @cyc0 plus the cycles at frequency @f since @t0. */
static u64 tsc_at(u64 t0, u64 cyc0, int f, u64 now)
{
	s64 d = now - t0;

	return cyc0 + (d > 0 ? d : 0) * cycles_per_ns[f];
}

/* ---- v3.13: per-CPU scale and offset, two words ------------------------- */

static unsigned long scale_v313[2];

struct c2n_v313 {
	unsigned long cyc2ns;		/* per_cpu(cyc2ns): the scale */
	unsigned long long cyc2ns_offset; /* per_cpu(cyc2ns_offset) */
	struct tsc_start tsc[2];	/* the model's TSC, per frequency */
};

static DEFINE_PER_CPU(struct c2n_v313, c2n_v313);

/* Which frequency a scale is the one of. */
static int freq_of(unsigned long scale)
{
	return scale == scale_v313[1];
}

/* native_sched_clock(): rdtsc, then __cycles_2_ns(), interrupts off. */
static u64 v313_read(void)
{
	struct c2n_v313 *c;
	unsigned long flags, scale;
	u64 tsc, ns;
	int f;

	raw_local_irq_save(flags);
	c = this_cpu_ptr(&c2n_v313);
	scale = READ_ONCE(c->cyc2ns);
	f = freq_of(scale);
	tsc = tsc_at(READ_ONCE(c->tsc[f].t0), READ_ONCE(c->tsc[f].cyc0), f,
		     ktime_get_raw_fast_ns());
	ns = READ_ONCE(c->cyc2ns_offset);
	ns += mult_frac(tsc, scale, 1UL << CYC2NS_SCALE_FACTOR);
	raw_local_irq_restore(flags);
	return ns;
}

/* A transition of this CPU, then set_cyc2ns_scale(khz, this CPU). */
static void v313_update(void)
{
	unsigned long flags, scale;
	unsigned long long tsc_now, ns_now;
	struct c2n_v313 *c;
	int f;
	u64 now;

	raw_local_irq_save(flags);
	c = this_cpu_ptr(&c2n_v313);
	f = !freq_of(c->cyc2ns);
	now = ktime_get_raw_fast_ns();
	tsc_now = tsc_at(c->tsc[!f].t0, c->tsc[!f].cyc0, !f, now);
	/* Not named by the scale yet: no reader looks at it. */
	WRITE_ONCE(c->tsc[f].t0, now);
	WRITE_ONCE(c->tsc[f].cyc0, tsc_now);
	ns_now = c->cyc2ns_offset +
		 mult_frac(tsc_now, c->cyc2ns, 1UL << CYC2NS_SCALE_FACTOR);
	scale = scale_v313[f];
	barrier();		/* an NMI on this CPU sees program order */
	WRITE_ONCE(c->cyc2ns, scale);	/* *scale = ...: the new frequency */
	ndelay(window_ns);
	WRITE_ONCE(c->cyc2ns_offset,
		   ns_now - mult_frac(tsc_now, scale, 1UL << CYC2NS_SCALE_FACTOR));
	raw_local_irq_restore(flags);
}

/* ---- 6.12: two copies of {mul, shift, offset} behind a latch ------------ */

static u32 mul_612[2], shift_612[2];

struct cyc2ns_data {
	u32 cyc2ns_mul;
	u32 cyc2ns_shift;
	u64 cyc2ns_offset;
	/* The model's TSC: the frequency this copy is for, and its start. */
	u64 tsc_t0;
	u64 tsc_cyc0;
	u32 freq;
};

struct cyc2ns {
	struct cyc2ns_data data[2];
	unsigned int seq;
};

static DEFINE_PER_CPU(struct cyc2ns, cyc2ns);

/* __cyc2ns_read(): the copy the count names; again if a writer moved it. */
static void cyc2ns_read(struct cyc2ns_data *data)
{
	unsigned int seq, idx;

	do {
		seq = this_cpu_read(cyc2ns.seq);
		idx = seq & 1;
		data->cyc2ns_offset = this_cpu_read(cyc2ns.data[idx].cyc2ns_offset);
		data->cyc2ns_mul = this_cpu_read(cyc2ns.data[idx].cyc2ns_mul);
		data->cyc2ns_shift = this_cpu_read(cyc2ns.data[idx].cyc2ns_shift);
		data->tsc_t0 = this_cpu_read(cyc2ns.data[idx].tsc_t0);
		data->tsc_cyc0 = this_cpu_read(cyc2ns.data[idx].tsc_cyc0);
		data->freq = this_cpu_read(cyc2ns.data[idx].freq);
	} while (unlikely(seq != this_cpu_read(cyc2ns.seq)));
}

/* native_sched_clock() -> cycles_2_ns(): preemption off, interrupts on. */
static u64 latch_read(void)
{
	struct cyc2ns_data data;
	u64 tsc, ns;

	preempt_disable_notrace();
	cyc2ns_read(&data);
	tsc = tsc_at(data.tsc_t0, data.tsc_cyc0, data.freq, ktime_get_raw_fast_ns());
	ns = data.cyc2ns_offset;
	ns += mul_u64_u32_shr(tsc, data.cyc2ns_mul, data.cyc2ns_shift);
	preempt_enable_notrace();
	return ns;
}

/* raw_write_seqcount_latch(): readers move to the other copy. */
static void latch(struct cyc2ns *c2n)
{
	smp_wmb();
	WRITE_ONCE(c2n->seq, c2n->seq + 1);
	smp_wmb();
}

static void copy_write(struct cyc2ns_data *copy, const struct cyc2ns_data *data)
{
	WRITE_ONCE(copy->cyc2ns_mul, data->cyc2ns_mul);
	WRITE_ONCE(copy->cyc2ns_shift, data->cyc2ns_shift);
	WRITE_ONCE(copy->freq, data->freq);
	ndelay(window_ns);
	WRITE_ONCE(copy->cyc2ns_offset, data->cyc2ns_offset);
	WRITE_ONCE(copy->tsc_t0, data->tsc_t0);
	WRITE_ONCE(copy->tsc_cyc0, data->tsc_cyc0);
}

/* A transition of this CPU, then __set_cyc2ns_scale(khz, this CPU, tsc_now). */
static void latch_update(void)
{
	struct cyc2ns *c2n;
	struct cyc2ns_data data;
	unsigned long long tsc_now, ns_now;
	unsigned long flags;
	u64 now;
	u32 f;

	raw_local_irq_save(flags);
	c2n = this_cpu_ptr(&cyc2ns);
	data = c2n->data[0];	/* both copies agree between updates */
	f = !data.freq;
	now = ktime_get_raw_fast_ns();
	tsc_now = tsc_at(data.tsc_t0, data.tsc_cyc0, data.freq, now);
	ns_now = data.cyc2ns_offset +
		 mul_u64_u32_shr(tsc_now, data.cyc2ns_mul, data.cyc2ns_shift);
	data.cyc2ns_mul = mul_612[f];
	data.cyc2ns_shift = shift_612[f];
	data.cyc2ns_offset = ns_now -
		mul_u64_u32_shr(tsc_now, data.cyc2ns_mul, data.cyc2ns_shift);
	data.freq = f;
	data.tsc_t0 = now;
	data.tsc_cyc0 = tsc_now;
	latch(c2n);
	copy_write(&c2n->data[0], &data);
	latch(c2n);
	copy_write(&c2n->data[1], &data);
	raw_local_irq_restore(flags);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_cyc2ns",
	.read = v313_read,
	.update = v313_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_cyc2ns_fixed",
	.read = latch_read,
	.update = latch_update,
	.owner = THIS_MODULE,
};

static void __init conversions(void)
{
	int f;

	for (f = 0; f < 2; f++) {
		/* v3.13 set_cyc2ns_scale() */
		scale_v313[f] = ((NSEC_PER_MSEC << CYC2NS_SCALE_FACTOR) + khz[f] / 2) / khz[f];
		/* 6.12 __set_cyc2ns_scale() */
		clocks_calc_mult_shift(&mul_612[f], &shift_612[f], khz[f], NSEC_PER_MSEC, 0);
		if (shift_612[f] == 32) {
			shift_612[f] = 31;
			mul_612[f] >>= 1;
		}
	}
}

static int __init zoo_init(void)
{
	int cpu, ret;

	if (window_ns > 1000000) {
		pr_err("window_ns=%u: want at most 1000000\n", window_ns);
		return -EINVAL;
	}
	conversions();
	/* Every CPU at 1 GHz from cycle 0 now; both read the raw clock's time. */
	load_ns = ktime_get_raw_fast_ns();
	for_each_possible_cpu(cpu) {
		struct c2n_v313 *c = per_cpu_ptr(&c2n_v313, cpu);
		struct cyc2ns *c2n = per_cpu_ptr(&cyc2ns, cpu);

		c->cyc2ns = scale_v313[0];
		c->cyc2ns_offset = load_ns;
		c->tsc[0].t0 = load_ns;
		c->tsc[0].cyc0 = 0;
		c->tsc[1] = c->tsc[0];
		c2n->data[0] = (struct cyc2ns_data){
			.cyc2ns_mul = mul_612[0],
			.cyc2ns_shift = shift_612[0],
			.cyc2ns_offset = load_ns,
			.tsc_t0 = load_ns,
			.tsc_cyc0 = 0,
			.freq = 0,
		};
		c2n->data[1] = c2n->data[0];
		c2n->seq = 0;
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
MODULE_DESCRIPTION("nmiclock zoo: 20d1c86a5776, x86 cyc2ns scale and offset torn by an NMI");
MODULE_LICENSE("GPL");
