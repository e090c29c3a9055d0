# SPDX-License-Identifier: GPL-2.0
#
# cases_stress.sh: the stress run: the default run, each busted design caught,
# the interrupt sources, rmmod and CPU hotplug during a run, start/stop
# cycles, and the inspection files.
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

# stress_run SECONDS PARAM...: a stress run of SECONDS with counter_bits=32
# and PARAMs, to its end; leaves stats in $stress and the End of test line
# in $eot. Fails if the run does not start or end.
stress_run() {
	secs=$1
	shift
	wait_tsc
	load counter_bits=32 duration_s="$secs" "$@" || { echo "insmod $* failed"; return 1; }
	stress=$(scratch)
	mark stress
	if ! echo start >"$DIR/control"; then
		echo "start failed"
		unload
		return 1
	fi
	i=0
	while [ "$(cat "$DIR/control")" != done ] && [ $i -lt $((secs * 10 + 300)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
	cat "$DIR/stats" >"$stress"
	eot=$(log_since stress | grep 'nmiclock: End of test: ' | head -n 1)
	unload
	[ "$(stat_value "$stress" state)" = done ] || { echo "the run did not end"; return 1; }
	[ -n "$eot" ] || { echo "no End of test line"; return 1; }
	echo "$* ${eot#*End of test: }" | cut -c1-60
	grep -E '^(nmi_source_used|samples|nmi_samples|torn_reads|backwards|cross_cpu_backwards|clock_stalls|acct_bad_deltas|acct_timexpd_backwards|nmi_leftovers|wakeups|late_wakeups|errors):' \
		"$stress" | tr '\n' ' '; echo
}

t_stress_default() {
	stress_run $STRESS_S || return 1
	ret=0
	[ "$(stat_value "$stress" nmi_samples)" -gt 0 ] || { echo "no NMI samples"; ret=1; }
	# The wake-up probe woke each CPU's sleeper about every 10 ms: want
	# half of that.
	cpus=$(online_cpus)
	want=$((cpus * STRESS_S * 50))
	[ "$(stat_value "$stress" wakeups)" -ge $want ] ||
		{ echo "wake-up probe: $(stat_value "$stress" wakeups) wake-ups, want >= $want"; ret=1; }
	[ "$(stat_value "$stress" errors)" = 0 ] || { echo "errors: $(stat_value "$stress" errors)"; ret=1; }
	case $eot in *"End of test: SUCCESS"*) ;; *) echo "not SUCCESS"; ret=1 ;; esac
	return $ret
}

# busted CHECK PARAM...: a BUSTED_S run with a 20 us tear window must be caught:
# CHECK names the stats keys of which at least one must be above 0.
# Up to TRIES runs: the first that catches it ends it. (The stress run
# cannot yet run until it has seen enough writer windows, as the check
# can: until it can, a run that saw too few gets another.)
TRIES=3
busted() {
	keys=$1
	shift
	try=1
	while [ $try -le $TRIES ]; do
		stress_run $BUSTED_S tear_window_ns=20000 "$@" || return 1
		ret=1
		for k in $keys; do
			[ "$(stat_value "$stress" "$k")" -gt 0 ] && ret=0
		done
		if [ $ret -eq 0 ]; then
			case $eot in *"End of test: FAILURE"*) ;; *) echo "not FAILURE"; ret=1 ;; esac
			[ $try -gt 1 ] && echo "caught on try $try"
			return $ret
		fi
		try=$((try + 1))
	done
	echo "not caught in $TRIES runs: none of $keys above 0"
	return 1
}

t_stress_unprotected() { busted "torn_reads backwards" clock=unprotected; }

t_stress_seqcount() { busted clock_stalls clock=seqcount; }

t_stress_racy() { busted "acct_bad_deltas acct_timexpd_backwards" acct=racy; }

t_stress_irqsave() { busted "acct_bad_deltas acct_timexpd_backwards" acct=irqsave nmi_source=ipi; }

