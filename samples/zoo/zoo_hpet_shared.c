// SPDX-License-Identifier: GPL-2.0
/*
 * zoo_hpet_shared: the HPET clocksource's shared read, and an NMI's read
 * newer than a later task's.
 *
 * Not fixed: found by nmiclock's campaign on 7.3 (Documentation/results.rst,
 * "Every clock of 7.3"), where ktime_get_mono_fast_ns() and
 * ktime_get_raw_fast_ns() stepped back across CPUs by up to tens of us with
 * the HPET as clocksource, and never with the TSC or the ACPI PM timer.
 * arch/x86/kernel/hpet.c's read_hpet() (6.12 and 7.3 alike, SMP 64-bit)
 * lets one CPU read the slow counter for all: the reader that takes
 * hpet.lock reads HPET_COUNTER and stores the value beside the lock; a
 * reader that finds the lock held waits until the value changes or the lock
 * is free, and returns the holder's value.  That value was read when the
 * holder read it, which may be before the waiter was called.  Among readers
 * that take the lock or wait for it, no newer value can exist meanwhile;
 * but an NMI reads the counter directly ("Read HPET directly if in NMI"),
 * so an NMI on any CPU can read, and publish through its caller, a value
 * newer than the one a task on another CPU, called after it, then gets
 * from the holder.  The kernel's fast clocks (ktime_get_*_fast_ns(), the
 * tracers' "mono" clock) are read from NMI context by design: on a machine
 * whose clocksource is the HPET, an NMI's timestamp can be later than the
 * timestamp of an event on another CPU that happened after it, by up to
 * one HPET read (about a microsecond on hardware, tens under QEMU TCG).
 *
 * The model: the counter is ktime_get_raw_fast_ns() since module load,
 * taken at the start of a read that then takes @read_ns (the HPET's round
 * trip, ndelay()).  The lock and the value share one 64-bit word, as
 * union hpet_lock does (bit 0 the lock here, the value above it), so that
 * a waiter reads both at once.  update(), which nmiclock's writers call,
 * is one locked read (interrupts off, as read_hpet() has them): the window
 * in which a waiter on another CPU gets the holder's value.
 *
 * Registered here side by side:
 *  - zoo_hpet_shared: read_hpet()'s scheme as it is.  nmiclock reports
 *    cross_cpu_backwards up to about @read_ns (a task's read below an NMI's
 *    on another CPU), no reference mismatch.
 *  - zoo_hpet_shared_fixed: what we would send upstream: every read, the
 *    NMI's direct one included, passes through a global "newest value"
 *    (pvclock's last_value: a value below it returns it, one above moves it
 *    up with cmpxchg), so that no reader returns less than a value another
 *    has returned.  For the HPET the comparison is on the 32-bit counter,
 *    (s32)(value - last) <= 0, and the cmpxchg is on a line read_hpet()
 *    already shares; the model's counter does not wrap.
 *
 * What was scaled: the read's length, @read_ns (default 20 us), so that
 * under emulation an NMI lands inside a holder's read often enough.
 *
 * Architectures: x86 (the HPET); the model is arch-neutral.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/hardirq.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/processor.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

static unsigned int read_ns = 20000;
module_param(read_ns, uint, 0444);
MODULE_PARM_DESC(read_ns, "how long one counter read takes, ns (default 20000, 1..1000000)");

static u64 load_ns;

#define LOCKED	1ULL

/* union hpet_lock: the lock (bit 0) and the last value read, one word. */
static atomic64_t hpet = ATOMIC64_INIT(0);

/* pvclock's last_value: the newest value any reader returned. */
static atomic64_t newest = ATOMIC64_INIT(0);

/* hpet_readl(HPET_COUNTER): sampled at once, returned @read_ns later. */
static u64 counter_read(void)
{
	u64 v = ktime_get_raw_fast_ns() - load_ns;

	ndelay(read_ns);
	return v;
}

/* read_hpet(), SMP 64-bit, as in 6.12 and 7.3. */
static u64 shared_read(void)
{
	unsigned long flags;
	s64 old, new;
	u64 v;

	if (in_nmi())
		return counter_read();

	old = atomic64_read(&hpet);
	if (old & LOCKED)
		goto contended;

	local_irq_save(flags);
	if (atomic64_try_cmpxchg(&hpet, &old, old | LOCKED)) {
		v = counter_read();
		/* The value, then the unlock: one store here. */
		atomic64_set_release(&hpet, v << 1);
		local_irq_restore(flags);
		return v;
	}
	local_irq_restore(flags);

contended:
	do {
		cpu_relax();
		new = atomic64_read_acquire(&hpet);
	} while ((new >> 1) == (old >> 1) && (new & LOCKED));

	return (u64)new >> 1;
}

/* The fix: no reader returns less than another has returned. */
static u64 newest_read(void)
{
	u64 v = shared_read();
	s64 last = atomic64_read(&newest);

	do {
		if ((s64)v <= last)
			return last;
	} while (!atomic64_try_cmpxchg(&newest, &last, v));
	return v;
}

/* One locked read: the holder's window. */
static void holder_read(void)
{
	shared_read();
}

/* ---- registration ----------------------------------------------------- */

static struct nmiclock_target buggy = {
	.name = "zoo_hpet_shared",
	.read = shared_read,
	.update = holder_read,
	.owner = THIS_MODULE,
};

static struct nmiclock_target fixed = {
	.name = "zoo_hpet_shared_fixed",
	.read = newest_read,
	.update = holder_read,
	.owner = THIS_MODULE,
};

static int __init zoo_init(void)
{
	int ret;

	if (read_ns < 1 || read_ns > 1000000) {
		pr_err("read_ns=%u: want 1..1000000\n", read_ns);
		return -EINVAL;
	}
	load_ns = ktime_get_raw_fast_ns();
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
MODULE_DESCRIPTION("nmiclock zoo: read_hpet()'s shared read against an NMI's direct one (unfixed)");
MODULE_LICENSE("GPL");
