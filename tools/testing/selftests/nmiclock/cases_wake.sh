# SPDX-License-Identifier: GPL-2.0
#
# cases_wake.sh: the wake-up designs (wake=sleep|racy|poll), each run on
# every CPU with the waiters really idling between wake-ups.
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

# wake_run DESIGN [PARAM...]: a WAKE_S seconds run of the wake activity;
# leaves the results in $wake_out and prints them on one line. Fails unless
# the design ran and every CPU saw wake-ups.
wake_run() {
	load wake="$@" || { echo "insmod wake=$* failed"; return 1; }
	wake_out=$(scratch)
	ret=0
	echo $((WAKE_S * 1000)) >"$DIR/wake" || { echo "writing $((WAKE_S * 1000)) to wake failed"; ret=1; }
	stats_copy "$DIR/wake" "$wake_out"
	grep -E '^(wakeups|late_wakeups|lost_wakeups|slow_wakeups|p50_wake_latency_ns|p99_wake_latency_ns|max_wake_latency_ns|poll_wakeups|polled_ns|verdict):' \
		"$wake_out" | tr '\n' ' '; echo
	[ "$st_wake" = "$1" ] || { echo "wake does not say wake: $1"; ret=1; }
	cpus=$(online_cpus)
	n=$(grep -cE '^cpu[0-9]+: wakeups=[1-9]' "$wake_out")
	[ "$n" -eq "$cpus" ] || { echo "wake-ups on $n of $cpus CPUs"; ret=1; }
	unload
	return $ret
}

# wake_clean DESIGN [PARAM...]: a correct design loses no wake-up. Late
# ones that were not lost (slow: woken in time, run a tick later; in a VM
# the host's doing) are reported, not judged.
wake_clean() {
	wake_run "$@" || return 1
	lost=$st_lost_wakeups
	[ "$lost" = 0 ] || { echo "$lost wake-ups lost"; return 1; }
	[ "$st_verdict" = clean ] || { echo "verdict is not clean"; return 1; }
}

t_wake_sleep() { wake_clean sleep; }

# poll must also have taken wake-ups while polling: the timer comes at most
# 50 us after the waiter starts waiting, within the 100 us window.
t_wake_poll() {
	wake_clean poll poll_us=100 || return 1
	n=$st_poll_wakeups
	[ "$n" -gt 0 ] || { echo "no wake-up taken while polling"; return 1; }
}

# racy must be caught: its wake-ups that land between its check and its
# sleep are lost until its one-tick timeout. Runs of WAKE_S seconds go on
# until one loses some, WAKE_TRIES at most (how often the timer lands in
# that gap varies with the host); a racy design never caught means the
# probe is blind, and fails.
t_wake_racy() {
	try=1
	while :; do
		wake_run racy || return 1
		lost=$st_lost_wakeups
		[ "$lost" -gt 0 ] && break
		[ $try -ge $WAKE_TRIES ] && {
			echo "racy lost no wake-up in $try runs of $WAKE_S s: the probe is blind"
			return 1
		}
		try=$((try + 1))
	done
	late=$st_late_wakeups
	max=$st_max_wake_latency_ns
	tick=$st_tick_ns
	# A lost wake-up waits out the whole tick: each is a late one.
	[ "$late" -ge "$lost" ] && [ "$max" -ge "$tick" ] ||
		{ echo "$lost lost but $late late, worst $max ns: lost ones must be a tick ($tick ns) late"; return 1; }
	echo "XFAIL: caught in run $try: $lost wake-ups lost, $late late, worst latency $max ns (tick $tick ns)" \
		"in $st_wakeups wake-ups"
	return $KSFT_XFAIL
}

case_add t_wake_sleep "wake=sleep: $WAKE_S s of timer wake-ups on every CPU, none lost"
case_add t_wake_poll "wake=poll poll_us=100: $WAKE_S s of timer wake-ups on every CPU, some while polling, none lost"
case_add t_wake_racy "wake=racy: timer wake-ups on every CPU until some are lost (runs of $WAKE_S s), caught"