t_stress_perf_sw() {
	stress_run 3 nmi_source=perf_sw || return 1
	ret=0
	[ "$(stat_value "$stress" nmi_source_used)" = perf_sw ] || { echo "source is not perf_sw"; ret=1; }
	[ "$(stat_value "$stress" samples)" -gt 0 ] || { echo "no samples"; ret=1; }
	[ "$(stat_value "$stress" nmi_samples)" = 0 ] || { echo "perf_sw samples counted as NMIs"; ret=1; }
	[ "$(stat_value "$stress" errors)" = 0 ] || { echo "errors: $(stat_value "$stress" errors)"; ret=1; }
	return $ret
}

t_stress_perf_hw() {
	wait_tsc
	load counter_bits=32 duration_s=3 nmi_source=perf_hw || { echo "insmod failed"; return 1; }
	mark perf_hw
	if ! echo start >"$DIR/control" 2>/dev/null; then
		why=$(log_since perf_hw | grep -m1 'nmiclock: .*perf_hw' | sed 's/^\[[^]]*\] //')
		err=$(stat_value "$DIR/stats" perf_hw_error)
		unload
		[ "$err" != 0 ] || { echo "start failed but perf_hw_error is 0"; return 1; }
		echo "SKIP: no hardware perf counter here (perf_hw_error $err): $why"
		return 4
	fi
	sleep 4
	n=$(stat_value "$DIR/stats" nmi_samples)
	e=$(stat_value "$DIR/stats" errors)
	unload
	[ "$n" -gt 0 ] && [ "$e" = 0 ] || { echo "nmi_samples $n errors $e"; return 1; }
}

t_rmmod_running() {
	wait_tsc
	load duration_s=60 || { echo "insmod failed"; return 1; }
	mark rmmod_running
	echo start >"$DIR/control" || { unload; echo "start failed"; return 1; }
	sleep 1
	[ "$(cat "$DIR/control")" = running ] || { echo "not running"; unload; return 1; }
	unload || { echo "rmmod during a run failed"; return 1; }
	left=$(left_behind)
	[ -z "$left" ] || { echo "$left"; return 1; }
	log_since rmmod_running | grep -q 'End of test: .*(module unloaded)' ||
		{ echo "no End of test line for the unloaded run"; return 1; }
}

t_hotplug() {
	cpu=/sys/devices/system/cpu/cpu1/online
	[ -w "$cpu" ] || { echo "SKIP: no hotpluggable cpu1"; return 4; }
	wait_tsc
	# Long enough for the cycles on any kernel; stopped below.
	load counter_bits=32 duration_s=300 || { echo "insmod failed"; return 1; }
	echo start >"$DIR/control" || { unload; echo "start failed"; return 1; }
	ret=0
	for i in 1 2 3 4 5 6 7 8; do
		sleep 0.25
		echo 0 >"$cpu" || { echo "offlining cpu1 failed"; ret=1; }
		sleep 0.25
		echo 1 >"$cpu" || { echo "onlining cpu1 failed"; ret=1; }
	done
	a=$(grep '^cpu1:' "$DIR/percpu" | sed 's/.* samples=\([0-9]*\) .*/\1/')
	sleep 0.5
	b=$(grep '^cpu1:' "$DIR/percpu" | sed 's/.* samples=\([0-9]*\) .*/\1/')
	[ "$(cat "$DIR/control")" = running ] || { echo "the run ended early"; ret=1; }
	echo stop >"$DIR/control" || { echo "stop failed"; ret=1; }
	grep -E '^(samples|nmi_samples|errors):' "$DIR/stats" | tr '\n' ' '; echo
	[ "$b" -gt "$a" ] || { echo "cpu1 does not sample after coming back ($a, then $b)"; ret=1; }
	[ "$(stat_value "$DIR/stats" errors)" = 0 ] || { echo "errors: $(stat_value "$DIR/stats" errors)"; ret=1; }
	unload || ret=1
	return $ret
}

