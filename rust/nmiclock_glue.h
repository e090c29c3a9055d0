/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nmiclock_glue.h: the C side of nmiclock.ko, for what the 6.12 Rust
 * `kernel` crate does not wrap.
 *
 * Kbuild runs bindgen on this header at build time, and rust/ffi/ includes
 * the result: the Rust side calls exactly what is declared here, so a
 * declaration that does not match its use fails the build.  Nothing in the
 * glue calls into Rust by symbol name: every callback is a function pointer
 * with a data pointer, handed over by a typed Rust wrapper that owns both.
 * The one symbol Rust defines for C, nmiclock_sched_clock(), is exported
 * here and checked against this declaration at compile time.
 *
 * Why each group exists:
 *  - module parameters: the 6.12 module! macro takes none.
 *  - debugfs and seq_file: no Rust abstraction in 6.12.
 *  - hrtimer, kthreads, workqueue, CPU hotplug states and the hotplug lock:
 *    none either.
 *  - perf kernel counters, NMI handlers and NMI IPIs: none either, and the
 *    IPI goes through an arch static call.
 *  - kretprobes: none either; the handler finds its data with the inline
 *    get_kretprobe().
 *  - cpumask, tsc_khz, the kernel's clocks, irq flags, ndelay(), TICK_NSEC,
 *    context tests, the hypervisor's identity (CPUID, the SMCCC UID, the
 *    device tree): macros, inline functions and arch data bindgen does
 *    not see.
 *  - EXPORT_SYMBOL_GPL(nmiclock_sched_clock) and of the target
 *    registration (include/nmiclock.h, defined in Rust): exports need the
 *    C macro.
 *  - targets: the calls through a registered target's pointers (the one
 *    call through a pointer on the NMI path: the code under test), its
 *    owner's reference count, and the mutex of the registry.
 */
#ifndef NMICLOCK_GLUE_H
#define NMICLOCK_GLUE_H

#include <linux/types.h>

#include "../include/nmiclock.h"

struct dentry;
struct perf_event;
struct seq_file;
struct task_struct;

/* ---- module parameters ---------------------------------------------------
 *
 * One line per parameter, in the order of Rust's settings table
 * (rust/settings.rs), which gives each its default, range and help text.
 * All are strings, parsed in Rust, so that every bad value gets the same
 * -EINVAL and one log line; NULL when not given at load.
 */
#define NMICLOCK_PARAMS(X)	\
	X(clock)		\
	X(counter)		\
	X(counter_bits)		\
	X(tear_window_ns)	\
	X(acct)			\
	X(nmi_source)		\
	X(period_us)		\
	X(update_us)		\
	X(duration_s)		\
	X(autostart)		\
	X(min_window_hits)	\
	X(until)		\
	X(disturb)		\
	X(target)		\
	X(wake)			\
	X(poll_us)		\
	X(trace_on_anomaly)

#define NMICLOCK_PARAM_ONE(name) + 1
enum nmiclock_params {
	NMICLOCK_NR_PARAMS = 0 NMICLOCK_PARAMS(NMICLOCK_PARAM_ONE)
};

/* Name and value of parameter @i (< NMICLOCK_NR_PARAMS); NULL past the end. */
const char *nmiclock_param_name(unsigned int i);
const char *nmiclock_param_value(unsigned int i);

/* ---- the exported clock (defined in Rust) --------------------------------- */

/* nmiclock_sched_clock() is declared in include/nmiclock.h, included above. */

/* ---- debugfs ------------------------------------------------------------------ */

/*
 * What a file does, owned by its Rust creator until the file is removed:
 * @show renders it (0, or seq_file's overflow), @write handles one write(2)
 * of @len bytes at user address @ubuf, whole or not at all (NULL:
 * read-only), both with @data.
 */
struct nmiclock_file {
	int (*show)(struct seq_file *m, const void *data);
	int (*write)(const void *data, const char __user *ubuf, size_t len);
	const void *data;
};

struct dentry *nmiclock_debugfs_create_dir(const char *name);
struct dentry *nmiclock_debugfs_create_file(const char *name, umode_t mode,
					    struct dentry *parent,
					    const struct nmiclock_file *file);
