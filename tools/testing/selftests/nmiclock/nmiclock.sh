#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# nmiclock.sh: kselftest-style suite for nmiclock.ko, KTAP output.
#
# Usage: nmiclock.sh [-m MODULE.ko] [-c CYCLES]
#
#   -m MODULE.ko  the module to test (default: $NMICLOCK_KO, else
#                 ../nmiclock.ko beside this script, as in the VM at
#                 /opt/nmiclock, else the nmiclock.ko of the source tree
#                 this script is in)
#   -c CYCLES     load/unload cycles (default: 20)
#
# Runs as root, in the VM (scripts/vm-run) or on a machine whose running
# kernel the module was built for.  Loads and unloads the module itself; a
# copy already loaded is unloaded first.  Exit status is kselftest's:
# 0 all passed, 1 something failed, 4 everything skipped.  The last line is
# "N passed, N failed, N skipped".

cycles=20
module=${NMICLOCK_KO:-}
here=$(cd "$(dirname "$0")" && pwd)

while getopts m:c:h opt; do
	case $opt in
	m) module=$OPTARG ;;
	c) cycles=$OPTARG ;;
	*) sed -n '4,19p' "$0" | sed 's/^# \{0,1\}//'; exit 4 ;;
	esac
done

DEBUGFS=/sys/kernel/debug
DIR=$DEBUGFS/nmiclock
STATS_KEYS="version state online_cpus tsc_khz tsc_mult tsc_shift stats_reads
clock counter counter_bits tear_window_ns mult shift update_interval_ns now_ns
clock_reads clock_retries clock_stalls epoch_updates wrap_overruns
epoch_update_skips recalibrations acct acct_updates acct_races acct_bad_deltas
acct_timexpd_backwards acct_integral_mismatches"
# Bound on |nmiclock elapsed - local_clock() elapsed| in the clock check.
MAX_DEV_NS=100000
SPLAT_RE='WARNING:|BUG:|Oops|kernel BUG at|general protection fault|UBSAN:|KASAN:|kmemleak: [0-9]+ new suspected|Uhhuh\. NMI received|panicked at'

# --- KTAP ---------------------------------------------------------------------
n_pass=0 n_fail=0 n_skip=0 n_case=0

ktap_plan() {
	echo "TAP version 13"
	echo "1..$1"
}

# run_case NAME FUNCTION: FUNCTION returns 0 (pass), 4 (skip, reason in
# $skip_reason) or anything else (fail); its output becomes KTAP diagnostics.
run_case() {
	name=$1
	n_case=$((n_case + 1))
	skip_reason=
	out=$($2 2>&1)
	rc=$?
	skip_reason=$(printf '%s\n' "$out" | sed -n 's/^SKIP: //p' | head -n 1)
	printf '%s\n' "$out" | grep -v '^SKIP: ' | grep . | sed 's/^/# /'
	if [ $rc -eq 0 ]; then
		n_pass=$((n_pass + 1))
		echo "ok $n_case $name"
	elif [ $rc -eq 4 ]; then
		n_skip=$((n_skip + 1))
		echo "ok $n_case $name # SKIP $skip_reason"
	else
		n_fail=$((n_fail + 1))
		echo "not ok $n_case $name"
	fi
}

ktap_finish() {
	echo "# Totals: pass:$n_pass fail:$n_fail xfail:0 xpass:0 skip:$n_skip error:0"
	echo "$n_pass passed, $n_fail failed, $n_skip skipped"
	if [ $n_fail -gt 0 ]; then
		exit 1
	elif [ $n_pass -eq 0 ] && [ $n_skip -gt 0 ]; then
		exit 4
	fi
	exit 0
}

skip_all() {
	ktap_plan 0
	echo "# SKIP: $*"
	echo "0 passed, 0 failed, 0 skipped"
	exit 4
}

# --- helpers --------------------------------------------------------------------
is_loaded() {
	grep -q '^nmiclock ' /proc/modules
}

