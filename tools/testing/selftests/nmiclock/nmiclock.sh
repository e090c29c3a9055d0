#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# nmiclock.sh: kselftest-style suite for nmiclock.ko, KTAP output.
#
# Usage: nmiclock.sh [-q] [-m MODULE.ko] [-c CYCLES]
#
#   -q            quick: every case, with shorter runs (3 s checks and acct
#                 runs instead of 5, stress runs of 3 s instead of 10 and
#                 2 s instead of 4, 5 load/unload and 10 start/stop cycles
#                 instead of 20 and 50, one bad value per module parameter
#                 instead of three or four). For debug kernels, whose point is
#                 that every path runs under lockdep, KASAN and kmemleak;
#                 the full run measures how much the checks catch.
#   -m MODULE.ko  the module to test (default: $NMICLOCK_KO, else
#                 ../nmiclock.ko beside this script, as in the VM at
#                 /opt/nmiclock, else the nmiclock.ko of the source tree
#                 this script is in)
#   -c CYCLES     load/unload cycles (default: 20, or 5 with -q)
#
# Runs as root, in the VM (scripts/vm-run) or on a machine whose running
# kernel the module was built for.  Loads and unloads the module itself; a
# copy already loaded is unloaded first.  Exit status is kselftest's:
# 0 all passed, 1 something failed, 4 everything skipped.  The last line is
# "N passed, N failed, N skipped".

cycles=
quick=0
module=${NMICLOCK_KO:-}
here=$(cd "$(dirname "$0")" && pwd)

while getopts qm:c:h opt; do
	case $opt in
	q) quick=1 ;;
	m) module=$OPTARG ;;
	c) cycles=$OPTARG ;;
	*) sed -n '4,25p' "$0" | sed 's/^# \{0,1\}//'; exit 4 ;;
	esac
done

# Lengths of the runs (see -q).
if [ $quick = 1 ]; then
	CHECK_S=3 ACCT_S=3 STRESS_S=3 BUSTED_S=2 START_STOP=10
	: "${cycles:=5}"
else
	CHECK_S=5 ACCT_S=5 STRESS_S=10 BUSTED_S=4 START_STOP=50
	: "${cycles:=20}"
fi

DEBUGFS=/sys/kernel/debug
DIR=$DEBUGFS/nmiclock
STATS_KEYS="version state online_cpus tsc_khz tsc_mult tsc_shift stats_reads
clock counter counter_bits tear_window_ns mult shift update_interval_ns now_ns
clock_reads clock_retries clock_stalls epoch_updates wrap_overruns
epoch_update_skips recalibrations acct acct_updates acct_races acct_bad_deltas
acct_timexpd_backwards acct_integral_mismatches nmi_source nmi_source_requested
perf_hw_error samples nmi_samples torn_reads backwards cross_cpu_backwards
max_backstep_ns errors nmi_leftovers nmi_handler_p50_ns nmi_handler_p99_ns
nmi_handler_max_ns wakeups late_wakeups max_wake_latency_ns
elapsed_ms anomalies_kept anomalies_dropped"
# Random writes per file in the hostile-input case.
FUZZ_WRITES=60
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

# mark NAME: writes a marker into the kernel log; log_since NAME prints the
# log after it. The ring buffer can wrap (lots of logging, small buffers),
# so counting lines would go wrong; if the marker itself is gone, the whole
# buffer is printed (and a note to stderr).
mark() {
	echo "nmiclock-selftest[$$]: mark $1" >/dev/kmsg
}

