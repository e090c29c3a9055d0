# SPDX-License-Identifier: GPL-2.0
#
# cases_clock.sh: the task-context check of the clock against local_clock(),
# narrow counters, the tear window, and bad input to check and acct.
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

# Bound on |nmiclock elapsed - local_clock() elapsed| in the clock check.
MAX_DEV_NS=100000

# check_run MS: runs the clock check for MS ms and leaves its results in
# $check (a file); fails if the write fails.
check_run() {
	echo "$1" >"$DIR/check" || { echo "writing $1 to check failed"; return 1; }
	stats_copy "$DIR/check" "$check"
}

# check_all_cpus: every online CPU took part in the last check.
check_all_cpus() {
	cpus=$(online_cpus)
	n=$(grep -c '^cpu[0-9]*: reads=[1-9]' "$check")
	[ "$n" -eq "$cpus" ] || { echo "check ran on $n of $cpus CPUs"; return 1; }
}

# t_clock_check COUNTER: CHECK_S seconds of task-context reads on every CPU with a
# 32-bit counter (epoch updates about every second): monotonic per CPU and
# within MAX_DEV_NS of local_clock(), through two epoch updates or more.
t_clock_check() {
	load counter="$1" counter_bits=32 || { echo "insmod counter=$1 counter_bits=32 failed"; return 1; }
	check=$(scratch)
	ret=0
	u0=$(stat_value "$DIR/stats" epoch_updates)
	check_run $((CHECK_S * 1000)) || ret=1
	u1=$(stat_value "$DIR/stats" epoch_updates)
	grep -v '^cpu' "$check" | tr '\n' ' '; echo
	check_all_cpus || ret=1
	[ "$st_backwards" = 0 ] ||
		{ echo "time went backwards $st_backwards times"; ret=1; }
	dev=$st_max_dev_ns
	{ is_number "$dev" && [ "$dev" -le $MAX_DEV_NS ]; } ||
		{ echo "max_dev_ns $dev > $MAX_DEV_NS"; ret=1; }
	[ "$st_reads" -gt 0 ] || { echo "no reads"; ret=1; }
	[ "$(stat_value "$DIR/stats" wrap_overruns)" = 0 ] ||
		{ echo "wrap_overruns with a 32-bit counter"; ret=1; }
	unload
	# The check must span epoch updates to say anything of them: fewer
	# than two (the epoch timer held off: a starved guest) is a skip.
	if [ $ret = 0 ] && [ $((u1 - u0)) -lt 2 ]; then
		echo "SKIP: starved guest: $((u1 - u0)) epoch updates during the $CHECK_S s check, want 2; no step back in $st_reads reads"
		return $KSFT_SKIP
	fi
	return $ret
}

t_check_ordered() { t_clock_check $ORDERED; }

t_check_bare() { t_clock_check $BARE; }

