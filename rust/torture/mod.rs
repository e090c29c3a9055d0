// SPDX-License-Identifier: GPL-2.0

//! The stress run: hammer the clock's update path and the acct updater
//! while interrupts, NMIs where possible, sample them on every CPU, and
//! count every torn read, backward step, stall and bad delta.
//!
//! - [`source`]: the interrupt sources (`nmi_source`);
//! - [`sample`]: what each sample reads and checks;
//! - [`anomaly`]: the first anomalies, kept with their context;
//! - [`wake`]: the wake-up latency probe;
//! - [`show`]: `stats`, `histogram`, `percpu` and the End of test line;
//! - here: the run itself. Writers (a kthread per CPU) move the clock's
//!   epoch as often as `update_us` allows (0: back to back) and run
//!   task-context acct updates, both pausing `tear_window_ns` inside their
//!   windows; `disturb` adds conversion switches or stutter. The run stops
//!   by itself after `duration_s` (a monitor hrtimer queues the stop on a
//!   workqueue) or, with `until=verdict`, as soon as its verdict is certain
//!   (`until=coverage`: not before `duration_s` unless an anomaly, and on
//!   past it until the window hits are met, [`COVERAGE_CAP`] times
//!   `duration_s` at most),
//!   on `stop`, or at unload, and logs one `End of test: SUCCESS`,
//!   `FAILURE` or `INCONCLUSIVE` line with every setting and count.
//!   CPU hotplug: a CPU going offline during a run takes its perf counter,
//!   writer and sleeper down with it; one coming online gets them. Start and
//!   stop hold hotplug off while they set up or tear down every CPU's part.
//!
//! States: `idle` -> `starting` -> `running` -> `stopping` -> `done`
//! (`reset` goes back to `idle`); a run holds the activity guard
//! ([`crate::activity`]) from `starting` to `done`.

pub(crate) mod anomaly;
pub(crate) mod ceiling;
mod sample;
pub(crate) mod series;
pub(crate) mod show;
pub(crate) mod source;
mod wake;

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::activity::{Activity, Guard};
use crate::choices::{Disturb, Until};
use crate::ffi;
use crate::ffi::cpu::{Context, Hotplug};
use crate::ffi::hrtimer::HrTimer;
use crate::ffi::kthread::{Kthread, Worker};
use crate::ffi::nmi::PerfEvent;
use crate::ffi::workqueue::Work;
use crate::fmtbuf::kernel_display;
use crate::kacct;
use crate::kclock;
use crate::percpu::{BoxSlot, PerCpu};
use crate::settings;
use crate::target;

pub(crate) use sample::NMI_HANDLER_NS;

use crate::choices::coverage_cap;

/// [`coverage_cap!`] as a number (`stats`: `coverage_cap`).
pub(crate) const COVERAGE_CAP: u64 = coverage_cap!();

/// `disturb=conversion`: one writer step in this many switches the
/// conversion instead of moving the epoch.
const CONVERSION_EVERY: u64 = 16;
/// `disturb=stutter`: the writers run this long, then pause this long.
const STUTTER_NS: u64 = 500_000_000;

/// How often the run's monitor looks at the clock and the counts.
const MONITOR_NS: u64 = 10_000_000;

/// Why a run stopped, for its End of test line.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Reason {
    Duration = 0,
    Anomaly,
    Coverage,
    CoverageAnomaly,
    CoverageMet,
    CoverageCap,
}

impl Reason {
    const ALL: [Self; 6] = [
        Self::Duration,
        Self::Anomaly,
        Self::Coverage,
        Self::CoverageAnomaly,
        Self::CoverageMet,
        Self::CoverageCap,
    ];

    fn text(self) -> &'static str {
        match self {
            Self::Duration => "duration_s elapsed",
            Self::Anomaly => "until=verdict: an anomaly",
            Self::Coverage => "until=verdict: min_window_hits reached",
            Self::CoverageAnomaly => "until=coverage: an anomaly",
            Self::CoverageMet => "until=coverage: duration_s elapsed, window hits met",
            Self::CoverageCap => concat!(
                "until=coverage: ",
                coverage_cap!(),
                " x duration_s without enough window hits"
            ),
        }
    }
}