load() {
	insmod "$module" "$@"
}

unload() {
	rmmod nmiclock
}

# Prints the value of KEY in the stats file given as $1.
stat_value() {
	sed -n "s/^$2: //p" "$1"
}

is_number() {
	case $1 in ''|*[!0-9]*) return 1 ;; esac
}

# --- cases ------------------------------------------------------------------------
t_insmod() {
	load || { echo "insmod $module failed"; return 1; }
	is_loaded || { echo "insmod succeeded but nmiclock is not in /proc/modules"; return 1; }
}

t_load_message() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	dmesg | tail -n 50 | grep -q 'nmiclock: loaded: version ' && return 0
	echo "no 'nmiclock: loaded: version' line in the kernel log"
	return 1
}

t_debugfs() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	[ -d "$DIR" ] || { echo "$DIR missing"; return 1; }
	[ -f "$DIR/stats" ] || { echo "$DIR/stats missing"; return 1; }
	mode=$(stat -c %a "$DIR/stats")
	[ "$mode" = 400 ] || { echo "$DIR/stats has mode $mode, want 400 (root-only)"; return 1; }
	cat "$DIR/stats" >/dev/null || { echo "reading $DIR/stats failed"; return 1; }
}

t_stats_parse() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	tmp=$(mktemp) || return 1
	cat "$DIR/stats" >"$tmp" || { rm -f "$tmp"; echo "read failed"; return 1; }
	ret=0
	[ -s "$tmp" ] || { echo "stats is empty"; ret=1; }
	bad=$(grep -vcE '^[a-z][a-z0-9_]*: [^ ].*$' "$tmp")
	[ "$bad" -eq 0 ] || { echo "$bad line(s) are not 'key: value':"; grep -vE '^[a-z][a-z0-9_]*: [^ ].*$' "$tmp"; ret=1; }
	dups=$(cut -d: -f1 "$tmp" | sort | uniq -d)
	[ -z "$dups" ] || { echo "duplicate keys: $dups"; ret=1; }
	for key in $STATS_KEYS; do
		grep -q "^$key: " "$tmp" || { echo "key '$key' missing"; ret=1; }
	done
	for key in online_cpus tsc_khz tsc_mult tsc_shift stats_reads counter_bits \
		clock_reads epoch_updates now_ns; do
		v=$(stat_value "$tmp" $key)
		is_number "$v" || { echo "$key: '$v' is not a number"; ret=1; }
	done
	[ "$(stat_value "$tmp" state)" = idle ] || { echo "state is not idle"; ret=1; }
	[ "$(stat_value "$tmp" clock)" = latch ] || { echo "default clock is not latch"; ret=1; }
	[ "$(stat_value "$tmp" counter)" = tsc_ordered ] || { echo "default counter is not tsc_ordered"; ret=1; }
	[ "$(stat_value "$tmp" counter_bits)" = 64 ] || { echo "default counter_bits is not 64"; ret=1; }
	[ "$(stat_value "$tmp" acct)" = cmpxchg ] || { echo "default acct is not cmpxchg"; ret=1; }
	cpus=$(grep -c '^processor' /proc/cpuinfo)
	[ "$(stat_value "$tmp" online_cpus)" = "$cpus" ] ||
		{ echo "online_cpus $(stat_value "$tmp" online_cpus) != $cpus CPUs in /proc/cpuinfo"; ret=1; }
	khz=$(stat_value "$tmp" tsc_khz)
	shift_=$(stat_value "$tmp" tsc_shift)
	if is_number "$khz" && [ "$khz" -gt 0 ] && is_number "$shift_"; then
		[ "$shift_" -ge 1 ] && [ "$shift_" -le 32 ] ||
			{ echo "tsc_shift $shift_ outside 1..32 for a $khz kHz TSC"; ret=1; }
	fi
	# Counters move: every read of stats reads the clock once.
	tmp2=$(mktemp) || return 1
	cat "$DIR/stats" >"$tmp2"
	for key in stats_reads clock_reads now_ns; do
		a=$(stat_value "$tmp" $key)
		b=$(stat_value "$tmp2" $key)
		if is_number "$a" && is_number "$b"; then
			[ "$b" -gt "$a" ] || { echo "$key did not advance: $a then $b"; ret=1; }
		fi
	done
	rm -f "$tmp2"
	rm -f "$tmp"
	return $ret
}