log_since() {
	# Lines after the last line that ends with the marker.
	out=$(dmesg | awk -v m="nmiclock-selftest[$$]: mark $1" '
		{
			i = index($0, m)
			if (i && i + length(m) == length($0) + 1) { n = 0; seen = 1; next }
		}
		seen { line[n++] = $0 }
		END { for (j = 0; j < n; j++) print line[j] }')
	if [ -z "$out" ] && ! dmesg | grep -q "nmiclock-selftest\[$$\]: mark $1\$"; then
		echo "(kernel log wrapped past mark $1: whole log)" >&2
		out=$(dmesg)
	fi
	printf '%s\n' "$out"
}
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
	mark insmod
	load || { echo "insmod $module failed"; return 1; }
	is_loaded || { echo "insmod succeeded but nmiclock is not in /proc/modules"; return 1; }
}

t_load_message() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	log_since insmod | grep -q 'nmiclock: loaded: version ' && return 0
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

# kmemleak (debug kernels): after everything is unloaded, an explicit scan
# must find nothing new since the suite started. It reports only objects
# older than 5 s, hence the wait.
KMEMLEAK=$DEBUGFS/kmemleak
t_kmemleak() {
	[ -e "$KMEMLEAK" ] || { echo "SKIP: kernel without kmemleak"; return 4; }
	is_loaded && unload
	sleep 6
	echo scan >"$KMEMLEAK" || { echo "kmemleak scan failed"; return 1; }
	sleep 1
	echo scan >"$KMEMLEAK"
	leaks=$(cat "$KMEMLEAK")
	[ -z "$leaks" ] && return 0
	echo "kmemleak reports:"
	printf '%s\n' "$leaks" | head -n 40
	return 1
}

