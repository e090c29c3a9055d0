# SPDX-License-Identifier: GPL-2.0
#
# cases_interface.sh: control and config, one activity at a time, hostile input
# to every writable file, and the benchmark.
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

t_control_config() {
	wait_clocksource
	load duration_s=30 || { echo "insmod failed"; return 1; }
	ret=0
	cfg=$(cat "$DIR/config")
	for v in bogus START "start stop" "" 1; do
		expect_refused control "$v" "$EINVAL_TEXT" || ret=1
	done
	expect_refused control stop "$EBUSY_TEXT" || ret=1
	for v in clock=bogus clock= =latch bogus=1 counter_bits=8 period_us=0 period_us=5 \
		duration_s=0 duration_s=86401 update_us=-1 autostart=2 nmi_source=nmi \
		min_window_hits=x until=forever disturb=both "acct=racy extra" clock \
		wake=bogus wake= poll_us=10001 poll_us=-1; do
		expect_refused config "$v" "$EINVAL_TEXT" || ret=1
	done
	[ "$(cat "$DIR/config")" = "$cfg" ] || { echo "refused config writes changed it"; ret=1; }
	echo start >"$DIR/control" || { echo "start failed"; ret=1; }
	expect_refused control start "$EBUSY_TEXT" || ret=1
	expect_refused control reset "$EBUSY_TEXT" || ret=1
	expect_refused config acct=racy "$EBUSY_TEXT" || ret=1
	echo stop >"$DIR/control" || { echo "stop failed"; ret=1; }
	state_is "$DIR/control" done || { echo "not done after stop"; ret=1; }
	echo acct=racy >"$DIR/config" || { echo "config acct=racy refused while idle"; ret=1; }
	says "$DIR/config" acct racy || { echo "config acct not applied"; ret=1; }
	echo clock=seqcount >"$DIR/config" || ret=1
	says "$DIR/stats" clock seqcount || { echo "clock not switched"; ret=1; }
	echo reset >"$DIR/control" || { echo "reset failed"; ret=1; }
	state_is "$DIR/control" idle || { echo "not idle after reset"; ret=1; }
	says "$DIR/stats" samples 0 || { echo "reset left samples"; ret=1; }
	unload
	return $ret
}

# Settings valid alone but not together: the epoch timer pauses
# tear_window_ns twice per update in hard-IRQ and may spend at most a tenth
# of its period there, so a narrow counter (an update every few us) takes
# no long pause. Refused at load and in config with EINVAL and one line
# naming both; a config write of several pairs is applied all or none, so
# a valid pair is reached from a state where neither key alone is valid.
t_config_combination() {
	wait_clocksource
	ret=0
	mark combo
	err=$(insmod "$module" counter_bits=16 tear_window_ns=1000000 2>&1) &&
		{ echo "insmod counter_bits=16 tear_window_ns=1000000 loaded"; unload; ret=1; }
	insmod_refused "$err" || { echo "insmod: want EINVAL, got: $err"; ret=1; }
	# One line per load attempt (busybox's insmod tries finit_module,
	# then init_module: two), and no other.
	n=$(log_since combo | grep 'nmiclock: ' | grep -vc 'counter_bits=16 tear_window_ns=1000000: the epoch timer would spend')
	log_since combo | grep -q 'counter_bits=16 tear_window_ns=1000000: the epoch timer would spend' ||
		{ echo "no log line names the pair at load"; ret=1; }
	[ "$n" = 0 ] || { echo "$n other log lines at the refused load"; ret=1; }
	load counter_bits=16 || { echo "insmod counter_bits=16 failed"; return 1; }
	cfg=$(cat "$DIR/config")
	for v in tear_window_ns=1000000 "clock=seqcount tear_window_ns=1000000" \
		"tear_window_ns=100000 clock=seqcount" "clock=seqcount clock=latch" \
		"clock=seqcount bogus" "clock=seqcount bogus=1" "acct=racy counter_bits=8"; do
		mark "combo-$v"
		expect_refused config "$v" "$EINVAL_TEXT" || ret=1
		n=$(log_since "combo-$v" | grep -c 'nmiclock: ')
		[ "$n" = 1 ] || { echo "config '$v': $n log lines, want 1"; ret=1; }
	done
	[ "$(cat "$DIR/config")" = "$cfg" ] || { echo "refused config writes changed it"; ret=1; }
	# Neither key alone gets from counter_bits=16 to this valid pair.
	echo "counter_bits=32 tear_window_ns=50000 clock=seqcount" >"$DIR/config" ||
		{ echo "a valid set of three refused"; ret=1; }
	stats_copy "$DIR/stats" "$(scratch)"
	[ "$st_counter_bits $st_tear_window_ns $st_clock" = "32 50000 seqcount" ] ||
		{ echo "applied: $st_counter_bits $st_tear_window_ns $st_clock, want 32 50000 seqcount"; ret=1; }
	echo "update_interval_ns at counter_bits=32: $st_update_interval_ns"
	expect_refused config counter_bits=16 "$EINVAL_TEXT" || ret=1
	echo "tear_window_ns=0 counter_bits=16" >"$DIR/config" || { echo "back to counter_bits=16 refused"; ret=1; }
	says "$DIR/config" counter_bits 16 || { echo "counter_bits=16 not applied"; ret=1; }
	unload || ret=1
	return $ret
}

