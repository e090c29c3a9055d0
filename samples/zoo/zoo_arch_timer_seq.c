// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_arch_timer_seq: the counter read outside the seqlock's read section.
 *
 * 75a19a0202db ("arm64: arch_timer: Ensure counter register reads occur
 * with seqlock held"), v5.2, arch/arm64/kernel/vdso/gettimeofday.S and
 * arch/arm64/include/asm/arch_timer.h.  "When executing clock_gettime(),
 * either in the vDSO or via a system call, we need to ensure that the read
 * of the counter register occurs within the seqlock reader critical
 * section.  This ensures that updates to the clocksource parameters (e.g.
 * the multiplier) are consistent with the counter value and therefore
 * avoids the situation where time appears to go backwards across multiple
 * reads."  Two defects, two fixes:
 *  (a) the vDSO assembly loaded cycle_last, mult and the base, ran
 *      seqcnt_check, and only then read cntvct_el0 (get_clock_shifted_nsec):
 *      an update landing between the check and the counter read made it
 *      extrapolate the old parameters past the new cycle_last.  The patch
 *      moves seqcnt_check after get_clock_shifted_nsec, a program-order
 *      fix;
 *  (b) "Since reads of the counter system registers are not ordered by
 *      memory barrier instructions, introduce dependency ordering from the
 *      counter read to a subsequent memory access so that the seqlock
 *      memory barriers apply to the counter access": an out-of-order CPU
 *      may perform `isb; mrs cntvct_el0` after the retry's load.  The fix
 *      is arch_counter_enforce_ordering() (eor, add sp, ldr xzr), which 6.12
 *      keeps in __arch_counter_get_cntvct() and the C vDSO.
 *
 * The model's protection.  The vDSO's readers wait while the count is odd;
 * an NMI cannot (over its own CPU's writer it would wait forever, and a
 * bounded wait, on a vCPU the host deschedules inside the update too, is a
 * stall: a false finding for the fixed form).  So the data page is two
 * copies behind a latch, and a read that meets an update in progress (an
 * odd count, the old copy) and has its counter value, does what waiting
 * achieves: before the writer fixes its update point u, it raises u to at
 * least its own counter value (a compare-and-exchange on one word, which
 * the writer's freezes); once u is fixed, a read past it computes the new
 * parameters from the old copy and u (the update is a pure function of
 * them), as the writer is writing them.  No read ever combines the old
 * parameters with a counter value past u, and none waits: the guarantee
 * of the vDSO's retry, provided the counter value is read inside the
 * section.  That proviso is the entry.
 *
 * Registered here:
 *  - zoo_arch_timer_seq: (a), the v5.1 order: the parameters are checked,
 *    then the counter is read, so that an update landing in between makes
 *    the read extrapolate the old slope past the update point: too high
 *    by up to 2*s*window_ns within the span (4 us at x86's defaults; on
 *    arm64, s times the writer's 40 us spin) when the slope dropped.
 *    nmiclock reports cross_cpu_backwards: the next task-context read, on
 *    either CPU, is below it; no stall.
 *  - zoo_arch_timer_seq_fixed: the counter read inside the section, before
 *    the retry: no step, no stall, the raw clock's rate.
 *  - zoo_arch_timer_ooo: (b), NEGATIVE CONTROL.  The fixed form's order
 *    with the hardware counter read bare, as 6.12 would be without
 *    arch_counter_enforce_ordering(): arm64 `isb; mrs cntvct_el0` (rate
 *    from cntfrq_el0), x86 `rdtsc` without lfence (rate tsc_khz), while
 *    its writer reads the counter ordered.  Under QEMU TCG, which runs each
 *    vCPU's instructions in order, it is NOT caught and must not be: the
 *    suite's expected result is "not caught under TCG: needs out-of-order
 *    hardware" (arm64 or KVM on it; the x86 form is the analogue, rdtsc
 *    being unordered too).  A finding there under TCG is a bug of the model.
 *
 * What was scaled:
 *  - The slope, as in zoo_fast_mono: NTP moves mult by ppm; here it
 *    alternates between 1:1 plus and minus @slope_ppm (default 10 %),
 *    steered towards the raw clock, and applies to the first
 *    SLOPE_SPAN_NS (50 us) past cycle_last only, 1:1 beyond, so that the
 *    clock stays within s*D of the raw clock (s the slope, D the span) and
 *    keeps its rate within nmiclock's reference check (2*s*D = 10 us at
 *    most) however long the writers pause.
 *  - The gap.  The vDSO's was a few instructions, long only when the
 *    reader was interrupted there.  Here the buggy read pauses @window_ns
 *    (default 20 us; 10 us on arm64, whose single TCG thread runs one
 *    vCPU at a time, see FREEZE_SPIN_NS) between the check and the counter read when it runs
 *    in NMI or hard-IRQ context (nmiclock's samples: the interrupted
 *    reads), so that an update lands in it under emulation, and not in
 *    task context (the writers' reads, back to back: the uninterrupted
 *    ones, which then read below it).  A pause in every read would hide
 *    the bug: each read loads nmiclock's high-water mark before its own
 *    pause, and the clock gains more in 20 us than the error.
 *  - The writer pauses @window_ns inside its second copy's write (no
 *    reader uses that copy then), so that update() takes about that long
 *    and the runs meet it (coverage); on arm64 it also works 40 us past
 *    its update point before it yields (FREEZE_SPIN_NS).
 * The counter of the first two is ktime_get_raw_fast_ns(), the raw clock's
 * ns standing in for cntvct_el0 (the forms run at the raw clock's rate);
 * the negative control's is the hardware counter itself.
 *
 * Architectures: the defects are arm64's (vDSO assembly, system register
 * ordering); (a) is program order and shows on both x86_64 and arm64
 * under TCG; (b) needs out-of-order hardware: nothing under TCG.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/preempt.h>
