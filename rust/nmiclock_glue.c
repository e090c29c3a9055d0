// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_glue.c: thin, typed wrappers over kernel APIs that the 6.12 Rust
 * `kernel` crate does not wrap.  No logic lives here; see nmiclock_glue.h
 * for why each function exists and rust/ffi.rs for its Rust side.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/workqueue.h>
#include <linux/sched/clock.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <asm/apic.h>
#include <asm/cpufeature.h>
#include <asm/nmi.h>
#include <asm/tsc.h>

#include "nmiclock_glue.h"

/* ---- module parameters (validated in Rust; see Documentation) ---------- */

static char *clock = "latch";
module_param(clock, charp, 0444);
MODULE_PARM_DESC(clock, "read-side protection: latch, seqcount or unprotected");

static char *counter = "tsc_ordered";
module_param(counter, charp, 0444);
MODULE_PARM_DESC(counter, "counter source: tsc_ordered or tsc");

static char *acct = "cmpxchg";
module_param(acct, charp, 0444);
MODULE_PARM_DESC(acct, "acct integrals update: cmpxchg, irqsave or racy");

static char *nmi_source = "auto";
module_param(nmi_source, charp, 0444);
MODULE_PARM_DESC(nmi_source, "stress interrupt source: auto, perf_hw, perf_sw or ipi");

static char *period_us = "100";
module_param(period_us, charp, 0444);
MODULE_PARM_DESC(period_us, "stress sample period per CPU, 10..1000000 us");

static char *update_us = "0";
module_param(update_us, charp, 0444);
MODULE_PARM_DESC(update_us, "pause of the per-CPU epoch updaters, 0..1000000 us (0: back to back)");

static char *duration_s = "10";
module_param(duration_s, charp, 0444);
MODULE_PARM_DESC(duration_s, "stress run length, 1..86400 s");

static char *autostart = "0";
module_param(autostart, charp, 0444);
MODULE_PARM_DESC(autostart, "start a stress run at load: 0 or 1");

/*
 * Numbers are taken as strings too, so that Rust parses every parameter the
 * same strict way and any bad value gets -EINVAL and one clear line.
 */
static char *counter_bits = "64";
module_param(counter_bits, charp, 0444);
MODULE_PARM_DESC(counter_bits, "counter width, 16..64: narrower wraps sooner");

static char *tear_window_ns = "0";
module_param(tear_window_ns, charp, 0444);
MODULE_PARM_DESC(tear_window_ns, "fault injection: writer pause between its stores, 0..1000000 ns");

void nmiclock_get_params(struct nmiclock_params *p)
{
	p->clock = clock;
	p->counter = counter;
	p->counter_bits = counter_bits;
	p->tear_window_ns = tear_window_ns;
	p->acct = acct;
	p->nmi_source = nmi_source;
	p->period_us = period_us;
	p->update_us = update_us;
	p->duration_s = duration_s;
	p->autostart = autostart;
}

/* ---- the exported clock ------------------------------------------------- */

EXPORT_SYMBOL_GPL(nmiclock_sched_clock);

/* ---- debugfs ------------------------------------------------------------ */

/* Longest write a debugfs file accepts; longer ones get -EINVAL. */
#define NMICLOCK_WRITE_MAX 256

static int nmiclock_seq_show(struct seq_file *m, void *v)
{
	return nmiclock_rs_show(m, m->private);
}

static int nmiclock_debugfs_open(struct inode *inode, struct file *file)
{
	return single_open(file, nmiclock_seq_show, inode->i_private);
}

static ssize_t nmiclock_debugfs_write(struct file *file, const char __user *ubuf,
				      size_t len, loff_t *ppos)
{
	struct seq_file *m = file->private_data;
	char *buf;
	int ret;

	if (len == 0 || len > NMICLOCK_WRITE_MAX) {
		pr_err("%pD: a write of %zu bytes; want 1..%d\n", file, len,
		       NMICLOCK_WRITE_MAX);
		return -EINVAL;
	}
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = nmiclock_rs_write(m->private, buf, len);
	kfree(buf);
	return ret ? ret : len;
}