void nmiclock_debugfs_remove(struct dentry *dentry);
int nmiclock_seq_write(struct seq_file *m, const char *buf, size_t len);

/* ---- callbacks ------------------------------------------------------------------ */

/* A callback and its data, owned by the Rust wrapper that registered it. */
struct nmiclock_callback {
	void (*fn)(const void *data);
	const void *data;
};

/* ---- hrtimer ------------------------------------------------------------------ */

struct nmiclock_timer;

/*
 * A hard-IRQ CLOCK_MONOTONIC hrtimer, pinned to the CPU that starts it,
 * whose @fn(@data) returns the next period in ns, 0 to stop.
 */
struct nmiclock_timer *nmiclock_timer_new(u64 (*fn)(const void *data),
					  const void *data);
void nmiclock_timer_start(struct nmiclock_timer *t, u64 ns);
void nmiclock_timer_cancel(struct nmiclock_timer *t);
void nmiclock_timer_free(struct nmiclock_timer *t);

/* ---- kthreads ------------------------------------------------------------------ */

/*
 * A kthread bound to @cpu running @cb->fn(@cb->data) at most once (not if
 * stopped before it first ran), then waiting to be stopped; or an ERR_PTR.
 */
struct task_struct *nmiclock_kthread_start(unsigned int cpu,
					   const struct nmiclock_callback *cb);
void nmiclock_kthread_stop(struct task_struct *t);
/*
 * In a kthread of nmiclock_kthread_start() or nmiclock_cpu_threads_start().
 * nmiclock_kthread_should_stop() is also a Tasks RCU quiescent state, for
 * the loops that poll it and never sleep.
 */
bool nmiclock_kthread_should_stop(void);
void nmiclock_kthread_prepare_to_sleep(void);
void nmiclock_kthread_sleep(unsigned int max_ms);
/*
 * After nmiclock_kthread_prepare_to_sleep(): sleeps until woken or stopped,
 * @ns at most (an hrtimer, no slack); true if the time ran out.
 */
bool nmiclock_kthread_sleep_ns(u64 ns);
/* Marks the current task running again without sleeping. */
void nmiclock_kthread_set_running(void);

/*
 * Kthreads running @fn(@data, cpu) once, one bound to each online CPU,
 * all woken at once; or an ERR_PTR (none started).  CPU hotplug waits
 * from here until nmiclock_cpu_threads_end(), which must follow.
 */
struct nmiclock_cpu_threads;
struct nmiclock_cpu_threads *
nmiclock_cpu_threads_start(void (*fn)(const void *data, unsigned int cpu),
			   const void *data);
/* Waits until every thread's @fn has returned: 0, or -EINTR at a signal. */
int nmiclock_cpu_threads_wait_interruptible(struct nmiclock_cpu_threads *t);
/*
 * Waits until every thread's @fn has returned (signals or not), stops the
 * threads, lets CPU hotplug go on and frees @t.
 */
void nmiclock_cpu_threads_end(struct nmiclock_cpu_threads *t);



/* ---- workqueue ------------------------------------------------------------------ */

struct nmiclock_work;

/* A work item running @cb->fn(@cb->data) on the system workqueue. */
struct nmiclock_work *nmiclock_work_new(const struct nmiclock_callback *cb);
void nmiclock_work_queue(struct nmiclock_work *w);
void nmiclock_work_cancel(struct nmiclock_work *w);
void nmiclock_work_free(struct nmiclock_work *w);

/* ---- perf and NMIs ---------------------------------------------------------------- */

/*
 * A pinned kernel counter on @cpu: CPU cycles (@hw; its overflow is an NMI
 * on x86, a pseudo-NMI on arm64 with GICv3 priority masking) or the
 * cpu-clock software event (in ns; hard-IRQ context), overflowing every
 * @period events, or with @freq @period times a second, calling
 * @cb->fn(@cb->data) from there.  An ERR_PTR when it cannot be created,
 * e.g. -ENOENT for cycles without a PMU.
 */
struct perf_event *nmiclock_perf_create(unsigned int cpu, bool hw, u64 period,
					bool freq,
					const struct nmiclock_callback *cb);
