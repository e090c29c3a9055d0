// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_scd_clamp: the sched_clock_data clamp pulls a coupled clock back.
 *
 * Fixed by 5b7dba4 ("sched_clock: prevent scd->clock from moving
 * backwards"), Dave Kleikamp, 2008 (v2.6.27 era), kernel/sched_clock.c.
 * Only the short sha is known: the full one (recalled as 5b7dba4ff834...)
 * and the date are unverified.  With an unstable TSC, each CPU's clock is
 * scd->tick_gtod (GTOD at its last tick) plus the sched_clock() delta since
 * that tick (tick_raw), clamped to a window of one tick, TICK_NSEC, above
 * tick_gtod; a read of another CPU's clock couples the two, the lower
 * taking the higher.  "When sched_clock_cpu() couples the clocks between
 * two cpus, it may increment scd->clock beyond the GTOD tick window that
 * __update_sched_clock() uses to clamp the clock.  A later call to
 * __update_sched_clock() may move the clock back to scd->tick_gtod +
 * TICK_NSEC, violating the clock's monotonic property."  Before it (as
 * recalled), __update_sched_clock() set clock = max_clock whenever
 * clock + delta passed it; after it (a 2008 kernel/sched_clock.c in a code
 * index), "if (clock < max_clock) clock = max_clock; else clock++;".  6.12
 * says it as max_clock = wrap_max(old_clock, gtod + TICK_NSEC): never below
 * the clock.
 *
 * The model is 6.12's kernel/sched/clock.c (sched_clock_local() with its
 * cmpxchg, sched_clock_remote() as on 64-bit, sched_clock_tick()), its
 * gtod the raw clock since load.  Every other read on a CPU is a coupling
 * with the next online CPU (cpu_clock() of a remote CPU, as the scheduler
 * reads a remote runqueue's clock), returning the coupled value, which is
 * this CPU's clock then; the others are local_clock().  update() is the
 * tick: every call spends @window_ns with interrupts off (the rest of the
 * tick; nmiclock counts reads meeting it), and when this CPU's tick is due
 * it stamps tick_gtod and tick_raw and updates the clock.  Ticks come every
 * @tick_ns, CPU n's n * (@tick_ns / 2) / num_possible_cpus() late (the
 * kernel's skew_tick=1).  What drives one CPU's clock past another's window
 * is the unstable TSC: odd CPUs' sched_clock() runs @fast_pct percent fast
 * (a TSC that follows the CPU's frequency, see zoo_cpufreq), so the fast
 * CPU's clock reaches the top of its window, tick_gtod + TICK_NSEC, early;
 * since it ticked later, that is above the even CPU's window.  The even
 * CPU's coupling takes it, and its next local read clamps back.
 *
 * Registered here side by side:
 *  - zoo_scd_clamp: max_clock = gtod + TICK_NSEC, as before the fix.  With
 *    the defaults on two CPUs, 3/8 of each tick is open for it: nmiclock
 *    reports backwards on CPU 0, hundreds a second, of up to @tick_ns / 4
 *    (more when a tick comes late: at the first update after it is due).
 *  - zoo_scd_clamp_fixed: 6.12's max_clock: no step back on one CPU.
 * Both declare local_clock()'s promise (nmiclock's table): none per CPU
 * (back_cpu_ns 0), any across CPUs (NMICLOCK_ANY: the CPUs' clocks differ
 * by design, cross_cpu_backwards are counted as unpromised_*), and any rate
 * (any_rate): a clock stands at the top of its window until the next tick,
 * jumps when coupled, and the fast CPU's runs at 1 + @fast_pct / 100 until
 * it stands.
 *
 * What was scaled: the tick window is not (TICK_NSEC at HZ=1000); the TSC's
 * rate error is (default 100%, a CPU at twice its nominal frequency; a
 * stale cyc2ns factor or a TSC that stops in idle errs less, over more
 * ticks).  A constant offset between CPUs' TSCs would not do: delta is
 * taken against the same CPU's tick_raw, and cancels it.  Ticks stand
 * still through NOHZ idle in the kernel; here they come on time.
 *
 * Architectures: x86 (HAVE_UNSTABLE_SCHED_CLOCK); the bug is logic, so the
 * model shows it on any SMP machine (one CPU has nobody to couple with).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/math.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/smp.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the tick's pause inside each update, ns (default 20000, at most 1000000)");

static unsigned int tick_ns = 1000000;
module_param(tick_ns, uint, 0444);
MODULE_PARM_DESC(tick_ns, "TICK_NSEC: the tick period and the clamp's window, ns (default 1000000, 10000..100000000)");

static unsigned int fast_pct = 100;
module_param(fast_pct, uint, 0444);
MODULE_PARM_DESC(fast_pct, "how much faster odd CPUs' sched_clock() runs, percent (default 100, 1..1000)");

static u64 load_ns;
static unsigned int skew_step;	/* skew_tick: CPU n ticks n * this late */

struct sched_clock_data {
	u64 tick_raw;
	u64 tick_gtod;
	u64 clock;
};

/* One form's clocks, and each CPU's last tick. */
struct form {
	struct sched_clock_data __percpu *scd;
	u64 __percpu *tick;
	bool fixed;
};

static DEFINE_PER_CPU(struct sched_clock_data, scd_old);
static DEFINE_PER_CPU(struct sched_clock_data, scd_new);
static DEFINE_PER_CPU(u64, tick_old);
static DEFINE_PER_CPU(u64, tick_new);
static DEFINE_PER_CPU(unsigned int, reads);

static const struct form before = { &scd_old, &tick_old, false };
static const struct form after = { &scd_new, &tick_new, true };

/* ktime_get_ns(), the model's GTOD. */
static u64 gtod_now(void)
{
	return ktime_get_raw_fast_ns() - load_ns;
}

/* sched_clock() on @cpu, this CPU: its unstable TSC. */
static u64 sched_clock_model(int cpu)
{
	u64 d = gtod_now();

	return cpu & 1 ? d + mult_frac(d, fast_pct, 100) : d;
}

static u64 wrap_min(u64 x, u64 y)
{
	return (s64)(x - y) < 0 ? x : y;
}

static u64 wrap_max(u64 x, u64 y)
{
	return (s64)(x - y) > 0 ? x : y;
}

static u64 sched_clock_local(const struct form *f, struct sched_clock_data *scd)
{
	u64 now, clock, old_clock, min_clock, max_clock, gtod;
	s64 delta;

again:
	now = sched_clock_model(smp_processor_id());
	delta = now - READ_ONCE(scd->tick_raw);
	if (unlikely(delta < 0))
		delta = 0;

	old_clock = READ_ONCE(scd->clock);

	/*
	 * scd->clock = clamp(scd->tick_gtod + delta,
	 *		      max(scd->tick_gtod, scd->clock),
	 *		      scd->tick_gtod + TICK_NSEC);
	 */

	gtod = READ_ONCE(scd->tick_gtod);
	clock = gtod + delta;
	min_clock = wrap_max(gtod, old_clock);
	if (f->fixed)
		max_clock = wrap_max(old_clock, gtod + tick_ns);
	else
		max_clock = gtod + tick_ns;	/* the bug: may be below old_clock */

	clock = wrap_max(clock, min_clock);
	clock = wrap_min(clock, max_clock);

	if (!try_cmpxchg64(&scd->clock, &old_clock, clock))
		goto again;

	return clock;
}

/* 6.12 sched_clock_remote(), 64-bit: couple @scd and this CPU's @my_scd. */
static u64 sched_clock_remote(const struct form *f, struct sched_clock_data *scd,
			      struct sched_clock_data *my_scd)
{
	u64 this_clock, remote_clock;
	u64 *ptr, old_val, val;

	sched_clock_local(f, my_scd);
again:
	this_clock = READ_ONCE(my_scd->clock);
	remote_clock = READ_ONCE(scd->clock);

	/*
	 * Use the opportunity that we have both locks
	 * taken to couple the two clocks: we take the
	 * larger time as the latest time for both
	 * runqueues. (this creates monotonic movement)
	 */
	if (likely((s64)(remote_clock - this_clock) < 0)) {
		ptr = &scd->clock;
		old_val = remote_clock;
		val = this_clock;
	} else {
		/*
		 * Should be rare, but possible:
		 */
		ptr = &my_scd->clock;
		old_val = this_clock;
		val = remote_clock;
	}

	if (!try_cmpxchg64(ptr, &old_val, val))
		goto again;

	return val;
}

/* The CPU this one couples with: the next online one. */
static int partner(int cpu)
{
	int other = cpumask_next(cpu, cpu_online_mask);

	return other < nr_cpu_ids ? other : cpumask_first(cpu_online_mask);
}

static u64 scd_read(const struct form *f)
{
	struct sched_clock_data *my_scd;
	int cpu, other;
	u64 clock;

	preempt_disable_notrace();
	cpu = smp_processor_id();
	my_scd = per_cpu_ptr(f->scd, cpu);
	other = partner(cpu);
	if (other != cpu && (this_cpu_inc_return(reads) & 1))
		clock = sched_clock_remote(f, per_cpu_ptr(f->scd, other), my_scd);
	else
		clock = sched_clock_local(f, my_scd);
	preempt_enable_notrace();
	return clock;
}

/* The tick: sched_clock_tick() when this CPU's is due. */
static void scd_tick(const struct form *f)
{
	struct sched_clock_data *scd;
	unsigned long flags;
	u64 n, *last;
	int cpu;

	raw_local_irq_save(flags);
	ndelay(window_ns);
	cpu = smp_processor_id();
	n = div_u64(gtod_now() + tick_ns - (u64)cpu * skew_step, tick_ns);
	last = this_cpu_ptr(f->tick);
	if (n != *last) {
		*last = n;
		scd = this_cpu_ptr(f->scd);
		/* __scd_stamp() */
		WRITE_ONCE(scd->tick_gtod, gtod_now());
		WRITE_ONCE(scd->tick_raw, sched_clock_model(cpu));
		sched_clock_local(f, scd);
	}
	raw_local_irq_restore(flags);
}

static u64 old_read(void)
{
	return scd_read(&before);
}

static void old_tick(void)
{
	scd_tick(&before);
}

static u64 new_read(void)
{
	return scd_read(&after);
}

static void new_tick(void)
{
	scd_tick(&after);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_scd_clamp",
	.read = old_read,
	.update = old_tick,
	.owner = THIS_MODULE,
	.back_cpu_ns = 0,
	.back_cross_ns = NMICLOCK_ANY,
	.any_rate = true,
};

static struct nmiclock_target fixed = {
	.name = "zoo_scd_clamp_fixed",
	.read = new_read,
	.update = new_tick,
	.owner = THIS_MODULE,
	.back_cpu_ns = 0,
	.back_cross_ns = NMICLOCK_ANY,
	.any_rate = true,
};

static int __init zoo_init(void)
{
	int cpu, ret;

	if (window_ns > 1000000 || tick_ns < 10000 || tick_ns > 100000000 ||
	    fast_pct < 1 || fast_pct > 1000) {
		pr_err("window_ns=%u tick_ns=%u fast_pct=%u: want window_ns at most 1000000, tick_ns 10000..100000000, fast_pct 1..1000\n",
		       window_ns, tick_ns, fast_pct);
		return -EINVAL;
	}
	skew_step = tick_ns / 2 / num_possible_cpus();
	/* Every clock at 0 now, its first tick at the first update. */
	load_ns = ktime_get_raw_fast_ns();
	for_each_possible_cpu(cpu) {
		*per_cpu_ptr(&scd_old, cpu) = (struct sched_clock_data){ 0, 0, 0 };
		*per_cpu_ptr(&scd_new, cpu) = (struct sched_clock_data){ 0, 0, 0 };
		*per_cpu_ptr(&tick_old, cpu) = U64_MAX;
		*per_cpu_ptr(&tick_new, cpu) = U64_MAX;
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
MODULE_DESCRIPTION("nmiclock zoo: 5b7dba4, the sched_clock_data clamp moves a coupled clock back");
MODULE_LICENSE("GPL");
