// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_fsl_a008585: Freescale/NXP erratum A-008585, a generic timer counter
 * that may read an erroneous value, and its re-read-until-equal workaround.
 *
 * Worked around by f6dc1576cd51 ("arm64: arch_timer: Work around QorIQ
 * Erratum A-008585"), v4.9 (release not verified),
 * drivers/clocksource/arm_arch_timer.c (the loop below is the 6.12 one,
 * __fsl_a008585_read_reg()).  The Kconfig help says only that the "ARM
 * generic timer may contain an erroneous value"; the
 * workaround reads the counter twice, back to back, until both reads agree
 * ("The number of retries is an arbitrary value well beyond the highest
 * number of iterations the loop has been observed to take": 200), and
 * WARNs once if they never did.
 *
 * The counter is a clean one, ktime_get_raw_fast_ns() at @counter_khz,
 * read through an injector standing for the erratum.  The erroneous value's
 * pattern is not documented; chosen here: the true count plus 1..4095 ticks
 * (up to 41 ms ahead at the default 100 kHz).  It errs ahead on purpose: the
 * workaround can only catch a value that differs from the read next to it,
 * and one too low by exactly the ticks elapsed between the two reads would
 * pass it.  A bad read is never followed by another in the same context on
 * that CPU (task, softirq, hard IRQ and NMI each keep their own state, so
 * an NMI between the two reads of a pair changes nothing): so a pair whose
 * second read is bad always has a good first one, below it, and the loop
 * rejects every bad value.
 *
 * Registered here side by side:
 *  - zoo_fsl_a008585: one read of the faulty counter (no workaround).
 *    nmiclock reports reference_mismatches (the value milliseconds ahead)
 *    and backwards on the next read on that CPU, and cross_cpu_backwards.
 *  - zoo_fsl_a008585_fixed: the 6.12 loop verbatim, but for its
 *    WARN_ON_ONCE(!_retries), which would print from NMI: counted in the
 *    read-only parameter exhausted instead.  Nothing to report.
 *
 * What was scaled: faults are injected, one read in @fault_every (default
 * 64) from a per-CPU, per-context xorshift, not at the counter's changes.
 * The counter runs at 100 kHz by default, not at a 24 MHz-class rate: the
 * workaround needs two back-to-back reads to fall on the same tick, and
 * under TCG a read of the base clock takes a large part of a 24 MHz tick,
 * so at that rate nearly every pair would differ and the loop would run out.
 * At 1 MHz it still did on a loaded host: a fixed run saw a bad value its
 * 200 retries had let through, 1.067 ms ahead (a cross-CPU step back), in
 * one arm64 suite of three beside two other guests; at 100 kHz a pair
 * straddles a tick about a tenth as often.  update() only
 * pauses @window_ns: the counter has no software state to update, but
 * nmiclock counts its coverage (window hits) in its target's updates, so a
 * fixed run needs them to reach SUCCESS.
 *
 * Architectures: the erratum and its workaround are arm64 only (QorIQ
 * LS1043A/LS2080A); the model is arch-neutral, and only injected faults are
 * catchable: TCG's counter is correct.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/random.h>
#include <linux/sysfs.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the pause of update(), ns (default 20000, at most 1000000)");

static unsigned int counter_khz = 100;
module_param(counter_khz, uint, 0444);
MODULE_PARM_DESC(counter_khz, "rate of the modelled counter, kHz (default 100, 100..100000)");

static unsigned int fault_every = 64;
module_param(fault_every, uint, 0444);
MODULE_PARM_DESC(fault_every, "one counter read in this many is erroneous (default 64, 2..1000000)");

static atomic_t exhausted = ATOMIC_INIT(0);

static int exhausted_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&exhausted));
}

static int exhausted_set(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

static const struct kernel_param_ops exhausted_ops = {
	.set = exhausted_set,
	.get = exhausted_get,
};
module_param_cb(exhausted, &exhausted_ops, NULL, 0444);
MODULE_PARM_DESC(exhausted, "read-only: fixed reads whose retries ran out, where the kernel WARNs once");

/* ---- the faulty counter ------------------------------------------------ */

/* One context level's injector state on one CPU. */
struct inj_ctx {
	u64 rng;		/* xorshift64 */
	bool last_bad;		/* its last read was erroneous */
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
	bool bad = !s->last_bad && (u32)xorshift64(&s->rng) % fault_every == 0;

	s->last_bad = bad;
	if (bad)
		cnt += 1 + (xorshift64(&s->rng) & 4095);
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

/* ---- 6.12: __fsl_a008585_read_reg() ------------------------------------- */

/*
 * The number of retries is an arbitrary value well beyond the highest number
 * of iterations the loop has been observed to take.
 */
static u64 fsl_a008585_read_cntvct_el0(void)
{
	u64 _old, _new;
	int _retries = 200;

	do {
		_old = read_cntvct();
		_new = read_cntvct();
		_retries--;
	} while (unlikely(_old != _new) && _retries);

	if (!_retries)		/* WARN_ON_ONCE(!_retries) */
		atomic_inc(&exhausted);
	return _new;
}

static u64 fixed_read(void)
{
	u64 cnt;

	preempt_disable_notrace();
	cnt = fsl_a008585_read_cntvct_el0();
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
	.name = "zoo_fsl_a008585",
	.read = buggy_read,
	.update = pause_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_fsl_a008585_fixed",
	.read = fixed_read,
	.update = pause_update,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	unsigned int cpu, i;
	int ret;

	if (window_ns > 1000000 || counter_khz < 100 || counter_khz > 100000 ||
	    fault_every < 2 || fault_every > 1000000) {
		pr_err("window_ns=%u counter_khz=%u fault_every=%u: want window_ns at most 1000000, counter_khz 100..100000, fault_every 2..1000000\n",
		       window_ns, counter_khz, fault_every);
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
MODULE_DESCRIPTION("nmiclock zoo: f6dc1576cd51, FSL erratum A-008585 counter reads and their re-read workaround");
MODULE_LICENSE("GPL");
