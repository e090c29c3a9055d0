#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# perf_unthrottle.sh: keep perf from throttling nmiclock's sample counters.
#
# perf throttles a counter whose overflow handling takes "too long" (it
# prints "perf: interrupt took too long" and lowers
# kernel.perf_event_max_sample_rate), and only the tick unthrottles it, which
# NO_HZ idle and masked interrupts stop: a perf_hw run would then get a few
# samples a second.  This raises the rate limit, then turns the time-based
# throttle off, in that order (with the percent at 0 the rate cannot be
# written), and prints what is in force.  Exit 0 when both took, 1 (with
# the reason) when not: the run then shows throttling as starved CPUs.
#
# Usage: perf_unthrottle.sh [MAX_SAMPLE_RATE]   (default 200000)
#        perf_unthrottle.sh --restore RATE PERCENT
#
# --restore puts back the two sysctls as they were (read before the first
# call), quietly when they are so already; exit 1 when it cannot.

rate=/proc/sys/kernel/perf_event_max_sample_rate
pct=/proc/sys/kernel/perf_cpu_time_max_percent

if [ "${1:-}" = --restore ]; then
	[ $# = 3 ] || { echo "usage: perf_unthrottle.sh --restore RATE PERCENT" >&2; exit 2; }
	[ "$(cat $rate)" = "$2" ] && [ "$(cat $pct)" = "$3" ] && exit 0
	# A percent of 0 or 100 makes the rate read-only: through 25.
	{ echo 25 >$pct && echo "$2" >$rate && echo "$3" >$pct; } 2>/dev/null && exit 0
	echo "perf_unthrottle: could not put back perf_event_max_sample_rate=$2 perf_cpu_time_max_percent=$3" >&2
	exit 1
fi
want=${1:-200000}

if [ ! -w $rate ] || [ ! -w $pct ]; then
	echo "perf_unthrottle: $rate or $pct not writable: perf counters may be throttled"
	exit 1
fi
# A percent of 0 (or 100) makes the rate read-only: step through 25.
echo 25 >$pct && echo "$want" >$rate && echo 0 >$pct
ok=$?
echo "perf_unthrottle: perf_event_max_sample_rate=$(cat $rate) perf_cpu_time_max_percent=$(cat $pct)"
[ $ok -eq 0 ] && [ "$(cat $rate)" -ge "$want" ] && [ "$(cat $pct)" = 0 ] && exit 0
echo "perf_unthrottle: could not set them: perf counters may be throttled"
exit 1
