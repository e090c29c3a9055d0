# SPDX-License-Identifier: GPL-2.0
#
# cases_target.sh: targets other than nmiclock's own clock: each of the
# kernel's NMI-safe clocks judged by its promises, under the disturbances
# the kernel provides (clocksource switches, stepping and slewing the time, CPU
# hotplug), the sample targets (a two-step update that must be caught, two
# latches that must survive), registration errors, and unregistering or
# unloading a provider during a run.
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

# kernel_clocks: the kernel clocks the module under test reads, from its
# own declaration (the values of its target parameter, in .modinfo): the
# built-in targets but nmiclock.
kernel_clocks() {
	module_targets "$module" | grep -vx nmiclock | tr '\n' ' '
}

# sample_ko NAME: the sample module NAME.ko, beside the module under test
# (as the kselftest install has it) or in its samples/.
sample_ko() {
	for d in "$(dirname "$module")/samples" "$(dirname "$module")"; do
		[ -e "$d/$1.ko" ] && { echo "$d/$1.ko"; return 0; }
	done
	return 1
}

# What a target run measured, on one line (after stress_run).
target_summary() {
	for k in nmi_samples task_reads max_backstep_ns max_cross_backstep_ns steps_back_allowed \
		steps_back_at_clocksource_switch unpromised_backwards unpromised_cross_cpu_backwards unpromised_reference_errors \
		max_reference_error_ns target_updates kernel_update_calls window_hits_local \
		window_hits_remote window_hits_needed; do
		st $k
		printf '%s=%s ' $k "$st"
	done
	echo
}

# run_loaded [LIMIT]: a stress run with the module loaded as it is, to its
# end (LIMIT seconds at most, default TARGET_S); sets $stress, $eot and
# $verdict as stress_run does.
run_loaded() {
	stress=$(scratch)
	mark stress
	echo start >"$DIR/control" || { echo "start failed"; return 1; }
	wait_done "${1:-$TARGET_S}" $TARGET_S
	stats_copy "$DIR/stats" "$stress"
	eot=$(log_since stress 'nmiclock: End of test: ')
	[ -n "$eot" ] || { echo "no End of test line"; return 1; }
	eot_split
}