t_rmmod() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	unload || { echo "rmmod nmiclock failed"; return 1; }
}

# Everything the module creates is gone once it is unloaded.
left_behind() {
	is_loaded && echo "nmiclock still in /proc/modules"
	[ -e /sys/module/nmiclock ] && echo "/sys/module/nmiclock still there"
	[ -e "$DIR" ] && echo "$DIR still there"
}

t_nothing_left() {
	left=$(left_behind)
	[ -z "$left" ] && return 0
	echo "$left"
	return 1
}

t_cycles() {
	i=1
	while [ $i -le "$cycles" ]; do
		load || { echo "cycle $i: insmod failed"; return 1; }
		cat "$DIR/stats" >/dev/null || { echo "cycle $i: reading stats failed"; unload; return 1; }
		unload || { echo "cycle $i: rmmod failed"; return 1; }
		left=$(left_behind)
		[ -z "$left" ] || { echo "cycle $i: $left"; return 1; }
		i=$((i + 1))
	done
	echo "$cycles cycles"
}

t_kernel_log_clean() {
	found=$(dmesg | tail -n +"$((dmesg_start + 1))" | grep -E "$SPLAT_RE")
	[ -z "$found" ] && return 0
	echo "kernel log reports problems since the suite started:"
	echo "$found"
	return 1
}


# check_run MS: runs the clock check for MS ms and leaves its results in
# $check (a file); fails if the write fails.
check_run() {
	echo "$1" >"$DIR/check" || { echo "writing $1 to check failed"; return 1; }
	cat "$DIR/check" >"$check"
}

# check_all_cpus: every online CPU took part in the last check.
check_all_cpus() {
	cpus=$(grep -c '^processor' /proc/cpuinfo)
	n=$(grep -c '^cpu[0-9]*: reads=[1-9]' "$check")
	[ "$n" -eq "$cpus" ] || { echo "check ran on $n of $cpus CPUs"; return 1; }
}

# t_clock_check COUNTER: 5 s of task-context reads on every CPU with a
# 32-bit counter (epoch updates about every second): monotonic per CPU and
# within MAX_DEV_NS of local_clock().
t_clock_check() {
	load counter="$1" counter_bits=32 || { echo "insmod counter=$1 counter_bits=32 failed"; return 1; }
	check=$(mktemp)
	ret=0
	u0=$(stat_value "$DIR/stats" epoch_updates)
	check_run 5000 || ret=1
	u1=$(stat_value "$DIR/stats" epoch_updates)
	grep -v '^cpu' "$check" | tr '\n' ' '; echo
	check_all_cpus || ret=1
	[ "$(stat_value "$check" backwards)" = 0 ] ||
		{ echo "time went backwards $(stat_value "$check" backwards) times"; ret=1; }
	dev=$(stat_value "$check" max_dev_ns)
	{ is_number "$dev" && [ "$dev" -le $MAX_DEV_NS ]; } ||
		{ echo "max_dev_ns $dev > $MAX_DEV_NS"; ret=1; }
	[ "$(stat_value "$check" reads)" -gt 0 ] || { echo "no reads"; ret=1; }
	[ $((u1 - u0)) -ge 2 ] || { echo "only $((u1 - u0)) epoch updates during the check"; ret=1; }
	[ "$(stat_value "$DIR/stats" wrap_overruns)" = 0 ] ||
		{ echo "wrap_overruns with a 32-bit counter"; ret=1; }
	rm -f "$check"
	unload
	return $ret
}