t_kernel_log_clean() {
	found=$(log_since suite | grep -v 'nmiclock-selftest\[' | grep -E "$SPLAT_RE")
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

# t_clock_check COUNTER: CHECK_S seconds of task-context reads on every CPU with a
# 32-bit counter (epoch updates about every second): monotonic per CPU and
# within MAX_DEV_NS of local_clock().
t_clock_check() {
	load counter="$1" counter_bits=32 || { echo "insmod counter=$1 counter_bits=32 failed"; return 1; }
	check=$(mktemp)
	ret=0
	u0=$(stat_value "$DIR/stats" epoch_updates)
	check_run $((CHECK_S * 1000)) || ret=1
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
	# awk, not $((...)): a fraction like .08 is not a valid shell number.
	ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')
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

# tear_check CLOCK: the check with the writer pausing 50 us between its
# stores, on a 28-bit counter (an epoch update every 64 ms, while a wrap,
# 128 ms, is far longer than any hiccup of a vCPU, so no update is late by
# a whole wrap, which would step time back by one wrap whatever the
# protection). It runs until the readers have seen TEAR_WINDOWS distinct
# writer windows or time went backwards, TEAR_CAP_MS at most: how long that
# takes depends on how often the host lets the reading vCPU run through a
# window, not on a fixed time. Sets $backwards, $overruns, $windows,
# $first (windows seen before the first backward step, -1 for none),
# $stopped and $elapsed.
TEAR_WINDOWS=50
TEAR_CAP_MS=60000
tear_check() {
	load clock="$1" counter_bits=28 tear_window_ns=50000 || { echo "insmod clock=$1 failed"; return 1; }
	check=$(mktemp)
	check_run "ms=$TEAR_CAP_MS windows=$TEAR_WINDOWS"
	rc=$?
	grep -v '^cpu' "$check" | tr '\n' ' '; echo
	backwards=$(stat_value "$check" backwards)
	windows=$(stat_value "$check" windows_seen)
	first=$(stat_value "$check" first_catch_windows)
	stopped=$(stat_value "$check" stopped)
	elapsed=$(stat_value "$check" elapsed_ms)
	overruns=$(stat_value "$DIR/stats" wrap_overruns)
	echo "epoch_updates: $(stat_value "$DIR/stats" epoch_updates) wrap_overruns: $overruns"
	rm -f "$check"
	unload
	[ $rc -eq 0 ] && is_number "$backwards" && is_number "$overruns" && is_number "$windows"
}

t_tear_latch() {
	tear_check latch || return 1
	[ "$overruns" = 0 ] || { echo "inconclusive: $overruns epoch updates came a wrap late"; return 1; }
	[ "$backwards" = 0 ] || { echo "the latch went backwards $backwards times"; return 1; }
	[ "$windows" -ge $TEAR_WINDOWS ] ||
		{ echo "inconclusive: the readers saw $windows writer windows in $elapsed ms, want $TEAR_WINDOWS"; return 1; }
	echo "the latch survived $windows writer windows ($elapsed ms)"
}

# The check must catch the unprotected clock: a read that lands in the
# writer's pause sees the new epoch_cyc with the old epoch_ns. It ends at
# the first catch; a clock that survives TEAR_WINDOWS windows means the
# check is blind.
t_tear_unprotected() {
	tear_check unprotected || return 1
	[ "$overruns" = 0 ] || { echo "inconclusive: $overruns epoch updates came a wrap late"; return 1; }
	if [ "$backwards" -gt 0 ]; then
		echo "caught after $first writer windows seen ($elapsed ms)"
		return 0
	fi
	if [ "$windows" -ge $TEAR_WINDOWS ]; then
		echo "blind: the unprotected clock survived $windows writer windows"
	else
		echo "inconclusive: the readers saw $windows writer windows in $elapsed ms, want $TEAR_WINDOWS"
	fi
	return 1
}

t_sample() {
	[ -e "$sample" ] || { echo "SKIP: $sample not found"; return 4; }
	load || { echo "insmod nmiclock failed"; return 1; }
	ret=0
	mark sample
	insmod "$sample" || { echo "insmod $sample failed"; ret=1; }
	log_since sample | grep 'nmiclock_sample: ' | sed 's/^\[[^]]*\] //'
	log_since sample | grep -q 'nmiclock_sample: 5 reads, monotonic' ||
		{ echo "no 'nmiclock_sample: 5 reads, monotonic' in the kernel log"; ret=1; }
	rmmod nmiclock_sample || { echo "rmmod nmiclock_sample failed"; ret=1; }
	unload || ret=1
	return $ret
}

t_bad_params() {
	ret=0 seen=
	for p in clock=bogus clock= clock=LATCH counter=rdtsc counter= acct=bogus acct= \
		acct=CMPXCHG acct=irq_save counter_bits=15 \
		counter_bits=65 counter_bits=0 counter_bits=abc counter_bits=-1 \
		counter_bits=99999999999 "counter_bits= 32" counter_bits=0x20 \
		tear_window_ns=1000001 tear_window_ns=x tear_window_ns=-5 tear_window_ns= \
		nmi_source=nmi nmi_source= nmi_source=IPI period_us=0 period_us=9 \
		period_us=1000001 update_us=-1 update_us=1000001 duration_s=0 \
		duration_s=86401 autostart=2 autostart=yes; do
		name=${p%%=*}
		# -q: one bad value per parameter.
		case " $seen " in *" $name "*) [ $quick = 1 ] && continue ;; esac
		seen="$seen $name"
		k=$((k + 1))
		mark "param$k"
		err=$(insmod "$module" "$p" 2>&1) && { echo "$p: loaded"; unload; ret=1; continue; }
		case $err in
		*"Invalid argument"*) ;;
		*) echo "$p: want EINVAL, got: $err"; ret=1 ;;
		esac
		is_loaded && { echo "$p: module loaded anyway"; unload; ret=1; }
		msg=$(log_since "param$k" | grep "nmiclock: .*$name" | head -n 1)
		[ -n "$msg" ] || { echo "$p: no log line naming $name"; ret=1; }
		echo "$p: ${msg#*] }"
	done
	return $ret
}