#include <linux/timekeeping.h>

#if defined(CONFIG_ARM64)
#include <asm/arch_timer.h>
#elif defined(CONFIG_X86_64)
#include <asm/msr.h>
#include <asm/tsc.h>
#else
#error "zoo_arch_timer_seq: x86_64 or arm64 only"
#endif

#include <nmiclock.h>		/* include/ of the nmiclock tree */

/*
 * arm64's guest runs its vCPUs in turn on one TCG thread, and a delay
 * yields to the other vCPU: a read's gap meets an update only when it
 * yields to the writer's vCPU and the writer runs the update there.  The
 * read's excess is the slope change times the time from the update point
 * to its counter read, and another read must follow within it.  A writer
 * that yielded back at once after fixing its point (its pause is a delay)
 * would keep the excess to a microsecond or two; a gap as long as the
 * pause of every NMI would starve the interrupted CPU (an NMI each period,
 * each taking most of it), so that the next read came tens of
 * microseconds later, from the writer after its pause.  So on arm64 the
 * writer works FREEZE_SPIN_NS past its update point without yielding (a
 * loop on the counter: the update's work, scaled), a read whose short gap
 * yielded to it reads at least that far past the point (an excess of
 * s * 40 us: 4 us at the default slope), and the interrupted CPU reads
 * again within it.  Measured in the arm64 guest (see samples/zoo/README.md):
 * a 60 us gap took up to 51 s without the spin and missed 2 runs of 12
 * in 60 s with it; this caught it within a second.  On x86's guest each vCPU has its thread: the gap
 * runs on while the writer does, and its read comes up to the gap past
 * the point.
 */
#ifdef CONFIG_ARM64
#define WINDOW_NS_DEFAULT 10000
#define FREEZE_SPIN_NS	40000
#else
#define WINDOW_NS_DEFAULT 20000
#define FREEZE_SPIN_NS	0
#endif

static unsigned int window_ns = WINDOW_NS_DEFAULT;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the buggy read's gap and the writer's pause, ns (default 20000, 10000 on arm64; at most 1000000)");

static unsigned int slope_ppm = 100000;
module_param(slope_ppm, uint, 0444);
MODULE_PARM_DESC(slope_ppm, "how far mult moves off 1:1 each way, ppm (default 100000: 10 %, at most 100000)");