# t_narrow_counter: counter_bits=16, a wrap of 28 us of a 2.3 GHz TSC (1 ms
# of arm64's 62.5 MHz counter), so the epoch moves tens of thousands of
# times a second, and the clock check through those updates. What it
# asserts is counted, not timed, so that a slow or starved guest cannot
# fail it:
# - the design: the epoch timer's period (stats update_interval_ns) is at
#   most half the wrap computed from counter_bits and counter_khz;
# - every wrap had its update: over a check in which no update came a wrap
#   late, the updates are at least the wraps that passed (elapsed_ms times
#   the counter's rate, over 2^bits) less one; a wrap without an update
#   that was not counted late would be lost time nobody accounts for;
# - the check spans NARROW_UPDATES epoch updates that came in time (one a
#   wrap late steps time back whatever the protection, and the check
#   leaves it out) with no step back.
# It runs one-second checks until they have spanned NARROW_UPDATES timely
# updates; a guest that gives it fewer in NARROW_CAP checks is starved:
# a skip with the counts, neither a pass nor a failure. A step back, or a
# broken design or count, fails it whenever seen.
NARROW_UPDATES=1000
NARROW_CAP=20
t_narrow_counter() {
	load counter_bits=16 || { echo "insmod counter_bits=16 failed"; return 1; }
	now=$(scratch)
	stats_copy "$DIR/stats" "$now"
	khz=${st_counter_khz-} bits=${st_counter_bits-} interval=${st_update_interval_ns-}
	{ is_number "$khz" && [ "$khz" -gt 0 ] && [ "$bits" = 16 ] && is_number "$interval"; } ||
		{ echo "stats lack counter_khz, counter_bits=16 or update_interval_ns"; unload; return 1; }
	wrap_ns=$(((1 << bits) * 1000000 / khz))
	echo "counter_bits=$bits at $khz kHz: a wrap is $wrap_ns ns, the epoch timer's period $interval ns"
	ret=0
	[ $((interval * 2)) -le $((wrap_ns + 2)) ] ||
		{ echo "the epoch timer's period is more than half the wrap"; ret=1; }
	check=$(scratch)
	n=0 updates=0 late=0 timely=0 backwards=0 wraps=0 ms=0
	while [ $ret = 0 ] && [ $timely -lt $NARROW_UPDATES ] && [ $n -lt $NARROW_CAP ]; do
		n=$((n + 1))
		stats_copy "$DIR/stats" "$now"
		u0=$st_epoch_updates o0=$st_wrap_overruns
		check_run 1000 || { ret=1; break; }
		is_number "${st_backwards-}" && is_number "${st_elapsed_ms-}" ||
			{ echo "check $n gave no backwards or elapsed_ms count"; ret=1; break; }
		b=$st_backwards e=$st_elapsed_ms
		stats_copy "$DIR/stats" "$now"
		nu=$((st_epoch_updates - u0)) nl=$((st_wrap_overruns - o0))
		# Wraps that surely passed inside the check (elapsed_ms may be
		# rounded up by one).
		w=$((e > 0 ? ((e - 1) * khz) >> bits : 0))
		echo "check $n: $e ms, $w wraps, $nu epoch updates, $nl a wrap late, backwards: $b"
		if [ "$nl" = 0 ] && [ $((nu + 1)) -lt "$w" ]; then
			echo "$w wraps passed with $nu epoch updates and none counted late"
			ret=1
		fi
		[ "$b" = 0 ] || { echo "the latch went backwards $b times"; ret=1; }
		updates=$((updates + nu)) late=$((late + nl)) timely=$((updates - late))
		backwards=$((backwards + b)) wraps=$((wraps + w)) ms=$((ms + e))
	done
	unload
	echo "$n checks, $ms ms: $wraps wraps, $updates epoch updates, $late of them a wrap late, $timely in time; backwards: $backwards"
	[ $ret = 0 ] || return 1
	[ $timely -ge $NARROW_UPDATES ] && return 0
	echo "SKIP: starved guest: $timely epoch updates in time in $n checks ($ms ms), want $NARROW_UPDATES; no step back through them"
	return $KSFT_SKIP
}