t_check_tsc_ordered() { t_clock_check tsc_ordered; }
t_check_tsc() { t_clock_check tsc; }

t_narrow_counter() {
	load counter_bits=16 || { echo "insmod counter_bits=16 failed"; return 1; }
	u0=$(stat_value "$DIR/stats" epoch_updates)
	t0=$(cut -d' ' -f1 /proc/uptime)
	sleep 1
	u1=$(stat_value "$DIR/stats" epoch_updates)
	t1=$(cut -d' ' -f1 /proc/uptime)
	unload
	ms=$(( (${t1%.*} * 100 + ${t1#*.}) * 10 - (${t0%.*} * 100 + ${t0#*.}) * 10 ))
	rate=$(( (u1 - u0) * 1000 / (ms > 0 ? ms : 1) ))
	echo "$((u1 - u0)) epoch updates in $ms ms: $rate/s"
	[ "$rate" -ge 1000 ] || { echo "want thousands per second"; return 1; }
}

t_variants() {
	ret=0
	for c in latch seqcount unprotected; do
		load clock=$c || { echo "insmod clock=$c failed"; ret=1; continue; }
		got=$(stat_value "$DIR/stats" clock)
		[ "$got" = $c ] || { echo "clock=$c: stats says clock: $got"; ret=1; }
		unload
	done
	return $ret
}

# tear_check CLOCK: 2 s check with the writer pausing 50 us between its
# stores, on a 28-bit counter: an epoch update every 64 ms, while a wrap
# (128 ms) is far longer than any hiccup of a vCPU, so no update is late by
# a whole wrap (which would step time back by one wrap, whatever the
# protection). Sets $backwards and $overruns.
tear_check() {
	load clock="$1" counter_bits=28 tear_window_ns=50000 || { echo "insmod clock=$1 failed"; return 1; }
	check=$(mktemp)
	check_run 2000
	rc=$?
	grep -v '^cpu' "$check" | tr '\n' ' '; echo
	backwards=$(stat_value "$check" backwards)
	overruns=$(stat_value "$DIR/stats" wrap_overruns)
	echo "epoch_updates: $(stat_value "$DIR/stats" epoch_updates) wrap_overruns: $overruns"
	rm -f "$check"
	unload
	[ $rc -eq 0 ] && is_number "$backwards" && is_number "$overruns"
}

t_tear_latch() {
	tear_check latch || return 1
	[ "$overruns" = 0 ] || { echo "inconclusive: $overruns epoch updates came a wrap late"; return 1; }
	[ "$backwards" = 0 ] || { echo "the latch went backwards $backwards times"; return 1; }
}

t_tear_unprotected() {
	tear_check unprotected || return 1
	[ "$overruns" = 0 ] || { echo "inconclusive: $overruns epoch updates came a wrap late"; return 1; }
	[ "$backwards" -gt 0 ] || { echo "the check did not catch the unprotected clock"; return 1; }
}

t_sample() {
	[ -e "$sample" ] || { echo "SKIP: $sample not found"; return 4; }
	load || { echo "insmod nmiclock failed"; return 1; }
	ret=0
	insmod "$sample" || { echo "insmod $sample failed"; ret=1; }
	dmesg | tail -n 20 | grep 'nmiclock_sample: ' | sed 's/^\[[^]]*\] //'
	dmesg | tail -n 20 | grep -q 'nmiclock_sample: 5 reads, monotonic' ||
		{ echo "no 'nmiclock_sample: 5 reads, monotonic' in the kernel log"; ret=1; }
	rmmod nmiclock_sample || { echo "rmmod nmiclock_sample failed"; ret=1; }
	unload || ret=1
	return $ret
}

t_bad_params() {
	ret=0
	for p in clock=bogus clock= clock=LATCH counter=rdtsc counter= acct=bogus acct= \
		acct=CMPXCHG acct=irq_save counter_bits=15 \
		counter_bits=65 counter_bits=0 counter_bits=abc counter_bits=-1 \
		counter_bits=99999999999 "counter_bits= 32" counter_bits=0x20 \
		tear_window_ns=1000001 tear_window_ns=x tear_window_ns=-5 tear_window_ns=; do
		name=${p%%=*}
		before=$(dmesg | wc -l)
		err=$(insmod "$module" "$p" 2>&1) && { echo "$p: loaded"; unload; ret=1; continue; }
		case $err in
		*"Invalid argument"*) ;;
		*) echo "$p: want EINVAL, got: $err"; ret=1 ;;
		esac
		is_loaded && { echo "$p: module loaded anyway"; unload; ret=1; }
		msg=$(dmesg | tail -n +"$((before + 1))" | grep "nmiclock: .*$name" | head -n 1)
		[ -n "$msg" ] || { echo "$p: no log line naming $name"; ret=1; }
		echo "$p: ${msg#*] }"
	done
	return $ret
}

# acct_run VARIANT: a 5 s run of the acct updater, task side and hrtimer
# side on every CPU; leaves the results in $acct_out. Fails unless both
# sides ran on every CPU and updates were applied.
acct_run() {
	load acct="$1" || { echo "insmod acct=$1 failed"; return 1; }
	acct_out=$(mktemp)
	ret=0
	echo 5000 >"$DIR/acct" || { echo "writing 5000 to acct failed"; ret=1; }
	cat "$DIR/acct" >"$acct_out"
	grep -vE '^(cpu|irq_period|min_delta|state|runs|cpus)' "$acct_out" | tr '\n' ' '; echo
	[ "$(stat_value "$DIR/stats" acct)" = "$1" ] || { echo "stats does not say acct: $1"; ret=1; }
	cpus=$(grep -c '^processor' /proc/cpuinfo)
	n=$(grep -cE '^cpu[0-9]+: task_calls=[1-9][0-9]* irq_calls=[1-9][0-9]* updates=[1-9]' "$acct_out")
	[ "$n" -eq "$cpus" ] || { echo "task side, hrtimer side and updates on $n of $cpus CPUs"; ret=1; }
	unload
	return $ret
}

# t_acct_clean VARIANT: no bad delta, no backward step, integrals add up.
t_acct_clean() {
	acct_run "$1" || { rm -f "$acct_out"; return 1; }
	ret=0
	for key in bad_deltas timexpd_backwards integral_mismatches; do
		v=$(stat_value "$acct_out" $key)
		[ "$v" = 0 ] || { echo "$key: $v"; ret=1; }
	done
	rm -f "$acct_out"
	return $ret
}

t_acct_cmpxchg() { t_acct_clean cmpxchg; }
t_acct_irqsave() { t_acct_clean irqsave; }

# racy is reported for what it shows (an interrupt must land in its window).
t_acct_racy() {
	acct_run racy || { rm -f "$acct_out"; return 1; }
	echo "racy: $(stat_value "$acct_out" bad_deltas) bad deltas," \
		"$(stat_value "$acct_out" timexpd_backwards) backward steps," \
		"$(stat_value "$acct_out" integral_mismatches) integral mismatches"
	rm -f "$acct_out"
}

t_acct_bench() {
	load || { echo "insmod failed"; return 1; }
	out=$(mktemp)
	ret=0
	echo 3 >"$DIR/acct_bench" || { echo "writing 3 to acct_bench failed"; ret=1; }
	cat "$DIR/acct_bench" >"$out"
	unload
	tr '\n' ' ' <"$out"; echo
	[ "$(stat_value "$out" rounds)" = 3 ] || { echo "rounds is not 3"; ret=1; }
	for mode in tick apply; do
		for a in cmpxchg irqsave racy; do
			v=$(stat_value "$out" ${a}_${mode}_ns)
			case $v in [0-9]*.[0-9][0-9]) [ "${v%.*}${v#*.}" -gt 0 ] || { echo "${a}_${mode}_ns is 0"; ret=1; } ;;
			*) echo "${a}_${mode}_ns: '$v'"; ret=1 ;; esac
		done
		grep -qE "^irqsave_over_cmpxchg_$mode: [0-9]+\.[0-9]{2}$" "$out" ||
			{ echo "no irqsave_over_cmpxchg_$mode ratio"; ret=1; }
	done
	rm -f "$out"
	return $ret
}