#define SLOPE_SPAN_NS	50000ULL	/* D: mult applies this far past cycle_last */
#define UPD_FROZEN	BIT_ULL(63)	/* the writer fixed its update point */

/* ---- the counters ------------------------------------------------------ */

#if defined(CONFIG_ARM64)
/* 6.12's __arch_counter_get_cntvct() without ECV and without the fix. */
static u64 hw_counter_bare(void)
{
	u64 cnt;

	asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r" (cnt));
	return cnt;
}

/* With arch_counter_enforce_ordering(): the writer's. */
static u64 hw_counter_ordered(void)
{
	return __arch_counter_get_cntvct();
}

static u64 hw_counter_hz(void)
{
	u64 hz;

	asm volatile("mrs %0, cntfrq_el0" : "=r" (hz));
	return hz;
}
#else
/* rdtsc without lfence: x86's unordered counter read. */
static u64 hw_counter_bare(void)
{
	u32 lo, hi;

	asm volatile("rdtsc" : "=a" (lo), "=d" (hi));
	return (u64)hi << 32 | lo;
}

static u64 hw_counter_ordered(void)
{
	return rdtsc_ordered();
}

static u64 hw_counter_hz(void)
{
	return (u64)tsc_khz * 1000;
}
#endif

/* ---- one counter's clock: the vDSO data page, as a latch ------------- */

/* The fields of the data page (struct tk_read_base's) that a read uses. */
struct tkr {
	u64 base_ns;
	u64 cycle_last;
	u64 xtime_nsec;		/* the remainder below 1 ns, << shift */
	u32 mult;
	u32 shift;
};

struct zclock {
	unsigned int seq;	/* the data page's count, as a latch */
	struct tkr base[2];
	atomic64_t upd;		/* this update's point (cycles), | UPD_FROZEN */
	struct tkr tk;		/* the timekeeper's: the writer's own */
	/* Constant: the counter's 1:1 conversion, the two slopes, the span. */
	u32 mult0, mult_lo, mult_hi;
	u64 span;		/* SLOPE_SPAN_NS in cycles */
	u64 ref_cyc, ref_ns;	/* where the 1:1 line meets the raw clock */
};

static struct zclock vd;	/* counter: ktime_get_raw_fast_ns() */
static struct zclock ood;	/* counter: the hardware's */

static void tkr_load(struct tkr *r, const struct tkr *src)
{
	r->base_ns = READ_ONCE(src->base_ns);
	r->cycle_last = READ_ONCE(src->cycle_last);
	r->xtime_nsec = READ_ONCE(src->xtime_nsec);
	r->mult = READ_ONCE(src->mult);
	r->shift = READ_ONCE(src->shift);
}

/* A copy's write, pausing @pause_ns half-way. */
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

/* The time at @cycles: mult for the first span past cycle_last, 1:1 beyond. */
static u64 zc_ns(const struct zclock *zc, const struct tkr *r, u64 cycles)
{
	u64 delta = cycles - r->cycle_last, head;

	if ((s64)delta < 0)		/* negative motion: the update's time */
		return r->base_ns;
	head = min(delta, zc->span);
	return r->base_ns + ((head * r->mult + r->xtime_nsec) >> r->shift) +
	       mul_u64_u32_shr(delta - head, zc->mult0, r->shift);
}

/*
 * The update at @cycles, from the old parameters @r: accumulate exactly
 * (xtime_nsec keeps the remainder, so the line is continuous there), then
 * NTP's slope for the next interval, the one that steers the clock back to
 * the raw clock.  A pure function of @r and @cycles, so that a reader can
 * compute what the writer writes.
 */
static void zc_next(const struct zclock *zc, struct tkr *r, u64 cycles)
{
	u64 delta = cycles - r->cycle_last, head, acc, ref;

	if ((s64)delta < 0)
		return;
	head = min(delta, zc->span);
	acc = head * r->mult + r->xtime_nsec;
	r->base_ns += (acc >> r->shift) + mul_u64_u32_shr(delta - head, zc->mult0, r->shift);
	r->xtime_nsec = acc & ((1ULL << r->shift) - 1);
	r->cycle_last = cycles;
	ref = zc->ref_ns + mul_u64_u32_shr(cycles - zc->ref_cyc, zc->mult0, r->shift);
	r->mult = (s64)(r->base_ns - ref) > 0 ? zc->mult_lo : zc->mult_hi;
}

