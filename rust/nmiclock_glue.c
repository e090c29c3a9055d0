// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_glue.c: thin, typed wrappers over kernel APIs that the 6.12 Rust
 * `kernel` crate does not wrap (no debugfs, hrtimer, kthread, CPU hotplug,
 * perf or NMI abstraction; module parameters are not in its module! macro;
 * its workqueue cannot cancel), and over static inline functions Rust
 * cannot call.  nmiclock_glue.h says why each function exists, rust/ffi/
 * wraps each in a safe type.
 *
 * Decisions are Rust's: what a write may be (its length, its copy from
 * user memory), when a signal stops the per-CPU threads, that one NMI
 * handler is registered at a time, when the targets' lock is taken.  What
 * stays here is state Rust cannot own: the parameters' variables, the
 * x86 NMI handler's function and data (register_nmi_handler() passes no
 * data pointer), and the targets' mutex (6.12's `kernel` crate has no
 * static Mutex: its Mutex is pinned and initialised at run time).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/perf_event.h>
#include <linux/rcupdate.h>
#include <linux/sched/clock.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/trace.h>
#include <linux/version.h>
#include <linux/workqueue.h>

#include "nmiclock_glue.h"

/* ---- module parameters ------------------------------------------------------ */

/*
 * Declared from NMICLOCK_PARAMS; their help text is in Rust's settings
 * table, which emits it into .modinfo, so modinfo shows it as usual.
 */
#define NMICLOCK_DECLARE_PARAM(name)		\
	static char *name;			\
	module_param(name, charp, 0444);
NMICLOCK_PARAMS(NMICLOCK_DECLARE_PARAM)

#define NMICLOCK_PARAM_ENTRY(name) { #name, &name },
static const struct {
	const char *name;
	char **value;
} nmiclock_params[] = { NMICLOCK_PARAMS(NMICLOCK_PARAM_ENTRY) };

const char *nmiclock_param_name(unsigned int i)
{
	return i < ARRAY_SIZE(nmiclock_params) ? nmiclock_params[i].name : NULL;
}

const char *nmiclock_param_value(unsigned int i)
{
	return i < ARRAY_SIZE(nmiclock_params) ? *nmiclock_params[i].value : NULL;
}

/* ---- the exported clock ------------------------------------------------------ */

EXPORT_SYMBOL_GPL(nmiclock_sched_clock);
EXPORT_SYMBOL_GPL(nmiclock_register_target);
EXPORT_SYMBOL_GPL(__nmiclock_register_target);
EXPORT_SYMBOL_GPL(nmiclock_unregister_target);

/* ---- debugfs ---------------------------------------------------------------- */

static int nmiclock_seq_show(struct seq_file *m, void *v)
{
	const struct nmiclock_file *file = m->private;

	return file->show(m, file->data);
}

static int nmiclock_debugfs_open(struct inode *inode, struct file *file)
{
	return single_open(file, nmiclock_seq_show, inode->i_private);
}

static ssize_t nmiclock_debugfs_write(struct file *file, const char __user *ubuf,
				      size_t len, loff_t *ppos)
{
	struct seq_file *m = file->private_data;
	const struct nmiclock_file *nf = m->private;
	int ret = nf->write(nf->data, ubuf, len);

	return ret ? ret : len;
}

/*
 * debugfs_create_file() gives these a full proxy: debugfs_remove() waits for
 * every ->show() and ->write() in flight, so the nmiclock_file (and what it
 * points at) may go once it returns.
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
					    const struct nmiclock_file *file)
{
	return debugfs_create_file(name, mode, parent, (void *)file,
				   file->write ? &nmiclock_debugfs_rw_fops :
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

/* ---- hrtimer ---------------------------------------------------------------- */

struct nmiclock_timer {
	struct hrtimer timer;
	u64 (*fn)(const void *data);
	const void *data;
};

static enum hrtimer_restart nmiclock_timer_fire(struct hrtimer *timer)
{
	struct nmiclock_timer *t = container_of(timer, struct nmiclock_timer, timer);
	u64 next = t->fn(t->data);