void nmiclock_perf_release(struct perf_event *event);

/*
 * Per architecture (nmiclock_glue_<arch>.c) from here to the end of this
 * section: NMI IPIs exist on x86 only; elsewhere registering the handler
 * fails with -EOPNOTSUPP and nmiclock_ipi_new() returns NULL.
 *
 * The NMI_LOCAL handler: @fn(@data) returns true for an NMI it claims.
 * The kernel's handler has no data pointer, so the glue keeps @fn and
 * @data in a slot of its own: one registration at a time, which the
 * caller ensures.
 */
int nmiclock_nmi_register(bool (*fn)(const void *data), const void *data);
void nmiclock_nmi_unregister(void);

/* A CPU mask to send NMI IPIs with, one sender at a time. */
struct nmiclock_ipi;

struct nmiclock_ipi *nmiclock_ipi_new(void);
void nmiclock_ipi_clear(struct nmiclock_ipi *ipi);
/* Adds @cpu to the mask (ids past nr_cpu_ids are ignored). */
void nmiclock_ipi_add(struct nmiclock_ipi *ipi, unsigned int cpu);
/* Sends an NMI IPI to the CPUs of the mask that are online. */
void nmiclock_ipi_send(struct nmiclock_ipi *ipi);
void nmiclock_ipi_free(struct nmiclock_ipi *ipi);

/* ---- kretprobes ---------------------------------------------------------------- */

struct nmiclock_bracket;

/*
 * A kretprobe on the kernel function @symbol that calls @fn(@data, true)
 * when the function is entered and @fn(@data, false) when it returns, on
 * the CPU that runs it, in the context the function runs in (the
 * kretprobe's handlers: preemption off, and as the probed function may
 * be, with interrupts off and its locks held); or an ERR_PTR:
 * -EOPNOTSUPP without CONFIG_KRETPROBES, -ENOENT for no such symbol,
 * -EINVAL where kprobes may not go.  Task context; may sleep.
 */
struct nmiclock_bracket *nmiclock_bracket_new(const char *symbol,
					      void (*fn)(const void *data, bool entered),
					      const void *data);
/* Calls the probed function made that @fn missed (no free instance). */
unsigned long nmiclock_bracket_missed(const struct nmiclock_bracket *b);
/* Unregisters and frees @b: no call of @fn is in flight after it. May sleep. */
void nmiclock_bracket_free(struct nmiclock_bracket *b);

/* ---- CPUs and CPU hotplug ----------------------------------------------------------- */

struct nmiclock_cpuhp;

/*
 * Calls @online(@data, cpu) for each CPU that comes online and
 * @offline(@data, cpu) for each that goes offline, from now until removed
 * (not for CPUs already online).
 */
struct nmiclock_cpuhp *nmiclock_cpuhp_add(int (*online)(const void *data,
							unsigned int cpu),
					  void (*offline)(const void *data,
							  unsigned int cpu),
					  const void *data);
void nmiclock_cpuhp_remove(struct nmiclock_cpuhp *hp);
void nmiclock_cpus_read_lock(void);
void nmiclock_cpus_read_unlock(void);

unsigned int nmiclock_num_online_cpus(void);
unsigned int nmiclock_nr_cpu_ids(void);
unsigned int nmiclock_cpu(void);
bool nmiclock_cpu_online(unsigned int cpu);
bool nmiclock_in_nmi(void);
bool nmiclock_in_hardirq(void);
void nmiclock_preempt_disable(void);
void nmiclock_preempt_enable(void);
unsigned long nmiclock_irq_save(void);
void nmiclock_irq_restore(unsigned long flags);
void nmiclock_ndelay(unsigned int ns);
void nmiclock_cond_resched(void);
void nmiclock_sleep_us(unsigned int us);
void nmiclock_synchronize_rcu(void);
/* rcu_read_lock()/rcu_read_unlock() are static inline: not callable from Rust. */
void nmiclock_rcu_read_lock(void);
void nmiclock_rcu_read_unlock(void);

/* ---- clocks and time ------------------------------------------------------------------ */

/*
 * Per architecture: the clock counter's rate (x86: tsc_khz; arm64:
 * CNTFRQ_EL0 / 1000).
 */