# snapshot: what a refused write must not change.
snapshot() {
	cat "$DIR/config" "$DIR/control"
	grep -E '^(samples|acct_updates|stats_reads):' "$DIR/stats" | grep -v stats_reads
	stat_value "$DIR/check" runs
	stat_value "$DIR/acct" runs
	stat_value "$DIR/wake" runs
	head -n 1 "$DIR/bench"
}

# Hostile input: every writable file gets hundreds of malformed writes
# (fixed nasty values and random bytes); each must be refused and change
# nothing. Values that are valid for some file are not sent.
t_hostile_writes() {
	load || { echo "insmod failed"; return 1; }
	ret=0
	before=$(snapshot)
	long=$(head -c 300 /dev/zero | tr '\0' 7)
	huge=$(head -c 4000 /dev/zero | tr '\0' a)
	two_lines=$(printf '1\n2') start_stop=$(printf 'start\nstop') high=$(printf '\377\376')
	# Random bytes, 1..256 of them, for FUZZ_WRITES writes to each of the
	# six files: no digits and no newlines, so that no draw can be a valid
	# number ("9" would run a 9 ms check). Each is one write, the shell's
	# printf of octal escapes (one buffer), made by one awk for all, where
	# a dd per write would be a process each (50 ms on the debug kernel).
	pool=$(scratch)
	head -c $((6 * FUZZ_WRITES * 256)) /dev/urandom | tr '0-9\n' 'a-k' >"$pool"
	fuzz=$(scratch)
	od -An -v -tu1 "$pool" | awk -v lens="$(od -An -tu1 -N$((6 * FUZZ_WRITES)) /dev/urandom)" '
		{ for (i = 1; i <= NF; i++) b[nb++] = $i }
		END {
			nl = split(lens, len)
			for (w = 1; w <= nl; w++) {
				s = ""
				for (i = 0; i <= len[w]; i++) s = s sprintf("\\%03o", b[p++])
				print len[w] + 1, s
			}
		}' >"$fuzz"
	exec 3<"$fuzz"
	n=0
	for f in control config check acct bench wake; do
		for v in "" " " "	" "-1" "-0" "+1" "0x10" "1e3" "1.5" "99999999999999999999" \
			"abc" "st art" "START" "stop now" "reset!" "key=" "=v" "a=b=c" \
			"clock=latch clock=seqcount" "clock=latch;" "duration_s=1s" \
			"period_us=0010x" "$long" "$huge" "$two_lines" \
			"$start_stop" "$high" "%n%s%x" "../../etc"; do
			n=$((n + 1))
			if echo "$v" >"$DIR/$f" 2>/dev/null; then
				echo "$f accepted '$(printf '%s' "$v" | cut -c1-40)'"
				ret=1
			fi
		done
		# Embedded NUL: "start", NUL, "x".
		n=$((n + 1))
		if printf 'start\000x' >"$DIR/$f" 2>/dev/null; then
			echo "$f accepted start<NUL>x"
			ret=1
		fi
		# Its share of the random writes.
		k=0
		while [ $k -lt $FUZZ_WRITES ] && read -r len esc <&3; do
			k=$((k + 1)) n=$((n + 1))
			# shellcheck disable=SC2059 # the escapes are the point
			if printf "$esc" >"$DIR/$f" 2>/dev/null; then
				echo "$f accepted $len random bytes: $(printf '%s' "$esc" | cut -c1-128)"
				ret=1
			fi
		done
	done
	exec 3<&-
	after=$(snapshot)
	[ "$before" = "$after" ] || { echo "refused writes changed something:"; a=$(scratch); b=$(scratch); echo "$before" >"$a"; echo "$after" >"$b"; diff "$a" "$b"; ret=1; }
	echo "$n malformed writes refused"
	unload || ret=1
	return $ret
}

