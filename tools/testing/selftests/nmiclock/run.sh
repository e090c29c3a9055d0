#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# run.sh: one stress run of the loaded nmiclock, as the suite runs one
# (its lib.sh: the clocksource waited for, perf kept from throttling the
# samples; both perf's sysctls and the console's log level put back at
# exit), for scripts/run-main and scripts/soak in
# the guest. Starts the run, waits for it to end, prints what it left
# ("== NAME" then the file: config, End of test, stats, anomalies,
# histogram, percpu, series; "== end" last) and exits with its verdict,
# kselftest's way: 0 SUCCESS, 1 FAILURE, 4 INCONCLUSIVE or none.
#
# Usage: run.sh [-p INTERVAL -g GIVEUP [-r READS] [-s SECONDS]]
#
#   -p INTERVAL  every INTERVAL seconds, a progress line ("soak: ..."),
#                and stop the run at its first anomaly, once READS
#                NMI-context reads are in (-r), after SECONDS (-s), or at
#                GIVEUP seconds (-g) whatever else; "soak: stopped: WHY"
#                then says which. Without -p, the run ends by itself.
#
# The End of test line, stats and anomalies are also printed between
# "--- soak summary begin" and "--- soak summary end", which scripts/soak
# keeps.

here=$(cd "$(dirname "$0")" && pwd)
interval= giveup= reads=0 duration=0
while getopts "p:g:r:s:" o; do
	case $o in
	p) interval=$OPTARG ;;
	g) giveup=$OPTARG ;;
	r) reads=$OPTARG ;;
	s) duration=$OPTARG ;;
	*) sed -n '/^# Usage:/,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 1 ;;
	esac
done
. "$here/lib.sh"

[ -d "$DIR" ] || { echo "run: nmiclock is not loaded (no $DIR)"; exit 4; }
wait_clocksource
state_snapshot "$SCRATCH/before"
"$here/perf_unthrottle.sh"
echo "== config"
cat "$DIR/config"
# The End of test line is printed once, below: keep the kernel's info
# lines off the console meanwhile (warnings and worse still show), and
# put the console's level back at exit, with what lib.sh puts back.
read -r printk_was _ </proc/sys/kernel/printk
trap 'echo "$printk_was" >/proc/sys/kernel/printk; restore_state; rm -rf "$SCRATCH"' EXIT
echo 5 >/proc/sys/kernel/printk
echo start >"$DIR/control" || { echo "== the run did not start"; exit 4; }

# v KEY: KEY's value in stats.
v() {
	sed -n "s/^$1: //p" "$DIR/stats"
}

# human N: N as 1.2G, 3.4M or 5.6k (hms, lib.sh's: seconds as 1h2m).
human() {
	n=$1
	if [ $n -ge 1000000000 ]; then echo "$((n / 1000000000)).$((n % 1000000000 / 100000000))G"
	elif [ $n -ge 1000000 ]; then echo "$((n / 1000000)).$((n % 1000000 / 100000))M"
	elif [ $n -ge 1000 ]; then echo "$((n / 1000)).$((n % 1000 / 100))k"
	else echo $n; fi
}

# progress: the soak's loop, a line every $interval s until a stop
# condition; then stops the run if it still runs.
progress() {
	read -r t0 _ </proc/uptime
	t0=${t0%%.*}
	why=
	while :; do
		# The interval, or less once the run has ended by itself.
		j=0
		while [ $j -lt "$interval" ] && ! state_is "$DIR/control" done; do
			sleep 1
			j=$((j + 1))
		done
		read -r now _ </proc/uptime
		el=$((${now%%.*} - t0))
		state_is "$DIR/control" done && ended=1 || ended=0
		n=$(v nmi_samples)
		e=$(v errors)
		rate=$((n / (el > 0 ? el : 1)))
		line="soak: $(human $n)"
		left=
		if [ "$reads" -gt 0 ]; then
			line="$line of $(human $reads) reads ($((n * 100 / reads)) %)"
			[ $rate -gt 0 ] && [ $n -lt $reads ] && left=$(((reads - n) / rate))
		else
			line="$line reads"
		fi
		if [ "$duration" -gt 0 ]; then
			dl=$((duration - el))
			[ $dl -lt 0 ] && dl=0
			{ [ -z "$left" ] || [ $dl -lt $left ]; } && left=$dl
		fi
		line="$line, $rate/s, $(hms $el) elapsed"
		[ -n "$left" ] && line="$line, ~$(hms $left) left"
		echo "$line, $e anomalies"
		[ $ended = 1 ] && { why="the run ended"; break; }
		[ "$e" -gt 0 ] && { why="first anomaly"; break; }
		[ "$reads" -gt 0 ] && [ "$n" -ge "$reads" ] && { why="target reached"; break; }
		[ "$el" -ge "$giveup" ] && { why="gave up at the time limit"; break; }
	done
	state_is "$DIR/control" running && echo stop >"$DIR/control"
	echo "soak: stopped: $why"
}

if [ -n "$interval" ]; then
	progress
fi
while ! state_is "$DIR/control" done; do
	sleep 1
done
echo "--- soak summary begin"
echo "== End of test"
dmesg | grep "End of test" | sed -n '/End of test: /h;/End of test: /!H;${x;p;}'
echo "== stats"
cat "$DIR/stats"
echo "== anomalies"
cat "$DIR/anomalies"
echo "--- soak summary end"
for f in histogram percpu series; do
	echo "== $f"
	cat "$DIR/$f"
done
echo "== end"
case $(v verdict | head -n 1) in
SUCCESS) exit 0 ;;
FAILURE) exit 1 ;;
*) exit 4 ;;
esac