/// The stress run: its state, each CPU's part, and what it was set to.
struct RunState {
    /// Why the monitor queued the stop.
    reason: AtomicU32,
    /// Where the run is ([`State`]).
    state: AtomicU32,
    /// Each CPU's part of the run.
    cpus: PerCpu<CpuRun>,
    /// Sample period of the run in progress.
    period_ns: AtomicU64,
    /// When it started and ended (`local_clock()`, ns).
    start_ns: AtomicU64,
    end_ns: AtomicU64,
    /// Set while a ceiling run is set up and runs: its samples are only
    /// counted (an empty handler), and it has no writers and no wake probe.
    ceiling: AtomicBool,
    /// A ceiling run's source (`Source as u32`) and period.
    ceiling_source: AtomicU32,
    ceiling_period_ns: AtomicU64,
    /// The run in progress, if any.
    run: BoxSlot<Run>,
    /// The settings of the run in progress (or the last), taken when it
    /// started.
    settings: settings::RunSettingsCell,
    /// Whether the run in progress is one of the bench's own (its guard is
    /// nested in the bench's): only the bench, a target being unregistered or
    /// the module's unload stop it.
    bench_owns_run: AtomicBool,
}

static STRESS: RunState = RunState {
    reason: AtomicU32::new(Reason::Duration as u32),
    state: AtomicU32::new(State::Idle as u32),
    cpus: PerCpu::new(),
    period_ns: AtomicU64::new(0),
    start_ns: AtomicU64::new(0),
    end_ns: AtomicU64::new(0),
    ceiling: AtomicBool::new(false),
    ceiling_source: AtomicU32::new(0),
    ceiling_period_ns: AtomicU64::new(0),
    run: BoxSlot::new(),
    settings: settings::RunSettingsCell::new(),
    bench_owns_run: AtomicBool::new(false),
};

/// The settings of the run in progress (or the last).
pub(crate) fn run_settings() -> settings::RunSettings {
    STRESS.settings.get()
}
/// Run states, in `STRESS.state`.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum State {
    Idle = 0,
    Starting,
    Running,
    Stopping,
    Done,
}

impl State {
    const ALL: [Self; 5] = [
        Self::Idle,
        Self::Starting,
        Self::Running,
        Self::Stopping,
        Self::Done,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Done => "done",
        }
    }
}

fn state() -> State {
    let v = STRESS.state.load(Ordering::Acquire);
    State::ALL
        .iter()
        .copied()
        .find(|s| *s as u32 == v)
        .unwrap_or(State::Idle)
}

fn set_state(s: State) {
    STRESS.state.store(s as u32, Ordering::Release);
}

