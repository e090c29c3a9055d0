// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_evcntr32: a 64-bit PMU event counter read through a u32.
 *
 * Fixed by 7bb8bc6eb550 ("arm64: perf: Fix 64-bit event counter read
 * truncation"), Rob Herring, v5.12-rc, arch/arm64/kernel/perf_event.c.
 * 0fdf1bb75953 ("arm64: perf: Avoid PMXEV* indirection") had "changed
 * armv8pmu_read_evcntr() to return a u32 instead of u64.  The result is
 * silent truncation of the event counter when using 64-bit counters": the
 * long counters of PMUv3p5 (a chained pair is read half by half, as
 * recalled, and was not hit).  Every read loses bits 63:32: the value
 * falls by 2^32 at each carry out of bit 31, and perf's
 * armpmu_event_update(), taking (new - prev) & max_period with max_period
 * all ones, counts that as a delta near 2^64.  The fix: it returns u64
 * again.
 *
 * The model's counter counts ns (as a cycles event at 1 GHz would):
 * ktime_get_raw_fast_ns() plus an offset that puts it @lead_ms below 2^32 at
 * module load, so its first carry out of bit 31 comes @lead_ms after load
 * and the next every 2^32 ns (4.29 s).
 *
 * Registered here side by side:
 *  - zoo_evcntr32: read through the v5.11 armv8pmu_read_evcntr(), a u32.
 *    At each carry nmiclock reports backwards on every CPU (and
 *    cross_cpu_backwards) of 2^32 ns less what passed between the reads,
 *    max_backstep_ns near 4294967296, and reference_mismatches from then
 *    on; a run of 4.3 s or more meets at least one carry.
 *  - zoo_evcntr32_fixed: read through the u64 one: it is the raw clock,
 *    offset.
 *
 * The bug has no writer: a PMU counter counts by itself.  update() is a
 * stand-in for the counter's overflow interrupt, armv8pmu_handle_irq(),
 * which reads the counter as armpmu_event_update() does and keeps it as
 * prev_count (nothing a read uses).  nmiclock asks no window hits of a
 * target without an update, so it is there for the coverage count only:
 * each call takes @window_ns with interrupts off, so that the run meets
 * its updates as it does the other entries'.
 *
 * What was scaled: nothing was narrowed (2^32 ns is 4.29 s); the counter
 * starts near the carry, by the load-time offset, so that the first one
 * comes within @lead_ms.
 *
 * Architectures: arm64 with FEAT_PMUv3p5 (64-bit event counters); the bug
 * is a type, so the model shows it on any.
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
MODULE_PARM_DESC(window_ns, "the overflow handler's pause, ns (default 20000, at most 1000000)");

static unsigned int lead_ms = 1000;
module_param(lead_ms, uint, 0444);
MODULE_PARM_DESC(lead_ms, "ms from load to the counter's first carry out of bit 31 (default 1000, 1..4294)");

static u64 offset;
static u64 prev_count;		/* hwc->prev_count: the handler's last read */

/* read_pmevcntrn(): the 64-bit counter register. */
static u64 read_pmevcntrn(void)
{
	return ktime_get_raw_fast_ns() + offset;
}

/* v5.11 */
static inline u32 armv8pmu_read_evcntr_u32(void)
{
	return read_pmevcntrn();
}

/* v5.12 */
static inline u64 armv8pmu_read_evcntr(void)
{
	return read_pmevcntrn();
}

static u64 truncated_read(void)
{
	return armv8pmu_read_evcntr_u32();
}

static u64 full_read(void)
{
	return armv8pmu_read_evcntr();
}

/* armv8pmu_handle_irq() -> armpmu_event_update(), as a stand-in. */
static void truncated_irq(void)
{
	unsigned long flags;

	raw_local_irq_save(flags);
	ndelay(window_ns);
	WRITE_ONCE(prev_count, armv8pmu_read_evcntr_u32());
	raw_local_irq_restore(flags);
}

static void full_irq(void)
{
	unsigned long flags;

	raw_local_irq_save(flags);
	ndelay(window_ns);
	WRITE_ONCE(prev_count, armv8pmu_read_evcntr());
	raw_local_irq_restore(flags);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_evcntr32",
	.read = truncated_read,
	.update = truncated_irq,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_evcntr32_fixed",
	.read = full_read,
	.update = full_irq,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	int ret;

	if (window_ns > 1000000 || lead_ms < 1 || lead_ms > 4294) {
		pr_err("window_ns=%u lead_ms=%u: want window_ns at most 1000000, lead_ms 1..4294\n",
		       window_ns, lead_ms);
		return -EINVAL;
	}
	/* The counter at 2^32 - lead_ms now (wrapping arithmetic). */
	offset = (1ULL << 32) - (u64)lead_ms * NSEC_PER_MSEC - ktime_get_raw_fast_ns();
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
MODULE_DESCRIPTION("nmiclock zoo: 7bb8bc6eb550, arm64 perf 64-bit event counter read truncated to u32");
MODULE_LICENSE("GPL");