/*
 * A read at counter value @now met an update in progress (@r is the old
 * copy): the model's stand-in for the vDSO reader's wait (see the header).
 * Lock-free: a failed exchange means the word moved on, and it only grows
 * until the writer freezes it.
 */
static void zc_overlap(struct zclock *zc, struct tkr *r, u64 now)
{
	s64 c = atomic64_read(&zc->upd);

	for (;;) {
		if ((u64)c & UPD_FROZEN) {
			u64 u = (u64)c & ~UPD_FROZEN;

			if (now > u)
				zc_next(zc, r, u);
			return;
		}
		if ((u64)c >= now)
			return;
		if (atomic64_try_cmpxchg(&zc->upd, &c, (s64)now))
			return;
	}
}

/* raw_write_seqcount_latch(): readers move to the other copy. */
static void zc_latch(struct zclock *zc)
{
	smp_wmb();
	WRITE_ONCE(zc->seq, zc->seq + 1);
	smp_wmb();
}

/* update_vsyscall() as a latch, the update point fixed with the readers. */
static void zc_update(struct zclock *zc, u64 (*read)(void))
{
	unsigned long flags;
	u64 t, u;
	s64 c;

	raw_local_irq_save(flags);
	atomic64_set(&zc->upd, 0);
	zc_latch(zc);			/* readers to base[1], the old copy */
	smp_mb();			/* the odd count before the counter read */
	t = read();
	c = atomic64_read(&zc->upd);
	do {
		u = max_t(u64, (u64)c, t);
	} while (!atomic64_try_cmpxchg(&zc->upd, &c, (s64)(u | UPD_FROZEN)));
	if (FREEZE_SPIN_NS) {		/* see FREEZE_SPIN_NS: no yield here */
		u64 end = ktime_get_raw_fast_ns() + FREEZE_SPIN_NS;

		while (ktime_get_raw_fast_ns() < end)
			barrier();
	}
	zc_next(zc, &zc->tk, u);
	tkr_store(&zc->base[0], &zc->tk, 0);
	zc_latch(zc);			/* readers back to base[0] */
	tkr_store(&zc->base[1], &zc->tk, window_ns);
	raw_local_irq_restore(flags);
}

/* ---- (a) v5.1: the counter read after the check ------------------------ */

static int seq_read(u64 *ns)
{
	unsigned int seq;
	struct tkr r;
	u64 now;

	do {
		seq = smp_load_acquire(&vd.seq);
		tkr_load(&r, vd.base + (seq & 1));
		smp_rmb();
	} while (READ_ONCE(vd.seq) != seq);	/* seqcnt_check */
	/* The scaled gap: an interrupted read's (see the header). */
	if (!in_task())
		ndelay(window_ns);
	now = ktime_get_raw_fast_ns();		/* get_clock_shifted_nsec */
	if (seq & 1)
		zc_overlap(&vd, &r, now);
	*ns = zc_ns(&vd, &r, now);
	return 0;
}

/* ---- v5.2: the counter read inside the section ------------------------- */

static int seq_fixed_read(u64 *ns)
{
	unsigned int seq;
	struct tkr r;
	u64 now;

	do {
		seq = smp_load_acquire(&vd.seq);
		tkr_load(&r, vd.base + (seq & 1));
		now = ktime_get_raw_fast_ns();	/* get_clock_shifted_nsec */
		if (seq & 1)
			zc_overlap(&vd, &r, now);
		smp_rmb();
	} while (READ_ONCE(vd.seq) != seq);	/* seqcnt_check */
	*ns = zc_ns(&vd, &r, now);
	return 0;
}

static void seq_update(void)
{
	zc_update(&vd, ktime_get_raw_fast_ns);
}

/* ---- (b) the hardware counter read bare: negative control under TCG ---- */