fn move_state(from: State, to: State) -> bool {
    STRESS
        .state
        .compare_exchange(from as u32, to as u32, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Whether a run is sampling.
fn running() -> bool {
    state() == State::Running
}

/// Whether a run is starting or sampling: the run's timers keep going.
fn live() -> bool {
    matches!(state(), State::Starting | State::Running)
}

/// The current state's name (the `control` file).
pub(crate) fn state_name() -> &'static str {
    state().name()
}

/// One CPU's part of the run, in its own cache lines.
#[repr(align(64))]
#[derive(Default)]
struct CpuRun {
    checks: sample::Cpu,
    nmi: source::Cpu,
    wake: wake::Cpu,
    /// This CPU's resources, while it takes part in a run.
    res: BoxSlot<CpuRes>,
}

/// A sample on this CPU, from a source (NMI, hard-IRQ context). Only CPUs
/// whose part of the run is set up sample: a CPU coming online gets NMIs
/// before its hotplug callback attaches it.
fn on_sample(ctx: Context) {
    if !running() {
        return;
    }
    STRESS.cpus.with_this_cpu(|c| {
        if !c.res.is_set() {
            return;
        }
        if STRESS.ceiling.load(Ordering::Relaxed) {
            // The empty handler of a ceiling run: count, nothing else.
            c.nmi.ceiling_samples.fetch_add(1, Ordering::Relaxed);
            return;
        }
        sample::sample_timed(&c.checks, ctx);
    });
}

/// What a ceiling run measured.
pub(crate) struct CeilingRate {
    /// Samples taken, all CPUs.
    pub(crate) samples: u64,
    /// How long the run sampled, ms.
    pub(crate) elapsed_ms: u64,
}

/// A writer on one CPU, until the run stops: moves the epoch (or, with
/// `disturb=conversion`, now and then switches the conversion) and runs a
/// task-context acct update, as often as `update_us` allows; with
/// `disturb=stutter` it pauses every other [`STUTTER_NS`]. With another
/// target than `nmiclock`, it calls a registered target's update instead,
/// and reads the target in task context.
fn writer(k: &Kthread) {
    let s = run_settings();
    let (update_us, window, disturb) = (s.update_us, s.tear_window_ns, s.disturb);
    let start = STRESS.start_ns.load(Ordering::Relaxed);
    let kind = target::run_kind();
    let mut n: u64 = 0;
    let mut prev = None;
    let cpus = STRESS.cpus.pin();
    while !k.should_stop() {
        crate::cs_switch::note_kind_after_switch();
        if kind != target::Kind::Nmiclock {
            // Another target: its update (a registered one's), then a
            // read in task context; the kernel's clocks update themselves.
            if let target::Kind::Registered { update: true } = kind {
                target::update_step();
            }
            if let Some(c) = cpus.as_ref().and_then(|s| s.this_cpu()) {
                sample::task_read(&c.checks, &mut prev);
            }
        } else if disturb == Disturb::Stutter
            && (ffi::time::local_clock().wrapping_sub(start) / STUTTER_NS) % 2 == 1
        {
            ffi::cpu::sleep_us(10_000);
            continue;
        } else if disturb == Disturb::Conversion && n % CONVERSION_EVERY == 0 {
            kclock::switch_conversion();
        } else {
            kclock::follow_calibration();
            kclock::update_epoch();
        }
        sample::acct_update(Context::Task, window);
        n = n.wrapping_add(1);
        if update_us != 0 {
            ffi::cpu::sleep_us(update_us);
        } else if n % 16 == 0 {
            ffi::cpu::cond_resched();
        }
    }
}

/// How long a start waits for the kernel's TSC calibration to be final.
const CALIBRATION_WAIT_MS: u32 = 5_000;

/// Waits, at most [`CALIBRATION_WAIT_MS`], while the kernel still runs on
/// `tsc-early` ([`ffi::time::on_early_tsc`]). Its refinement changes
/// `tsc_khz` first and the timekeeper's clocksource, which the reference
/// (`ktime_get_raw_fast_ns()`) follows, only once `tsc` is registered (56
/// ms later in a loaded VM): a run across that gap would compare the
/// clock at the refined rate with a reference at the boot one, and report
/// the kernel's own recalibration as reference mismatches. Task context.
fn wait_final_calibration() {
    if !ffi::time::on_early_tsc() {
        return;
    }
    pr_info!("start: waiting for the kernel's refined TSC calibration (clocksource tsc-early)\n");
    let mut waited_ms: u32 = 0;
    while ffi::time::on_early_tsc() {
        if waited_ms >= CALIBRATION_WAIT_MS {
            pr_warn!(
                "start: clocksource still tsc-early after {waited_ms} ms: its refinement may show as reference_mismatches\n"
            );
            return;
        }
        ffi::cpu::sleep_us(10_000);
        waited_ms = waited_ms.saturating_add(10);
    }
    pr_info!("start: TSC calibration final after {waited_ms} ms\n");
}

/// One CPU's resources in a run: its perf counter (perf sources), its
/// writer and the wake probe's sleeper (neither in a ceiling run). Drops in
/// that order.
struct CpuRes {
    _perf: Option<PerfEvent>,
    _writer: Option<Worker>,
    _sleeper: Option<Worker>,
}

/// Sets up CPU `cpu`'s part of the run in progress (at start, or when the
/// CPU comes online during the run). Task context, CPU hotplug held off.
fn attach(cpu: u32) -> Result {
    let Some(cpus) = STRESS.cpus.pin() else {
        return Ok(());
    };
    let Some(c) = cpus.get(cpu) else {
        return Ok(());
    };
    let source = source::in_use().ok_or(EINVAL)?;
    let perf = source.attach(cpu, STRESS.period_ns.load(Ordering::Relaxed))?;
    let busy = !STRESS.ceiling.load(Ordering::Relaxed);
    let res = KBox::new(
        CpuRes {
            _perf: perf,
            _writer: busy.then(|| Worker::start(cpu, writer)).transpose()?,
            _sleeper: busy
                .then(|| Worker::start(cpu, move |k: &Kthread| wake::sleeper(k, cpu)))
                .transpose()?,
        },
        GFP_KERNEL,
    )?;
    // The first sample once attached is a new base: nothing from before
    // the CPU went down (or from before the run) compares with it.
    c.checks.forget();
    // An old part (there should be none) goes first, unpublished.
    detach(cpu);
    if let Some(sleeper) = &res._sleeper {
        c.wake.publish(sleeper);
    }
    // `detach()` above emptied the slot.
    drop(c.res.put(res));
    // Samples count only while the run is running: so does the time they
    // are expected over (a run starting marks its CPUs when it does).
    if running() {
        c.nmi.attached();
    }
    Ok(())
}

/// Tears down CPU `cpu`'s part of the run, if any (at stop, or when the CPU
/// goes offline), and forgets its previous sample. Task context.
fn detach(cpu: u32) {
    let Some(cpus) = STRESS.cpus.pin() else {
        return;
    };
    let Some(c) = cpus.get(cpu) else {
        return;
    };
    // The controller may still hold the sleeper: wait for it.
    c.wake.unpublish();
    let old = c.res.take();
    c.nmi.detached();
    drop(old);
    c.checks.forget();
    // The pending NMI count stays: an NMI sent just before the CPU went
    // down can be delivered when it comes back, and must still find it.
}

/// What a run holds beyond the per-CPU parts; dropping it stops
/// everything, in order. The guard goes last, after the End of test line.
struct Run {
    deadline: HrTimer,
    waker: Option<HrTimer>,
    source: source::RunPart,
    /// `trace_on_anomaly=1`: the trace instance the first anomaly marks;
    /// dropped after `source`, once no sample can mark it.
    _trace: Option<ffi::trace::InstanceInUse>,
    /// Released once nothing reads the target any more.
    _target: target::Pinned,
    guard: Option<Guard>,
}

impl Drop for Run {
    fn drop(&mut self) {
        self.deadline.cancel();
        self.waker = None;
        self.source.stop_sending();
        // Releasing the counters stops their overflows; stopping the
        // writers ends the updates.
        ffi::cpu::with_cpus_held(|| {
            for cpu in 0..ffi::cpu::nr_cpu_ids() {
                detach(cpu);
            }
        });
        // The NMI handler (if any) goes with `source`, after this.
    }
}

/// The run's monitor (hard-IRQ, every [`MONITOR_NS`]): queues the stop
/// once `duration_s` has passed; with `until=verdict`, once the verdict is
/// certain; with `until=coverage`, at an anomaly, or once `duration_s` has
/// passed and the window hits are met, or at the cap.
fn monitor(stopper: &Work, s: &settings::RunSettings) -> u64 {
    if !live() {
        return 0;
    }
    // Still starting: the run is not in `STRESS.run` yet, so a stop queued now
    // would find none to take (`EBUSY`), be lost with this timer not
    // re-armed, and the run would go on past `duration_s` for good. A
    // starter held up between `build()` and `Running` (its vCPU
    // descheduled by a loaded host) while the writers' first reads of a
    // target already failed did that in the suite. Judge from the next
    // tick on.
    if !running() {
        return MONITOR_NS;
    }
    // A registered target's update, from hard-IRQ context too.
    if let target::Kind::Registered { update: true } = target::run_kind() {
        target::update_step();
    }
    let (verdict, totals) = show::progress();
    if verdict == show::Verdict::Failure {
        sample::note_anomaly();
    }
    let elapsed = ffi::time::local_clock().saturating_sub(STRESS.start_ns.load(Ordering::Relaxed));
    series::record(elapsed, || totals);
    let duration = s.duration_ns;
    let reason = match s.until {
        Until::Verdict if elapsed < duration => match verdict {
            show::Verdict::Failure => Some(Reason::Anomaly),
            show::Verdict::Success => Some(Reason::Coverage),
            show::Verdict::Inconclusive => None,
        },
        Until::Coverage => match verdict {
            show::Verdict::Failure => Some(Reason::CoverageAnomaly),
            _ if elapsed >= duration.saturating_mul(COVERAGE_CAP) => Some(Reason::CoverageCap),
            show::Verdict::Success if elapsed >= duration => Some(Reason::CoverageMet),
            _ => None,
        },
        _ if elapsed >= duration => Some(Reason::Duration),
        _ => None,
    };
    match reason {
        Some(r) => {
            STRESS.reason.store(r as u32, Ordering::Relaxed);
            stopper.queue();
            0
        }
        None => MONITOR_NS,
    }
}

/// Sets up the sources, writers and timers of a run.
fn build(guard: Guard, stopper: &Arc<Work>) -> Result<KBox<Run>> {
    let s = run_settings();
    let target = target::Pinned::of(s.target)?;
    let ceiling = STRESS.ceiling.load(Ordering::Relaxed);
    let period_ns = if ceiling {
        STRESS.ceiling_period_ns.load(Ordering::Relaxed)
    } else {
        s.period_ns
    };
    STRESS.period_ns.store(period_ns, Ordering::Relaxed);
    let stopper = stopper.clone();
    let deadline = HrTimer::new(move || monitor(&stopper, &s))?;
    let (source, part) = if ceiling {
        let c = source::from_u32(STRESS.ceiling_source.load(Ordering::Relaxed)).ok_or(EINVAL)?;
        source::start_exactly(c, period_ns)?
    } else {
        source::choose_and_start(s.nmi_source, period_ns)?
    };
    kacct::use_strategy(s.acct);
    let trace = if s.trace_on_anomaly {
        let Some(i) = ffi::trace::Instance::get() else {
            pr_err!("start: trace_on_anomaly=1: cannot get the trace instance nmiclock\n");
            return Err(ENOMEM);
        };
        let i = i.install();
        ffi::trace::mark(
            kernel::c_str!("nmiclock: run start, period_ns, cpus:"),
            period_ns,
            u64::from(ffi::cpu::num_online_cpus()),
        );
        Some(i)
    } else {
        None
    };
    let mut run = KBox::new(
        Run {
            deadline,
            waker: None,
            source: part,
            _trace: trace,
            _target: target,
            guard: Some(guard),
        },
        GFP_KERNEL,
    )?;
    ffi::cpu::with_cpus_held(|| -> Result {
        for cpu in 0..ffi::cpu::nr_cpu_ids() {
            if ffi::cpu::online(cpu) {
                attach(cpu).inspect_err(|e| {
                    pr_err!(
                        "start: {}: cannot start on cpu{} (error {})\n",
                        source.name(),
                        cpu,
                        e.to_errno()
                    )
                })?;
            }
        }
        Ok(())
    })?;
    if !ceiling {
        run.waker = Some(wake::start_controller()?);
    }
    run.deadline.start(MONITOR_NS);
    Ok(run)
}

/// Zeroes the run's counters, anomalies and histogram (and the clock's and
/// acct updater's counters). Not while a run is in progress.
fn reset_counters() {
    STRESS.cpus.with(|cpus| {
        for (_, c) in cpus.iter() {
            c.checks.reset();
            c.wake.reset();
            c.nmi.reset();
        }
    });
    anomaly::clear();
    kclock::reset_stats();
    kacct::reset();
}

/// The stress run's per-CPU state, its CPU hotplug callbacks and the work
/// item that ends a run, installed at load. Dropping it stops a run in
/// progress and frees the state.
pub(crate) struct Stress {
    hotplug: Option<Hotplug>,
    stopper: Arc<Work>,
}

impl Stress {
    /// Installs the per-CPU state, the hotplug callbacks and the stopper.
    pub(crate) fn new() -> Result<Self> {
        let stopper = Arc::new(
            Work::new(|| {
                let r = STRESS.reason.load(Ordering::Relaxed);
                let reason = Reason::ALL
                    .iter()
                    .copied()
                    .find(|x| *x as u32 == r)
                    .unwrap_or(Reason::Duration);
                let _ = stop(reason.text());
            })?,
            GFP_KERNEL,
        )?;
        STRESS.cpus.install(CpuRun::default)?;
        let hotplug = Hotplug::new(
            |cpu| {
                if live() {
                    if let Err(e) = attach(cpu) {
                        pr_err!(
                            "cpu{}: online during the run, but its part failed to start (error {})\n",
                            cpu,
                            e.to_errno()
                        );
                    }
                }
                Ok(())
            },
            detach,
        );
        match hotplug {
            Ok(hotplug) => Ok(Self {
                hotplug: Some(hotplug),
                stopper,
            }),
            Err(e) => {
                STRESS.cpus.uninstall();
                Err(e)
            }
        }
    }

    /// Starts a run (`start` to `control`, or `autostart`). `EBUSY` if
    /// anything runs.
    pub(crate) fn start(&self) -> Result {
        let guard = Guard::try_begin(Activity::Stress, "start")?;
        self.start_with(guard)
    }

    /// Starts a run that `guard` (a stress run's, possibly nested in
    /// `bench`'s) holds the activity for.
    pub(crate) fn start_with(&self, guard: Guard) -> Result {
        wait_final_calibration();
        // Which counter the reference reads now: all a kernel whose
        // switches the module cannot see gets.
        crate::cs_switch::note_kind();
        // Only from rest: a stop still tearing a run down (`stopping`)
        // would otherwise set `done` over the new run's state.
        if !move_state(State::Idle, State::Starting) && !move_state(State::Done, State::Starting) {
            return Err(EBUSY);
        }
        STRESS
            .bench_owns_run
            .store(guard.is_nested(), Ordering::Relaxed);
        STRESS.settings.set(&settings::RunSettings::now());
        reset_counters();
        sample::start_run();
        series::reset();
        STRESS
            .reason
            .store(Reason::Duration as u32, Ordering::Relaxed);
        STRESS
            .start_ns
            .store(ffi::time::local_clock(), Ordering::Relaxed);
        STRESS.end_ns.store(0, Ordering::Relaxed);
        match build(guard, &self.stopper) {
            Ok(run) => {
                // Only a stop takes a run out, and none was running.
                drop(STRESS.run.put(run));
                set_state(State::Running);
                // From now on samples count, and the time they are
                // expected over runs, on every CPU set up (a CPU that comes
                // online now marks itself in `attach()`; marking twice
                // only restarts the span at the same instant).
                STRESS.cpus.with(|cpus| {
                    for (_, c) in cpus.iter() {
                        if c.res.is_set() {
                            c.nmi.attached();
                        }
                    }
                });
                pr_info!(
                    "start: nmi_source in use: {};{}\n",
                    source::in_use().map_or("?", |s| s.name()),
                    kernel_display!(run_settings())
                );
                Ok(())
            }
            Err(e) => {
                set_state(State::Idle);
                Err(e)
            }
        }
    }

    /// Measures the NMI ceiling of `source` at `period_ns`: a run of
    /// `ms` with an empty handler (samples are only counted), no writers
    /// and no wake probe, that `guard` (the bench's, nested) holds the
    /// activity for. Blocking; the settings are not touched.
    pub(crate) fn ceiling(
        &self,
        bench: &Guard,
        source: source::Source,
        period_ns: u64,
        ms: u32,
    ) -> Result<CeilingRate> {
        STRESS
            .ceiling_source
            .store(source as u32, Ordering::Relaxed);
        STRESS.ceiling_period_ns.store(period_ns, Ordering::Relaxed);
        STRESS.ceiling.store(true, Ordering::Release);
        let started = bench
            .nest(Activity::Stress)
            .and_then(|guard| self.start_with(guard));
        if started.is_ok() {
            ffi::cpu::sleep_us(ms.saturating_mul(1_000));
            let _ = stop("bench: NMI ceiling measured (empty handler, its own period)");
            self.wait_stopped();
            // A target unregistered meanwhile may have stopped the run:
            // its stop drops the run's guard last.
            bench.wait_handed_back();
        }
        STRESS.ceiling.store(false, Ordering::Release);
        started?;
        Ok(CeilingRate {
            samples: STRESS.cpus.sum(|c| &c.nmi.ceiling_samples),
            elapsed_ms: elapsed_ms(),
        })
    }

    /// Waits until a stop in progress (from the deadline's work item) has
    /// finished. Task context.
    pub(crate) fn wait_stopped(&self) {
        self.stopper.cancel_sync();
    }
}

impl Drop for Stress {
    fn drop(&mut self) {
        if stop("module unloaded").is_ok() {
            pr_info!("stopped the run in progress at unload\n");
        }
        // A stop from the deadline's work may be under way: wait for it.
        self.wait_stopped();
        self.hotplug = None;
        STRESS.cpus.uninstall();
    }
}

/// `stop` written to `control`: stops the run in progress, unless there is
/// none or it is one of the bench's own (`EBUSY` and one log line each:
/// the bench's ends with the bench, which a signal to its writer ends).
pub(crate) fn stop_written() -> Result {
    if running() && STRESS.bench_owns_run.load(Ordering::Relaxed) {
        pr_err!("stop: the stress run in progress is the bench's own; it ends with the bench\n");
        return Err(EBUSY);
    }
    stop("stop written to control").inspect_err(|_| pr_err!("stop: no run in progress\n"))
}

/// Stops the run in progress and logs its End of test line. `EBUSY` if
/// none is running (or another stop is under way).
pub(crate) fn stop(why: &str) -> Result {
    if !move_state(State::Running, State::Stopping) {
        return Err(EBUSY);
    }
    // Samples no longer count: neither does the time they are expected
    // over (tearing the run down can take a while on a loaded host).
    STRESS.cpus.with(|cpus| {
        for (_, c) in cpus.iter() {
            c.nmi.detached();
        }
    });
    // The swap gives the run to exactly one stopper.
    let guard = STRESS.run.take().and_then(|mut run| {
        let guard = run.guard.take();
        drop(run);
        guard
    });
    STRESS
        .end_ns
        .store(ffi::time::local_clock(), Ordering::Relaxed);
    kacct::check_integrals();
    show::end_run();
    set_state(State::Done);
    show::end_of_test(why);
    // The activity ends only now, so that nothing resets the counters
    // before they are logged.
    drop(guard);
    Ok(())
}

/// Unregisters target `t` (`nmiclock_unregister_target()`), stopping the
/// run that reads it first.
fn unregister_target(t: &crate::ffi::target::Unregistering<'_>) {
    target::unregister(t, || stop("target unregistered").is_ok());
}

// `nmiclock_register_target()` and `nmiclock_unregister_target()`: the
// registry's, with the stress run stopped for a target going away.
crate::ffi::target::export_registry!(crate::target::register, unregister_target);

/// Zeroes the counters and returns to `idle`. `EBUSY` while anything runs.
pub(crate) fn reset() -> Result {
    let _guard = Guard::try_begin(Activity::Reset, "reset")?;
    reset_counters();
    STRESS.start_ns.store(0, Ordering::Relaxed);
    STRESS.end_ns.store(0, Ordering::Relaxed);
    set_state(State::Idle);
    Ok(())
}

/// The sample period of the run in progress (or the last), in ns.
fn period_ns() -> u64 {
    STRESS.period_ns.load(Ordering::Relaxed)
}

/// Samples expected on CPU `c` so far (see [`source::Cpu::expected`]).
fn expected(c: &CpuRun) -> u64 {
    c.nmi.expected(period_ns())
}

/// How long the run in progress (or the last) has lasted, in ms.
fn elapsed_ms() -> u64 {
    let start = STRESS.start_ns.load(Ordering::Relaxed);
    if start == 0 {
        return 0;
    }
    let end = match STRESS.end_ns.load(Ordering::Relaxed) {
        0 => ffi::time::local_clock(),
        e => e,
    };
    end.saturating_sub(start) / 1_000_000
}