# Each kernel clock, a run of TARGET_S (one load for all), with the
# kernel's update of the clock bracketed by a kretprobe: no promise may
# break (never FAILURE). The fast clocks' update (timekeeping_update(),
# run by the tick) must be exercised and met by window_hits_needed reads:
# SUCCESS. Their runs are until=coverage: the update's few microseconds a
# tick are met once or twice a second under TCG, so a run of TARGET_S
# goes on until its hits are in. sched_clock's and local_clock's update runs at boot, at TSC
# refinement or on the wrap timer, not during a run: their run must say
# "update not exercised" and end INCONCLUSIVE, since no read could meet
# the update (on arm64 the wrap timer may, once an hour, fall in the run:
# then any verdict but FAILURE, said). On a kernel without kprobes the
# update cannot be bracketed: every run must say so and be INCONCLUSIVE.
# With -q, only sched_clock and ktime_get_mono_fast_ns: the other clocks
# read through the same paths of nmiclock's, and the same two updates.
t_target_kernel_clocks() {
	wait_clocksource
	load counter_bits=32 duration_s=$TARGET_S || { echo "insmod failed"; return 1; }
	kprobes=yes
	[ -d /sys/kernel/debug/kprobes ] || kprobes=no
	clocks=$(kernel_clocks)
	[ -n "$clocks" ] || { echo "no kernel clock in $module's target parameter"; return 1; }
	[ $quick = 0 ] || clocks="sched_clock ktime_get_mono_fast_ns"
	ret=0 starved=
	for t in $clocks; do
		case $t in ktime_get_*) until=coverage limit=$((TARGET_S * 30)) ;; *) until=duration limit=$TARGET_S ;; esac
		echo "target=$t until=$until" >"$DIR/config" || { echo "target=$t until=$until refused"; ret=1; continue; }
		run_loaded $limit || { echo "$t: the run failed"; ret=1; continue; }
		st kernel_update_coverage
		cov=$st
		echo "$t: $verdict, $cov; $(target_summary)"
		[ "$st_nmi_samples" -gt 0 ] || { echo "$t: no NMI samples"; ret=1; }
		[ "$st_task_reads" -gt 0 ] || { echo "$t: no task-context reads"; ret=1; }
		case $kprobes/$t/$cov/$verdict in
		*/FAILURE) echo "$t: a promise broken"; ret=1 ;;
		no/*/"update not bracketed"*/INCONCLUSIVE) ;;
		no/*) echo "$t: no kprobes here, yet '$cov', $verdict"; ret=1 ;;
		yes/ktime_get_*/exercised/SUCCESS) ;;
		# Too few bracketed updates met by the coverage cap: the host's
		# pace; the case is a skip unless another clock failed it.
		yes/ktime_get_*/*/INCONCLUSIVE) starved="$starved $t($cov)" ;;
		yes/ktime_get_*) echo "$t: want the update exercised and SUCCESS"; ret=1 ;;
		yes/*/"update not exercised"/INCONCLUSIVE) ;;
		yes/*/exercised/*) echo "$t: its update ran during the run (kernel_update_calls=$st_kernel_update_calls)" ;;
		*) echo "$t: want 'update not exercised' and INCONCLUSIVE"; ret=1 ;;
		esac
	done
	unload || ret=1
	if [ $ret = 0 ] && [ -n "$starved" ]; then
		echo "SKIP: starved guest: INCONCLUSIVE by the coverage cap for$starved"
		return $KSFT_SKIP
	fi
	return $ret
}

# disturb WHAT...: rounds of the disturbances WHAT (lib.sh's disturb_round:
# cs, time, slew, hotplug) during the run in progress, for TARGET_S, one
# round at least, then the run is stopped: however slow a loaded host
# makes them, they all happen inside the run. What could not be done is
# said, and fails the case.
disturb() {
	disturb_begin
	uptime_s
	end=$((up_s + TARGET_S))
	n=0
	while [ $n = 0 ] || { uptime_s; [ $up_s -lt $end ]; }; do
		for what; do
			disturb_round "$what"
		done
		n=$((n + 1))
	done
	reads_after || disturb_bad="$disturb_bad|(no read after the last disturbance)"
	state_is "$DIR/control" running || disturb_bad="$disturb_bad|(the run ended before the disturbances did)"
	echo stop >"$DIR/control"
	disturb_end "$@"
	{
		echo "$n rounds of: $*$(case " $* " in *" cs "*) echo " ($disturb_sources)" ;; esac)"
		disturb_failed
	} >"$SCRATCH/disturb"
}

# disturbed_run TARGET WHAT...: a run of the kernel clock TARGET during
# which disturb does WHAT (it stops the run; duration_s is only a cap, so
# one window hit makes it SUCCESS).
disturbed_run() {
	t=$1
	shift
	stress_during="disturb $*"
	stress_run 60 target=$t min_window_hits=1 >/dev/null || { stress_during=; echo "$t: the run failed"; return 1; }
	stress_during=
	echo "$t, disturbed ($(tr '\n' ' ' <"$SCRATCH/disturb")): $verdict; $(target_summary)"
	! grep -q '^FAILED:' "$SCRATCH/disturb"
}

# The kernel's NMI-safe clocks while the time is stepped and slewed and
# CPU 1 goes offline and back: their promises hold (no anomaly: the mono
# clock's slope changes are the kernel's "few nanoseconds" case);
# CLOCK_REALTIME's steps back show as unpromised, with their size, and do
# not fail the run. Not ktime_get_raw_fast_ns as a target: neither step
# nor slew moves it, the same update publishes it beside mono's, and both
# runs read it throughout as their reference.
t_target_disturbed() {
	destructive "steps and slews the real-time clock and takes CPU 1 offline" || return $KSFT_SKIP
	command -v adjtimex >/dev/null ||
		{ echo "SKIP: no adjtimex (busybox's applet, or Debian's adjtimex package) to slew the clock with"; return 4; }
	ret=0
	for t in ktime_get_mono_fast_ns ktime_get_real_fast_ns; do
		disturbed_run $t time slew hotplug || { ret=1; continue; }
		# No anomaly; the tick's update met or not (its coverage is
		# t_target_kernel_clocks' to judge).
		case $verdict in
		SUCCESS | INCONCLUSIVE) ;;
		*) echo "$t: verdict $verdict, want no anomaly"; ret=1 ;;
		esac
		if [ $t = ktime_get_real_fast_ns ] && [ "$st_unpromised_backwards" = 0 ] &&
			[ "$st_unpromised_cross_cpu_backwards" = 0 ]; then
			echo "$t: the time was stepped back 1 s, and no step back was seen"
			ret=1
		fi
	done
	return $ret
}

# The fast clocks while the clocksource is switched. The kernel loses the
# switch's own stretch (change_clocksource() reads the old clocksource,
# then the new one to count from), so a reader of the fast timekeeper's
# old copy may be ahead of a reader of the new by up to it: its "not
# monotonic across an update". The module times each switch and allows
# these clocks a step back up to its length, during a switch or that long
# after it (steps_back_at_clocksource_switch), and spans no switch with a
# reference check. A run that finds only steps back beyond that is a
# kernel finding, an expected failure with their size: on the HPET, whose
# read_hpet() hands a waiter the lock holder's older value while an NMI
# reads the counter itself (samples/zoo/zoo_hpet_shared.c). Any other
# anomaly fails the case.
t_target_cs_switch() {
	destructive "switches the clocksource" || return $KSFT_SKIP
	n=$(wc -w </sys/devices/system/clocksource/clocksource0/available_clocksource)
	[ "$n" -ge 2 ] || { echo "SKIP: only one clocksource"; return 4; }
	ret=0 found=
	for t in ktime_get_mono_fast_ns ktime_get_raw_fast_ns; do
		disturbed_run $t cs || { ret=1; continue; }
		case $verdict in
		SUCCESS | INCONCLUSIVE) ;;
		FAILURE)
			steps=$(($st_backwards + $st_cross_cpu_backwards))
			if [ "$st_errors" = "$steps" ]; then
				found="$found $t stepped back up to $st_max_cross_backstep_ns ns across CPUs;"
			else
				echo "$t: anomalies besides steps back"; ret=1
			fi ;;
		*) echo "$t: verdict $verdict"; ret=1 ;;
		esac
	done
	[ $ret = 0 ] && [ -n "$found" ] && { echo "XFAIL: kernel finding (read_hpet(), zoo_hpet_shared):$found promised: 1000 ns, or a switch's own length"; return $KSFT_XFAIL; }
	return $ret
}

# Loads the two sample modules (a stress_prep).
load_samples() {
	c=$(sample_ko nmiclock_target_c) && r=$(sample_ko nmiclock_target_rust) ||
		{ echo "SKIP: the target samples (nmiclock_target_c.ko, nmiclock_target_rust.ko) are not beside the module"; return 4; }
	insmod "$c" || { echo "insmod $c failed"; return 1; }
	insmod "$r" || { echo "insmod $r failed"; return 1; }
	echo "target=$target" >"$DIR/config" || { echo "target=$target refused"; return 1; }
}

# target_caught NAME / target_survives NAME: caught() and survives() on a
# sample target.
# samples_here: both target samples are beside the module (else a SKIP
# line).
samples_here() {
	sample_ko nmiclock_target_c >/dev/null && sample_ko nmiclock_target_rust >/dev/null && return 0
	echo "SKIP: the target samples (nmiclock_target_c.ko, nmiclock_target_rust.ko) are not beside the module"
	return 1
}

target_caught() {
	samples_here || return $KSFT_SKIP
	target=$1 stress_prep=load_samples
	caught
	rc=$?
	stress_prep=
	[ $rc = $KSFT_XFAIL ] && target_summary
	return $rc
}

target_survives() {
	samples_here || return $KSFT_SKIP
	target=$1 stress_prep=load_samples
	survives
	rc=$?
	stress_prep=
	target_summary
	return $rc
}

t_target_twostep() { target_caught sample_c_twostep; }
t_target_latch_c() { target_survives sample_c_latch; }
t_target_latch_rust() { target_survives sample_rust_latch; }

# Loads the tracers' clocks (a stress_prep).
load_trace_clocks() {
	insmod "$tc" || { echo "insmod $tc failed"; return 1; }
	echo "target=$target" >"$DIR/config" || { echo "target=$target refused"; return 1; }
}

# The tracers' clocks, as the kernel exports them, where it has them
# (CONFIG_TRACE_CLOCK: the debug kernel): trace_clock_global keeps its
# one promise (monotonic on each CPU) while NMIs read it inside a
# task-context call of it, which raises its prev_time under the trylock
# (its update); trace_clock_local promises nothing, has no update, and
# is reported. Runs of 1 s (on past it until the windows are met): the
# update is met thousands of times a second, and the case runs on the
# debug kernel, the suite's long pole.
t_target_trace_clocks() {
	tc=$(sample_ko nmiclock_trace_clocks) ||
		{ echo "SKIP: no nmiclock_trace_clocks.ko: this kernel has no CONFIG_TRACE_CLOCK"; return 4; }
	ret=0 starved=
	stress_prep=load_trace_clocks pressure_s=$PRESSURE_S PRESSURE_S=1
	for target in trace_clock_global trace_clock_local; do
		survives >/dev/null
		case $? in
		0) ;;
		$KSFT_SKIP) starved="$starved $target" ;;
		*) echo "$target: $verdict, want SUCCESS"; ret=1 ;;
		esac
		echo "$target: $verdict; $(target_summary)"
	done
	stress_prep= PRESSURE_S=$pressure_s
	if [ $ret = 0 ] && [ -n "$starved" ]; then
		echo "SKIP: starved guest: INCONCLUSIVE by the coverage cap for$starved"
		return $KSFT_SKIP
	fi
	return $ret
}

# Registrations nmiclock must refuse, each with its error and one log
# line (the C sample tries them at load with bad_registrations=1).
t_target_bad_registrations() {
	c=$(sample_ko nmiclock_target_c) || { echo "SKIP: the target samples (nmiclock_target_c.ko, nmiclock_target_rust.ko) are not beside the module"; return 4; }
	load || { echo "insmod failed"; return 1; }
	mark badreg
	ret=0
	insmod "$c" bad_registrations=1 || { echo "the sample found a bad registration accepted"; ret=1; }
	log=$(log_since badreg)
	printf '%s\n' "$log" | grep -E 'nmiclock: register_target|nmiclock_target_c' | sed 's/^\[[^]]*\] //'
	n=$(printf '%s\n' "$log" | grep -c 'nmiclock: register_target: ')
	[ "$n" = 10 ] || { echo "$n refusal lines, want 10 (one per bad registration)"; ret=1; }
	[ "$(stat_value "$DIR/stats" registered_targets)" = 2 ] ||
		{ echo "registered_targets: $(stat_value "$DIR/stats" registered_targets), want 2"; ret=1; }
	echo target=no_such_target >"$DIR/config" 2>/dev/null && { echo "target=no_such_target accepted"; ret=1; }
	unload_all || ret=1
	left=$(left_behind)
	[ -z "$left" ] || { echo "$left"; ret=1; }
	return $ret
}

# A provider during a run of its target: rmmod of it, or of nmiclock,
# is refused while the run holds it; unregistering the target stops the
# run first and sets target back to nmiclock; then both unload, in order.
t_target_unregister() {
	c=$(sample_ko nmiclock_target_c) || { echo "SKIP: the target samples (nmiclock_target_c.ko, nmiclock_target_rust.ko) are not beside the module"; return 4; }
	wait_clocksource
	load counter_bits=32 duration_s=60 || { echo "insmod failed"; return 1; }
	ret=0
	insmod "$c" || { unload; echo "insmod $c failed"; return 1; }
	echo target=sample_c_latch >"$DIR/config" || { echo "target=sample_c_latch refused"; ret=1; }
	mark unreg
	echo start >"$DIR/control" || { echo "start failed"; ret=1; }
	sleep 0.5
	rmmod nmiclock_target_c 2>/dev/null && { echo "rmmod of the provider during its run succeeded"; ret=1; }
	rmmod nmiclock 2>/dev/null && { echo "rmmod nmiclock with a provider loaded succeeded"; ret=1; }
	state_is "$DIR/control" running || { echo "the run did not survive the refused rmmods"; ret=1; }
	echo sample_c_latch >/sys/module/nmiclock_target_c/parameters/unregister ||
		{ echo "unregistering failed"; ret=1; }
	state_is "$DIR/control" done || { echo "state $st_line after unregistering, want done"; ret=1; }
	log=$(log_since unreg)
	printf '%s\n' "$log" | grep -E 'nmiclock: (stopped|target|End of test)' | sed 's/^\[[^]]*\] //' | cut -c1-160
	printf '%s\n' "$log" | grep -q 'End of test: .*(target unregistered)' ||
		{ echo "no End of test line saying the target was unregistered"; ret=1; }
	[ "$(stat_value "$DIR/config" target)" = nmiclock ] ||
		{ echo "target is $(stat_value "$DIR/config" target), want nmiclock"; ret=1; }
	rmmod nmiclock_target_c || { echo "rmmod of the provider failed"; ret=1; }
	unload || { echo "rmmod nmiclock failed"; ret=1; }
	left=$(left_behind)
	[ -z "$left" ] || { echo "$left"; ret=1; }
	return $ret
}

case_add t_target_kernel_clocks "targets: each kernel NMI-safe clock keeps its promises under NMIs"
case_add t_target_disturbed "targets: mono and real fast clocks while the time is stepped and slewed and CPU 1 goes offline"
case_add t_target_cs_switch "targets: mono and raw fast clocks across clocksource switches"
case_add t_target_twostep "targets: a module's clock that publishes its update in two steps is caught"
case_add t_target_latch_c "targets: a module's latch clock (C) survives"
case_add t_target_latch_rust "targets: a module's latch clock (Rust) survives"
case_add t_target_trace_clocks "targets: the tracers' clocks keep their promises (a kernel with CONFIG_TRACE_CLOCK)"
case_add t_target_bad_registrations "targets: bad registrations refused with EINVAL or EEXIST and one line each"
case_add t_target_unregister "targets: provider unload refused during its run, unregistering stops the run"