static int ooo_read(u64 *ns)
{
	unsigned int seq;
	struct tkr r;
	u64 now;

	do {
		seq = smp_load_acquire(&ood.seq);
		tkr_load(&r, ood.base + (seq & 1));
		now = hw_counter_bare();	/* no arch_counter_enforce_ordering() */
		if (seq & 1)
			zc_overlap(&ood, &r, now);
		smp_rmb();
	} while (READ_ONCE(ood.seq) != seq);
	*ns = zc_ns(&ood, &r, now);
	return 0;
}

static void ooo_update(void)
{
	zc_update(&ood, hw_counter_ordered);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_arch_timer_seq",
	.read_status = seq_read,
	.update = seq_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_arch_timer_seq_fixed",
	.read_status = seq_fixed_read,
	.update = seq_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target ooo = {
	.name = "zoo_arch_timer_ooo",
	.read_status = ooo_read,
	.update = ooo_update,
	.owner = THIS_MODULE,
};

/*
 * Sets up @zc for a counter at @hz read by @read: the largest shift whose
 * 1:1 mult leaves room for the slope in 32 bits; false if none does.
 */
static bool zc_init(struct zclock *zc, u64 hz, u64 (*read)(void))
{
	u32 shift, dm;
	u64 m = 0;

	for (shift = 32; shift >= 8; shift--) {
		m = div64_u64((u64)NSEC_PER_SEC << shift, hz);
		if (m && m + m / 8 <= U32_MAX)
			break;
	}
	if (shift < 8)
		return false;
	zc->mult0 = (u32)m;
	dm = (u32)div_u64(m * slope_ppm, 1000000);
	zc->mult_lo = zc->mult0 - dm;
	zc->mult_hi = zc->mult0 + dm;
	zc->span = div64_u64(SLOPE_SPAN_NS * hz, NSEC_PER_SEC);
	/* At the raw clock's time, so the reads start at CLOCK_MONOTONIC_RAW. */
	zc->ref_ns = ktime_get_raw_fast_ns();
	zc->ref_cyc = read();
	zc->tk.base_ns = zc->ref_ns;
	zc->tk.cycle_last = zc->ref_cyc;
	zc->tk.xtime_nsec = 0;
	zc->tk.mult = zc->mult_lo;
	zc->tk.shift = shift;
	zc->base[0] = zc->tk;
	zc->base[1] = zc->tk;
	atomic64_set(&zc->upd, 0);
	return true;
}

static int __init zoo_init(void)
{
	u64 hz = hw_counter_hz();
	int ret;

	if (window_ns > 1000000 || slope_ppm > 100000) {
		pr_err("window_ns=%u slope_ppm=%u: want window_ns at most 1000000, slope_ppm at most 100000\n",
		       window_ns, slope_ppm);
		return -EINVAL;
	}
	if (!zc_init(&vd, NSEC_PER_SEC, ktime_get_raw_fast_ns) ||
	    !hz || hz > 100ULL * NSEC_PER_SEC || !zc_init(&ood, hz, hw_counter_ordered)) {
		pr_err("counter rate %llu Hz: no conversion for it\n", hz);
		return -ENODEV;
	}

	ret = nmiclock_register_target(&buggy);
	if (ret)
		return ret;
	ret = nmiclock_register_target(&fixed);
	if (ret)
		goto out_buggy;
	ret = nmiclock_register_target(&ooo);
	if (ret)
		goto out_fixed;
	return 0;

out_fixed:
	nmiclock_unregister_target(&fixed);
out_buggy:
	nmiclock_unregister_target(&buggy);
	return ret;
}

static void __exit zoo_exit(void)
{
	nmiclock_unregister_target(&ooo);
	nmiclock_unregister_target(&fixed);
	nmiclock_unregister_target(&buggy);
}

module_init(zoo_init);
module_exit(zoo_exit);
MODULE_DESCRIPTION("nmiclock zoo: 75a19a0202db, arm64 counter read outside the seqlock (vDSO order; OoO read: negative control under TCG)");
MODULE_LICENSE("GPL");