# The benchmark: a short run; every row of both phases has numbers, the
# references have ratio 1.00, the NMI handler was timed (or the reason it
# was not is given), and there is one refscale-format table per row and
# phase, with nruns lines. Bad arguments get EINVAL; a config write while
# it runs, and the benchmark during a stress run, get EBUSY.
BENCH_ROWS=22
t_bench() {
	wait_clocksource
	load || { echo "insmod failed"; return 1; }
	ret=0
	for v in loops=9 loops=1000001 nruns=0 nruns=101 update_us=0 speed=1 "run now" \
		"loops=100 loops=100" "loops=100  nruns=2" LOOPS=100 ""; do
		expect_refused bench "$v" "$EINVAL_TEXT" || ret=1
	done
	grep -q '^state: idle' "$DIR/bench" || { echo "refused writes ran it"; ret=1; }
	# A longer run in the background, to be caught running, then ended
	# by a signal (t_activities checks how).
	(echo "loops=20000 nruns=3" >"$DIR/bench") &
	pid=$!
	i=0
	while ! says "$DIR/bench" state running && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	if says "$DIR/bench" state running; then
		expect_refused config clock=seqcount "$EBUSY_TEXT" || ret=1
		expect_refused bench run "$EBUSY_TEXT" || ret=1
	else
		echo "never saw the benchmark running"; ret=1
	fi
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	echo "loops=200 nruns=3" >"$DIR/bench" || { echo "the benchmark failed"; ret=1; }
	out=$(scratch)
	cat "$DIR/bench" >"$out"
	sed -n '/^phase /,/^# nmi handler/p' "$out"
	for phase in idle updaters; do
		n=$(grep -cE "^$phase +[a-z_/()]+.* [0-9]+\.[0-9]{3} +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+\.[0-9]{2} +[0-9]+\.[0-9]{2}-[0-9]+\.[0-9]{2}\$" "$out")
		[ "$n" = $BENCH_ROWS ] || { echo "$phase: $n complete rows, want $BENCH_ROWS"; ret=1; }
		for ref in 'sched_clock()' 'acct cmpxchg (tick)' 'acct cmpxchg (apply)'; do
			grep -F "$ref" "$out" | grep "^$phase " | grep -qE ' 1\.00 +1\.00-1\.00$' ||
				{ echo "$phase $ref: ratio not 1.00"; ret=1; }
		done
		if grep "^$phase " "$out" | grep -E ' 0\.000 '; then
			echo "$phase: a median of 0"; ret=1
		fi
	done
	# Ping-pong: sleep, the reference, polls nothing; every poll row polled.
	n=$(grep -cE '^pingpong +pingpong (sleep|poll [0-9]+us) +[0-9]+\.[0-9]{3} +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+\.[0-9]{2}  poll_ns=[0-9]+\.[0-9]{3} speedup=[0-9]+\.[0-9]{2}x$' "$out")
	[ "$n" = 4 ] || { echo "pingpong: $n complete rows, want 4"; ret=1; }
	grep -qE '^pingpong +pingpong sleep .* 1\.00  poll_ns=0\.000 speedup=1\.00x$' "$out" ||
		{ echo "pingpong sleep: not the reference (ratio 1.00), or it polled"; ret=1; }
	if grep -E '^pingpong +pingpong poll .*poll_ns=0\.000 ' "$out"; then
		echo "a pingpong poll row never polled"; ret=1
	fi
	grep -qE '^nmi +nmi handler \(sample\) +- +[0-9]+ +[0-9]+ +[0-9]+ +-$' "$out" ||
		grep -q '^nmi +nmi handler: no NMI-context samples' "$out" ||
		{ echo "no NMI handler row"; ret=1; }
	# The NMI ceiling of every source this machine has (x86 here: ipi;
	# arm64: perf_hw), and then a stress run reports its rate against it.
	grep -E '^nmi +nmi ceiling' "$out"
	grep -qE '^nmi +nmi ceiling \([a-z_]+\): [1-9][0-9]* samples/s, empty handler' "$out" ||
		{ echo "no NMI ceiling measured"; ret=1; }
	tables=$(grep -c "^Runs	Time(ns)\$" "$out")
	lines=$(grep -cE '^[0-9]+	[0-9]+\.[0-9]{3}$' "$out")
	echo "$tables refscale tables, $lines run lines"
	[ "$tables" = $((2 * BENCH_ROWS)) ] || { echo "want $((2 * BENCH_ROWS)) tables"; ret=1; }
	[ "$lines" = $((6 * BENCH_ROWS)) ] || { echo "want $((6 * BENCH_ROWS)) run lines"; ret=1; }
	# Not during a stress run.
	echo start >"$DIR/control" || ret=1
	expect_refused bench run "$EBUSY_TEXT" || ret=1
	echo stop >"$DIR/control" || ret=1
	c=$(stat_value "$DIR/stats" nmi_ceiling_per_s)
	f=$(stat_value "$DIR/stats" nmi_ceiling_fraction)
	echo "the stress run after it: $(stat_value "$DIR/stats" nmi_rate_per_s) NMI samples/s, ceiling $c, fraction $f"
	{ [ "$c" -gt 0 ] && [ "$f" != - ]; } || { echo "the run does not report its rate against the ceiling"; ret=1; }
	unload || ret=1
	return $ret
}

