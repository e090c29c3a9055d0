# SPDX-License-Identifier: GPL-2.0
#
# cases_stress.sh: the stress run: the default run, each busted design caught,
# the interrupt sources, rmmod and CPU hotplug during a run, start/stop
# cycles, and the inspection files.
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

# stress_run SECONDS PARAM...: a stress run of SECONDS with counter_bits=32
# and PARAMs, to its end; leaves stats in $stress, the End of test line in
# $eot and its verdict in $verdict. Fails if the run does not start or end.
stress_run() {
	secs=$1
	shift
	wait_clocksource
	load counter_bits=32 duration_s="$secs" "$@" || { echo "insmod $* failed"; return 1; }
	# $stress_prep (cases_target.sh): what to do between load and start.
	if [ -n "${stress_prep:-}" ] && ! $stress_prep; then
		unload_all
		return 1
	fi
	stress=$(scratch)
	mark stress
	if ! echo start >"$DIR/control"; then
		echo "start failed"
		unload_all
		return 1
	fi
	# $stress_during (cases_target.sh): what to do while it runs; it may
	# stop the run.
	[ -z "${stress_during:-}" ] || $stress_during
	# until=coverage may run coverage_cap times as long (stats says how
	# many); until=verdict may end at once, and so may a run that
	# $stress_during stopped; the others not before their duration.
	limit=$secs earliest=$secs
	case " $* " in
	*" until=coverage "*)
		while IFS= read -r l; do
			case $l in "coverage_cap: "*) limit=$((secs * ${l#*: })) ;; esac
		done <"$DIR/stats" ;;
	*" until=verdict "*) earliest=0 ;;
	esac
	[ -z "${stress_during:-}" ] || earliest=0
	wait_done "$limit" "$earliest"
	stats_copy "$DIR/stats" "$stress"
	eot=$(log_since stress 'nmiclock: End of test: ')
	unload_all
	[ "$st_state" = done ] || { echo "the run did not end"; return 1; }
	[ -n "$eot" ] || { echo "no End of test line"; return 1; }
	eot_split
	echo "$* -> $verdict ($why)"
	# What it counted: the counts its End of test line gives (the module
	# chooses them, per target), and how long it ran.
	for kv in nmi_source_used=${eot#* nmi_source_used=}; do
		printf '%s: %s ' "${kv%%=*}" "${kv#*=}"
	done
	st elapsed_ms
	echo "elapsed_ms: $st"
}

# eot_split: the verdict of the End of test line $eot in $verdict, the
# reason in brackets after it in $why.
eot_split() {
	verdict=${eot#*End of test: }
	why=${verdict#* (}
	why=${why%%)*}
	verdict=${verdict%% *}
}

# wait_done SECONDS [EARLIEST]: waits until the run in progress is done,
# SECONDS and 30 more at most; a run that cannot end before EARLIEST
# seconds is not polled until then (each poll's sleep is a process: CPU
# the run would have had).
wait_done() {
	[ "${2:-0}" -gt 0 ] && sleep "$2"
	i=$((${2:-0} * 10))
	while ! state_is "$DIR/control" done && [ $i -lt $(($1 * 10 + 300)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

# Window hits of the last stress_run, local and remote.
hits() {
	echo $(($st_window_hits_local + $st_window_hits_remote))
}

# It runs with until=coverage: on an idle host, perf_hw NMIs of an arm64
# TCG guest seldom land inside a writer's window (QEMU checks for them
# between translated blocks), so the run goes on until it has met enough.
t_stress_default() {
	stress_run $STRESS_S until=coverage || return 1
	ret=0
	[ "$st_nmi_samples" -gt 0 ] || { echo "no NMI samples"; ret=1; }
	# The wake-up probe: every wake-up its controller issued was seen by
	# the sleeper it woke (how many there were is the host's pace: a
	# count per second would be a timed assertion, which a starved guest
	# fails).
	issued=$st_wakeups_issued
	seen=$st_wakeups
	{ [ "$issued" -gt 0 ] && [ "$seen" = "$issued" ]; } ||
		{ echo "wake-up probe: $seen wake-ups seen of $issued issued"; ret=1; }
	[ "$st_errors" = 0 ] || { echo "errors: $st_errors"; ret=1; }
	# Too few window hits by the coverage cap: the rest still holds, and
	# the verdict is the host's pace (a skip with the counts).
	[ "$verdict" = INCONCLUSIVE ] && [ $ret = 0 ] && { starved; return; }
	for k in window_hits_local window_hits_remote; do
		st $k
		[ "$st" -gt 0 ] || { echo "$k is 0"; ret=1; }
	done
	[ "$verdict" = SUCCESS ] || { echo "verdict $verdict, want SUCCESS"; ret=1; }
	return $ret
}

# A run in which writers almost never update (every second, on a 64-bit
# counter): no read meets a window, and the run cannot be a SUCCESS.
t_stress_inconclusive() {
	stress_run 3 update_us=1000000 counter_bits=64 || return 1
	[ "$verdict" = INCONCLUSIVE ] && return 0
	echo "verdict $verdict with $(hits) window hits (needed $st_window_hits_needed), want INCONCLUSIVE"
	return 1
}

# The pressure every clock design is run under: the writers pause 20 us
# inside their windows (and the task-side acct update inside its own).
PRESSURE=tear_window_ns=20000
# How long a design that must be caught may run before it is taken as
# not caught: it runs with until=verdict, so it ends at its first anomaly,
# or once its samples have met min_window_hits windows (100 per second of
# this) without one.
CATCH_CAP_S=60

# Window hits a run that must catch a design needs to have met, without a
# catch, to call the detector blind: as many as until=verdict's own
# SUCCESS would (min_window_hits' default, 100 per second of the run).
CATCH_BLIND_HITS=$((100 * CATCH_CAP_S))

# starved: the last stress_run ended INCONCLUSIVE: too few window hits by
# its cap, or a starved interrupt source: the host's pace, not the
# design's. Prints the SKIP line with the counts (neither a pass nor a
# failure) and returns KSFT_SKIP.
starved() {
	echo "SKIP: starved guest: $verdict ($why), $(hits) window hits" \
		"($st_window_hits_local local) of $st_window_hits_needed needed," \
		"$st_samples samples in $st_elapsed_ms ms"
	return $KSFT_SKIP
}

# survives PARAM...: a run of at least PRESSURE_S with PARAMs must end
# SUCCESS: no anomaly, and at least window_hits_needed window hits. It runs
# with until=coverage: past PRESSURE_S while the hits are short (a loaded
# host, an emulated PMU), coverage_cap times as long at most; still short
# then (INCONCLUSIVE), it is a skip with the counts.
survives() {
	stress_run $PRESSURE_S until=coverage "$@" || return 1
	case $verdict in
	SUCCESS)
		echo "survived $(hits) window hits ($st_window_hits_local local, needed $st_window_hits_needed)"
		return 0 ;;
	INCONCLUSIVE) starved; return ;;
	esac
	echo "verdict $verdict, want SUCCESS"
	return 1
}

# not_caught: the last run of a design that must be caught ended without
# a catch (INCONCLUSIVE): blind, a failure, if its readers met
# CATCH_BLIND_HITS windows; else too few to tell, a skip with the counts.
not_caught() {
	if [ "$(hits)" -ge $CATCH_BLIND_HITS ]; then
		echo "not caught in $(hits) window hits (a catch is wanted within $CATCH_BLIND_HITS): the detector is blind"
		return 1
	fi
	starved
}

# caught PARAM...: a design that must fail, run with PARAMs until its
# verdict (CATCH_CAP_S at most): an expected failure when caught, with how
# soon; a failure of the suite when not (the detector is blind: SUCCESS,
# or INCONCLUSIVE after CATCH_BLIND_HITS window hits); a skip when the
# run saw too few windows to tell.
caught() {
	stress_run $CATCH_CAP_S until=verdict "$@" || return 1
	case $verdict in
	FAILURE)
		echo "XFAIL: caught after $st_first_anomaly_window_hits window hits" \
			"($st_first_anomaly_samples samples," \
			"$(($st_first_anomaly_ns / 1000)) us)"
		return $KSFT_XFAIL ;;
	SUCCESS)
		echo "XPASS: not caught in $(hits) window hits: the detector is blind"
		return $KSFT_XPASS ;;
	esac
	not_caught
}

t_pressure_latch() { survives $PRESSURE; }
t_pressure_latch_bare() { survives $PRESSURE counter=$BARE; }
t_pressure_seqcount() { caught $PRESSURE clock=seqcount; }
t_pressure_unprotected() { caught $PRESSURE clock=unprotected; }
t_conversion_latch() { survives disturb=conversion; }
t_conversion_seqcount() { caught disturb=conversion clock=seqcount; }
t_conversion_unprotected() { caught disturb=conversion clock=unprotected; }
t_stutter_latch() { survives disturb=stutter; }
# trace_on_anomaly=1: a busted design's first anomaly writes a marker into
# the trace instance nmiclock and stops the kernel's tracing, so that the
# top-level buffer ends with the events that led up to it (two timer and
# IRQ events, switched on here). Destructive: it empties the machine's
# top-level trace buffer (so that what it finds there is this run's) and
# stops it; it puts back tracing_on and each event's switch as found. A
# kernel without tracing refuses the setting with one line, which is
# checked without -d (nothing changes there).
t_trace_on_anomaly() {
	T=/sys/kernel/tracing
	if [ ! -e $T/tracing_on ]; then
		mark refuse
		load trace_on_anomaly=1 2>/dev/null && { unload; echo "insmod trace_on_anomaly=1 loaded without tracing"; return 1; }
		log_since refuse 'trace_on_anomaly=1: this kernel has no tracing' | grep -q . ||
			{ echo "no line saying why trace_on_anomaly=1 was refused"; return 1; }
		echo "SKIP: no tracing in this kernel (CONFIG_TRACING); trace_on_anomaly=1 refused with its line"
		return $KSFT_SKIP
	fi
	destructive "empties and stops the kernel's trace buffer" || return $KSFT_SKIP
	on0=$(cat $T/tracing_on)
	[ "$on0" = 1 ] || { echo "SKIP: tracing is off before the run: not ours to turn on"; return $KSFT_SKIP; }
	events="timer/hrtimer_expire_entry irq/irq_handler_entry" was=
	for e in $events; do
		was="$was $(cat $T/events/$e/enable 2>/dev/null || echo -)"
	done
	: >$T/trace
	for e in $events; do
		[ ! -e $T/events/$e/enable ] || echo 1 >$T/events/$e/enable
	done
	stress_run $CATCH_CAP_S until=verdict $PRESSURE clock=unprotected trace_on_anomaly=1
	rc=$?
	on=$(cat $T/tracing_on)
	kept=$(grep -cv '^#' $T/trace)
	marker=$(grep -c 'nmiclock: first anomaly' $T/instances/nmiclock/trace 2>/dev/null)
	starts=$(grep -c 'nmiclock: run start' $T/instances/nmiclock/trace 2>/dev/null)
	marks=$(grep -v '^#' $T/instances/nmiclock/trace 2>/dev/null | tail -n 2)
	# As found: each event's switch, tracing on; the instance, which stays
	# for reading after a run, is read.
	set -- $was
	for e in $events; do
		[ "$1" = - ] || echo "$1" >$T/events/$e/enable
		shift
	done
	echo "$on0" >$T/tracing_on
	rmdir $T/instances/nmiclock 2>/dev/null
	[ $rc = 0 ] || return 1
	echo "verdict $verdict; tracing_on $on after it; $kept event lines kept; marker lines $marker, run start $starts"
	[ "$verdict" = INCONCLUSIVE ] && { not_caught; return; }
	ret=0
	[ "$verdict" = FAILURE ] || { echo "the busted design was not caught: nothing to show"; ret=1; }
	[ "$on" = 0 ] || { echo "tracing still on after the first anomaly"; ret=1; }
	[ "${marker:-0}" -ge 1 ] || { echo "no first-anomaly marker in the instance nmiclock"; ret=1; }
	[ "${kept:-0}" -ge 1 ] || { echo "the stopped trace holds no event before the anomaly"; ret=1; }
	echo "$marks"
	return $ret
}
# A 16-bit counter wraps every few tens of us (x86), so a vCPU held off
# that long makes an epoch update come a wrap late (wrap_overruns): it
# loses whole wraps whatever the protection, and reads of the epoch it
# replaces were a wrap late themselves (wrap_late_reads). No check spans
# either, so the latch still survives: no torn read, no step back.
t_narrow_latch() {
	survives counter_bits=16 || return
	echo "wrap_overruns: $st_wrap_overruns, wrap_late_reads: $st_wrap_late_reads of $st_samples samples"
	[ "$st_wrap_overruns" -gt 0 ] ||
		echo "no update came a wrap late: this run shows the latch at 16 bits, not across an overrun"
}
# The acct designs race with the samples, not with the clock's writers:
# their runs end at the first anomaly only (min_window_hits out of reach).
t_stress_racy() { caught $PRESSURE min_window_hits=1000000000 acct=racy; }
t_stress_irqsave() { caught $PRESSURE min_window_hits=1000000000 acct=irqsave nmi_source=$NMI_SOURCE; }

t_stress_perf_sw() {
	stress_run 3 nmi_source=perf_sw || return 1
	ret=0
	[ "$st_nmi_source_used" = perf_sw ] || { echo "source is not perf_sw"; ret=1; }
	[ "$st_samples" -gt 0 ] || { echo "no samples"; ret=1; }
	[ "$st_nmi_samples" = 0 ] || { echo "perf_sw samples counted as NMIs"; ret=1; }
	[ "$st_errors" = 0 ] || { echo "errors: $st_errors"; ret=1; }
	return $ret
}

# perf_hw is a SKIP only where there is no PMU (ENOENT, ENODEV, EOPNOTSUPP)
# and the architecture has another NMI source (x86); any other error fails.
# Where it runs, every sample must be an NMI and no CPU starved.
t_stress_perf_hw() {
	wait_clocksource
	load counter_bits=32 duration_s=3 nmi_source=perf_hw || { echo "insmod failed"; return 1; }
	mark perf_hw
	if ! echo start >"$DIR/control" 2>/dev/null; then
		why=$(log_since perf_hw | grep -m1 'nmiclock: .*perf_hw' | sed 's/^\[[^]]*\] //')
		err=$(stat_value "$DIR/stats" perf_hw_error)
		unload
		case $err/$NMI_SOURCE in
		-2/ipi|-19/ipi|-95/ipi) echo "SKIP: no PMU here (perf_hw_error $err): $why"; return $KSFT_SKIP ;;
		esac
		echo "start failed with perf_hw_error $err: $why"
		return 1
	fi
	sleep 4
	tmp=$(scratch stats)
	stats_copy "$DIR/stats" "$tmp"
	unload
	n=$st_samples
	echo "samples $n (nmi_samples $st_nmi_samples, expected" \
		"$st_samples_expected), starved_cpus $st_starved_cpus," \
		"errors $st_errors"
	ret=0
	[ "$n" -gt 0 ] || { echo "no samples"; ret=1; }
	[ "$st_nmi_samples" = "$n" ] || { echo "not every perf_hw sample was an NMI (pseudo-NMIs off?)"; ret=1; }
	[ "$st_errors" = 0 ] || ret=1
	# A CPU given fewer than a 32nd of the overflows asked for: throttled,
	# or a starved emulator (QEMU's PMU timer runs on its main thread); a
	# skip with the counts, once nothing else is wrong.
	if [ $ret = 0 ] && [ "$st_starved_cpus" != 0 ]; then
		echo "SKIP: perf_hw starved on $st_starved_cpus CPUs: $n samples of $st_samples_expected expected"
		return $KSFT_SKIP
	fi
	return $ret
}

# The perf source of this architecture (x86 TCG has no PMU: cpu-clock).
PERF_SOURCE=perf_sw
[ $NMI_SOURCE = perf_hw ] && PERF_SOURCE=perf_hw

# A throttled perf counter is seen, and the run is not a SUCCESS: with the
# time-based throttle on (99 %) and a limit of 100 samples a second, set
# before the run (so no counter is running while the limits change, and
# none is long enough to be "too long" at 10 ms allowed), perf lets
# through at most two overflows a tick, 500/s at HZ=250, of the 50,000/s
# that period_us=20 asks for: 1 %, as throttling does (2.5 % or less).
t_perf_throttled() {
	stress_run_throttled
	rc=$?
	"$here/perf_unthrottle.sh" >/dev/null || { echo "cannot restore the perf sysctls"; return 1; }
	[ $rc = 0 ] || return 1
	ret=0
	[ "$st_starved_cpus" -gt 0 ] ||
		{ echo "no CPU starved: $st_samples samples of $st_samples_expected expected"; ret=1; }
	[ "$verdict" = INCONCLUSIVE ] || { echo "verdict $verdict, want INCONCLUSIVE"; ret=1; }
	return $ret
}
stress_run_throttled() {
	wait_clocksource
	load counter_bits=32 duration_s=3 period_us=20 nmi_source=$PERF_SOURCE || { echo "insmod failed"; return 1; }
	stress=$(scratch)
	echo 99 >/proc/sys/kernel/perf_cpu_time_max_percent &&
		echo 100 >/proc/sys/kernel/perf_event_max_sample_rate ||
		{ echo "cannot lower the perf sysctls"; unload; return 1; }
	mark throttled
	echo start >"$DIR/control" || { echo "start failed"; unload; return 1; }
	i=0
	while ! state_is "$DIR/control" done && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	stats_copy "$DIR/stats" "$stress"
	eot=$(log_since throttled 'nmiclock: End of test: ')
	unload
	eot_split
	echo "$PERF_SOURCE throttled to 100/s -> $verdict: samples $st_samples" \
		"of $st_samples_expected expected, starved_cpus $st_starved_cpus"
}

# nmi_source=ipi: NMI IPIs sample on x86; elsewhere the source is refused
# (EINVAL, one line saying it is x86-only) and nothing starts.
t_ipi_source() {
	if [ $NMI_SOURCE = ipi ]; then
		stress_run 3 nmi_source=ipi || return 1
		ret=0
		[ "$st_nmi_sent" -gt 0 ] || { echo "no NMI IPI sent"; ret=1; }
		[ "$st_nmi_samples" -gt 0 ] || { echo "no NMI samples"; ret=1; }
		[ "$st_errors" = 0 ] || ret=1
		return $ret
	fi
	load nmi_source=ipi || { echo "insmod failed"; return 1; }
	mark ipi
	if echo start >"$DIR/control" 2>/dev/null; then
		unload
		echo "nmi_source=ipi started on $(uname -m)"
		return 1
	fi
	ret=0
	n=$(log_since ipi | grep -c 'nmiclock: start: ipi: NMI IPIs are x86-only')
	[ "$n" = 1 ] || { echo "$n 'x86-only' lines, want 1"; ret=1; }
	state_is "$DIR/control" idle || { echo "state $st_line after the refusal"; ret=1; }
	unload
	return $ret
}

t_rmmod_running() {
	wait_clocksource
	load duration_s=60 || { echo "insmod failed"; return 1; }
	mark rmmod_running
	echo start >"$DIR/control" || { unload; echo "start failed"; return 1; }
	sleep 1
	state_is "$DIR/control" running || { echo "not running"; unload; return 1; }
	unload || { echo "rmmod during a run failed"; return 1; }
	left=$(left_behind)
	[ -z "$left" ] || { echo "$left"; return 1; }
	log_since rmmod_running | grep -q 'End of test: .*(module unloaded)' ||
		{ echo "no End of test line for the unloaded run"; return 1; }
}

t_hotplug() {
	destructive "takes CPU 1 offline and back" || return $KSFT_SKIP
	cpu=/sys/devices/system/cpu/cpu1/online
	[ -w "$cpu" ] || { echo "SKIP: no hotpluggable cpu1"; return 4; }
	wait_clocksource
	# Long enough for the cycles on any kernel; stopped below.
	load counter_bits=32 duration_s=300 || { echo "insmod failed"; return 1; }
	echo start >"$DIR/control" || { unload; echo "start failed"; return 1; }
	ret=0
	i=0
	while [ $i -lt $HOTPLUG ]; do
		i=$((i + 1))
		sleep 0.25
		echo 0 >"$cpu" || { echo "offlining cpu1 failed"; ret=1; }
		sleep 0.25
		echo 1 >"$cpu" || { echo "onlining cpu1 failed"; ret=1; }
	done
	a=$(grep '^cpu1:' "$DIR/percpu" | sed 's/.* samples=\([0-9]*\) .*/\1/')
	sleep 0.5
	b=$(grep '^cpu1:' "$DIR/percpu" | sed 's/.* samples=\([0-9]*\) .*/\1/')
	state_is "$DIR/control" running || { echo "the run ended early"; ret=1; }
	echo stop >"$DIR/control" || { echo "stop failed"; ret=1; }
	# The wake-up probe across the cycles: reported, not judged (a slow
	# host makes wake-ups late too); see Documentation, "Wake-ups".
	grep -E '^(samples|nmi_samples|errors|wakeups|late_wakeups|max_wake_latency_ns):' "$DIR/stats" | tr '\n' ' '; echo
	[ "$b" -gt "$a" ] || { echo "cpu1 does not sample after coming back ($a, then $b)"; ret=1; }
	[ "$(stat_value "$DIR/stats" errors)" = 0 ] || { echo "errors: $(stat_value "$DIR/stats" errors)"; ret=1; }
	unload || ret=1
	return $ret
}

t_start_stop_cycles() {
	wait_clocksource
	ret=0
	i=1
	# One read of the log for all the cycles: each must have left one End
	# of test line, the stop's (a read per cycle is three processes).
	mark start-stop
	while [ $i -le $START_STOP ]; do
		load duration_s=60 || { echo "cycle $i: insmod failed"; return 1; }
		echo start >"$DIR/control" || { echo "cycle $i: start failed"; ret=1; }
		echo stop >"$DIR/control" || { echo "cycle $i: stop failed"; ret=1; }
		unload || { echo "cycle $i: rmmod failed"; return 1; }
		left=$(left_behind)
		[ -z "$left" ] || { echo "cycle $i: $left"; return 1; }
		i=$((i + 1))
	done
	n=$(log_since start-stop | grep -cE 'End of test: (SUCCESS|INCONCLUSIVE) \(stop written to control\)')
	echo "$START_STOP cycles, $n End of test lines"
	[ "$n" = $START_STOP ] || { echo "want $START_STOP End of test lines"; ret=1; }
	return $ret
}

# sums BUCKET-SECTION FILE: the counts of one section of a histogram file,
# one per line; bucket lines with a count but no bar are printed as "nobar".
section() {
	awk -v s="$1" '
		/^@/ { on = ($0 == "@" s ":"); next }
		on && match($0, /[0-9]+ \|/) {
			n = substr($0, RSTART, RLENGTH - 2) + 0
			print n
			if (n > 0 && $0 !~ /\|@/) print "nobar"
		}' "$2"
}

# The End of test line is never cut: with every setting at its longest
# value and the longest kernel clock's name as the target, each record it
# is logged in (one, and continuation records if it outgrows one) fits in
# a printk record (1020 bytes of text with the "nmiclock: " prefix: 1024
# less the level marker, the newline and the NUL that vprintk_store()
# formats with it), every setting and count is there once, and the last
# record ends with the line's last field.
t_end_of_test_whole() {
	wait_clocksource
	load clock=unprotected counter=$ORDERED counter_bits=64 tear_window_ns=1000000 \
		nmi_source=perf_sw period_us=1000000 update_us=1000000 duration_s=86400 \
		min_window_hits=1000000000 until=coverage disturb=conversion poll_us=10000 ||
		{ echo "insmod failed"; return 1; }
	ret=0
	echo target=ktime_get_boot_fast_ns >"$DIR/config" || { echo "target refused"; ret=1; }
	mark eot-whole
	echo start >"$DIR/control" || { echo "start failed"; unload; return 1; }
	sleep 1
	echo stop >"$DIR/control" || ret=1
	recs=$(scratch)
	log_since eot-whole | sed -n 's/^\[[^]]*\] \(nmiclock: End of test[:,].*\)$/\1/p' >"$recs"
	unload
	n=0 longest=0 all=
	while IFS= read -r r; do
		n=$((n + 1))
		[ ${#r} -gt $longest ] && longest=${#r}
		all="$all${r#*: End of test*:}"
	done <"$recs"
	echo "$n records, the longest $longest bytes"
	[ $n -ge 1 ] || { echo "no End of test line"; return 1; }
	[ $longest -le 1020 ] || { echo "a record of $longest bytes: longer than printk keeps"; ret=1; }
	case $all in
	*" kernel_update_coverage="*[a-z]) ;;
	*) echo "the last field is missing: ...${all##* }"; ret=1 ;;
	esac
	for k in clock counter counter_bits tear_window_ns acct nmi_source period_us update_us \
		duration_s autostart min_window_hits until disturb target wake poll_us samples \
		nmi_samples errors window_hits_needed; do
		case $all in
		*" $k="*" $k="*) echo "$k twice"; ret=1 ;;
		*" $k="*) ;;
		*) echo "$k missing"; ret=1 ;;
		esac
	done
	return $ret
}

