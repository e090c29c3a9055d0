#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# bench.sh: nmiclock's benchmark, run where nmiclock.ko is loaded (the VM of
# scripts/run-bench, or any machine: run it as root).
#
# Usage: bench.sh [loops=N] [nruns=N] [update_us=N]
#
# Writes the arguments (default: refscale's loops=10000 nruns=30) to
# /sys/kernel/debug/nmiclock/bench, prints the table it gives and, after it,
# what nmiclock_sched_clock() costs another module (nmiclock_consumer.ko,
# beside nmiclock.ko, loaded three times), then loads the kernel's own
# refscale module with scale_type=clock and the same loops and
# nruns, and prints its figure beside ours for the same function
# (ktime_get_real_fast_ns()). refscale.ko and torture.ko are taken from
# $NMICLOCK_DIR/kernel, else from the running kernel's modules (modprobe).
# Exit status: 0 if everything ran, 1 if the benchmark failed, 4 (kselftest's
# skip) if nmiclock is not loaded; refscale missing is reported, not fatal.

D=/sys/kernel/debug/nmiclock
KDIR=${NMICLOCK_DIR:-/opt/nmiclock}/kernel

loops=10000 nruns=30 args=
for a in "$@"; do
	case $a in
	loops=*) loops=${a#loops=} ;;
	nruns=*) nruns=${a#nruns=} ;;
	update_us=*) ;;
	*) echo "bench.sh: unknown argument '$a' (want loops=N nruns=N update_us=N)" >&2; exit 2 ;;
	esac
	args="$args $a"
done
args=${args# }
[ -n "$args" ] || args="loops=$loops nruns=$nruns"

[ -w $D/bench ] || { echo "bench.sh: $D/bench missing: is nmiclock.ko loaded?" >&2; exit 4; }

# ktime_get_raw_fast_ns() and the counter agree only once timekeeping runs
# on it (on x86 seconds after boot in a VM, when the TSC takes over).
case $(uname -m) in aarch64) want=arch_sys_counter ;; *) want=tsc ;; esac
cs=/sys/devices/system/clocksource/clocksource0/current_clocksource
i=0
while [ "$(cat $cs 2>/dev/null)" != $want ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done

# Its NMI rows sample with the run's source: keep perf from throttling it,
# and put the two sysctls back at exit (on a signal too).
rate0=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null)
pct0=$(cat /proc/sys/kernel/perf_cpu_time_max_percent 2>/dev/null)
# And both benchmarks time with the console quiet (console_loglevel 1, put
# back at exit): under TCG a console line costs the host the emulated
# UART's work beside the timing vCPU, and the runs timed while the
# console was busy (the kernel's messages, our table) came out 1.5 times
# slower than the others, in both benchmarks alike.
lvl0=$(awk '{ print $1 }' /proc/sys/kernel/printk 2>/dev/null)
restore() {
	[ -z "$lvl0" ] || echo "$lvl0" >/proc/sys/kernel/printk
	[ -z "$rate0" ] || [ -z "$pct0" ] ||
		"$(dirname "$0")/perf_unthrottle.sh" --restore "$rate0" "$pct0"
}
trap restore EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
"$(dirname "$0")/perf_unthrottle.sh"
[ -z "$lvl0" ] || echo 1 >/proc/sys/kernel/printk
echo "bench.sh: running nmiclock's benchmark ($args); this takes a while"
echo "$args" >$D/bench || { echo "bench.sh: the benchmark failed" >&2; exit 1; }
# Our table is printed after refscale's runs: printing it is console work.
table_printed=
print_table() {
	[ -z "$table_printed" ] || return 0
	table_printed=1
	echo "--- nmiclock bench begin"
	cat $D/bench
	echo "--- nmiclock bench end"
	print_consumer
}

# The exported clock as another module pays for it: nmiclock_consumer.ko
# times nmiclock_sched_clock() against sched_clock() at load (31 runs of
# 10000 calls each, interrupts off); loaded CONSUMER_LOADS times, one
# line each, printed after our table.
CONSUMER_LOADS=3
consumer=${NMICLOCK_DIR:-/opt/nmiclock}/nmiclock_consumer.ko
consumer_lines=
if [ -e "$consumer" ]; then
	i=0
	while [ $i -lt $CONSUMER_LOADS ]; do
		i=$((i + 1))
		if insmod "$consumer"; then
			read -r line </sys/module/nmiclock_consumer/parameters/report
			rmmod nmiclock_consumer
		else
			line="not measured: insmod $consumer failed"
		fi
		consumer_lines="$consumer_lines
consumer $i: $line"
	done