# The bench's own stress runs (its NMI handler and ceiling runs) end with
# the bench: a stop written to control meanwhile gets EBUSY and one line.
# A target they read being unregistered stops them; the bench waits for
# that stop and goes on. Then every activity starts again and everything
# unloads. A try counts when its stop met one of the bench's runs and its
# unregistering stopped one (3 tries at most: on a loaded host a run may
# end between reading control and the writes).
t_bench_stopped() {
	c=$(sample_ko nmiclock_target_c) || { echo "SKIP: the target samples (nmiclock_target_c.ko, nmiclock_target_rust.ko) are not beside the module"; return 4; }
	wait_clocksource
	load counter_bits=32 || { echo "insmod failed"; return 1; }
	ret=0
	caught=0
	for try in 1 2 3; do
		# A fresh registration each try (the last one's may be gone).
		is_loaded nmiclock_target_c && rmmod nmiclock_target_c
		insmod "$c" || { echo "insmod $c failed"; ret=1; break; }
		echo target=sample_c_latch >"$DIR/config" || { echo "target=sample_c_latch refused"; ret=1; break; }
		mark "bench-stop-$try"
		(echo "loops=100 nruns=1" >"$DIR/bench") &
		pid=$!
		i=0
		while ! state_is "$DIR/control" running && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
		if state_is "$DIR/control" running; then
			# EBUSY either way: refused as the bench's run, or no run
			# left (it ended between the read and the write).
			expect_refused control stop "$EBUSY_TEXT" || ret=1
			echo sample_c_latch >/sys/module/nmiclock_target_c/parameters/unregister ||
				{ echo "unregistering failed"; ret=1; }
		fi
		wait "$pid" || { echo "the bench failed (try $try)"; ret=1; }
		log=$(log_since "bench-stop-$try")
		# Caught only if the stop met the bench's run and the unregistering
		# stopped one; else a run ended in between (a loaded host).
		if printf '%s\n' "$log" | grep -q "stop: the stress run in progress is the bench's own" &&
			printf '%s\n' "$log" | grep -q 'End of test: .*(target unregistered)'; then
			caught=1
			break
		fi
		echo "try $try: the bench's run ended before the stop or the unregistering"
	done
	[ $caught = 1 ] || { echo "never caught the bench's runs with both"; ret=1; }
	printf '%s\n' "$log" | grep -E 'nmiclock: (stop:|stopped|target|End of test|bench)' |
		sed 's/^\[[^]]*\] //' | cut -c1-160
	printf '%s\n' "$log" | grep -q 'bench: done in ' || { echo "the bench did not finish"; ret=1; }
	printf '%s\n' "$log" | grep -q 'ended while not the activity' && { echo "a guard was dropped out of turn"; ret=1; }
	says "$DIR/stats" activity none || { echo "activity $(stat_value "$DIR/stats" activity) left after the bench"; ret=1; }
	# Every activity starts again.
	for w in "check 100" "acct 100" "wake 100" "bench loops=100 nruns=1" "config counter_bits=32"; do
		echo "${w#* }" >"$DIR/${w%% *}" || { echo "${w%% *} ${w#* } refused after the bench"; ret=1; }
	done
	echo start >"$DIR/control" || { echo "start refused after the bench"; ret=1; }
	echo stop >"$DIR/control" || { echo "stop refused"; ret=1; }
	unload_all || ret=1
	left=$(left_behind)
	[ -z "$left" ] || { echo "$left"; ret=1; }
	return $ret
}