# acct_run VARIANT: an ACCT_S seconds run of the acct updater, task side and hrtimer
# side on every CPU; leaves the results in $acct_out. Fails unless both
# sides ran on every CPU and updates were applied.
acct_run() {
	load acct="$1" || { echo "insmod acct=$1 failed"; return 1; }
	acct_out=$(mktemp)
	ret=0
	echo $((ACCT_S * 1000)) >"$DIR/acct" || { echo "writing $((ACCT_S * 1000)) to acct failed"; ret=1; }
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

# The benchmark: a short run; every row of both phases has numbers, the
# references have ratio 1.00, the NMI handler was timed (or the reason it
# was not is given), and there is one refscale-format table per row and
# phase, with nruns lines. Bad arguments get EINVAL; a config write while
# it runs, and the benchmark during a stress run, get EBUSY.
BENCH_ROWS=20
t_bench() {
	wait_tsc
	load || { echo "insmod failed"; return 1; }
	ret=0
	for v in loops=9 loops=1000001 nruns=0 nruns=101 update_us=0 speed=1 "run now" \
		"loops=100 loops=100" "loops=100  nruns=2" LOOPS=100 ""; do
		expect_refused bench "$v" "Invalid argument" || ret=1
	done
	grep -q '^state: idle' "$DIR/bench" || { echo "refused writes ran it"; ret=1; }
	# A longer run in the background, to be caught running.
	(echo "loops=20000 nruns=3" >"$DIR/bench") &
	i=0
	while ! grep -q '^state: running' "$DIR/bench" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	if grep -q '^state: running' "$DIR/bench"; then
		expect_refused config clock=seqcount "resource busy" || ret=1
		expect_refused bench run "resource busy" || ret=1
	else
		echo "never saw the benchmark running"; ret=1
	fi
	wait
	echo "loops=200 nruns=3" >"$DIR/bench" || { echo "the benchmark failed"; ret=1; }
	out=$(mktemp)
	cat "$DIR/bench" >"$out"
	sed -n '/^phase /,/^# nmi handler/p' "$out"
	for phase in idle updaters; do
		n=$(grep -cE "^$phase +[a-z_/()]+.* [0-9]+\.[0-9]{3} +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+\.[0-9]{2}\$" "$out")
		[ "$n" = $BENCH_ROWS ] || { echo "$phase: $n complete rows, want $BENCH_ROWS"; ret=1; }
		for ref in 'sched_clock()' 'acct cmpxchg (tick)' 'acct cmpxchg (apply)'; do
			grep -F "$ref" "$out" | grep "^$phase " | grep -qE ' 1\.00$' ||
				{ echo "$phase $ref: ratio not 1.00"; ret=1; }
		done
		if grep "^$phase " "$out" | grep -E ' 0\.000 '; then
			echo "$phase: a median of 0"; ret=1
		fi
	done
	grep -qE '^nmi +nmi handler \(sample\) +- +[0-9]+ +[0-9]+ +[0-9]+ +-$' "$out" ||
		grep -q '^nmi +nmi handler: no NMI-context samples' "$out" ||
		{ echo "no NMI handler row"; ret=1; }
	tables=$(grep -c "^Runs	Time(ns)\$" "$out")
	lines=$(grep -cE '^[0-9]+	[0-9]+\.[0-9]{3}$' "$out")
	echo "$tables refscale tables, $lines run lines"
	[ "$tables" = $((2 * BENCH_ROWS)) ] || { echo "want $((2 * BENCH_ROWS)) tables"; ret=1; }
	[ "$lines" = $((6 * BENCH_ROWS)) ] || { echo "want $((6 * BENCH_ROWS)) run lines"; ret=1; }
	# Not during a stress run.
	echo start >"$DIR/control" || ret=1
	expect_refused bench run "resource busy" || ret=1
	echo stop >"$DIR/control" || ret=1
	rm -f "$out"
	unload || ret=1
	return $ret
}

# wait_tsc: the stress run's reference (ktime_get_mono_fast_ns) disagrees
# with the TSC until the kernel's timekeeping runs on it (about 1.7 s after
# boot in the VM): wait up to 10 s for that. Once the kernel has marked
# the TSC unstable it never comes back: then say so (once) and go on, the
# cases still run against the clocksource there is.
wait_tsc() {
	cs=/sys/devices/system/clocksource/clocksource0/current_clocksource
	[ -e /tmp/nmiclock-no-tsc.$$ ] && return 0
	i=0
	while [ "$(cat $cs 2>/dev/null)" != tsc ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ "$(cat $cs 2>/dev/null)" = tsc ] && return 0
	echo "note: clocksource is $(cat $cs 2>/dev/null), not tsc: the stress run's reference is not TSC-based" \
		"($(dmesg | grep -m1 -o 'Marking TSC unstable.*' || echo 'TSC not chosen'))"
	touch /tmp/nmiclock-no-tsc.$$
}

# stress_run SECONDS PARAM...: a stress run of SECONDS with counter_bits=32
# and PARAMs, to its end; leaves stats in $stress and the End of test line
# in $eot. Fails if the run does not start or end.
stress_run() {
	secs=$1
	shift
	wait_tsc
	load counter_bits=32 duration_s="$secs" "$@" || { echo "insmod $* failed"; return 1; }
	stress=$(mktemp)
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
	grep -E '^(nmi_source|samples|nmi_samples|torn_reads|backwards|cross_cpu_backwards|clock_stalls|acct_bad_deltas|acct_timexpd_backwards|nmi_leftovers|wakeups|late_wakeups|errors):' \
		"$stress" | tr '\n' ' '; echo
}

t_stress_default() {
	stress_run $STRESS_S || return 1
	ret=0
	[ "$(stat_value "$stress" nmi_samples)" -gt 0 ] || { echo "no NMI samples"; ret=1; }
	# The wake-up probe woke each CPU's sleeper about every 10 ms: want
	# half of that.
	cpus=$(grep -c '^processor' /proc/cpuinfo)
	want=$((cpus * STRESS_S * 50))
	[ "$(stat_value "$stress" wakeups)" -ge $want ] ||
		{ echo "wake-up probe: $(stat_value "$stress" wakeups) wake-ups, want >= $want"; ret=1; }
	[ "$(stat_value "$stress" errors)" = 0 ] || { echo "errors: $(stat_value "$stress" errors)"; ret=1; }
	case $eot in *"End of test: SUCCESS"*) ;; *) echo "not SUCCESS"; ret=1 ;; esac
	rm -f "$stress"
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
			rm -f "$stress"
			return $ret
		fi
		rm -f "$stress"
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
	[ "$(stat_value "$stress" nmi_source)" = perf_sw ] || { echo "source is not perf_sw"; ret=1; }
	[ "$(stat_value "$stress" samples)" -gt 0 ] || { echo "no samples"; ret=1; }
	[ "$(stat_value "$stress" nmi_samples)" = 0 ] || { echo "perf_sw samples counted as NMIs"; ret=1; }
	[ "$(stat_value "$stress" errors)" = 0 ] || { echo "errors: $(stat_value "$stress" errors)"; ret=1; }
	rm -f "$stress"
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

