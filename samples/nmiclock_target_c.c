// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_target_c: two clocks registered as nmiclock targets, written
 * only against nmiclock's public header, as a third-party module would be.
 *
 * Both are CLOCK_MONOTONIC_RAW rebased at every update: the clock keeps an
 * epoch (the raw time and the clock's time at the last update) and reads
 * as epoch_ns + (raw now - epoch_raw), as a sched_clock keeps an epoch of
 * counter cycles and ns.  Each update moves the epoch to now, which leaves
 * the time read unchanged, if the update is read whole.
 *
 *  - sample_c_twostep, NMI-unsafe on purpose: the update publishes the new
 *    epoch in two plain stores, epoch_raw first.  A read between them (an
 *    NMI on the updating CPU, or any read on another CPU) pairs the new
 *    epoch_raw with the old epoch_ns and reads the time since the previous
 *    update too early: the clock steps back.  What the update computes
 *    between the stores (here a 1 us delay stands for it) is the window.
 *  - sample_c_latch, correct: the epoch in two copies behind a seqcount
 *    latch (seqcount_latch_t, as kernel/time/sched_clock.c does), so a
 *    reader, NMI included, always reads a whole copy.
 *
 * Load nmiclock.ko first, then this module; select a clock with
 * "echo target=sample_c_twostep > /sys/kernel/debug/nmiclock/config".
 * For the suite: bad_registrations=1 tries what nmiclock must refuse (a
 * provider built against another header among them), and
 * writing a target's name to the parameter "unregister" unregisters it
 * while a run may be using it.
 */
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/seqlock.h>
#include <linux/timekeeping.h>

#include <nmiclock.h>		/* include/ of the nmiclock tree */

struct epoch {
	u64 raw;	/* CLOCK_MONOTONIC_RAW at the update */
	u64 ns;		/* the clock's time then */
};

/* ---- sample_c_twostep: two plain stores, no protection ---------------------- */

static struct epoch twostep;

static u64 notrace twostep_read(void)
{
	u64 raw = READ_ONCE(twostep.raw);
	u64 ns = READ_ONCE(twostep.ns);

	return ns + (ktime_get_raw_fast_ns() - raw);
}

static void twostep_update(void)
{
	u64 now = ktime_get_raw_fast_ns();
	u64 ns = twostep.ns + (now - twostep.raw);

	WRITE_ONCE(twostep.raw, now);
	udelay(1);		/* the rest of the update's work */
	WRITE_ONCE(twostep.ns, ns);
}

static struct nmiclock_target twostep_target = {
	.name = "sample_c_twostep",
	.read = twostep_read,
	.update = twostep_update,
	.owner = THIS_MODULE,
};

/* ---- sample_c_latch: a seqcount latch over two copies ------------------------ */

static struct {
	seqcount_latch_t seq;
	struct epoch copy[2];
} latch = {
	.seq = SEQCNT_LATCH_ZERO(latch.seq),
};

static u64 notrace latch_read(void)
{
	unsigned int seq;
	u64 ns;

	do {
		const struct epoch *e;

		seq = raw_read_seqcount_latch(&latch.seq);
		e = &latch.copy[seq & 1];
		ns = e->ns + (ktime_get_raw_fast_ns() - e->raw);
	} while (raw_read_seqcount_latch_retry(&latch.seq, seq));
	return ns;
}

static void latch_update(void)
{
	u64 now = ktime_get_raw_fast_ns();
	struct epoch e = {
		.raw = now,
		.ns = latch.copy[0].ns + (now - latch.copy[0].raw),
	};

	raw_write_seqcount_latch(&latch.seq);
	latch.copy[0] = e;
	udelay(1);		/* as twostep's: same window, now harmless */
	raw_write_seqcount_latch(&latch.seq);
	latch.copy[1] = e;
}

static struct nmiclock_target latch_target = {
	.name = "sample_c_latch",
	.read = latch_read,
	.update = latch_update,
	.owner = THIS_MODULE,
};

/* ---- what a provider may get wrong -------------------------------------------- */

static bool bad_registrations;
module_param(bad_registrations, bool, 0444);
MODULE_PARM_DESC(bad_registrations,
		 "at load, first try registrations nmiclock must refuse, and refuse to load if one is not");

/* Each must be refused with its error: -EINVAL or -EEXIST. */
static int __init try_bad_registrations(void)
{
	static struct nmiclock_target bad[] = {
		{ .name = "Bad-Name", .read = latch_read },
		{ .name = "", .read = latch_read },
		{ .name = NULL, .read = latch_read },
		{ .name = "a_name_of_thirty_two_characters_", .read = latch_read },
		{ .name = "sample_c_noread" },
		{ .name = "sched_clock", .read = latch_read },
		{ .name = "sample_c_twostep", .read = latch_read },
	};
	static const int want[] = {
		-EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EEXIST, -EEXIST,
	};
	int i, ret, wrong = 0;

	BUILD_BUG_ON(ARRAY_SIZE(bad) != ARRAY_SIZE(want));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		bad[i].owner = THIS_MODULE;
		ret = nmiclock_register_target(&bad[i]);
		if (ret == want[i])
			continue;
		pr_err("nmiclock_target_c: bad registration %d: got %d, want %d\n",
		       i, ret, want[i]);
		if (!ret)
			nmiclock_unregister_target(&bad[i]);
		wrong++;
	}
	/* The same structure twice. */
	ret = nmiclock_register_target(&twostep_target);
	if (ret != -EEXIST) {
		pr_err("nmiclock_target_c: registering twice: got %d, want %d\n", ret, -EEXIST);
		wrong++;
	}
	/* A structure of another header's size (one without the promise). */
	ret = __nmiclock_register_target(&twostep_target,
					 offsetof(struct nmiclock_target, back_cpu_ns));
	if (ret != -EINVAL) {
		pr_err("nmiclock_target_c: another header's structure: got %d, want %d\n",
		       ret, -EINVAL);
		wrong++;
	}
	/*
	 * Through the 0.6 entry point (the parentheses keep the header's
	 * macro out), as a module built against that header registers.
	 */
	ret = (nmiclock_register_target)(&latch_target);
	if (ret != -EINVAL) {
		pr_err("nmiclock_target_c: the 0.6 entry point: got %d, want %d\n", ret, -EINVAL);
		if (!ret)
			nmiclock_unregister_target(&latch_target);
		wrong++;
	}
	if (wrong)
		return -EINVAL;
	pr_info("nmiclock_target_c: %zu bad registrations refused as they must be\n",
		ARRAY_SIZE(bad) + 3);
	return 0;
}