# refused_during WHAT NAME ACTIVITY: while WHAT (a blocking activity, or a
# stress run) is in progress, config and every other activity get EBUSY,
# one log line each naming what runs (NAME, a regex: bench runs a stress run
# of its own at its end), and change nothing. Returns 0 when so, 1 when not,
# and 2 when a write was accepted and stats no longer shows ACTIVITY: it may
# have ended first (a loaded host), so nothing is known, and the caller
# tries again with a longer one.
refused_during() {
	rd_ret=0
	before=$(what_counts "$1")
	mark "during-$1"
	# The first write's errno read, the others' only where the shell's echo
	# names it (under dash a process each, seconds per activity on a
	# loaded host): the log lines below, one per refusal, say that each
	# was refused as the first was.
	how=expect_refused
	for w in "config clock=seqcount" "config acct=racy" "config counter_bits=32" \
		"control start" "control reset" "check 100" "check ms=100 windows=1" \
		"acct 100" "bench nruns=1 loops=10" "bench loops=10 nruns=1" "wake 100"; do
		$how ${w%% *} "${w#* }" "$EBUSY_TEXT" && { how=refused; continue; }
		if ! says "$DIR/stats" activity "$3"; then
			echo "during $1: $3 had ended by then; trying a longer one"
			# What the late write started (a stress run) ends first.
			echo stop >"$DIR/control" 2>/dev/null
			return 2
		fi
		rd_ret=1
	done
	after=$(what_counts "$1")
	[ "$before" = "$after" ] || { echo "during $1, a refused write changed something"; rd_ret=1; }
	n=$(log_since "during-$1" | grep -cE "not while ($2) is in progress")
	[ "$n" -ge 11 ] || { echo "during $1: $n log lines name it, want 11"; rd_ret=1; }
	return $rd_ret
}

# what_counts WHAT: the settings and the runs of check, acct and wake, but for
# WHAT's own (it may end meanwhile, and then counts its run).
what_counts() {
	cat "$DIR/config"
	for a in check acct wake; do
		[ "$1" = $a ] && continue
		while IFS= read -r l; do
			case $l in "runs: "*) echo "$a $l" ;; esac
		done <"$DIR/$a"
	done
}

# in_progress ACTIVITY: waits (5 s at most) until stats says ACTIVITY runs.
in_progress() {
	i=0
	while ! says "$DIR/stats" activity "$1" && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	says "$DIR/stats" activity "$1" || { echo "never saw $1 in progress"; return 1; }
}