t_check_bad_input() {
	load || { echo "insmod failed"; return 1; }
	ret=0
	for f in check acct acct_bench; do
		runs=$(stat_value "$DIR/$f" runs)
		rounds=$(stat_value "$DIR/$f" rounds)
		for v in 0 60001 abc -1 "" " 5" 5x 99999999999; do
			[ $f = acct_bench ] && [ "$v" = 60001 ] && v=32
			if printf '%s\n' "$v" >"$DIR/$f" 2>/dev/null; then
				echo "$f accepted '$v'"; ret=1
			fi
		done
		[ "$(stat_value "$DIR/$f" runs)" = "$runs" ] || { echo "a refused write to $f ran"; ret=1; }
		[ "$(stat_value "$DIR/$f" rounds)" = "$rounds" ] || { echo "a refused write to $f ran"; ret=1; }
	done
	unload
	return $ret
}

# --- main -------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || skip_all "must be run as root"
if [ -z "$module" ]; then
	for m in "$here/../nmiclock.ko" "$here/../../../../nmiclock.ko"; do
		[ -e "$m" ] && { module=$m; break; }
	done
fi
[ -n "$module" ] && [ -e "$module" ] || skip_all "nmiclock.ko not found (build it, or pass -m)"
is_number "$cycles" || { echo "-c needs a number" >&2; exit 1; }
if ! grep -q ' /sys/kernel/debug ' /proc/mounts; then
	mount -t debugfs debugfs "$DEBUGFS" || skip_all "debugfs not available"
