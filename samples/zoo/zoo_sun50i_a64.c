// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_sun50i_a64: Allwinner A64 "UNKNOWN1", a counter whose low bits read
 * all zeros or all ones while a higher bit rolls over, and the workaround
 * that re-reads such values.
 *
 * Worked around by c950ca8c35ee ("clocksource/drivers/arch_timer:
 * Workaround for Allwinner A64 timer instability"), and its mask narrowed
 * by 8b33dfe0ba1c ("clocksource/arm_arch_timer: Improve Allwinner A64 timer
 * workaround"), 2021 (releases not verified),
 * drivers/clocksource/arm_arch_timer.c (the loop below is the 6.12 one,
 * __sun50i_a64_read_reg()).  c950ca8c35ee: "instability in the low bits of
 * CNTVCT at the point a high bit rolls over.  This leads to power-of-two
 * cycle forward and backward jumps.  (Testing shows that forward jumps are
 * about twice as likely as backward jumps.)"; the 6.12 comment: "indeterminate
 * while bit 10 or greater is rolling over ... (7ff -> 000 -> 800) and
 * forward (7ff -> fff -> 800)".  Its check was GENMASK(9, 0), ten low bits;
 * 8b33dfe0: "on some chips, occasionally only the lowest 9 bits would read
 * as the anomalous value.  During these reads (which still happen only when
 * bit 10 [rolls over]), bit 9 would read as the correct value", hence
 * GENMASK(8, 0): a read whose low 9 bits are all 0 or all 1 is read again
 * (150 tries, "3 consecutive 24 MHz counter periods"), then a WARN once.
 * So the comment's "bit 10" and the 9-bit mask agree: the bad reads come
 * at rollovers of bit 10 and up, and some chips garble only 9 bits.
 *
 * The counter is a clean one, ktime_get_raw_fast_ns() at @counter_khz
 * (24 MHz by default), read through an injector standing for the erratum.
 * A read within @fault_ticks of a multiple of 2^10 (a rollover of bit 10 or
 * above) may be bad: one bad read in four has only its low 9 bits all 0 or
 * all 1 (bit 9 and up right: about 512 ticks back or ahead), the others
 * have the bits below the highest rolling bit (10 or 11: "7ff") all 1 with
 * the new high bits (ahead) or all 0 with the old (back), ahead twice as
 * often.  Each has its low 9 bits all 0 or all 1, so the 6.12 check
 * rejects every one (c950ca8c35ee's 10-bit check would pass the 9-bit
 * ones).  A bad read is never followed by another in the same context on
 * that CPU, so the loop moves on.
 *
 * Registered here side by side:
 *  - zoo_sun50i_a64: one read of the faulty counter.  nmiclock reports
 *    reference_mismatches (21, 43 or 85 us off), backwards (a read back, or
 *    the next read after one ahead) and cross_cpu_backwards.
 *  - zoo_sun50i_a64_fixed: the 6.12 loop verbatim, but for its
 *    WARN_ON_ONCE(!_retries), which would print from NMI: counted in the
 *    read-only parameter exhausted instead.  Nothing to report.
 *
 * What was scaled: faults are injected, with a chance of one in
 * @fault_every (default 2) for a read within @fault_ticks (default 4
 * ticks, 167 ns) of each rollover of bit 10, every 1024 ticks (43 us): the
 * hardware's bad window is shorter and comes at random.  The jumps stop at
 * 2^11 ticks (the chips' rollovers of higher bits gave jumps of up to an
 * hour).  update() only pauses @window_ns: the counter has no software
 * state to update, but nmiclock counts its coverage (window hits) in its
 * target's updates, so a fixed run needs them to reach SUCCESS.
 *
 * Architectures: the erratum and its workaround are arm64 only (Allwinner
 * A64); the model is arch-neutral, and only injected faults are catchable:
 * TCG's counter is correct.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/bits.h>
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

static unsigned int counter_khz = 24000;
module_param(counter_khz, uint, 0444);
MODULE_PARM_DESC(counter_khz, "rate of the modelled counter, kHz (default 24000, 100..100000)");

static unsigned int fault_every = 2;
module_param(fault_every, uint, 0444);
MODULE_PARM_DESC(fault_every, "one read in this many near a rollover is bad (default 2, 2..1000000)");

static unsigned int fault_ticks = 4;
module_param(fault_ticks, uint, 0444);
MODULE_PARM_DESC(fault_ticks, "reads this close to a rollover of bit 10, ticks, may be bad (default 4, 1..256)");

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

#define ROLL_BIT 10	/* "while bit 10 or greater is rolling over" */

/* The counter, erratum and all: read_sysreg(cntvct_el0).  Preemption off. */
static u64 read_cntvct(void)
{
	struct inj_ctx *s = &this_cpu_ptr(&inj)->ctx[interrupt_context_level()];
	u64 cnt = mul_u64_u32_div(ktime_get_raw_fast_ns(), counter_khz, 1000000);
	/* The multiple of 2^10 nearest cnt, and whether cnt is near it. */
	u64 d = (cnt + fault_ticks) & (BIT_ULL(ROLL_BIT) - 1);
	u64 b = cnt + fault_ticks - d;
	bool bad = !s->last_bad && d < 2 * fault_ticks && b &&
		   (u32)xorshift64(&s->rng) % fault_every == 0;
	unsigned int bits;
	u32 r;

	s->last_bad = bad;
	if (!bad)
		return cnt;
	r = (u32)xorshift64(&s->rng);
	if (r % 4 == 0)		/* 8b33dfe0: the low 9 bits only */
		return (cnt & ~GENMASK_ULL(8, 0)) | (r & 4 ? GENMASK_ULL(8, 0) : 0);
	/* The bits below the highest one rolling over, 10 or 11 of them. */
	bits = min(__ffs64(b), ROLL_BIT + 1);
	if ((r >> 3) % 3)	/* ahead: new high bits, low bits all 1 */
		return b | (BIT_ULL(bits) - 1);
	return b - BIT_ULL(bits);	/* back: old high bits, low bits all 0 */
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

/* ---- 6.12: __sun50i_a64_read_reg() -------------------------------------- */

/*
 * The low bits of the counter registers are indeterminate while bit 10 or
 * greater is rolling over. Since the counter value can jump both backward
 * (7ff -> 000 -> 800) and forward (7ff -> fff -> 800), ignore register values
 * with all ones or all zeros in the low bits. Bound the loop by the maximum
 * number of CPU cycles in 3 consecutive 24 MHz counter periods.
 */
static u64 sun50i_a64_read_cntvct_el0(void)
{
	u64 _val;
	int _retries = 150;

	do {
		_val = read_cntvct();
		_retries--;
	} while (((_val + 1) & GENMASK(8, 0)) <= 1 && _retries);

	if (!_retries)		/* WARN_ON_ONCE(!_retries) */
		atomic_inc(&exhausted);
	return _val;
}

static u64 fixed_read(void)
{
	u64 cnt;

	preempt_disable_notrace();
	cnt = sun50i_a64_read_cntvct_el0();
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
	.name = "zoo_sun50i_a64",
	.read = buggy_read,
	.update = pause_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_sun50i_a64_fixed",
	.read = fixed_read,
	.update = pause_update,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	unsigned int cpu, i;
	int ret;

	if (window_ns > 1000000 || counter_khz < 100 || counter_khz > 100000 ||
	    fault_every < 2 || fault_every > 1000000 || !fault_ticks || fault_ticks > 256) {
		pr_err("window_ns=%u counter_khz=%u fault_every=%u fault_ticks=%u: want window_ns at most 1000000, counter_khz 100..100000, fault_every 2..1000000, fault_ticks 1..256\n",
		       window_ns, counter_khz, fault_every, fault_ticks);
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
MODULE_DESCRIPTION("nmiclock zoo: c950ca8c35ee and 8b33dfe0ba1c, Allwinner A64 counter rollover reads and their workaround");
MODULE_LICENSE("GPL");