# Each blocking activity runs in the background while every other write is
# refused, then a signal to its writer ends it (Ctrl-C on a long write):
# check, acct and wake at their next poll, the write failing with EINTR,
# the file saying "stopped: interrupted" and the log why; the bench at the
# end of its phase. One that ends before the writes are done, or a bench
# past its phases when the signal comes (a loaded host), is run again
# twice as long, three times at most. The bench starts at twice the loops
# of the others: with as many, it was often in its final NMI runs (which
# a signal lets finish) by the time the refused writes were done, on the
# debug kernel.
t_activities() {
	wait_clocksource
	load duration_s=30 || { echo "insmod failed"; return 1; }
	ret=0
	for a in "check:a check:ms=" "acct:an acct run:" "bench:a bench:nruns=3 loops=" \
		"wake:a wake run:"; do
		f=${a%%:*} rest=${a#*:} what=${rest%%:*} arg=${rest#*:}
		names=$what
		[ "$f" = bench ] && names="$what|a stress run"
		len=20000
		[ "$f" = bench ] && len=40000
		for try in 1 2 3; do
			mark "signal-$f-$try"
			# Killed, not trapped: busybox's echo retries a write
			# that failed with EINTR, which would run it again.
			runs=$(stat_value "$DIR/$f" runs)
			(echo "$arg$len" >"$DIR/$f") &
			pid=$!
			rc=1
			if in_progress "$what"; then
				refused_during "$f" "$names" "$what"
				rc=$?
			fi
			kill "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			irc=0
			if [ $rc != 2 ]; then
				interrupted "$f" "$len" "signal-$f-$try" "$runs"
				irc=$?
			fi
			[ $rc = 2 ] || [ $irc = 2 ] || break
			len=$((len * 2))
			[ "$f" = bench ] || [ $len -le 60000 ] || len=60000
		done
		if [ $rc = 0 ]; then
			echo "$f ($arg$len): refused all during it"
		else
			ret=1
		fi
		[ $irc = 0 ] || ret=1
	done
	echo start >"$DIR/control" || { echo "start failed"; ret=1; }
	refused_during "a stress run" "a stress run" "a stress run" || ret=1
	echo stop >"$DIR/control" || { echo "stop failed"; ret=1; }
	says "$DIR/stats" activity none || { echo "an activity is left after all ended"; ret=1; }
	echo counter_bits=32 >"$DIR/config" || { echo "config refused with nothing running"; ret=1; }
	unload
	return $ret
}

# interrupted FILE LEN MARK RUNS: the write of LEN to FILE, killed, ended
# early because of the signal: the activity is over, the log says so once,
# (check, acct, wake) it counted one run more than RUNS, and the file says
# "stopped: interrupted", (check, wake) before LEN ms. 2: a bench that had
# passed its phases (the rest runs to its end) and finished.
interrupted() {
	i_ret=0
	says "$DIR/stats" activity none || { echo "$1: still running after the signal"; i_ret=1; }
	if [ "$1" = bench ] && log_since "$3" | grep -q "bench: done in "; then
		echo "bench: past its phases when the signal came; trying a longer one"
		return 2
	fi
	n=$(log_since "$3" | grep -c "$1: interrupted by a signal after ")
	[ "$n" = 1 ] || { echo "$1: $n log lines say it was interrupted, want 1"; i_ret=1; }
	if [ "$1" = bench ]; then
		[ $i_ret = 0 ] && echo "bench: a signal ended it at the end of its phase"
		return $i_ret
	fi
	stats_copy "$DIR/$1" "$(scratch)"
	[ "$st_runs" = $(($4 + 1)) ] || { echo "$1: runs went from $4 to $st_runs, want one more"; i_ret=1; }
	stopped=$st_stopped
	[ "$stopped" = interrupted ] || { echo "$1: stopped: $stopped, want interrupted"; i_ret=1; }
	elapsed=${st_elapsed_ms-}
	if [ -n "$elapsed" ]; then
		[ "$elapsed" -lt "$2" ] || { echo "$1: ran $elapsed ms of $2 although interrupted"; i_ret=1; }
	fi
	[ $i_ret = 0 ] && echo "$1: a signal ended it${elapsed:+ after $elapsed ms of $2}"
	return $i_ret
}

case_add t_control_config "control and config: wrong state EBUSY, bad input EINVAL, nothing changed"
case_add t_config_combination "settings valid alone but not together refused at load and in config; several pairs applied all or none"
case_add t_activities "one activity at a time: during check, acct, bench and a stress run, config and every other activity get EBUSY, nothing changed; a signal ends each blocking one"
case_add t_hostile_writes "hostile input: malformed writes to every writable file refused, nothing changed"
case_add t_bench "bench: every row and phase measured, refscale tables, bad input and wrong state refused"
case_add t_bench_stopped "bench: its own runs refuse a stop, end when their target is unregistered, and every activity starts again"