unsigned int nmiclock_counter_khz(void);
u64 nmiclock_tick_nsec(void);
u64 nmiclock_local_clock(void);
/*
 * The kernel's sched_clock() (include/linux/sched/clock.h), declared again
 * so that Rust calls it directly, as refscale does: the bench times it.
 * (The fast ktime accessors Rust calls through the kernel's own bindings;
 * local_clock() is inline on arm64, so it keeps its wrapper.)
 */
u64 sched_clock(void);
u64 nmiclock_boot_fast_ns(void);
u64 nmiclock_tai_fast_ns(void);
u64 nmiclock_ktime_get_ns(void);

/* ---- tracing ------------------------------------------------------------------------ */

/*
 * trace_on_anomaly=1: the kernel's tracing stopped at a run's first
 * anomaly, after a marker in nmiclock's own trace instance. Wrapped for
 * the kernels without CONFIG_TRACING (their stubs are inline, or absent),
 * and trace_array_printk() is variadic, which Rust does not call.
 *
 * nmiclock_tracing_available(): whether this kernel has tracing.
 * nmiclock_trace_get(): the instance "nmiclock" (created if needed), its
 *   printk buffers set up; NULL without tracing or memory. Task context.
 * nmiclock_trace_put(): drops that reference (the instance stays, for
 *   reading after the run).
 * nmiclock_trace_mark(): one record "@what a b" in the instance. Any
 *   context, NMI included (the ring buffer is lock-free).
 * nmiclock_tracing_off(): tracing_off(): stops the top-level buffer. Any
 *   context, NMI included.
 */
struct trace_array;
bool nmiclock_tracing_available(void);
struct trace_array *nmiclock_trace_get(void);
void nmiclock_trace_put(struct trace_array *tr);
void nmiclock_trace_mark(struct trace_array *tr, const char *what, u64 a, u64 b);
void nmiclock_tracing_off(void);

/* ---- the hypervisor ------------------------------------------------------------------ */

/*
 * Per architecture: what identifies the hypervisor the kernel runs under,
 * as the hardware and the firmware say it; Rust tells QEMU TCG, KVM,
 * another hypervisor and the bare hardware apart from it
 * (rust/nmiclock_core/src/environment.rs).  The other architecture's
 * fields stay false and 0.
 *
 * @cpuid_hypervisor: x86: X86_FEATURE_HYPERVISOR (CPUID.1:ECX[31]).
 * @cpuid_max_leaf, @cpuid_signature: x86, with that bit set: CPUID leaf
 *	0x40000000's eax (the hypervisor's highest leaf) and ebx, ecx, edx
 *	(its vendor signature, "TCGTCGTCGTCG" for QEMU TCG,
 *	"KVMKVMKVM\0\0\0" for KVM).
 * @smccc_kvm: arm64: the SMCCC vendor hypervisor UID was KVM's at boot
 *	(kvm_arm_hyp_service_available(ARM_SMCCC_KVM_FUNC_FEATURES)).
 * @dt_dummy_virt: arm64: the device tree's root is compatible with
 *	"linux,dummy-virt", QEMU's virt machine.
 */
struct nmiclock_hypervisor {
	bool cpuid_hypervisor;
	u32 cpuid_max_leaf;
	u8 cpuid_signature[12];
	bool smccc_kvm;
	bool dt_dummy_virt;
};

/* Fills in @id; task context (it may trap to the hypervisor). */
void nmiclock_hypervisor_id(struct nmiclock_hypervisor *id);

/* ---- targets (include/nmiclock.h) --------------------------------------------------- */

/*
 * The registry's mutex (registration, unregistration, and what reads or
 * changes the setting target=).
 */
void nmiclock_targets_lock(void);
void nmiclock_targets_unlock(void);
/*
 * @t's read (any context, NMI included): its read_status if set, else its
 * read; the time in *@ns, and 0 or NMICLOCK_READ_STALLED.  And its update
 * (task or hard-IRQ).
 */
int nmiclock_target_read(const struct nmiclock_target *t, u64 *ns);
void nmiclock_target_update(const struct nmiclock_target *t);

#endif /* NMICLOCK_GLUE_H */