/*
 * debugfs_create_file() gives these a full proxy: debugfs_remove() waits for
 * every ->show() and ->write() in flight, so Rust data behind @priv may go
 * once it returns.
 */
static const struct file_operations nmiclock_debugfs_ro_fops = {
	.owner = THIS_MODULE,
	.open = nmiclock_debugfs_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

static const struct file_operations nmiclock_debugfs_rw_fops = {
	.owner = THIS_MODULE,
	.open = nmiclock_debugfs_open,
	.read = seq_read,
	.write = nmiclock_debugfs_write,
	.llseek = seq_lseek,
	.release = single_release,
};

struct dentry *nmiclock_debugfs_create_dir(const char *name)
{
	return debugfs_create_dir(name, NULL);
}

struct dentry *nmiclock_debugfs_create_file(const char *name, umode_t mode,
					    struct dentry *parent,
					    const void *priv, bool writable)
{
	return debugfs_create_file(name, mode, parent, (void *)priv,
				   writable ? &nmiclock_debugfs_rw_fops :
					      &nmiclock_debugfs_ro_fops);
}

void nmiclock_debugfs_remove(struct dentry *dentry)
{
	debugfs_remove(dentry);
}

int nmiclock_seq_write(struct seq_file *m, const char *buf, size_t len)
{
	return seq_write(m, buf, len);
}

/* ---- hrtimer ------------------------------------------------------------ */

/*
 * A hard-IRQ hrtimer, pinned to the CPU that starts it, whose callback
 * returns the next period in ns, 0 to stop.
 */
struct nmiclock_timer {
	struct hrtimer timer;
	u64 (*fn)(void);
};

static enum hrtimer_restart nmiclock_timer_fire(struct hrtimer *timer)
{
	struct nmiclock_timer *t = container_of(timer, struct nmiclock_timer, timer);
	u64 next = t->fn();

	if (!next)
		return HRTIMER_NORESTART;
	hrtimer_forward_now(timer, ns_to_ktime(next));
	return HRTIMER_RESTART;
}

struct nmiclock_timer *nmiclock_timer_new(u64 (*fn)(void))
{
	struct nmiclock_timer *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
	hrtimer_init(&t->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	t->timer.function = nmiclock_timer_fire;
	t->fn = fn;
	return t;
}

void nmiclock_timer_start(struct nmiclock_timer *t, u64 ns)
{
	hrtimer_start(&t->timer, ns_to_ktime(ns), HRTIMER_MODE_REL_PINNED_HARD);
}

void nmiclock_timer_cancel(struct nmiclock_timer *t)
{
	hrtimer_cancel(&t->timer);
}

void nmiclock_timer_free(struct nmiclock_timer *t)
{
	hrtimer_cancel(&t->timer);
	kfree(t);
}

/* ---- per-CPU kthreads ---------------------------------------------------- */

struct nmiclock_cpu_work {
	void (*fn)(unsigned int cpu);
	unsigned int cpu;
	struct task_struct *task;
	struct completion done;
};

static int nmiclock_cpu_thread(void *arg)
{
	struct nmiclock_cpu_work *w = arg;

	w->fn(w->cpu);
	complete(&w->done);
	/* kthread_stop() needs the thread alive: wait for it. */
	set_current_state(TASK_INTERRUPTIBLE);
	while (!kthread_should_stop()) {
		schedule();
		set_current_state(TASK_INTERRUPTIBLE);
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/*
 * Runs @fn(cpu) in a kthread bound to each online CPU, all at once, and
 * returns when every one has finished.  CPU hotplug waits meanwhile.
 * kthread() skips the thread function of a thread stopped before it first
 * ran, so each thread's completion is awaited before it is stopped.
 */
int nmiclock_run_on_each_cpu(void (*fn)(unsigned int cpu))
{
	struct nmiclock_cpu_work *works;
	unsigned int cpu;
	int ret = 0;

	works = kcalloc(nr_cpu_ids, sizeof(*works), GFP_KERNEL);
	if (!works)
		return -ENOMEM;
	cpus_read_lock();
	for_each_online_cpu(cpu) {
		struct task_struct *task;

		works[cpu].fn = fn;
		works[cpu].cpu = cpu;
		init_completion(&works[cpu].done);
		task = kthread_create_on_cpu(nmiclock_cpu_thread, &works[cpu],
					     cpu, "nmiclock/%u");
		if (IS_ERR(task)) {
			ret = PTR_ERR(task);
			break;
		}
		works[cpu].task = task;
	}
	if (!ret) {
		for_each_online_cpu(cpu)
			wake_up_process(works[cpu].task);
		for_each_online_cpu(cpu)
			wait_for_completion(&works[cpu].done);
	}
	for_each_online_cpu(cpu)
		if (works[cpu].task)
			kthread_stop(works[cpu].task);
	cpus_read_unlock();
	kfree(works);
	return ret;
}

/* ---- perf events ---------------------------------------------------------- */

static void nmiclock_perf_overflow(struct perf_event *event,
				   struct perf_sample_data *data,
				   struct pt_regs *regs)
{
	nmiclock_rs_sample();
}

/*
 * A pinned kernel counter on @cpu overflowing every @period: CPU cycles
 * (@hw; its overflow is an NMI on x86) or the cpu-clock software event (in
 * ns; hard-IRQ context).  Returns an ERR_PTR when it cannot be created,
 * e.g. -ENOENT for cycles without a PMU.
 */
struct perf_event *nmiclock_perf_create(unsigned int cpu, bool hw, u64 period)
{
	struct perf_event_attr attr = {
		.type = hw ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
		.config = hw ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(attr),
		.sample_period = period,
		.pinned = 1,
	};

	return perf_event_create_kernel_counter(&attr, cpu, NULL,
						nmiclock_perf_overflow, NULL);
}

void nmiclock_perf_release(struct perf_event *event)
{
	perf_event_release_kernel(event);
}

/* ---- NMIs ------------------------------------------------------------------ */

static int nmiclock_nmi_handler(unsigned int type, struct pt_regs *regs)
{
	return nmiclock_rs_nmi() ? NMI_HANDLED : NMI_DONE;
}

int nmiclock_nmi_register(void)
{
	return register_nmi_handler(NMI_LOCAL, nmiclock_nmi_handler, 0, "nmiclock");
}

void nmiclock_nmi_unregister(void)
{
	unregister_nmi_handler(NMI_LOCAL, "nmiclock");
}

/* Only the stress run's one hrtimer sends, so one mask serves. */
static struct cpumask nmiclock_nmi_mask;

/* Sends an NMI IPI to every online CPU, or every one but this one. */
void nmiclock_nmi_send(bool self)
{
	cpumask_copy(&nmiclock_nmi_mask, cpu_online_mask);
	if (!self)
		cpumask_clear_cpu(smp_processor_id(), &nmiclock_nmi_mask);
	if (!cpumask_empty(&nmiclock_nmi_mask))
		__apic_send_IPI_mask(&nmiclock_nmi_mask, NMI_VECTOR);
}

/* ---- the stress run's workers and its stop -------------------------------- */

static int nmiclock_worker_thread(void *arg)
{
	void (*fn)(unsigned int cpu) = arg;

	fn(smp_processor_id());
	/* kthread_stop() needs the thread alive: wait for it. */
	set_current_state(TASK_INTERRUPTIBLE);
	while (!kthread_should_stop()) {
		schedule();
		set_current_state(TASK_INTERRUPTIBLE);
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/* A kthread bound to @cpu running @fn(cpu) until stopped (it polls). */
struct task_struct *nmiclock_worker_start(unsigned int cpu,
					  void (*fn)(unsigned int cpu))
{
	struct task_struct *t;

	t = kthread_create_on_cpu(nmiclock_worker_thread, fn, cpu, "nmiclock_w/%u");
	if (!IS_ERR(t))
		wake_up_process(t);
	return t;
}

void nmiclock_worker_stop(struct task_struct *t)
{
	kthread_stop(t);
}

/*
 * In a worker: nmiclock_prepare_to_sleep(), then announce the sleep, then
 * nmiclock_sleep(): a wake-up after the announcement is never lost.
 */
void nmiclock_prepare_to_sleep(void)
{
	set_current_state(TASK_INTERRUPTIBLE);
}

/* Sleeps at most 100 ms, so that a lost wake-up costs one late wake-up. */
void nmiclock_sleep(void)
{
	if (!kthread_should_stop())
		schedule_timeout(msecs_to_jiffies(100));
	__set_current_state(TASK_RUNNING);
}

/* Wakes @t through the scheduler (any context but NMI). */
void nmiclock_wake(struct task_struct *t)
{
	wake_up_process(t);
}

void nmiclock_synchronize_rcu(void)
{
	synchronize_rcu();
}

/* ---- CPU hotplug ------------------------------------------------------------ */

static int nmiclock_cpu_online_cb(unsigned int cpu)
{
	return nmiclock_rs_cpu_online(cpu);
}

static int nmiclock_cpu_offline_cb(unsigned int cpu)
{
	nmiclock_rs_cpu_offline(cpu);
	return 0;
}

/* A dynamic state whose callbacks run for CPUs going online or offline. */
int nmiclock_cpuhp_setup(void)
{
	return cpuhp_setup_state_nocalls(CPUHP_AP_ONLINE_DYN, "nmiclock:online",
					 nmiclock_cpu_online_cb,
					 nmiclock_cpu_offline_cb);
}

void nmiclock_cpuhp_remove(int state)
{
	cpuhp_remove_state_nocalls(state);
}

void nmiclock_cpus_read_lock(void)
{
	cpus_read_lock();
}

void nmiclock_cpus_read_unlock(void)
{
	cpus_read_unlock();
}

bool nmiclock_should_stop(void)
{
	return kthread_should_stop();
}

void nmiclock_sleep_us(unsigned int us)
{
	usleep_range(us, us + us / 8 + 1);
}

static void nmiclock_work_fn(struct work_struct *work)
{
	nmiclock_rs_work();
}

static DECLARE_WORK(nmiclock_work, nmiclock_work_fn);

/* Runs nmiclock_rs_work() soon in process context (from any context but NMI). */
void nmiclock_work_queue(void)
{
	schedule_work(&nmiclock_work);
}

void nmiclock_work_cancel(void)
{
	cancel_work_sync(&nmiclock_work);
}

/* ---- small wrappers ------------------------------------------------------- */

unsigned int nmiclock_num_online_cpus(void)
{
	return num_online_cpus();
}

unsigned int nmiclock_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

unsigned int nmiclock_cpu(void)
{
	return raw_smp_processor_id();
}

unsigned int nmiclock_tsc_khz(void)
{
	return tsc_khz;
}

u64 nmiclock_local_clock(void)
{
	return local_clock();
}

u64 nmiclock_mono_fast_ns(void)
{
	return ktime_get_mono_fast_ns();
}

/* The kernel clocks the benchmark reads beside nmiclock's. */
u64 nmiclock_sched_clock_kernel(void)
{
	return sched_clock();
}

u64 nmiclock_real_fast_ns(void)
{
	return ktime_get_real_fast_ns();
}

u64 nmiclock_ktime_get_ns(void)
{
	return ktime_get_ns();
}

void nmiclock_preempt_disable(void)
{
	preempt_disable();
}

void nmiclock_preempt_enable(void)
{
	preempt_enable();
}

unsigned long nmiclock_irq_save(void)
{
	unsigned long flags;

	local_irq_save(flags);
	return flags;
}

void nmiclock_irq_restore(unsigned long flags)
{
	local_irq_restore(flags);
}

void nmiclock_ndelay(unsigned int ns)
{
	ndelay(ns);
}

void nmiclock_cond_resched(void)
{
	cond_resched();
}

u64 nmiclock_tick_nsec(void)
{
	return TICK_NSEC;
}

bool nmiclock_in_vm(void)
{
	return boot_cpu_has(X86_FEATURE_HYPERVISOR);
}

bool nmiclock_in_nmi(void)
{
	return in_nmi();
}

bool nmiclock_in_hardirq(void)
{
	return in_hardirq();
}

bool nmiclock_cpu_online(unsigned int cpu)
{
	return cpu_online(cpu);
}