/* ---- unregistering while a run uses the target ---------------------------------- */

static bool twostep_registered, latch_registered;

/* Writing a target's name unregisters it now (module exit skips it then). */
static int unregister_set(const char *val, const struct kernel_param *kp)
{
	if (sysfs_streq(val, twostep_target.name) && twostep_registered) {
		nmiclock_unregister_target(&twostep_target);
		twostep_registered = false;
	} else if (sysfs_streq(val, latch_target.name) && latch_registered) {
		nmiclock_unregister_target(&latch_target);
		latch_registered = false;
	} else {
		return -EINVAL;
	}
	return 0;
}

static const struct kernel_param_ops unregister_ops = {
	.set = unregister_set,
};
module_param_cb(unregister, &unregister_ops, NULL, 0200);
MODULE_PARM_DESC(unregister, "write a target's name to unregister it now");

static int __init nmiclock_target_c_init(void)
{
	u64 now = ktime_get_raw_fast_ns();
	int ret;

	/* Both clocks start at CLOCK_MONOTONIC_RAW's time. */
	twostep.raw = now;
	twostep.ns = now;
	latch.copy[0] = (struct epoch){ .raw = now, .ns = now };
	latch.copy[1] = latch.copy[0];

	ret = nmiclock_register_target(&twostep_target);
	if (ret)
		return ret;
	twostep_registered = true;
	if (bad_registrations) {
		ret = try_bad_registrations();
		if (ret)
			goto out_twostep;
	}
	ret = nmiclock_register_target(&latch_target);
	if (ret)
		goto out_twostep;
	latch_registered = true;
	return 0;

out_twostep:
	nmiclock_unregister_target(&twostep_target);
	twostep_registered = false;
	return ret;
}

static void __exit nmiclock_target_c_exit(void)
{
	if (latch_registered)
		nmiclock_unregister_target(&latch_target);
	if (twostep_registered)
		nmiclock_unregister_target(&twostep_target);
}

module_init(nmiclock_target_c_init);
module_exit(nmiclock_target_c_exit);
MODULE_DESCRIPTION("nmiclock targets from C: a two-step update (NMI-unsafe) and a latch");
MODULE_AUTHOR("nmiclock developers");
MODULE_LICENSE("GPL");
