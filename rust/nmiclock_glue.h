/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nmiclock_glue.h: the C side of nmiclock, for what the 6.12 Rust `kernel`
 * crate does not wrap.  rust/ffi.rs declares the same functions for Rust and
 * wraps them in safe types; nothing else in Rust calls them.
 *
 * Why each group exists:
 *  - module parameters: the 6.12 module! macro takes no params.
 *  - debugfs and seq_file: no Rust abstraction in 6.12.
 *  - hrtimer, per-CPU kthreads, workqueue, CPU hotplug states and the
 *    hotplug lock: no Rust abstraction in 6.12.
 *  - perf kernel counters, NMI handlers and NMI IPIs: none either, and the
 *    IPI goes through an arch static call.
 *  - cpumask, tsc_khz, local_clock(), irq flags, ndelay(), TICK_NSEC, CPU
 *    features: macros, inline functions and arch data bindgen does not see.
 *  - EXPORT_SYMBOL_GPL(nmiclock_sched_clock): exports need the C macro.
 *
 * The Rust side implements the nmiclock_rs_*() callbacks and
 * nmiclock_sched_clock().
 */
#ifndef NMICLOCK_GLUE_H
#define NMICLOCK_GLUE_H

#include <linux/types.h>

struct dentry;
struct perf_event;
struct seq_file;
struct nmiclock_timer;
struct task_struct;

/* Module parameters as given at load, all strings, for Rust to validate. */
struct nmiclock_params {
	const char *clock;
	const char *counter;
	const char *counter_bits;
	const char *tear_window_ns;
	const char *acct;
	const char *nmi_source;
	const char *period_us;
	const char *update_us;
	const char *duration_s;
	const char *autostart;
};

void nmiclock_get_params(struct nmiclock_params *p);

/* Implemented in Rust (rust/ffi.rs). */
int nmiclock_rs_show(struct seq_file *m, const void *priv);
int nmiclock_rs_write(const void *priv, const char *buf, size_t len);
u64 nmiclock_sched_clock(void);
void nmiclock_rs_sample(void);
int nmiclock_rs_nmi(void);
void nmiclock_rs_work(void);
int nmiclock_rs_cpu_online(unsigned int cpu);
void nmiclock_rs_cpu_offline(unsigned int cpu);

struct dentry *nmiclock_debugfs_create_dir(const char *name);
struct dentry *nmiclock_debugfs_create_file(const char *name, umode_t mode,
					    struct dentry *parent,
					    const void *priv, bool writable);
void nmiclock_debugfs_remove(struct dentry *dentry);
int nmiclock_seq_write(struct seq_file *m, const char *buf, size_t len);

struct nmiclock_timer *nmiclock_timer_new(u64 (*fn)(void));
void nmiclock_timer_start(struct nmiclock_timer *t, u64 ns);
void nmiclock_timer_cancel(struct nmiclock_timer *t);
void nmiclock_timer_free(struct nmiclock_timer *t);

int nmiclock_run_on_each_cpu(void (*fn)(unsigned int cpu));

struct perf_event *nmiclock_perf_create(unsigned int cpu, bool hw, u64 period);
void nmiclock_perf_release(struct perf_event *event);

int nmiclock_nmi_register(void);
void nmiclock_nmi_unregister(void);
void nmiclock_nmi_send(bool self);

struct task_struct *nmiclock_worker_start(unsigned int cpu,
					  void (*fn)(unsigned int cpu));
void nmiclock_worker_stop(struct task_struct *t);
void nmiclock_prepare_to_sleep(void);
void nmiclock_sleep(void);
void nmiclock_wake(struct task_struct *t);
void nmiclock_synchronize_rcu(void);
int nmiclock_cpuhp_setup(void);
void nmiclock_cpuhp_remove(int state);
void nmiclock_cpus_read_lock(void);
void nmiclock_cpus_read_unlock(void);
bool nmiclock_should_stop(void);
void nmiclock_sleep_us(unsigned int us);
void nmiclock_work_queue(void);
void nmiclock_work_cancel(void);

unsigned int nmiclock_num_online_cpus(void);
unsigned int nmiclock_nr_cpu_ids(void);
unsigned int nmiclock_cpu(void);
unsigned int nmiclock_tsc_khz(void);
u64 nmiclock_local_clock(void);
u64 nmiclock_mono_fast_ns(void);
u64 nmiclock_sched_clock_kernel(void);
u64 nmiclock_real_fast_ns(void);
u64 nmiclock_ktime_get_ns(void);
void nmiclock_preempt_disable(void);
void nmiclock_preempt_enable(void);
unsigned long nmiclock_irq_save(void);
void nmiclock_irq_restore(unsigned long flags);
void nmiclock_ndelay(unsigned int ns);
void nmiclock_cond_resched(void);
u64 nmiclock_tick_nsec(void);
bool nmiclock_in_vm(void);
bool nmiclock_in_nmi(void);
bool nmiclock_in_hardirq(void);
bool nmiclock_cpu_online(unsigned int cpu);

#endif /* NMICLOCK_GLUE_H */
