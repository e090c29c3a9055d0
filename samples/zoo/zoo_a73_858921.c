// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_a73_858921: Cortex-A73 erratum 858921, a counter read that can be
 * wrong while the counter carries into bit 32, and the read-twice
 * workaround that picks one of the two reads.
 *
 * Worked around by fa8d815fac96 ("arm64: arch_timer: Workaround for
 * Cortex-A73 erratum 858921"), v4.12 (release not verified),
 * drivers/clocksource/arm_arch_timer.c (arm64_858921_read_cntvct_el0()
 * below is the 6.12 one).  The series' cover letter: a Cortex-A73 "whose
 * counter can return a wrong value if read while crossing a 32bit
 * boundary".  The workaround reads twice and
 * returns the first read if bit 32 differs between them, else the second:
 * no loop, no retry bound.
 *
 * That choice says which wrong value it expects.  It is right if a wrong
 * read has bit 32 (and up) from after the carry with the low 32 bits still
 * from before it (all ones): ahead by about 2^32 ticks.  Read first, its bit
 * 32 matches the second read's (after the carry) and the second is taken;
 * read second, its bit 32 differs from the first's (before the carry) and
 * the first is taken.  The opposite tear, bit 32 from before with the low
 * bits from after (back by 2^32), would pass as a second read.  So the
 * injector makes the first tear, and only on the first read in a context
 * on a CPU (task, softirq, hard IRQ and NMI each keep their own state)
 * after a carry, within @fault_ticks of it, where that context's read
 * before it came in the period just before, never on two reads in a row:
 * every wrong value it makes is one the workaround discards.
 *
 * The counter is a clean one, ktime_get_raw_fast_ns() at @counter_khz
 * (24 MHz by default), read through that injector.
 *
 * Registered here side by side:
 *  - zoo_a73_858921: one read of the faulty counter.  nmiclock reports
 *    reference_mismatches (2.7 ms ahead at the defaults), backwards on the
 *    next read on that CPU and cross_cpu_backwards.
 *  - zoo_a73_858921_fixed: the 6.12 workaround, bit 32 read as
 *    @carry_bit.  Nothing to report.
 *
 * What was scaled: the carry is into bit @carry_bit (default 16: every
 * 65536 ticks, 2.7 ms at 24 MHz), not bit 32 (every 179 s), and the
 * workaround tests that bit (carry_bit=32 is the real one); faults are
 * injected, with a chance of one in @fault_every (default 2) for a read
 * that qualifies.  update() only pauses @window_ns: the counter has no
 * software state to update, but nmiclock counts its coverage (window hits)
 * in its target's updates, so a fixed run needs them to reach SUCCESS.
 *
 * Architectures: the erratum and its workaround are arm64 only (Cortex-A73,
 * all revisions); the model is arch-neutral, and only injected faults are
 * catchable: TCG's counter is correct.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bits.h>
#include <linux/delay.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/random.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the pause of update(), ns (default 20000, at most 1000000)");

static unsigned int counter_khz = 24000;
module_param(counter_khz, uint, 0444);
MODULE_PARM_DESC(counter_khz, "rate of the modelled counter, kHz (default 24000, 100..100000)");

static unsigned int fault_every = 2;
module_param(fault_every, uint, 0444);
MODULE_PARM_DESC(fault_every, "one qualifying read (first after a carry) in this many is wrong (default 2, 2..1000000)");

static unsigned int fault_ticks = 64;
module_param(fault_ticks, uint, 0444);
MODULE_PARM_DESC(fault_ticks, "a read this close after a carry, ticks, may be wrong (default 64, 1..256)");

static unsigned int carry_bit = 16;
module_param(carry_bit, uint, 0444);
MODULE_PARM_DESC(carry_bit, "the bit standing for bit 32 (default 16, 12..32)");

/* ---- the faulty counter ------------------------------------------------ */

/* One context level's injector state on one CPU. */
struct inj_ctx {
	u64 rng;		/* xorshift64 */
	u64 last;		/* the true count at its last read */
	bool last_bad;		/* its last read was wrong */
};

/* Task, softirq, hard IRQ, NMI: each level's reads never overlap. */
struct inj_cpu {
	struct inj_ctx ctx[4];
};

static DEFINE_PER_CPU(struct inj_cpu, inj);

static u64 xorshift64(u64 *state)
{
	u64 x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

/* The counter, erratum and all: read_sysreg(cntvct_el0).  Preemption off. */
static u64 read_cntvct(void)
{
	struct inj_ctx *s = &this_cpu_ptr(&inj)->ctx[interrupt_context_level()];
	u64 cnt = mul_u64_u32_div(ktime_get_raw_fast_ns(), counter_khz, 1000000);
	u64 high = cnt >> carry_bit;
	/*
	 * The first read here since the carry, close enough after it, the
	 * read before it here in the period just before: two back-to-back
	 * reads never straddle more than one carry of bit 32 (179 s apart at
	 * 24 MHz), but a vCPU held off between them can straddle two of the
	 * scaled bit, and a second read wrong then has the first's bit
	 * carry_bit: no workaround of this kind could tell.
	 */
	bool bad = !s->last_bad && (s->last >> carry_bit) + 1 == high &&
		   (cnt & (BIT_ULL(carry_bit) - 1)) < fault_ticks &&
		   (u32)xorshift64(&s->rng) % fault_every == 0;

	s->last = cnt;
	s->last_bad = bad;
	if (bad)	/* bit carry_bit and up after the carry, low bits before */
		return cnt | (BIT_ULL(carry_bit) - 1);
	return cnt;
}

static u64 count_ns(u64 cnt)
{
	return mul_u64_u32_div(cnt, 1000000, counter_khz);
}

/* ---- no workaround ------------------------------------------------------ */

static u64 buggy_read(void)
{
	u64 cnt;

	preempt_disable_notrace();
	cnt = read_cntvct();
	preempt_enable_notrace();
	return count_ns(cnt);
}

/* ---- 6.12: arm64_858921_read_cntvct_el0(), bit 32 scaled ---------------- */

static u64 arm64_858921_read_cntvct_el0(void)
{
	u64 old, new;

	old = read_cntvct();
	new = read_cntvct();
	return (((old ^ new) >> carry_bit) & 1) ? old : new;
}

static u64 fixed_read(void)
{
	u64 cnt;

	preempt_disable_notrace();
	cnt = arm64_858921_read_cntvct_el0();
	preempt_enable_notrace();
	return count_ns(cnt);
}

/* The counter has no state to update: only a window for the coverage. */
static void pause_update(void)
{
	ndelay(window_ns);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_a73_858921",
	.read = buggy_read,
	.update = pause_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_a73_858921_fixed",
	.read = fixed_read,
	.update = pause_update,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	unsigned int cpu, i;
	int ret;

	if (window_ns > 1000000 || counter_khz < 100 || counter_khz > 100000 ||
	    fault_every < 2 || fault_every > 1000000 || !fault_ticks || fault_ticks > 256 ||
	    carry_bit < 12 || carry_bit > 32) {
		pr_err("window_ns=%u counter_khz=%u fault_every=%u fault_ticks=%u carry_bit=%u: want window_ns at most 1000000, counter_khz 100..100000, fault_every 2..1000000, fault_ticks 1..256, carry_bit 12..32\n",
		       window_ns, counter_khz, fault_every, fault_ticks, carry_bit);
		return -EINVAL;
	}
	for_each_possible_cpu(cpu)
		for (i = 0; i < ARRAY_SIZE(per_cpu_ptr(&inj, cpu)->ctx); i++)
			per_cpu_ptr(&inj, cpu)->ctx[i].rng = get_random_u64() | 1;
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
MODULE_DESCRIPTION("nmiclock zoo: fa8d815fac96, Cortex-A73 erratum 858921 counter reads at a carry and their workaround");
MODULE_LICENSE("GPL");