# snapshot: what a refused write must not change.
snapshot() {
	cat "$DIR/config" "$DIR/control"
	grep -E '^(samples|acct_updates|stats_reads):' "$DIR/stats" | grep -v stats_reads
	stat_value "$DIR/check" runs
	stat_value "$DIR/acct" runs
	stat_value "$DIR/acct_bench" rounds
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
	# The random bytes: no digits and no newlines, so that no draw can be
	# a valid number ("9" would run a 9 ms check).
	pool=$(mktemp)
	head -c 70000 /dev/urandom | tr '0-9\n' 'a-k' >"$pool"
	n=0
	for f in control config check acct acct_bench bench; do
		for v in "" " " "	" "-1" "-0" "+1" "0x10" "1e3" "1.5" "99999999999999999999" \
			"abc" "st art" "START" "stop now" "reset!" "key=" "=v" "a=b=c" \
			"clock=latch clock=seqcount" "clock=latch;" "duration_s=1s" \
			"period_us=0010x" "$long" "$huge" "$(printf '1\n2')" \
			"$(printf 'start\nstop')" "$(printf '\377\376')" "%n%s%x" "../../etc"; do
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
		# Random bytes, 1..256 of them, one dd (one write) each: a
		# process per write is what this costs on a debug kernel.
		k=0
		for len in $(od -An -tu1 -N$FUZZ_WRITES /dev/urandom); do
			len=$((len + 1)) k=$((k + 1))
			n=$((n + 1))
			if dd if="$pool" of="$DIR/$f" bs=$len skip=$k count=1 2>/dev/null; then
				echo "$f accepted $len random bytes:"
				dd if="$pool" bs=$len skip=$k count=1 2>/dev/null | od -An -tx1 | head -n 2
				ret=1
			fi
		done
	done
	rm -f "$pool"
	after=$(snapshot)
	[ "$before" = "$after" ] || { echo "refused writes changed something:"; echo "$before" > /tmp/a; echo "$after" > /tmp/b; diff /tmp/a /tmp/b; ret=1; }
	echo "$n malformed writes refused"
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

# expect_refused FILE VALUE ERRNO-TEXT: a write must fail with that error
# (echo, whose write error names the errno; busybox printf may not).
expect_refused() {
	err=$( (echo "$2" >"$DIR/$1") 2>&1) && { echo "$1 accepted '$2'"; return 1; }
	case $err in *"$3"*) return 0 ;; esac
	echo "$1 '$2': want '$3', got: $err"
	return 1
}

