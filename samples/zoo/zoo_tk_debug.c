// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_tk_debug: the fast NMI-safe clock with CONFIG_DEBUG_TIMEKEEPING, the
 * fix that took its lock out, and the fix of that fix.
 *
 * 27727df240c7 ("timekeeping: Avoid taking lock in NMI path with
 * CONFIG_DEBUG_TIMEKEEPING"), v4.8, kernel/time/timekeeping.c, and its
 * regression, fixed by 58bfea953255 ("timekeeping: Fix __ktime_get_fast_ns()
 * regression"), v4.9.  In v4.7, with CONFIG_DEBUG_TIMEKEEPING,
 * __ktime_get_fast_ns() (the latch that NMI code reads) called
 * timekeeping_get_ns() -> timekeeping_get_delta(), which read the clock and
 * tkr->cycle_last inside read_seqcount_begin(&tk_core.seq) /
 * read_seqcount_retry() so that it could check the delta against the
 * clocksource's max_cycles.  update_wall_time() holds tk_core.seq odd, with
 * interrupts off, around timekeeping_update(), which rewrites the fast
 * timekeeper's copies: an NMI that lands there on the writer's CPU spins
 * forever.  27727df240c7 open-coded the fast path without the count, as
 *	now = ktime_to_ns(tkr->base);
 *	now += clocksource_delta(tkr->read(tkr->clock), tkr->cycle_last, tkr->mask);
 * which adds clocksource cycles to nanoseconds: the cycles->ns conversion
 * (timekeeping_delta_to_ns()) is missing.  58bfea953255 put it back:
 *	now += timekeeping_delta_to_ns(tkr, clocksource_delta(...));
 * (code from the v4.7, v4.8 and v4.11 sources; lttng-modules refuses the
 * fast clock on 4.8.0-4.8.2 and the stable ranges that got 27727df240c7
 * alone: "introduces a buggy ktime_get_mono_fast_ns()").  6.12 has no
 * CONFIG_DEBUG_TIMEKEEPING; its timekeeping_cycles_to_ns() does the
 * conversion, with guards against negative motion and overflow.
 *
 * One timekeeper, one writer (timekeeping_advance(): accumulate into the
 * shadow timekeeper, then inside the odd tk_core.seq the copy into tk_core
 * and update_fast_timekeeper()), a constant mult, and three fast reads:
 *  - zoo_tk_debug: v4.7 with CONFIG_DEBUG_TIMEKEEPING.  Its wait for an
 *    even tk_core.seq gives up after 50 us plus twice the window and says
 *    it stalled (NMICLOCK_READ_STALLED), as a literal spin would hang the
 *    guest.  nmiclock reports target_stalls, one for each NMI that lands
 *    in its CPU's update (window_hits_local); other CPUs' reads just wait.
 *  - zoo_tk_debug_v48: v4.8, base_ns plus raw cycles.  The clocksource
 *    counts at 1.5 GHz (cycles = ns * 3 / 2), so between two updates the
 *    clock runs 50 % fast, and each update's base (converted ns) takes back
 *    what the cycles overshot: nmiclock reports backwards and
 *    cross_cpu_backwards at every update (half the time between two
 *    updates' counter reads, about 20 us at the defaults), and
 *    reference_mismatches for reads that land more than about 40 us after
 *    an update.  Deterministic: no NMI needed, caught within milliseconds.
 *  - zoo_tk_debug_fixed: v4.9 and later, lock-free with the conversion (as
 *    6.12's timekeeping_cycles_to_ns() does it).  mult never changes and
 *    xtime_nsec keeps the remainder below a nanosecond, so the old and new
 *    copies give the same time: no stall, no step back, the raw clock's
 *    rate; it declares nothing.
 *
 * What was scaled: the writer pauses @window_ns (default 20 us) inside
 * each fast copy's write, so inside the odd tk_core.seq too, so that under
 * emulation an NMI lands there; the kernel's window is two memcpy()s.  The
 * clocksource is CLOCK_MONOTONIC_RAW's ns times 3/2, a rate other than
 * 1 GHz so that the missing conversion shows (at 1 GHz and mult 1 << shift
 * the v4.8 code would be right by accident).  The model's base_ns holds
 * whole nanoseconds and xtime_nsec only the remainder below one, as
 * tkr_raw's did in v4.8; the kernel's tkr_mono.base left out the
 * nanoseconds since the last second, which v4.8's fast path lost too: a
 * larger error than the model's, of the same mistake.
 *
 * Architectures: generic timekeeping, x86_64 and arm64 alike; the stall is
 * an NMI's re-entry on its own CPU and the regression a missing
 * multiplication, both program order, which TCG shows.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/clocksource.h>
#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the writer's pause inside each fast copy's write, ns (default 20000, at most 1000000)");

#define WAIT_BUDGET_NS	50000ULL
#define TK_SHIFT	24
/* 1.5 GHz: a cycle is 2/3 ns.  11184811 / 2^24 is 2/3 within 0.03 ppm. */
#define TK_MULT		11184811U
#define CS_MASK		CLOCKSOURCE_MASK(64)

static u64 max_cycles;		/* tkr->clock->max_cycles */

/* The clocksource: 1.5 cycles per ns of CLOCK_MONOTONIC_RAW. */
static u64 counter(void)
{
	return ktime_get_raw_fast_ns() * 3 / 2;
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

/* clocksource_delta() (x86 and arm64 validate the last cycle). */
static u64 cs_delta(u64 now, u64 last)
{
	u64 ret = (now - last) & CS_MASK;

	return ret & ~(CS_MASK >> 1) ? 0 : ret;
}

/* timekeeping_delta_to_ns() */
static u64 delta_to_ns(const struct tkr *r, u64 delta)
{
	return (delta * r->mult + r->xtime_nsec) >> r->shift;
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

/* Accumulate up to @cycles exactly: xtime_nsec keeps the remainder. */
static void tkr_advance(struct tkr *r, u64 cycles)
{
	u64 delta = (cycles - r->cycle_last) & CS_MASK;

	if (delta & ~(CS_MASK >> 1))	/* negative motion: nothing to add */
		return;
	r->base_ns += mul_u64_u32_add_u64_shr(delta, r->mult, r->xtime_nsec, r->shift);
	r->xtime_nsec = (delta * r->mult + r->xtime_nsec) & ((1ULL << r->shift) - 1);
	r->cycle_last = cycles;
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

/* ---- v4.7: timekeeping_get_delta() of CONFIG_DEBUG_TIMEKEEPING --------- */

static u64 get_delta_debug(const struct tkr *tkr, int *stalled)
{
	u64 start = 0, now, last, delta;
	unsigned int seq;

	do {
		/* read_seqcount_begin(&tk_core.seq), with a budget. */
		while ((seq = READ_ONCE(tk_core.seq)) & 1) {
			u64 t = ktime_get_raw_fast_ns();

			if (!start)
				start = t;
			else if (t - start > WAIT_BUDGET_NS + 2ULL * window_ns) {
				*stalled = NMICLOCK_READ_STALLED;
				break;
			}
			cpu_relax();
		}
		smp_rmb();
		now = counter();			/* tkr->read(tkr->clock) */
		last = READ_ONCE(tkr->cycle_last);
		smp_rmb();
	} while (!*stalled && READ_ONCE(tk_core.seq) != seq);
	delta = (now - last) & CS_MASK;
	/* The debug checks (v4.7 also notes underflow_seen / overflow_seen). */
	if (unlikely((~delta & CS_MASK) < (CS_MASK >> 3)))
		delta = 0;
	if (unlikely(delta > max_cycles))
		delta = max_cycles;
	return delta;
}

static int debug_read(u64 *ns)
{
	const struct tkr *tkr;
	int stalled = 0;
	unsigned int seq;
	struct tkr r;
	u64 now;

	do {
		seq = smp_load_acquire(&tk_fast_mono.seq);	/* raw_read_seqcount_latch() */
		tkr = tk_fast_mono.base + (seq & 1);
		tkr_load(&r, tkr);
		/* ktime_to_ns(tkr->base) + timekeeping_get_ns(tkr) */
		now = r.base_ns + delta_to_ns(&r, get_delta_debug(tkr, &stalled));
		smp_rmb();
	} while (!stalled && READ_ONCE(tk_fast_mono.seq) != seq);
	*ns = now;
	return stalled;
}

/* ---- v4.8: base plus raw cycles --------------------------------------- */

static int v48_read(u64 *ns)
{
	unsigned int seq;
	struct tkr r;
	u64 now;

	do {
		seq = smp_load_acquire(&tk_fast_mono.seq);
		tkr_load(&r, tk_fast_mono.base + (seq & 1));
		now = r.base_ns;
		now += cs_delta(counter(), r.cycle_last);	/* no timekeeping_delta_to_ns() */
		smp_rmb();
	} while (READ_ONCE(tk_fast_mono.seq) != seq);
	*ns = now;
	return 0;
}

/* ---- v4.9 and later (6.12's timekeeping_cycles_to_ns()) --------------- */

static u64 cycles_to_ns(const struct tkr *r, u64 cycles)
{
	u64 delta = (cycles - r->cycle_last) & CS_MASK;

	if (unlikely(delta > max_cycles)) {
		if (delta & ~(CS_MASK >> 1))		/* negative motion */
			return r->xtime_nsec >> r->shift;
		return mul_u64_u32_add_u64_shr(delta, r->mult, r->xtime_nsec, r->shift);
	}
	return delta_to_ns(r, delta);
}

static int fixed_read(u64 *ns)
{
	unsigned int seq;
	struct tkr r;
	u64 now;

	do {
		seq = smp_load_acquire(&tk_fast_mono.seq);
		tkr_load(&r, tk_fast_mono.base + (seq & 1));
		now = r.base_ns + cycles_to_ns(&r, counter());
		smp_rmb();
	} while (READ_ONCE(tk_fast_mono.seq) != seq);
	*ns = now;
	return 0;
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target v47 = {
	.name = "zoo_tk_debug",
	.read_status = debug_read,
	.update = tk_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target v48 = {
	.name = "zoo_tk_debug_v48",
	.read_status = v48_read,
	.update = tk_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_tk_debug_fixed",
	.read_status = fixed_read,
	.update = tk_update,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	int ret;

	if (window_ns > 1000000) {
		pr_err("window_ns=%u: want at most 1000000\n", window_ns);
		return -EINVAL;
	}
	/* What the multiplication allows, halved: a margin, as the kernel keeps. */
	max_cycles = div_u64(U64_MAX >> 1, TK_MULT);

	/* At the raw clock's time, so the reads start at CLOCK_MONOTONIC_RAW. */
	shadow.base_ns = ktime_get_raw_fast_ns();
	shadow.cycle_last = shadow.base_ns * 3 / 2;
	shadow.xtime_nsec = 0;
	shadow.mult = TK_MULT;
	shadow.shift = TK_SHIFT;
	tk_core.tkr_mono = shadow;
	tk_fast_mono.base[0] = shadow;
	tk_fast_mono.base[1] = shadow;

	ret = nmiclock_register_target(&v47);
	if (ret)
		return ret;
	ret = nmiclock_register_target(&v48);
	if (ret)
		goto out_v47;
	ret = nmiclock_register_target(&fixed);
	if (ret)
		goto out_v48;
	return 0;

out_v48:
	nmiclock_unregister_target(&v48);
out_v47:
	nmiclock_unregister_target(&v47);
	return ret;
}

static void __exit zoo_exit(void)
{
	nmiclock_unregister_target(&fixed);
	nmiclock_unregister_target(&v48);
	nmiclock_unregister_target(&v47);
}

module_init(zoo_init);
module_exit(zoo_exit);
MODULE_DESCRIPTION("nmiclock zoo: 27727df240c7 and 58bfea953255, the fast NMI-safe clock under CONFIG_DEBUG_TIMEKEEPING's tk_core.seq, then without its cycles->ns conversion");
MODULE_LICENSE("GPL");