t_start_stop_cycles() {
	wait_tsc
	ret=0
	n=0
	i=1
	while [ $i -le $START_STOP ]; do
		load duration_s=60 || { echo "cycle $i: insmod failed"; return 1; }
		mark "cycle$i"
		echo start >"$DIR/control" || { echo "cycle $i: start failed"; ret=1; }
		echo stop >"$DIR/control" || { echo "cycle $i: stop failed"; ret=1; }
		log_since "cycle$i" | grep -q 'End of test: SUCCESS (stop written to control)' &&
			n=$((n + 1))
		unload || { echo "cycle $i: rmmod failed"; return 1; }
		left=$(left_behind)
		[ -z "$left" ] || { echo "cycle $i: $left"; return 1; }
		i=$((i + 1))
	done
	echo "$START_STOP cycles, $n End of test lines"
	[ "$n" = $START_STOP ] || { echo "want $START_STOP End of test lines"; ret=1; }
	return $ret
}

t_inspection_files() {
	wait_tsc
	load counter_bits=32 duration_s=2 clock=unprotected tear_window_ns=20000 || { echo "insmod failed"; return 1; }
	ret=0
	for f in control:600 config:600 stats:400 histogram:400 percpu:400 anomalies:400 check:600 acct:600 bench:600; do
		m=$(stat -c %a "$DIR/${f%:*}")
		[ "$m" = "${f#*:}" ] || { echo "${f%:*} has mode $m, want ${f#*:}"; ret=1; }
	done
	echo start >"$DIR/control"
	sleep 3
	while [ "$(cat "$DIR/control")" != done ]; do sleep 0.5; done
	head -n 3 "$DIR/histogram"
	grep -q '^@read_ns:$' "$DIR/histogram" || { echo "no histogram header"; ret=1; }
	grep -qE '^\[[0-9]+(, [0-9]+\))?\]? +[0-9]+ \|@+ *\|$' "$DIR/histogram" || { echo "no histogram bars"; ret=1; }
	cpus=$(online_cpus)
	[ "$(grep -c '^cpu[0-9]*: samples=' "$DIR/percpu")" = "$cpus" ] || { echo "percpu: not one line per CPU"; ret=1; }
	kept=$(stat_value "$DIR/anomalies" kept)
	torn=$(stat_value "$DIR/stats" torn_reads)
	echo "anomalies kept: $kept, torn_reads: $torn"
	[ "$kept" -gt 0 ] || { echo "no anomaly kept"; ret=1; }
	head -n 3 "$DIR/anomalies" | tail -n 1
	grep -qE '^0: kind=[a-z_]+ cpu=[0-9]+ ctx=(nmi|irq|task) value_ns=[0-9]+ against_ns=[0-9]+ seq=[0-9]+ copy=[01] epoch_ns=[0-9]+ at_us=[0-9]+$' "$DIR/anomalies" ||
		{ echo "anomaly 0 lacks its context"; ret=1; }
	unload
	return $ret
}

case_add t_stress_default "stress, default (latch, cmpxchg, auto source), $STRESS_S s: NMI samples, no error, SUCCESS"
case_add t_stress_unprotected "stress catches clock=unprotected (torn or backwards)"
case_add t_stress_seqcount "stress catches clock=seqcount (stalls)"
case_add t_stress_racy "stress catches acct=racy (bad deltas)"
case_add t_stress_irqsave "stress catches acct=irqsave under NMI IPIs (bad deltas)"
case_add t_stress_perf_sw "stress with nmi_source=perf_sw: hard-IRQ samples, no error"
case_add t_stress_perf_hw "stress with nmi_source=perf_hw"
case_add t_rmmod_running "rmmod during a run stops it cleanly"
case_add t_hotplug "CPU hotplug during a run: sources follow the CPU, no error"
case_add t_inspection_files "histogram, percpu, anomalies and file modes"
case_add t_start_stop_cycles "$START_STOP load/start/stop/unload cycles"