	if (!next)
		return HRTIMER_NORESTART;
	hrtimer_forward_now(timer, ns_to_ktime(next));
	return HRTIMER_RESTART;
}

struct nmiclock_timer *nmiclock_timer_new(u64 (*fn)(const void *data),
					  const void *data)
{
	struct nmiclock_timer *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	/* hrtimer_init() is gone from 7.x and .function is __private there. */
	hrtimer_setup(&t->timer, nmiclock_timer_fire, CLOCK_MONOTONIC,
		      HRTIMER_MODE_REL_PINNED_HARD);
#else
	hrtimer_init(&t->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	t->timer.function = nmiclock_timer_fire;
#endif
	t->fn = fn;
	t->data = data;
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

/* ---- kthreads ---------------------------------------------------------------- */

/* kthread_stop() needs the thread alive: after its work, wait for it. */
static void nmiclock_kthread_wait_stop(void)
{
	set_current_state(TASK_INTERRUPTIBLE);
	while (!kthread_should_stop()) {
		schedule();
		set_current_state(TASK_INTERRUPTIBLE);
	}
	__set_current_state(TASK_RUNNING);
}

static int nmiclock_kthread_fn(void *arg)
{
	const struct nmiclock_callback *cb = arg;

	cb->fn(cb->data);
	nmiclock_kthread_wait_stop();
	return 0;
}

/*
 * kthread() skips the thread function of a thread stopped before it first
 * ran: @cb->fn may never run.  @cb stays with the caller, who frees it once
 * nmiclock_kthread_stop() has returned.
 */
struct task_struct *nmiclock_kthread_start(unsigned int cpu,
					   const struct nmiclock_callback *cb)
{
	struct task_struct *t;

	t = kthread_create_on_cpu(nmiclock_kthread_fn, (void *)cb, cpu,
				  "nmiclock_w/%u");
	if (!IS_ERR(t))
		wake_up_process(t);
	return t;
}

void nmiclock_kthread_stop(struct task_struct *t)
{
	kthread_stop(t);
}

bool nmiclock_kthread_should_stop(void)
{
	/*
	 * A kthread that polls this in a loop that never sleeps (a stress
	 * run's writers) passes here through a Tasks RCU quiescent state, as
	 * cond_resched_tasks_rcu_qs() does (a macro: Rust cannot call it).
	 * Otherwise, on a preemptible kernel, it holds Tasks RCU off until the
	 * run ends, and with it the kprobe optimizer, which waits for Tasks
	 * RCU holding text_mutex, which CPU hotplug needs: a run of a kernel
	 * clock, whose update a kretprobe brackets, then never sees a CPU go
	 * offline.
	 */
	rcu_tasks_qs(current, false);
	return kthread_should_stop();
}

void nmiclock_kthread_prepare_to_sleep(void)
{
	set_current_state(TASK_INTERRUPTIBLE);
}

/* Sleeps until woken or stopped, @max_ms at most (a lost wake-up shows). */
void nmiclock_kthread_sleep(unsigned int max_ms)
{
	if (!kthread_should_stop())
		schedule_timeout(msecs_to_jiffies(max_ms));
	__set_current_state(TASK_RUNNING);
}

bool nmiclock_kthread_sleep_ns(u64 ns)
{
	ktime_t t = ns_to_ktime(ns);
	bool timed_out = false;

	if (!kthread_should_stop())
		timed_out = schedule_hrtimeout(&t, HRTIMER_MODE_REL) == 0;
	__set_current_state(TASK_RUNNING);
	return timed_out;
}

void nmiclock_kthread_set_running(void)
{
	__set_current_state(TASK_RUNNING);
}


struct nmiclock_cpu_work {
	void (*fn)(const void *data, unsigned int cpu);
	const void *data;
	unsigned int cpu;
	struct task_struct *task;
	struct completion done;
};

struct nmiclock_cpu_threads {
	unsigned int nr;
	struct nmiclock_cpu_work works[] __counted_by(nr);
};

static int nmiclock_cpu_thread(void *arg)
{
	struct nmiclock_cpu_work *w = arg;

	w->fn(w->data, w->cpu);
	/* complete_all(): any number of waits return, none consumes it. */
	complete_all(&w->done);
	nmiclock_kthread_wait_stop();
	return 0;
}

/* Stops the threads created so far, lets CPU hotplug go on, frees @t. */
static void nmiclock_cpu_threads_free(struct nmiclock_cpu_threads *t)
{
	unsigned int cpu;

	for_each_online_cpu(cpu)
		if (t->works[cpu].task)
			kthread_stop(t->works[cpu].task);
	cpus_read_unlock();
	kfree(t);
}

struct nmiclock_cpu_threads *
nmiclock_cpu_threads_start(void (*fn)(const void *data, unsigned int cpu),
			   const void *data)
{
	struct nmiclock_cpu_threads *t;
	unsigned int cpu;

	t = kzalloc(struct_size(t, works, nr_cpu_ids), GFP_KERNEL);
	if (!t)
		return ERR_PTR(-ENOMEM);
	t->nr = nr_cpu_ids;
	cpus_read_lock();
	for_each_online_cpu(cpu) {
		struct nmiclock_cpu_work *w = &t->works[cpu];
		struct task_struct *task;

		w->fn = fn;
		w->data = data;
		w->cpu = cpu;
		init_completion(&w->done);
		task = kthread_create_on_cpu(nmiclock_cpu_thread, w, cpu,
					     "nmiclock/%u");
		if (IS_ERR(task)) {
			/* Never woken: kthread_stop() skips their @fn. */
			nmiclock_cpu_threads_free(t);
			return ERR_CAST(task);
		}
		w->task = task;
	}
	for_each_online_cpu(cpu)
		wake_up_process(t->works[cpu].task);
	return t;
}

int nmiclock_cpu_threads_wait_interruptible(struct nmiclock_cpu_threads *t)
{
	unsigned int cpu;

	for_each_online_cpu(cpu)
		if (wait_for_completion_interruptible(&t->works[cpu].done))
			return -EINTR;
	return 0;
}

/*
 * kthread() skips the thread function of a thread stopped before it first
 * ran, so each thread's completion is awaited before it is stopped.
 */
void nmiclock_cpu_threads_end(struct nmiclock_cpu_threads *t)
{
	unsigned int cpu;

	for_each_online_cpu(cpu)
		wait_for_completion(&t->works[cpu].done);
	nmiclock_cpu_threads_free(t);
}

/* ---- workqueue ------------------------------------------------------------- */

struct nmiclock_work {
	struct work_struct work;
	struct nmiclock_callback cb;
};

static void nmiclock_work_fn(struct work_struct *work)
{
	struct nmiclock_work *w = container_of(work, struct nmiclock_work, work);

	w->cb.fn(w->cb.data);
}

struct nmiclock_work *nmiclock_work_new(const struct nmiclock_callback *cb)
{
	struct nmiclock_work *w = kzalloc(sizeof(*w), GFP_KERNEL);

	if (!w)
		return NULL;
	INIT_WORK(&w->work, nmiclock_work_fn);
	w->cb = *cb;
	return w;
}

/* From any context but NMI. */
void nmiclock_work_queue(struct nmiclock_work *w)
{
	schedule_work(&w->work);
}

void nmiclock_work_cancel(struct nmiclock_work *w)
{
	cancel_work_sync(&w->work);
}

void nmiclock_work_free(struct nmiclock_work *w)
{
	cancel_work_sync(&w->work);
	kfree(w);
}

/* ---- perf and NMIs ------------------------------------------------------------ */

static void nmiclock_perf_overflow(struct perf_event *event,
				   struct perf_sample_data *data,
				   struct pt_regs *regs)
{
	const struct nmiclock_callback *cb = event->overflow_handler_context;

	cb->fn(cb->data);
}

struct perf_event *nmiclock_perf_create(unsigned int cpu, bool hw, u64 period,
					bool freq,
					const struct nmiclock_callback *cb)
{
	struct perf_event_attr attr = {
		.type = hw ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
		.config = hw ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(attr),
		.sample_period = period,	/* sample_freq when .freq */
		.freq = freq,
		.pinned = 1,
	};

	return perf_event_create_kernel_counter(&attr, cpu, NULL,
						nmiclock_perf_overflow,
						(void *)cb);
}

void nmiclock_perf_release(struct perf_event *event)
{
	perf_event_release_kernel(event);
}

/* ---- kretprobes ---------------------------------------------------------------- */

#ifdef CONFIG_KRETPROBES
struct nmiclock_bracket {
	struct kretprobe krp;
	void (*fn)(const void *data, bool entered);
	const void *data;
};

static int nmiclock_bracket_entered(struct kretprobe_instance *ri,
				    struct pt_regs *regs)
{
	struct nmiclock_bracket *b =
		container_of(get_kretprobe(ri), struct nmiclock_bracket, krp);

	b->fn(b->data, true);
	return 0;
}
NOKPROBE_SYMBOL(nmiclock_bracket_entered);

static int nmiclock_bracket_returned(struct kretprobe_instance *ri,
				     struct pt_regs *regs)
{
	struct nmiclock_bracket *b =
		container_of(get_kretprobe(ri), struct nmiclock_bracket, krp);

	b->fn(b->data, false);
	return 0;
}
NOKPROBE_SYMBOL(nmiclock_bracket_returned);

struct nmiclock_bracket *nmiclock_bracket_new(const char *symbol,
					      void (*fn)(const void *data, bool entered),
					      const void *data)
{
	struct nmiclock_bracket *b = kzalloc(sizeof(*b), GFP_KERNEL);
	int ret;

	if (!b)
		return ERR_PTR(-ENOMEM);
	b->fn = fn;
	b->data = data;
	b->krp.kp.symbol_name = symbol;
	b->krp.entry_handler = nmiclock_bracket_entered;
	b->krp.handler = nmiclock_bracket_returned;
	ret = register_kretprobe(&b->krp);
	if (ret) {
		kfree(b);
		return ERR_PTR(ret);
	}
	return b;
}

unsigned long nmiclock_bracket_missed(const struct nmiclock_bracket *b)
{
	return READ_ONCE(b->krp.nmissed) + READ_ONCE(b->krp.kp.nmissed);
}

void nmiclock_bracket_free(struct nmiclock_bracket *b)
{
	/* Waits for an RCU grace period: no handler runs after it. */
	unregister_kretprobe(&b->krp);
	kfree(b);
}
#else
struct nmiclock_bracket *nmiclock_bracket_new(const char *symbol,
					      void (*fn)(const void *data, bool entered),
					      const void *data)
{
	return ERR_PTR(-EOPNOTSUPP);
}

unsigned long nmiclock_bracket_missed(const struct nmiclock_bracket *b)
{
	return 0;
}

void nmiclock_bracket_free(struct nmiclock_bracket *b)
{
}
#endif

/* ---- CPUs and CPU hotplug ----------------------------------------------------- */

struct nmiclock_cpuhp {
	struct hlist_node node;
	int state;
	int (*online)(const void *data, unsigned int cpu);
	void (*offline)(const void *data, unsigned int cpu);
	const void *data;
};

static int nmiclock_cpuhp_online(unsigned int cpu, struct hlist_node *node)
{
	struct nmiclock_cpuhp *hp = hlist_entry(node, struct nmiclock_cpuhp, node);

	return hp->online(hp->data, cpu);
}

static int nmiclock_cpuhp_offline(unsigned int cpu, struct hlist_node *node)
{
	struct nmiclock_cpuhp *hp = hlist_entry(node, struct nmiclock_cpuhp, node);

	hp->offline(hp->data, cpu);
	return 0;
}

/* A dynamic multi-instance state of its own, with @hp its one instance. */
struct nmiclock_cpuhp *nmiclock_cpuhp_add(int (*online)(const void *data,
							unsigned int cpu),
					  void (*offline)(const void *data,
							  unsigned int cpu),
					  const void *data)
{
	struct nmiclock_cpuhp *hp = kzalloc(sizeof(*hp), GFP_KERNEL);
	int ret;

	if (!hp)
		return ERR_PTR(-ENOMEM);
	hp->online = online;
	hp->offline = offline;
	hp->data = data;
	ret = cpuhp_setup_state_multi(CPUHP_AP_ONLINE_DYN, "nmiclock:online",
				      nmiclock_cpuhp_online,
				      nmiclock_cpuhp_offline);
	if (ret < 0)
		goto free;
	hp->state = ret;
	ret = cpuhp_state_add_instance_nocalls(hp->state, &hp->node);
	if (ret)
		goto remove;
	return hp;
remove:
	cpuhp_remove_multi_state(hp->state);
free:
	kfree(hp);
	return ERR_PTR(ret);
}

void nmiclock_cpuhp_remove(struct nmiclock_cpuhp *hp)
{
	cpuhp_state_remove_instance_nocalls(hp->state, &hp->node);
	cpuhp_remove_multi_state(hp->state);
	kfree(hp);
}

void nmiclock_cpus_read_lock(void)
{
	cpus_read_lock();
}

void nmiclock_cpus_read_unlock(void)
{
	cpus_read_unlock();
}

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

bool nmiclock_cpu_online(unsigned int cpu)
{
	return cpu < nr_cpu_ids && cpu_online(cpu);
}

bool nmiclock_in_nmi(void)
{
	return in_nmi();
}

bool nmiclock_in_hardirq(void)
{
	return in_hardirq();
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

void nmiclock_sleep_us(unsigned int us)
{
	usleep_range(us, us + us / 8 + 1);
}

void nmiclock_synchronize_rcu(void)
{
	synchronize_rcu();
}

void nmiclock_rcu_read_lock(void)
{
	rcu_read_lock();
}

void nmiclock_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

/* ---- clocks and time ------------------------------------------------------------ */

u64 nmiclock_tick_nsec(void)
{
	return TICK_NSEC;
}

u64 nmiclock_local_clock(void)
{
	return local_clock();
}

u64 nmiclock_boot_fast_ns(void)
{
	return ktime_get_boot_fast_ns();
}

u64 nmiclock_tai_fast_ns(void)
{
	return ktime_get_tai_fast_ns();
}

u64 nmiclock_ktime_get_ns(void)
{
	return ktime_get_ns();
}

/* ---- tracing ---------------------------------------------------------------------- */

#ifdef CONFIG_TRACING
bool nmiclock_tracing_available(void)
{
	return true;
}

struct trace_array *nmiclock_trace_get(void)
{
	struct trace_array *tr = trace_array_get_by_name("nmiclock", NULL);

	if (tr && trace_array_init_printk(tr)) {
		trace_array_put(tr);
		return NULL;
	}
	return tr;
}

void nmiclock_trace_put(struct trace_array *tr)
{
	trace_array_put(tr);
}

void nmiclock_trace_mark(struct trace_array *tr, const char *what, u64 a, u64 b)
{
	trace_array_printk(tr, _THIS_IP_, "%s %llu %llu\n", what, a, b);
}

void nmiclock_tracing_off(void)
{
	tracing_off();
}
#else
bool nmiclock_tracing_available(void)
{
	return false;
}

struct trace_array *nmiclock_trace_get(void)
{
	return NULL;
}

void nmiclock_trace_put(struct trace_array *tr)
{
}

void nmiclock_trace_mark(struct trace_array *tr, const char *what, u64 a, u64 b)
{
}

void nmiclock_tracing_off(void)
{
}
#endif

/* ---- targets ---------------------------------------------------------------------- */

static DEFINE_MUTEX(nmiclock_targets_mutex);

void nmiclock_targets_lock(void)
{
	mutex_lock(&nmiclock_targets_mutex);
}

void nmiclock_targets_unlock(void)
{
	mutex_unlock(&nmiclock_targets_mutex);
}

int nmiclock_target_read(const struct nmiclock_target *t, u64 *ns)
{
	if (t->read_status)
		return t->read_status(ns);
	*ns = t->read();
	return 0;
}

void nmiclock_target_update(const struct nmiclock_target *t)
{
	if (t->update)
		t->update();
}