else
	consumer_lines="
consumer: not measured: no $consumer"
fi
print_consumer() {
	echo "--- consumer begin"
	printf '%s\n' "${consumer_lines#?}"
	echo "--- consumer end"
}

# The kernel's refscale, same boot, same loops and nruns.
load() {
	m=$1
	shift
	if [ -e "$KDIR/$m.ko" ]; then
		insmod "$KDIR/$m.ko" "$@" 2>/dev/null
	else
		modprobe "$m" "$@" 2>/dev/null
	fi
}
ours=$(awk '$1 == "idle" && $2 == "ktime_get_real_fast_ns()" { print $3 }' $D/bench)
lsmod | grep -q '^refscale ' && rmmod refscale
if ! { lsmod | grep -q '^torture ' || load torture; }; then
	print_table
	echo "refscale: not run: no torture.ko (CONFIG_RCU_REF_SCALE_TEST=m in the kernel?)"
	exit 0
fi
before=$(dmesg | grep -c 'clock-ref-scale: END OF TEST')
if ! load refscale scale_type=clock loops="$loops" nruns="$nruns"; then
	print_table
	echo "refscale: not run: no refscale.ko (CONFIG_RCU_REF_SCALE_TEST=m in the kernel?)"
	rmmod torture 2>/dev/null
	exit 0
fi
echo "refscale: scale_type=clock loops=$loops nruns=$nruns loaded; waiting for its table"
# Wait for its END OF TEST asleep in one process, reading /dev/kmsg: a
# shell polling dmesg twice a second starts processes beside refscale's
# reader, and under TCG each costs the guest tens of ms of the CPUs it
# shares; that made refscale's figure 0.7 to 1.5 of ours, run to run,
# where ours ran with the shell blocked. The poll below then only picks
# up the table (and is the fallback without /dev/kmsg or timeout).
if [ -r /dev/kmsg ] && command -v timeout >/dev/null 2>&1; then
	timeout 300 awk -v before="$before" \
		'/clock-ref-scale: END OF TEST/ { if (++n > before) exit }' </dev/kmsg 2>/dev/null
fi
i=0
table=
while [ $i -lt 600 ]; do
	if [ "$(dmesg | grep -c 'clock-ref-scale: END OF TEST')" -gt "$before" ]; then
		# The table follows the last END OF TEST line: "Runs<TAB>Time(ns)"
		# and then one "N<TAB>ns" line per run.
		table=$(dmesg | sed -e 's/^\[[^]]*\] *//' | awk -v n="$nruns" '
			/clock-ref-scale: END OF TEST/ { got = 0; t = ""; on = 1; next }
			on && /^Runs\tTime\(ns\)$/ { next }
			on && /^[0-9]+\t[0-9]+\.[0-9]+$/ { t = t $0 "\n"; got++ }
			END { if (got == n) printf "%s", t }')
		[ -n "$table" ] && break
	fi
	sleep 0.5
	i=$((i + 1))
done
rmmod refscale 2>/dev/null
rmmod torture 2>/dev/null
[ -z "$lvl0" ] || echo "$lvl0" >/proc/sys/kernel/printk
print_table
if [ -z "$table" ]; then
	echo "refscale: no complete table within 300 s"
	exit 1
fi
echo "--- refscale begin"
echo "ref-scale: refscale module scale_type=clock"
printf 'Runs\tTime(ns)\n%s\n' "$table"
echo "--- refscale end"
# The median of each, and the 10th percentile: under QEMU TCG the host
# runs the guest at one of two speeds for seconds at a time, and the two
# benchmarks run one after the other, so their medians can fall in
# different speeds; their fastest runs, at the same speed, compare.
pct() { awk '{ print $2 }' | sort -n | awk -v p="$1" '{ v[NR] = $1 } END { print v[int((NR - 1) * p / 100) + 1] }'; }
theirs=$(printf '%s\n' "$table" | awk '{ print $2 }' | sort -n | awk '{ v[NR] = $1 } END { print v[int(NR / 2) + 1] }')
theirs10=$(printf '%s\n' "$table" | pct 10)
ours10=$(awk '/^ref-scale: idle ktime_get_real_fast_ns\(\)$/ { on = 1; next }
	on && /^[0-9]+\t[0-9.]+$/ { print; next } on && !/^Runs/ { exit }' $D/bench | pct 10)
echo "refscale vs nmiclock bench, ktime_get_real_fast_ns(), ns per read over $nruns runs of $loops: median refscale $theirs, nmiclock bench (idle) $ours; 10th percentile refscale $theirs10, nmiclock bench (idle) $ours10"