t_control_config() {
	wait_tsc
	load duration_s=30 || { echo "insmod failed"; return 1; }
	ret=0
	cfg=$(cat "$DIR/config")
	for v in bogus START "start stop" "" 1; do
		expect_refused control "$v" "Invalid argument" || ret=1
	done
	expect_refused control stop "resource busy" || ret=1
	for v in clock=bogus clock= =latch bogus=1 counter_bits=8 period_us=0 period_us=5 \
		duration_s=0 duration_s=86401 update_us=-1 autostart=2 nmi_source=nmi \
		"acct=racy extra" clock; do
		expect_refused config "$v" "Invalid argument" || ret=1
	done
	[ "$(cat "$DIR/config")" = "$cfg" ] || { echo "refused config writes changed it"; ret=1; }
	echo start >"$DIR/control" || { echo "start failed"; ret=1; }
	expect_refused control start "resource busy" || ret=1
	expect_refused control reset "resource busy" || ret=1
	expect_refused config acct=racy "resource busy" || ret=1
	echo stop >"$DIR/control" || { echo "stop failed"; ret=1; }
	[ "$(cat "$DIR/control")" = done ] || { echo "not done after stop"; ret=1; }
	echo acct=racy >"$DIR/config" || { echo "config acct=racy refused while idle"; ret=1; }
	[ "$(stat_value "$DIR/config" acct)" = racy ] || { echo "config acct not applied"; ret=1; }
	echo clock=seqcount >"$DIR/config" || ret=1
	[ "$(stat_value "$DIR/stats" clock)" = seqcount ] || { echo "clock not switched"; ret=1; }
	echo reset >"$DIR/control" || { echo "reset failed"; ret=1; }
	[ "$(cat "$DIR/control")" = idle ] || { echo "not idle after reset"; ret=1; }
	[ "$(stat_value "$DIR/stats" samples)" = 0 ] || { echo "reset left samples"; ret=1; }
	unload
	return $ret
}