fi

sample=$(dirname "$module")/samples/nmiclock_sample.ko
[ -e "$sample" ] || sample=$(dirname "$module")/nmiclock_sample.ko

ktap_plan 21
echo "# module: $module"
dmesg_start=$(dmesg | wc -l)
if is_loaded; then
	echo "# nmiclock was loaded; unloading it first"
	unload || echo "# rmmod nmiclock failed; insmod will fail too"
fi

run_case "insmod" t_insmod
run_case "load message logged" t_load_message
run_case "debugfs dir and root-only stats present and readable" t_debugfs
run_case "stats parses as key: value with sane values" t_stats_parse
run_case "rmmod" t_rmmod
run_case "rmmod leaves nothing behind" t_nothing_left
run_case "$cycles load/unload cycles" t_cycles
run_case "every clock variant loads and says so" t_variants
run_case "counter_bits=32 tsc_ordered: 5 s on every CPU monotonic, within 100 us of local_clock" t_check_tsc_ordered
run_case "counter_bits=32 tsc: 5 s on every CPU monotonic, within 100 us of local_clock" t_check_tsc
run_case "counter_bits=16: thousands of epoch updates per second" t_narrow_counter
run_case "tear window: the latch never goes backwards" t_tear_latch
run_case "tear window: the check catches the unprotected clock" t_tear_unprotected
run_case "sample consumer loads, reads and unloads" t_sample
run_case "bad module parameters: EINVAL, a log line, nothing loaded" t_bad_params
run_case "acct=cmpxchg: 5 s task + hrtimer updates, no bad delta, no backward step" t_acct_cmpxchg
run_case "acct=irqsave: 5 s task + hrtimer updates, no bad delta, no backward step" t_acct_irqsave
run_case "acct=racy: 5 s task + hrtimer updates, reported" t_acct_racy
run_case "acct_bench times every strategy and gives irqsave/cmpxchg" t_acct_bench
run_case "check, acct, acct_bench refuse bad input and run nothing" t_check_bad_input
run_case "kernel log has no splats" t_kernel_log_clean
ktap_finish
