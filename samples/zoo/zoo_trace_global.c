// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_trace_global: trace_clock_global()'s global prev_time, from a lock
 * that could deadlock, through a lockless clamp that stepped back by 1 ns,
 * to 6.12.
 *
 * Fixed by aafe104aa909 ("tracing: Restructure trace_clock_global() to never
 * block"), v5.13, and by 89529d8b8f8d ("tracing: Do no increment
 * trace_clock_global() by one"), dated 2021-06-17 (v5.13 or v5.14: not
 * verified), kernel/trace/trace_clock.c.
 *
 * trace_clock_global() keeps the trace clock in order across CPUs: a global
 * prev_time, the highest value handed out, to which a CPU whose
 * sched_clock_cpu() is behind is clamped.  Up to v5.12 it took
 * arch_spin_lock() around prev_time (interrupts off; in NMI it skipped the
 * lock and returned the raw local clock).  aafe104's trace, a suspend test
 * with the function graph tracer: ring_buffer_lock_reserve() {
 * trace_clock_global() { arch_spin_lock() { queued_spin_lock_slowpath() {
 * "lock taken", "(something else gets traced by function graph tracer)",
 * ring_buffer_lock_reserve() { trace_clock_global() { arch_spin_lock() {
 * queued_spin_lock_slowpath() { "DEAD LOCK!"; "Tracing should *never*
 * block".  Its fix reads prev_time without the lock, clamps to "prev_time
 * + 1", and stores only under arch_spin_trylock() and never in NMI.
 * 89529d8b: "If the lock is not taken, and the plus one to the timestamp is
 * returned, there's a small race that can cause the time to go backwards!".
 * In its timeline CPU0 holds the lock (an NMI interrupts it there); CPU1,
 * whose clock is behind, reads prev_time + 1 (trylock failed, nothing
 * stored), then reads again once its own clock equals prev_time, which is
 * not less than prev_time, and returns prev_time: 1 ns below its last read
 * ("Ring buffer clock went backwards: 20613921464 -> 20613921463").  An NMI
 * read, which never stores, can be the first read as well.  The fix clamps
 * to prev_time itself.
 *
 * The local clock (sched_clock_cpu()) is ktime_get_raw_fast_ns() in steps
 * of @res_ns, odd CPUs @skew_ns behind even ones: trace_clock_global()
 * promises per-CPU order only ("it really does not matter which one gets
 * the earlier time"), and the skew is what its clamp is for.  update() is a
 * traced caller on some CPU, its hold of the lock widened.  Registered here:
 *  - zoo_trace_global: the v5.12 code.  Its arch_spin_lock() is a
 *    trylock, else a bounded spin standing for queued_spin_lock_slowpath();
 *    having taken the lock on that slow path (only a contended lock gets
 *    there, as in the trace), it re-enters itself once, the traced function
 *    inside the slowpath, whose arch_spin_lock() spins on the lock its own
 *    CPU holds.  That spin gives up after a budget (50 us plus twice the
 *    window) and the read says it stalled (NMICLOCK_READ_STALLED).  The
 *    re-entry is synchronous on purpose: the code ran with interrupts off
 *    and skipped the lock in NMI, so no interrupt, hard or NMI, can be the
 *    re-entry (a hard-IRQ read on the holder's CPU spinning on its lock
 *    would be a model of code that never ran).  nmiclock reports
 *    target_stalls from task-context reads (and hard-IRQ ones, with
 *    nmi_source=perf_sw) that met another CPU's update(); no step back.
 *  - zoo_trace_global_plus1: aafe104's code.  While an even CPU's update()
 *    holds the trylock, an odd CPU's reads fail the trylock and return
 *    prev_time + 1 until that CPU's clock reaches prev_time, then
 *    prev_time: nmiclock reports backwards, max_backstep_ns 1, from the odd
 *    CPU's task-context reads (its writer reads back to back; NMI samples,
 *    100 us apart, rarely fall on both sides of the tie, and nmiclock judges
 *    task reads apart from the samples that interrupt them).
 *  - zoo_trace_global_fixed: 89529d8b (as in 6.12): the same reads give
 *    prev_time, then prev_time: equal, no step back.
 * All three declare back_cpu_ns 0 and back_cross_ns NMICLOCK_ANY (the skew
 * shows as cross-CPU steps back, counted, never anomalies), and any_rate:
 * trace_clock_global() promises order on each CPU, not a rate, and the
 * coarse local clock below lags the raw one by up to @res_ns + @skew_ns,
 * more than nmiclock's 20 us reference tolerance.
 *
 * What was scaled: update() holds the lock @window_ns (default 200 us)
 * between storing prev_time and unlocking, standing for the NMI that
 * interrupted the holder in 89529d8b's timeline (the kernel's hold is a few
 * stores); it runs whenever nmiclock's writers call it.  The local clock is
 * coarse (@res_ns, default 50 us, as a sched_clock on a low-rate counter)
 * and odd CPUs are a step behind (@skew_ns, default 50 us), so that during
 * a hold the odd CPU's clock is first below the stored prev_time for a
 * whole step (its reads give prev_time + 1), then exactly on it for
 * another (they give prev_time): at nanosecond resolution that tie is the
 * rare event behind "heavy tracing", and with steps of a few
 * microseconds it was met only where the two vCPUs ran at once (x86's
 * multi-threaded TCG), by luck elsewhere (arm64's single TCG thread runs
 * one vCPU at a time: once not in 60 s).  The skew is injected (the
 * kernel's comes from unstable sched_clock_cpu() per-CPU clocks).
 *
 * Architectures: kernel/trace/trace_clock.c is generic (x86_64, arm64 and
 * all others); both races are program order (a same-CPU re-entry; a lock
 * held on one CPU while another reads), so the model shows them anywhere.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/preempt.h>
#include <linux/smp.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int window_ns = 200000;
module_param(window_ns, uint, 0444);
MODULE_PARM_DESC(window_ns, "update()'s hold of the lock after storing prev_time, ns (default 200000, at most 1000000)");

static unsigned int res_ns = 50000;
module_param(res_ns, uint, 0444);
MODULE_PARM_DESC(res_ns, "resolution of the local clock, ns (default 50000, 1..100000)");

static unsigned int skew_ns = 50000;
module_param(skew_ns, uint, 0444);
MODULE_PARM_DESC(skew_ns, "how far odd CPUs' local clocks are behind even ones', ns (default 50000, at most 100000)");

#define WAIT_BUDGET_NS 50000ULL

/* keep prev_time and lock in the same cacheline (one per form). */
struct trace_clock_struct {
	u64 prev_time;
	arch_spinlock_t lock;
} ____cacheline_aligned_in_smp;

static struct trace_clock_struct old_tcs = {
	.lock = (arch_spinlock_t)__ARCH_SPIN_LOCK_UNLOCKED,
};
static struct trace_clock_struct plus1_tcs = {
	.lock = (arch_spinlock_t)__ARCH_SPIN_LOCK_UNLOCKED,
};
static struct trace_clock_struct fixed_tcs = {
	.lock = (arch_spinlock_t)__ARCH_SPIN_LOCK_UNLOCKED,
};

/* sched_clock_cpu(cpu): the raw clock in res_ns steps, odd CPUs behind. */
static u64 local_clock_of(int cpu)
{
	u64 t = ktime_get_raw_fast_ns() - ((cpu & 1) ? skew_ns : 0);
	u32 rem;

	div_u64_rem(t, res_ns, &rem);
	return t - rem;
}

/* ---- v5.12: arch_spin_lock() around prev_time ------------------------- */

/*
 * How long a contended lock is waited for when another CPU holds it: that
 * holder will let go, however long its vCPU is descheduled, so only a
 * bound for safety (a holder on this very CPU, the re-entry, gets the
 * short budget: it never lets go).
 */
#define OTHER_CPU_BUDGET_NS 100000000ULL

/* queued_spin_lock_slowpath(), with a budget: false when it gave up. */
static bool slowpath(arch_spinlock_t *lock, u64 budget_ns)
{
	u64 start = ktime_get_raw_fast_ns();

	while (!arch_spin_trylock(lock)) {
		if (ktime_get_raw_fast_ns() - start > budget_ns)
			return false;
		cpu_relax();
	}
	return true;
}

/*
 * trace_clock_global() as of v5.12; @hold_ns: the caller's pause under the
 * lock (update()), @nested: this is the traced call from inside the
 * slowpath (the ring buffer let one recursion through: it goes no deeper).
 */
static int old_clock(u64 *ns, unsigned int hold_ns, bool nested)
{
	struct trace_clock_struct *s = &old_tcs;
	unsigned long flags;
	int stalled = 0;
	u64 now;

	raw_local_irq_save(flags);

	now = local_clock_of(raw_smp_processor_id());
	/*
	 * If in an NMI context then dont risk lockups and return the
	 * cpu_clock() time:
	 */
	if (unlikely(in_nmi()))
		goto out;

	/* arch_spin_lock(): the fast path, else the slowpath. */
	if (!arch_spin_trylock(&s->lock)) {
		/* Nested, this CPU holds it: it waits for itself. */
		if (!slowpath(&s->lock, nested ? WAIT_BUDGET_NS + 2ULL * window_ns :
						 OTHER_CPU_BUDGET_NS)) {
			stalled = NMICLOCK_READ_STALLED;
			goto out;
		}
		/*
		 * "lock taken", then "something else gets traced": a traced
		 * function returns inside the slowpath, and its event takes a
		 * timestamp, on this CPU, with the lock held.
		 */
		if (!nested) {
			u64 ts;

			stalled = old_clock(&ts, 0, true);
		}
	}

	if ((s64)(now - s->prev_time) < 0)
		now = s->prev_time + 1;

	s->prev_time = now;
	if (hold_ns)
		ndelay(hold_ns);

	arch_spin_unlock(&s->lock);

 out:
	raw_local_irq_restore(flags);

	*ns = now;
	return stalled;
}

static int old_read(u64 *ns)
{
	return old_clock(ns, 0, false);
}

static void old_update(void)
{
	u64 ns;

	old_clock(&ns, window_ns, false);
}

/* ---- aafe104 (+ 1) and 89529d8b (=): lockless, a trylock to store ----- */

/* trace_clock_global() from aafe104 on: @plus1 (its form) or not (6.12). */
static u64 new_clock(struct trace_clock_struct *s, bool plus1, unsigned int hold_ns)
{
	unsigned long flags;
	u64 now, prev_time;

	raw_local_irq_save(flags);

	/*
	 * The global clock "guarantees" that the events are ordered
	 * between CPUs. But if two events on two different CPUS call
	 * trace_clock_global at roughly the same time, it really does
	 * not matter which one gets the earlier time. Just make sure
	 * that the same CPU will always show a monotonic clock.
	 *
	 * Use a read memory barrier to get the latest written
	 * time that was recorded.
	 */
	smp_rmb();
	prev_time = READ_ONCE(s->prev_time);
	now = local_clock_of(raw_smp_processor_id());

	/* aafe104: greater than prev_time; 89529d8b: or equal to it. */
	if ((s64)(now - prev_time) < 0)
		now = plus1 ? prev_time + 1 : prev_time;

	/*
	 * If in an NMI context then dont risk lockups and simply return
	 * the current time.
	 */
	if (unlikely(in_nmi()))
		goto out;

	/* Tracing can cause strange recursion, always use a try lock */
	if (arch_spin_trylock(&s->lock)) {
		/* Reread prev_time in case it was already updated */
		prev_time = READ_ONCE(s->prev_time);
		if ((s64)(now - prev_time) < 0)
			now = plus1 ? prev_time + 1 : prev_time;

		WRITE_ONCE(s->prev_time, now);
		if (hold_ns)
			ndelay(hold_ns);

		/* The unlock acts as the wmb for the above rmb */
		arch_spin_unlock(&s->lock);
	}
 out:
	raw_local_irq_restore(flags);

	return now;
}

static u64 plus1_read(void)
{
	return new_clock(&plus1_tcs, true, 0);
}

static void plus1_update(void)
{
	new_clock(&plus1_tcs, true, window_ns);
}

static u64 fixed_read(void)
{
	return new_clock(&fixed_tcs, false, 0);
}

static void fixed_update(void)
{
	new_clock(&fixed_tcs, false, window_ns);
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_trace_global",
	.read_status = old_read,
	.update = old_update,
	.owner = THIS_MODULE,
	.back_cpu_ns = 0,
	.back_cross_ns = NMICLOCK_ANY,
	.any_rate = true,
};

static struct nmiclock_target plus1 = {
	.name = "zoo_trace_global_plus1",
	.read = plus1_read,
	.update = plus1_update,
	.owner = THIS_MODULE,
	.back_cpu_ns = 0,
	.back_cross_ns = NMICLOCK_ANY,
	.any_rate = true,
};

static struct nmiclock_target fixed = {
	.name = "zoo_trace_global_fixed",
	.read = fixed_read,
	.update = fixed_update,
	.owner = THIS_MODULE,
	.back_cpu_ns = 0,
	.back_cross_ns = NMICLOCK_ANY,
	.any_rate = true,
};

static int __init zoo_init(void)
{
	int ret;

	if (window_ns > 1000000 || !res_ns || res_ns > 100000 || skew_ns > 100000) {
		pr_err("window_ns=%u res_ns=%u skew_ns=%u: want window_ns at most 1000000, res_ns 1..100000, skew_ns at most 100000\n",
		       window_ns, res_ns, skew_ns);
		return -EINVAL;
	}
	ret = nmiclock_register_target(&buggy);
	if (ret)
		return ret;
	ret = nmiclock_register_target(&plus1);
	if (ret)
		goto out_buggy;
	ret = nmiclock_register_target(&fixed);
	if (ret)
		goto out_plus1;
	return 0;

out_plus1:
	nmiclock_unregister_target(&plus1);
out_buggy:
	nmiclock_unregister_target(&buggy);
	return ret;
}

static void __exit zoo_exit(void)
{
	nmiclock_unregister_target(&fixed);
	nmiclock_unregister_target(&plus1);
	nmiclock_unregister_target(&buggy);
}

module_init(zoo_init);
module_exit(zoo_exit);
MODULE_DESCRIPTION("nmiclock zoo: aafe104aa909 and 89529d8b8f8d, trace_clock_global() lock re-entry and +1 step back");
MODULE_LICENSE("GPL");