t_inspection_files() {
	wait_tsc
	load counter_bits=32 duration_s=2 clock=unprotected tear_window_ns=20000 || { echo "insmod failed"; return 1; }
	ret=0
	for f in control:600 config:600 stats:400 histogram:400 percpu:400 anomalies:400 check:600 acct:600 acct_bench:600 bench:600; do
		m=$(stat -c %a "$DIR/${f%:*}")
		[ "$m" = "${f#*:}" ] || { echo "${f%:*} has mode $m, want ${f#*:}"; ret=1; }
	done
	echo start >"$DIR/control"
	sleep 3
	while [ "$(cat "$DIR/control")" != done ]; do sleep 0.5; done
	head -n 3 "$DIR/histogram"
	grep -q '^@read_ns:$' "$DIR/histogram" || { echo "no histogram header"; ret=1; }
	grep -qE '^\[[0-9]+(, [0-9]+\))?\]? +[0-9]+ \|@+ *\|$' "$DIR/histogram" || { echo "no histogram bars"; ret=1; }
	cpus=$(grep -c '^processor' /proc/cpuinfo)
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

ktap_plan 36
echo "# module: $module$([ $quick = 1 ] && echo ' (quick: shorter runs)')"
# Suspected leaks from before the suite are not ours.
[ -e "$KMEMLEAK" ] && echo clear >"$KMEMLEAK"
mark suite
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
run_case "counter_bits=32 tsc_ordered: $CHECK_S s on every CPU monotonic, within 100 us of local_clock" t_check_tsc_ordered
run_case "counter_bits=32 tsc: $CHECK_S s on every CPU monotonic, within 100 us of local_clock" t_check_tsc
run_case "counter_bits=16: thousands of epoch updates per second" t_narrow_counter
run_case "tear window: the latch never goes backwards" t_tear_latch
run_case "tear window: the check catches the unprotected clock" t_tear_unprotected
run_case "sample consumer loads, reads and unloads" t_sample
run_case "bad module parameters: EINVAL, a log line, nothing loaded" t_bad_params
run_case "acct=cmpxchg: $ACCT_S s task + hrtimer updates, no bad delta, no backward step" t_acct_cmpxchg
run_case "acct=irqsave: $ACCT_S s task + hrtimer updates, no bad delta, no backward step" t_acct_irqsave
run_case "acct=racy: $ACCT_S s task + hrtimer updates, reported" t_acct_racy
run_case "acct_bench times every strategy and gives irqsave/cmpxchg" t_acct_bench
run_case "check, acct, acct_bench refuse bad input and run nothing" t_check_bad_input
run_case "bench: every row and phase measured, refscale tables, bad input and wrong state refused" t_bench
run_case "stress, default (latch, cmpxchg, auto source), $STRESS_S s: NMI samples, no error, SUCCESS" t_stress_default
run_case "stress catches clock=unprotected (torn or backwards)" t_stress_unprotected
run_case "stress catches clock=seqcount (stalls)" t_stress_seqcount
run_case "stress catches acct=racy (bad deltas)" t_stress_racy
run_case "stress catches acct=irqsave under NMI IPIs (bad deltas)" t_stress_irqsave
run_case "stress with nmi_source=perf_sw: hard-IRQ samples, no error" t_stress_perf_sw
run_case "stress with nmi_source=perf_hw" t_stress_perf_hw
run_case "rmmod during a run stops it cleanly" t_rmmod_running
run_case "CPU hotplug during a run: sources follow the CPU, no error" t_hotplug
run_case "control and config: wrong state EBUSY, bad input EINVAL, nothing changed" t_control_config
run_case "histogram, percpu, anomalies and file modes" t_inspection_files
run_case "hostile input: malformed writes to every writable file refused, nothing changed" t_hostile_writes
run_case "$START_STOP load/start/stop/unload cycles" t_start_stop_cycles
run_case "kmemleak finds no leak after unload (debug kernels)" t_kmemleak
run_case "kernel log has no splats" t_kernel_log_clean
rm -f /tmp/nmiclock-no-tsc.$$
ktap_finish