# tear_check CLOCK: the check with the writer pausing 50 us between its
# stores, on a counter masked to wrap in about TEAR_WRAP_MS (lib.sh): on
# x86 28 bits of a 2.3 GHz TSC, an epoch update every 64 ms; on arm64 26
# bits of the 62.5 MHz counter, one every 0.5 s (at 28 bits the epoch timer
# is held to one a second, and 50 windows take twice as long). An update
# late by a whole wrap (a vCPU held off that long: a loaded host did it
# in three runs of three, one each) steps time back by one wrap whatever
# the protection; the check leaves that out, as the stress run does (a
# read of an epoch a wrap old is not compared, no step spans the late
# update), so such a run still counts and says how many it had. It runs
# until the readers have seen TEAR_WINDOWS distinct writer windows or
# time went backwards,
# TEAR_CAP_MS at most: how long that takes depends on how often the host
# lets the reading vCPU run through a window, not on a fixed time. Sets
# $backwards, $overruns, $windows, $first (windows seen before the first
# backward step, -1 for none), $stopped and $elapsed.
TEAR_WINDOWS=50
TEAR_CAP_MS=60000
tear_check() {
	load clock="$1" tear_window_ns=50000 || { echo "insmod clock=$1 failed"; return 1; }
	bits=$(bits_for_wrap_ms $TEAR_WRAP_MS)
	echo "counter_bits=$bits" >"$DIR/config" || { echo "config counter_bits=$bits refused"; unload; return 1; }
	check=$(scratch)
	check_run "ms=$TEAR_CAP_MS windows=$TEAR_WINDOWS"
	rc=$?
	grep -v '^cpu' "$check" | tr '\n' ' '; echo
	backwards=$st_backwards
	windows=$st_windows_seen
	first=$st_first_catch_windows
	stopped=$st_stopped
	elapsed=$st_elapsed_ms
	overruns=$(stat_value "$DIR/stats" wrap_overruns)
	echo "counter_bits: $bits epoch_updates: $(stat_value "$DIR/stats" epoch_updates) wrap_overruns: $overruns"
	unload
	[ $rc -eq 0 ] && is_number "$backwards" && is_number "$overruns" && is_number "$windows"
}

t_tear_latch() {
	tear_check latch || return 1
	[ "$backwards" = 0 ] || { echo "the latch went backwards $backwards times"; return 1; }
	[ "$windows" -ge $TEAR_WINDOWS ] || {
		echo "SKIP: starved guest: the readers saw $windows writer windows in $elapsed ms, want $TEAR_WINDOWS; no step back through them"
		return $KSFT_SKIP
	}
	echo "the latch survived $windows writer windows ($elapsed ms)"
}

# The check must catch the unprotected clock: a read that lands in the
# writer's pause sees the new epoch_cyc with the old epoch_ns. It ends at
# the first catch; a clock that survives TEAR_WINDOWS windows means the
# check is blind.
t_tear_unprotected() {
	tear_check unprotected || return 1
	if [ "$backwards" -gt 0 ]; then
		echo "caught after $first writer windows seen ($elapsed ms)"
		return 0
	fi
	if [ "$windows" -ge $TEAR_WINDOWS ]; then
		echo "blind: the unprotected clock survived $windows writer windows"
		return 1
	fi
	echo "SKIP: starved guest: the readers saw $windows writer windows in $elapsed ms, want $TEAR_WINDOWS; not caught in them"
	return $KSFT_SKIP
}

t_check_bad_input() {
	load || { echo "insmod failed"; return 1; }
	ret=0
	for f in check acct; do
		runs=$(stat_value "$DIR/$f" runs)
		for v in 0 60001 abc -1 "" " 5" 5x 99999999999 ms=0 "ms=100 windows=x" \
			"ms=100 ms=200" "ms=100  windows=1" windows=5 "ms=1 windows=1000001"; do
			if printf '%s\n' "$v" >"$DIR/$f" 2>/dev/null; then
				echo "$f accepted '$v'"; ret=1
			fi
		done
		[ "$(stat_value "$DIR/$f" runs)" = "$runs" ] || { echo "a refused write to $f ran"; ret=1; }
	done
	unload
	return $ret
}

case_add t_check_ordered "counter_bits=32 $ORDERED: $CHECK_S s on every CPU monotonic, within 100 us of local_clock"
case_add t_check_bare "counter_bits=32 $BARE: $CHECK_S s on every CPU monotonic, within 100 us of local_clock"
case_add t_narrow_counter "counter_bits=16: the epoch timer keeps up with every wrap; the check through $NARROW_UPDATES timely epoch updates sees no step back"
case_add t_tear_latch "tear window: the latch never goes backwards"
case_add t_tear_unprotected "tear window: the check catches the unprotected clock"
case_add t_check_bad_input "check and acct refuse bad input and run nothing"
