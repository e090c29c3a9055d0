// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_pvclock: per-vCPU pvclock records disagree, and time warps across CPUs.
 *
 * Fixed by 489fb490dbf8 ("x86, paravirt: Add a global synchronization point
 * for pvclock"), Glauber Costa, 2010, for v2.6.35 (full sha, date and file
 * list unverified), arch/x86/kernel/pvclock.c.  kvmclock (and Xen's clock)
 * read a per-vCPU record the host fills, {tsc_timestamp, system_time,
 * tsc_to_system_mul, tsc_shift}, as system_time + scale(tsc - tsc_timestamp).
 * The host fills each vCPU's record at its own moment, pairing its clock
 * with a TSC reading it takes a little apart from it, so two vCPUs reading
 * at the same instant can disagree, and a read on one just after a read on
 * the other can be lower: time warps across CPUs.  The message, as
 * recalled (unverified), counted up to 1.5 million warps a minute with
 * time-warp-test, and argued that a global value needs no lock, only
 * cmpxchg.  The fix passes every read through a global last_value: a read
 * below it returns it, a read above it moves it up with cmpxchg.  6.12's
 * __pvclock_clocksource_read() still does, unless the host sets
 * PVCLOCK_TSC_STABLE_BIT (the model's host never does).
 *
 * The model: the TSC is ktime_get_raw_fast_ns() since module load, 1 GHz
 * (tsc_to_system_mul 2^31, tsc_shift 1, pvclock_scale_delta() as in 6.12),
 * and system_time is the raw clock.  update() is the host refreshing this
 * CPU's record (as KVM refreshes a vCPU's before entering it), interrupts
 * off: it pairs the TSC it reads with a system_time taken as if a little later,
 * by an error drawn at each refresh from [0, @skew_ns] (prandom), so the
 * CPU's clock runs ahead of the raw clock by that error until its next
 * refresh.  Two CPUs' errors differ, so their clocks disagree by up to
 * @skew_ns; a CPU whose error shrinks at a refresh steps back on itself.
 *
 * One deviation: pvclock's reader retries while the record's version is
 * odd, the host writing it.  KVM writes a vCPU's record while that vCPU is
 * out of the guest, so the guest never waits on its own; the model writes
 * it from the CPU itself (nmiclock calls update() there), where an NMI
 * over the writer would wait for ever.  So each record is two copies behind
 * a latch (raw_write_seqcount_latch()'s protocol), which no reader waits on:
 * waiting is not this bug.
 *
 * Registered here side by side, over the same records:
 *  - zoo_pvclock: the read before the fix, the per-vCPU value as it is.
 *    nmiclock reports cross_cpu_backwards of up to @skew_ns, and now and
 *    then backwards (a read on the CPU soon after its error shrank); no
 *    reference mismatch (the error stays within @skew_ns).
 *  - zoo_pvclock_fixed: the same value through the global last_value
 *    cmpxchg loop: no step on one CPU or across, and its time stays within
 *    @skew_ns ahead of the raw clock.
 *
 * What was scaled: the host's pairing error is injected (@skew_ns, default
 * 5 us), since under TCG there is neither a host refreshing records nor a
 * kvmclock; on hardware it came from the host's TSC and clock reads apart,
 * TSCs slightly out of sync across sockets, and records refreshed at
 * different times.  Records are refreshed as often as nmiclock's writers
 * call update(); each refresh takes @window_ns (default 20 us) inside each
 * copy's write, so that the run meets its updates.
 *
 * Architectures: x86 paravirt guests (KVM, Xen); the model is arch-neutral.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/prandom.h>
#include <linux/preempt.h>
#include <linux/random.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 20000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "the host's pause inside each copy's write, ns (default 20000, at most 1000000)");

static unsigned int skew_ns = 5000;
module_param(skew_ns, uint, 0444);
MODULE_PARM_DESC(skew_ns, "the host's largest pairing error, ns (default 5000, 1..10000)");

static u64 load_ns;
static struct rnd_state rnd;	/* the host's errors; update() is serialized */

/* The model's rdtsc(): 1 GHz since load, never below @since. */
static u64 tsc_read(u64 since)
{
	u64 tsc = ktime_get_raw_fast_ns() - load_ns;

	return (s64)(tsc - since) > 0 ? tsc : since;
}

/* struct pvclock_vcpu_time_info, the fields a read uses. */
struct pvti {
	u64 tsc_timestamp;
	u64 system_time;
	u32 tsc_to_system_mul;
	s8 tsc_shift;
};

/* One vCPU's record: two copies behind a latch (see above). */
struct pvti_latch {
	unsigned int seq;
	struct pvti copy[2];
};

static DEFINE_PER_CPU(struct pvti_latch, pvti);

static atomic64_t last_value = ATOMIC64_INIT(0);

/* 6.12 pvclock_scale_delta() */
static u64 pvclock_scale_delta(u64 delta, u32 mul_frac, int shift)
{
	if (shift < 0)
		delta >>= -shift;
	else
		delta <<= shift;
	return mul_u64_u32_shr(delta, mul_frac, 32);
}

/* The per-vCPU part of __pvclock_clocksource_read(). */
static u64 pvclock_read_cycles(void)
{
	const struct pvti *src;
	struct pvti_latch *p;
	struct pvti r;
	unsigned int seq;
	u64 ret;

	preempt_disable_notrace();
	p = this_cpu_ptr(&pvti);
	do {
		seq = smp_load_acquire(&p->seq);	/* raw_read_seqcount_latch() */
		src = p->copy + (seq & 1);
		r.tsc_timestamp = READ_ONCE(src->tsc_timestamp);
		r.system_time = READ_ONCE(src->system_time);
		r.tsc_to_system_mul = READ_ONCE(src->tsc_to_system_mul);
		r.tsc_shift = READ_ONCE(src->tsc_shift);
		smp_rmb();
	} while (READ_ONCE(p->seq) != seq);		/* ..._latch_retry() */
	ret = r.system_time +
	      pvclock_scale_delta(tsc_read(r.tsc_timestamp) - r.tsc_timestamp,
				  r.tsc_to_system_mul, r.tsc_shift);
	preempt_enable_notrace();
	return ret;
}

/* Before the fix: the vCPU's value as it is. */
static u64 pervcpu_read(void)
{
	return pvclock_read_cycles();
}

/* The fix (and 6.12): through the global last_value. */
static u64 global_read(void)
{
	u64 ret = pvclock_read_cycles();
	u64 last = atomic64_read(&last_value);

	do {
		if (ret <= last)
			return last;
	} while (!atomic64_try_cmpxchg(&last_value, &last, ret));
	return ret;
}

/* raw_write_seqcount_latch(): readers move to the other copy. */
static void latch(struct pvti_latch *p)
{
	smp_wmb();
	WRITE_ONCE(p->seq, p->seq + 1);
	smp_wmb();
}

static void copy_write(struct pvti *copy, const struct pvti *r)
{
	WRITE_ONCE(copy->tsc_to_system_mul, r->tsc_to_system_mul);
	WRITE_ONCE(copy->tsc_shift, r->tsc_shift);
	WRITE_ONCE(copy->tsc_timestamp, r->tsc_timestamp);
	ndelay(window_ns);
	WRITE_ONCE(copy->system_time, r->system_time);
}

/* The host refreshes this vCPU's record. */
static void host_update(void)
{
	struct pvti_latch *p;
	struct pvti r;
	unsigned long flags;

	raw_local_irq_save(flags);
	p = this_cpu_ptr(&pvti);
	r.tsc_to_system_mul = 1U << 31;		/* 1 GHz */
	r.tsc_shift = 1;
	r.tsc_timestamp = tsc_read(p->copy[0].tsc_timestamp);
	/* The host's clock, read as if a moment after the TSC. */
	r.system_time = load_ns + r.tsc_timestamp +
			prandom_u32_state(&rnd) % (skew_ns + 1);
	latch(p);
	copy_write(&p->copy[0], &r);
	latch(p);
	copy_write(&p->copy[1], &r);
	raw_local_irq_restore(flags);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_pvclock",
	.read = pervcpu_read,
	.update = host_update,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_pvclock_fixed",
	.read = global_read,
	.update = host_update,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	int cpu, ret;

	if (window_ns > 1000000 || skew_ns < 1 || skew_ns > 10000) {
		pr_err("window_ns=%u skew_ns=%u: want window_ns at most 1000000, skew_ns 1..10000\n",
		       window_ns, skew_ns);
		return -EINVAL;
	}
	prandom_seed_state(&rnd, get_random_u64());
	/* Every record fresh and exact: each CPU starts at the raw clock. */
	load_ns = ktime_get_raw_fast_ns();
	for_each_possible_cpu(cpu) {
		struct pvti_latch *p = per_cpu_ptr(&pvti, cpu);

		p->seq = 0;
		p->copy[0].tsc_timestamp = 0;
		p->copy[0].system_time = load_ns;
		p->copy[0].tsc_to_system_mul = 1U << 31;
		p->copy[0].tsc_shift = 1;
		p->copy[1] = p->copy[0];
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
MODULE_DESCRIPTION("nmiclock zoo: 489fb490dbf8, pvclock without a global synchronization point");
MODULE_LICENSE("GPL");