# A 2 s run of the unprotected clock: its anomalies must be shown in
# full. One that kept none fails once its readers met the windows the run
# needs for a verdict (window_hits_needed: the unprotected clock torn in
# none of them is a blind detector), and is a skip with its counts before.
t_inspection_files() {
	wait_clocksource
	load counter_bits=32 duration_s=2 clock=unprotected tear_window_ns=20000 || { echo "insmod failed"; return 1; }
	ret=0
	for f in control:600 config:600 stats:400 histogram:400 percpu:400 anomalies:400 check:600 acct:600 bench:600 wake:600; do
		m=$(stat -c %a "$DIR/${f%:*}")
		[ "$m" = "${f#*:}" ] || { echo "${f%:*} has mode $m, want ${f#*:}"; ret=1; }
	done
	echo start >"$DIR/control" || { echo "start failed"; unload; return 1; }
	wait_done 2 2
	state_is "$DIR/control" done || { echo "the run did not end"; unload; return 1; }
	hist=$(scratch)
	cat "$DIR/histogram" >"$hist"
	samples=$(stat_value "$DIR/stats" samples)
	head -n 3 "$hist"
	for sec in read_ns tear_error_ns; do
		grep -q "^@$sec:\$" "$hist" || { echo "no @$sec section"; ret=1; }
		section $sec "$hist" | grep -q nobar && { echo "@$sec: a bucket with a count but no bar"; ret=1; }
	done
	sum=$(section read_ns "$hist" | grep -v nobar | awk '{ s += $1 } END { print s + 0 }')
	echo "@read_ns: $sum reads in buckets, $samples samples"
	[ "$sum" = "$samples" ] || { echo "the read_ns buckets add up to $sum, not to the $samples samples"; ret=1; }
	errs=$(section tear_error_ns "$hist" | grep -v nobar | awk '{ s += $1 } END { print s + 0 }')
	[ "$errs" -gt 0 ] && [ "$errs" -le "$samples" ] || { echo "@tear_error_ns: $errs checks"; ret=1; }
	cpus=$(online_cpus)
	[ "$(grep -c '^cpu[0-9]*: samples=' "$DIR/percpu")" = "$cpus" ] || { echo "percpu: not one line per CPU"; ret=1; }
	kept=$(stat_value "$DIR/anomalies" kept)
	torn=$(stat_value "$DIR/stats" torn_reads)
	echo "anomalies kept: $kept, torn_reads: $torn"
	if [ "$kept" -gt 0 ]; then
		head -n 3 "$DIR/anomalies" | tail -n 1
		grep -qE '^0: kind=[a-z_]+ cpu=[0-9]+ ctx=(nmi|irq|task) value_ns=[0-9]+ against_ns=[0-9]+ seq=[0-9]+ copy=[01] epoch_ns=[0-9]+ mult=[0-9]+ shift=[0-9]+ at_us=[0-9]+ cyc=[0-9]+ epoch_cyc=[0-9]+ base_cyc=[0-9]+$' "$DIR/anomalies" ||
			{ echo "anomaly 0 lacks its context"; ret=1; }
	fi
	stats_copy "$DIR/stats" "$(scratch)"
	unload
	[ "$kept" -gt 0 ] || [ $ret != 0 ] || {
		verdict=$st_verdict why="no anomaly kept"
		[ "$(hits)" -lt "$st_window_hits_needed" ] && { starved; return; }
		echo "no anomaly kept in $(hits) window hits: the detector is blind"
		return 1
	}
	return $ret
}

