// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_fast_mono: CLOCK_MONOTONIC from NMI, before and after the fast,
 * NMI-safe accessor.
 *
 * 4396e058c52e ("timekeeping: Provide fast and NMI safe access to
 * CLOCK_MONOTONIC"), v3.17, kernel/time/timekeeping.c.  Not a bug fix: it
 * gave NMI code (perf, tracing) a clock it may read at all.  Before it the
 * only CLOCK_MONOTONIC was ktime_get(), which reads the timekeeper inside
 * read_seqcount_begin(&tk_core.seq) / read_seqcount_retry(), while
 * update_wall_time() holds that count odd, interrupts off, as it publishes
 * a new tk_read_base {base, cycle_last, mult, shift, xtime_nsec}: an NMI
 * that lands there on the writer's CPU spins forever.  The commit keeps a
 * second copy of the read base behind a latch (tk_fast_mono.base[2],
 * update_fast_timekeeper(), called inside that write section), which an
 * NMI reads without waiting, and documents the price: "if the update
 * lowers the slope, readers who are forced to the not yet updated second
 * array are still using the old steeper slope ... So reader 6 will observe
 * time going backwards versus reader 5.  While other CPUs are likely to be
 * able observe that, the only way for a CPU local observation is when an
 * NMI hits in the middle of the update" (the commit message; 6.12's
 * comment on ktime_get_mono_fast_ns() still says so).
 *
 * One timekeeper, one writer (timekeeping_advance(): accumulate into the
 * shadow timekeeper, the NTP slope for the next interval, then inside the
 * odd tk_core.seq the copy into tk_core and update_fast_timekeeper()),
 * read two ways:
 *  - zoo_fast_mono: ktime_get(), what NMI code had before.  Its wait for
 *    an even count gives up after 50 us plus twice the window and says it
 *    stalled (NMICLOCK_READ_STALLED): the literal spin would hang the
 *    guest.  nmiclock reports target_stalls, one for each NMI that lands in
 *    its CPU's update (window_hits_local).
 *  - zoo_fast_mono_fixed: __ktime_get_fast_ns(&tk_fast_mono), the latch.
 *    No stall; the documented step back, which this form DECLARES as its
 *    promise (back_cpu_ns = back_cross_ns = the bound below): nmiclock
 *    counts the steps in steps_back_allowed and passes the run.  A
 *    calibration entry: it shows that a promise is honoured, and a step
 *    past the bound would fail it.
 *
 * What was scaled:
 *  - The slope.  NTP moves mult by parts per million, so the kernel's
 *    step is "a few nanoseconds".  Here mult alternates between 1:1 plus
 *    and minus @slope_ppm (default 5 %), steered as NTP steers: the next
 *    interval runs slow if the clock is ahead of the raw clock, fast if it
 *    is behind.  The counter is ktime_get_raw_fast_ns() (1:1 is mult =
 *    1 << 24, shift 24), so the forms run at the raw clock's rate.
 *  - How far a slope reaches.  The kernel accumulates every tick, so an
 *    interval at one mult is a tick long at most.  Here a run's writers
 *    may pause (update_us) and a vCPU may be descheduled inside an update,
 *    so the model applies mult to the first SLOPE_SPAN_NS (50 us) past
 *    cycle_last only, and 1:1 beyond (the same in the accumulation and in
 *    the read, so the line stays continuous).  With the steering this
 *    keeps the clock within s*D of the raw clock (s the slope, D the span):
 *    two reads' elapsed times differ from the raw clock's by 2*s*D at most,
 *    5 us at the defaults, 10 us at the largest slope_ppm, under the
 *    20 us of nmiclock's reference check: the rate is kept (any_rate is
 *    not declared).
 *  - The window: each latch copy's write pauses @window_ns (default 20 us)
 *    between its two halves, so that an NMI (or the other CPU) reads
 *    base[1] with the old slope for that long after the update point; the
 *    kernel's window is a memcpy.
 *
 * The bound.  A read of the old copy at counter time t past the update
 * point u (the writer's counter read, before it moves the latch) is on the
 * old line, every other read on the line of its time; the two lines meet
 * at u and part by the difference of the slopes times how far past u the
 * read reaches, which the span caps: 2*s*min(t - u, D) at most, above the
 * true line if the slope dropped, below it if it rose.  A high read and a
 * later low one (the old copy of a later update, at t' past its u') are
 * t' - u' apart at least, in which the clock gains (1 - s)*(t' - u'), more
 * than the low read's 2*s*(t' - u') for s < 1/3.  So no read is lower than
 * an earlier one, on its CPU or any, by more than 2*s*D, however far apart
 * the updates and however long a vCPU stalls inside one; plus 2 ns for the
 * truncations: 5002 ns at the defaults (2 * 5 % * 50 us), computed in init
 * from slope_ppm.  Under TCG the steps seen are up to 2*s*window_ns (2 us):
 * the other CPU's writer, finding an update in progress, reads the target
 * in task context back to back, meets the old copy, then the new one.
 *
 * Architectures: generic timekeeping, x86_64 and arm64 alike; both the
 * NMI re-entry and the old copy's slope are program order, which TCG
 * shows.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the writer's pause inside each latch copy's write, ns (default 20000, at most 1000000)");

static unsigned int slope_ppm = 50000;
module_param(slope_ppm, uint, 0444);
MODULE_PARM_DESC(slope_ppm, "how far mult moves off 1:1 each way, ppm (default 50000: 5 %, at most 100000)");

#define WAIT_BUDGET_NS	50000ULL
#define SLOPE_SPAN_NS	50000ULL	/* D: mult applies this far past cycle_last */
#define TK_SHIFT	24
#define TK_MULT_1TO1	(1U << TK_SHIFT)

static u32 mult_lo, mult_hi;

/* The clocksource: CLOCK_MONOTONIC_RAW's ns stand in for its cycles. */
static u64 counter(void)
{
	return ktime_get_raw_fast_ns();
}

/* The fields of struct tk_read_base that a read uses. */
struct tkr {
	u64 base_ns;		/* ktime_to_ns(tkr->base) */
	u64 cycle_last;
	u64 xtime_nsec;		/* here only the remainder below 1 ns, << shift */
	u32 mult;
	u32 shift;
};

static void tkr_load(struct tkr *r, const struct tkr *src)
{
	r->base_ns = READ_ONCE(src->base_ns);
	r->cycle_last = READ_ONCE(src->cycle_last);
	r->xtime_nsec = READ_ONCE(src->xtime_nsec);
	r->mult = READ_ONCE(src->mult);
	r->shift = READ_ONCE(src->shift);
}

/* A copy's memcpy(), pausing @pause_ns half-way. */
static void tkr_store(struct tkr *dst, const struct tkr *r, unsigned int pause_ns)
{
	WRITE_ONCE(dst->base_ns, r->base_ns);
	WRITE_ONCE(dst->xtime_nsec, r->xtime_nsec);
	if (pause_ns)
		ndelay(pause_ns);
	WRITE_ONCE(dst->cycle_last, r->cycle_last);
	WRITE_ONCE(dst->mult, r->mult);
	WRITE_ONCE(dst->shift, r->shift);
}

/*
 * timekeeping_cycles_to_ns() (6.12), mult applied to the first
 * SLOPE_SPAN_NS only; base_ns included.  Negative motion reads the update's
 * time, as 6.12 does.
 */
static u64 tkr_ns(const struct tkr *r, u64 cycles)
{
	u64 delta = cycles - r->cycle_last, head;

	if ((s64)delta < 0)
		return r->base_ns;
	head = min(delta, SLOPE_SPAN_NS);
	return r->base_ns + ((head * r->mult + r->xtime_nsec) >> r->shift) +
	       (delta - head);
}

/* ---- the writer: timekeeping_advance() ------------------------------- */

static struct tkr shadow;	/* shadow_timekeeper.tkr_mono */

static struct {
	unsigned int seq;	/* tk_core.seq */
	struct tkr tkr_mono;	/* tk_core.timekeeper.tkr_mono */
} tk_core;

static struct {
	unsigned int seq;
	struct tkr base[2];
} tk_fast_mono;

/* raw_write_seqcount_latch(): readers move to the other copy. */
static void latch(void)
{
	smp_wmb();
	WRITE_ONCE(tk_fast_mono.seq, tk_fast_mono.seq + 1);
	smp_wmb();
}

static void update_fast_timekeeper(const struct tkr *tkr)
{
	latch();			/* force readers off to base[1] */
	tkr_store(&tk_fast_mono.base[0], tkr, window_ns);
	latch();			/* force readers back to base[0] */
	tkr_store(&tk_fast_mono.base[1], tkr, window_ns);
}

/*
 * Accumulate up to @cycles exactly (xtime_nsec keeps the remainder, so the
 * line is continuous there), then timekeeping_adjust(): the slope that
 * steers the clock back to the raw clock.
 */
static void tkr_advance(struct tkr *r, u64 cycles)
{
	u64 delta = cycles - r->cycle_last, head, acc;

	if ((s64)delta < 0)
		return;
	head = min(delta, SLOPE_SPAN_NS);
	acc = head * r->mult + r->xtime_nsec;
	r->base_ns += (acc >> r->shift) + (delta - head);
	r->xtime_nsec = acc & ((1ULL << r->shift) - 1);
	r->cycle_last = cycles;
	r->mult = (s64)(r->base_ns - cycles) > 0 ? mult_lo : mult_hi;
}

static void tk_update(void)
{
	unsigned long flags;

	raw_local_irq_save(flags);	/* raw_spin_lock_irqsave(&timekeeper_lock) */
	tkr_advance(&shadow, counter());
	WRITE_ONCE(tk_core.seq, tk_core.seq + 1);	/* write_seqcount_begin() */
	smp_wmb();
	tkr_store(&tk_core.tkr_mono, &shadow, 0);	/* memcpy(real_tk, tk) */
	update_fast_timekeeper(&shadow);		/* timekeeping_update() */
	smp_wmb();
	WRITE_ONCE(tk_core.seq, tk_core.seq + 1);	/* write_seqcount_end() */
	raw_local_irq_restore(flags);
}

/* ---- before: ktime_get() under tk_core.seq ---------------------------- */

static int ktime_get_read(u64 *ns)
{
	u64 start = 0, now;
	unsigned int seq;
	struct tkr r;
	int stalled = 0;

	do {
		/* read_seqcount_begin(&tk_core.seq), with a budget. */
		while ((seq = READ_ONCE(tk_core.seq)) & 1) {
			u64 t = ktime_get_raw_fast_ns();

			if (!start)
				start = t;
			else if (t - start > WAIT_BUDGET_NS + 2ULL * window_ns) {
				stalled = NMICLOCK_READ_STALLED;
				break;
			}
			cpu_relax();
		}
		smp_rmb();
		tkr_load(&r, &tk_core.tkr_mono);
		now = counter();		/* timekeeping_get_ns() */
		smp_rmb();
	} while (!stalled && READ_ONCE(tk_core.seq) != seq);
	*ns = tkr_ns(&r, now);
	return stalled;
}

/* ---- after: __ktime_get_fast_ns(&tk_fast_mono) ------------------------ */

static int fast_read(u64 *ns)
{
	unsigned int seq;
	struct tkr r;
	u64 now;

	do {
		seq = smp_load_acquire(&tk_fast_mono.seq);	/* raw_read_seqcount_latch() */
		tkr_load(&r, tk_fast_mono.base + (seq & 1));
		now = tkr_ns(&r, counter());
		smp_rmb();
	} while (READ_ONCE(tk_fast_mono.seq) != seq);	/* ..._latch_retry() */
	*ns = now;
	return 0;
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_fast_mono",
	.read_status = ktime_get_read,
	.update = tk_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_fast_mono_fixed",
	.read_status = fast_read,
	.update = tk_update,
	.owner = THIS_MODULE,
	/* back_cpu_ns, back_cross_ns: set in init, see "The bound" above. */
};

static int __init zoo_init(void)
{
	u32 dm;
	u64 bound;
	int ret;

	if (window_ns > 1000000 || slope_ppm > 100000) {
		pr_err("window_ns=%u slope_ppm=%u: want window_ns at most 1000000, slope_ppm at most 100000\n",
		       window_ns, slope_ppm);
		return -EINVAL;
	}
	dm = (u32)div_u64((u64)TK_MULT_1TO1 * slope_ppm, 1000000);
	mult_lo = TK_MULT_1TO1 - dm;
	mult_hi = TK_MULT_1TO1 + dm;
	/* 2 * s * D, rounded up, plus 2 ns of truncation. */
	bound = ((2ULL * dm * SLOPE_SPAN_NS + TK_MULT_1TO1 - 1) >> TK_SHIFT) + 2;
	fixed.back_cpu_ns = bound;
	fixed.back_cross_ns = bound;

	/* At the raw clock's time, so the reads start at CLOCK_MONOTONIC_RAW. */
	shadow.base_ns = ktime_get_raw_fast_ns();
	shadow.cycle_last = shadow.base_ns;
	shadow.xtime_nsec = 0;
	shadow.mult = mult_lo;
	shadow.shift = TK_SHIFT;
	tk_core.tkr_mono = shadow;
	tk_fast_mono.base[0] = shadow;
	tk_fast_mono.base[1] = shadow;

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
MODULE_DESCRIPTION("nmiclock zoo: 4396e058c52e, CLOCK_MONOTONIC from NMI: ktime_get() under tk_core.seq, then the fast latch and its documented step back");
MODULE_LICENSE("GPL");