case_add t_stress_default "stress, default (latch, cmpxchg, auto source), $STRESS_S s: NMI samples, window hits, no error, SUCCESS"
case_add t_stress_inconclusive "stress with writers that almost never write: INCONCLUSIVE, not SUCCESS"
case_add t_pressure_latch "pressure ($PRESSURE), $PRESSURE_S s: the latch survives, enough window hits, SUCCESS"
case_add t_pressure_latch_bare "pressure, counter=$BARE: the latch survives, SUCCESS"
case_add t_pressure_seqcount "pressure: clock=seqcount caught"
case_add t_pressure_unprotected "pressure: clock=unprotected caught"
case_add t_conversion_latch "disturb=conversion, no tear window: the latch survives, SUCCESS"
case_add t_conversion_seqcount "disturb=conversion, no tear window: clock=seqcount caught"
case_add t_conversion_unprotected "disturb=conversion, no tear window: clock=unprotected caught"
case_add t_stutter_latch "disturb=stutter: the latch survives, SUCCESS"
case_add t_trace_on_anomaly "trace_on_anomaly=1: the first anomaly marks nmiclock's trace instance and stops tracing, the events before it kept (destructive; refused without tracing)"
case_add t_narrow_latch "counter_bits=16: the latch survives, wrap overruns and late reads unchecked, no check spanning them"
case_add t_end_of_test_whole "End of test at the longest settings: every record fits printk's, no field cut or missing"
case_add t_stress_racy "stress catches acct=racy (bad deltas)"
case_add t_stress_irqsave "stress catches acct=irqsave under real NMIs, nmi_source=$NMI_SOURCE (bad deltas)"
case_add t_stress_perf_sw "stress with nmi_source=perf_sw: hard-IRQ samples, no error"
case_add t_stress_perf_hw "stress with nmi_source=perf_hw: every sample an NMI, no CPU starved (SKIP only without a PMU, on x86)"
case_add t_perf_throttled "a throttled $PERF_SOURCE counter: starved CPUs, INCONCLUSIVE"
case_add t_ipi_source "nmi_source=ipi: NMI IPIs on x86, refused elsewhere"
case_add t_rmmod_running "rmmod during a run stops it cleanly"
case_add t_hotplug "CPU hotplug during a run: sources follow the CPU, no error"
case_add t_inspection_files "histogram, percpu, anomalies and file modes"
case_add t_start_stop_cycles "$START_STOP load/start/stop/unload cycles"
