# SPDX-License-Identifier: GPL-2.0
#
# lib.sh: what nmiclock's selftest cases share, sourced by nmiclock.sh:
# KTAP output (the function names and the "# Totals:" line of the kernel's
# tools/testing/selftests/kselftest/ktap_helpers.sh, plus expected
# failures), a registry of cases, loading and unloading the module, the
# kernel log read from markers, scratch files, and small helpers.

# --- KTAP -------------------------------------------------------------------------

KSFT_PASS=0
KSFT_FAIL=1
KSFT_XFAIL=2
KSFT_XPASS=3
KSFT_SKIP=4

KTAP_TESTNO=1
KTAP_CNT_PASS=0
KTAP_CNT_FAIL=0
KTAP_CNT_XFAIL=0
KTAP_CNT_XPASS=0
KTAP_CNT_SKIP=0
KSFT_NUM_TESTS=0

ktap_print_header() {
	echo "TAP version 13"
}

ktap_set_plan() {
	KSFT_NUM_TESTS=$1
	echo "1..$KSFT_NUM_TESTS"
}

ktap_skip_all() {
	echo "1..0 # SKIP $*"
}

ktap_print_msg() {
	echo "# $*"
}

# __ktap_test RESULT DESCRIPTION [DIRECTIVE]
__ktap_test() {
	if [ -n "${3:-}" ]; then
		echo "$1 $KTAP_TESTNO $2 # $3"
	else
		echo "$1 $KTAP_TESTNO $2"
	fi
	KTAP_TESTNO=$((KTAP_TESTNO + 1))
}

ktap_test_pass() {
	__ktap_test ok "$1"
	KTAP_CNT_PASS=$((KTAP_CNT_PASS + 1))
}

# ktap_test_skip DESCRIPTION [REASON]
ktap_test_skip() {
	__ktap_test ok "$1" "SKIP${2:+ $2}"
	KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
}

# ktap_test_xfail DESCRIPTION [REASON]: failed, as it must (a busted design
# caught).
ktap_test_xfail() {
	__ktap_test ok "$1" "XFAIL${2:+ $2}"
	KTAP_CNT_XFAIL=$((KTAP_CNT_XFAIL + 1))
}

# ktap_test_xpass DESCRIPTION [REASON]: passed where it must fail (a busted
# design not caught: the detector is blind).
ktap_test_xpass() {
	__ktap_test "not ok" "$1" "XPASS${2:+ $2}"
	KTAP_CNT_XPASS=$((KTAP_CNT_XPASS + 1))
}

ktap_test_fail() {
	__ktap_test "not ok" "$1"
	KTAP_CNT_FAIL=$((KTAP_CNT_FAIL + 1))
}

ktap_print_totals() {
	echo "# Totals: pass:$KTAP_CNT_PASS fail:$KTAP_CNT_FAIL xfail:$KTAP_CNT_XFAIL xpass:$KTAP_CNT_XPASS skip:$KTAP_CNT_SKIP error:0"
}

# ktap_finished: KTAP's totals line (which scripts/run-tests reads), and
# kselftest's exit status: 1 if anything failed (an XPASS too), 4 if
# everything was skipped, else 0.
ktap_finished() {
	ktap_print_totals
	if [ $((KTAP_CNT_FAIL + KTAP_CNT_XPASS)) -gt 0 ]; then
		exit $KSFT_FAIL
	elif [ $((KTAP_CNT_PASS + KTAP_CNT_XFAIL)) -eq 0 ] && [ $KTAP_CNT_SKIP -gt 0 ]; then
		exit $KSFT_SKIP
	fi
	exit $KSFT_PASS
}

# skip_all REASON: nothing can run here.
skip_all() {
	ktap_print_header
	ktap_skip_all "$*"
	ktap_print_totals
	exit $KSFT_SKIP
}

# --- cases ------------------------------------------------------------------------

# The registered cases, one "FUNCTION DESCRIPTION" per line, in order.
CASES=

# case_add FUNCTION DESCRIPTION: registers a case. FUNCTION's output becomes
# KTAP diagnostics; it returns $KSFT_PASS, $KSFT_FAIL, $KSFT_SKIP (the
# reason on a line "SKIP: reason"), $KSFT_XFAIL (a line "XFAIL: reason") or
# $KSFT_XPASS (a line "XPASS: reason").
case_add() {
	CASES="$CASES$1 $2
"
}

# selected_cases [PATTERN [EXCLUDE]]: the registered cases whose function
# or description matches PATTERN (grep -E; all if empty), but for those
# whose function matches EXCLUDE (grep -E, anchored at its start).
selected_cases() {
	if [ -n "${2:-}" ]; then
		printf '%s' "$CASES" | grep -E -- "${1:-.}" | grep -vE -- "^($2)( |\$)"
	else
		printf '%s' "$CASES" | grep -E -- "${1:-.}"
	fi
}

# The helpers below read files with the shell's own read where they can:
# on the debug kernel under TCG, every fork costs about 20 ms and every
# exec about 30 more, and a suite run makes thousands.

# uptime_s: whole seconds since boot, in $up_s (no fork).
uptime_s() {
	read -r up_s _ </proc/uptime
	up_s=${up_s%%.*}
}

# hms S: S seconds as 1h2m, 3m4s or 5s.
hms() {
	if [ $1 -ge 3600 ]; then echo "$(($1 / 3600))h$(($1 % 3600 / 60))m"
	elif [ $1 -ge 60 ]; then echo "$(($1 / 60))m$(($1 % 60))s"
	else echo "${1}s"; fi
}

# module_targets MODULE: the built-in targets MODULE (a nmiclock.ko)
# declares, the values of its target parameter in .modinfo, nmiclock's
# own first, a line each.
module_targets() {
	tr '\0' '\n' <"$1" | sed -n 's/^parm=target:.*; values: \([^;]*\);.*/\1/p' |
		tr '|' '\n' | grep -v ' '
}

# uptime_cs: hundredths of a second since boot, in $up_cs (/proc/uptime
# has two decimals; "1" before them keeps a leading 0 from reading octal).
uptime_cs() {
	read -r up_cs _ </proc/uptime
	up_cs=$((${up_cs%%.*} * 100 + 1${up_cs#*.} - 100))
}

# run_cases [PATTERN [EXCLUDE]]: the plan (the number of cases selected),
# then each case with its result.
run_cases() {
	selected=$(selected_cases "${1:-}" "${2:-}")
	ktap_set_plan "$(printf '%s\n' "$selected" | grep -c .)"
	[ -n "$selected" ] || return 0
	printf '%s\n' "$selected" >"$SCRATCH/cases"
	while read -r fn desc; do
		uptime_cs
		t0=$up_cs
		out=$($fn 2>&1)
		rc=$?
		# Its output as diagnostics, but for the SKIP, XFAIL and XPASS
		# lines: the first one's reason goes on the result line.
		reason=
		while IFS= read -r line; do
			case $line in
			'') ;;
			'SKIP: '*|'XFAIL: '*|'XPASS: '*) [ -n "$reason" ] || reason=${line#*: } ;;
			*) echo "# $line" ;;
			esac
		done <<EOF
$out
EOF
		# How long it took, as KUnit writes a test's attributes
		# (# NAME.ATTRIBUTE: VALUE): in the case's own KTAP lines,
		# where the kernel's KTAP parser keeps it (scripts/kcidb).
		uptime_cs
		t0=$((up_cs - t0))
		printf '# %s.duration: %d.%02d s\n' "${fn#t_}" $((t0 / 100)) $((t0 % 100))
		case $rc in
		$KSFT_PASS) ktap_test_pass "$desc" ;;
		$KSFT_SKIP) ktap_test_skip "$desc" "$reason" ;;
		$KSFT_XFAIL) ktap_test_xfail "$desc" "$reason" ;;
		$KSFT_XPASS) ktap_test_xpass "$desc" "$reason" ;;
		*) ktap_test_fail "$desc" ;;
		esac
	done <"$SCRATCH/cases"
}

# --- scratch files ------------------------------------------------------------------

# One directory per run, removed at exit (after what the suite changed on
# the machine is put back, below); scratch FILE makes a file in it. A
# signal ends the suite through the same exit. (Subshells, each case's
# among them, do not inherit the traps.)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/nmiclock-selftest.XXXXXX") || exit $KSFT_FAIL
trap 'restore_state; rm -rf "$SCRATCH"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

scratch() {
	mktemp "$SCRATCH/${1:-tmp}.XXXXXX"
}

# --- the module -----------------------------------------------------------------------

DEBUGFS=/sys/kernel/debug
DIR=$DEBUGFS/nmiclock

# is_loaded [MODULE]: MODULE (nmiclock) is in /proc/modules.
is_loaded() {
	while read -r m _; do
		[ "$m" = "${1:-nmiclock}" ] && return 0
	done </proc/modules
	return 1
}

load() {
	insmod "$module" "$@"
}

unload() {
	rmmod nmiclock
}

# The target samples (cases_target.sh), then nmiclock: they depend on it.
unload_all() {
	for m in nmiclock_target_c nmiclock_target_rust nmiclock_reader nmiclock_trace_clocks; do
		is_loaded $m && rmmod $m
	done
	# The zoo's modules (cases_zoo.sh), and the entries of one's own it
	# was given (NMICLOCK_ZOO_WITH: their modules' paths first).
	for m in $(grep -o '^zoo_[a-z0-9_]*' /proc/modules); do
		rmmod "$m"
	done
	for w in ${NMICLOCK_ZOO_WITH-}; do
		m=$(basename "${w%%:*}" .ko | tr - _)
		is_loaded "$m" && rmmod "$m"
	done
	unload
}

# Everything the module creates is gone once it is unloaded.
left_behind() {
	is_loaded && echo "nmiclock still in /proc/modules"
	[ -e /sys/module/nmiclock ] && echo "/sys/module/nmiclock still there"
	[ -e "$DIR" ] && echo "$DIR still there"
}

# stat_value FILE KEY: the value of KEY in a `key: value` file.
stat_value() {
	sed -n "s/^$2: //p" "$1"
}

# stats_copy FILE COPY: FILE (a `key: value` debugfs file) copied to COPY,
# and each KEY of it in the variable st_KEY (those of the last copy unset
# first): one sed, where a stat_value per key is a process each.
stats_copy() {
	for v in $st_keys; do unset "st_$v"; done
	st_keys=
	cat "$1" >"$2" || return
	eval "$(sed -n -e "s/'/'\\\\''/g" \
		-e "s/^\([a-z][a-z0-9_]*\): \(.*\)\$/st_\1='\2'; st_keys=\"\$st_keys \1\"/p" "$2")"
}
st_keys=

# st KEY: st_KEY in $st (for a KEY in a variable; no process).
st() {
	eval "st=\${st_$1-}"
}

# state_is FILE WORD: FILE's first line (control's state) is WORD.
state_is() {
	read -r st_line <"$1" && [ "$st_line" = "$2" ]
}

# says FILE KEY VALUE: the `key: value` file FILE says KEY: VALUE (read
# up to that key).
says() {
	while IFS= read -r st_line; do
		case $st_line in "$2: "*) [ "${st_line#"$2: "}" = "$3" ]; return ;; esac
	done <"$1"
	return 1
}

# bits_for_wrap_ms MS: the counter_bits (16..64) whose mask makes the
# loaded module's counter wrap in the nearest to MS, from its rate in stats
# (counter_khz): how often the clock's epoch moves is then about the same
# on every counter. (busybox awk may lack log(): shell arithmetic.)
bits_for_wrap_ms() {
	target=$(($(stat_value "$DIR/stats" counter_khz) * $1))
	b=16
	while [ $b -lt 64 ] && [ $((1 << b)) -lt $target ]; do b=$((b + 1)); done
	[ $b -gt 16 ] && [ $(((1 << b) - target)) -gt $((target - (1 << (b - 1)))) ] && b=$((b - 1))
	echo $b
}

is_number() {
	case $1 in ''|*[!0-9]*) return 1 ;; esac
}

online_cpus() {
	grep -c '^processor' /proc/cpuinfo
}

# EINVAL and EBUSY as the C library names them (strerror), and as kmod's
# insmod names EINVAL at load ("Invalid parameters"; busybox's insmod says
# strerror's).
EINVAL_TEXT="Invalid argument"
EBUSY_TEXT="Device or resource busy"
INSMOD_EINVAL="Invalid argument|Invalid parameters"

# insmod_refused ERR: insmod's error output ERR says EINVAL, in either
# tool's words.
insmod_refused() {
	printf '%s\n' "$1" | grep -qE "$INSMOD_EINVAL"
}

# How a refused write's errno is read: from the shell's own echo where
# its error names the errno (busybox sh, bash: no process per write, which
# on a debug kernel under TCG costs about 50 ms), else from dd's, one
# write(2) whose error dd names with strerror() (dash's echo says only
# "I/O error"). Found once: a write the kernel refuses with EINVAL.
if (echo x >/proc/self/oom_score_adj) 2>&1 | grep -q "$EINVAL_TEXT"; then
	REFUSED_BY=echo
else
	REFUSED_BY=dd
fi

# expect_refused FILE VALUE ERRNO-TEXT: a write of VALUE to FILE must fail
# with that error, whatever shell runs the suite.
expect_refused() {
	if [ $REFUSED_BY = echo ]; then
		echo "$2" 2>"$SCRATCH/err" >"$DIR/$1"
	else
		printf '%s\n' "$2" | dd of="$DIR/$1" bs=4096 2>"$SCRATCH/err" >/dev/null
	fi && { echo "$1 accepted '$2'"; return 1; }
	err=
	while IFS= read -r l; do err="$err$l"; done <"$SCRATCH/err"
	case $err in *"$3"*) return 0 ;; esac
	echo "$1 '$2': want '$3', got: $err"
	return 1
}

# refused FILE VALUE: a write of VALUE to FILE must fail, its errno
# unread where reading it costs a process (dash): for runs of writes that
# one expect_refused and the module's log lines, one per refusal, judge
# together (refused_during).
refused() {
	[ $REFUSED_BY = echo ] && { expect_refused "$1" "$2" "$3"; return; }
	echo "$2" 2>/dev/null >"$DIR/$1" && { echo "$1 accepted '$2'"; return 1; }
	return 0
}

# --- the kernel log -----------------------------------------------------------------

# mark NAME: writes a marker into the kernel log; log_since NAME prints the
# log after it. The ring buffer can wrap (lots of logging, small buffers),
# so counting lines would go wrong; if the marker itself is gone, the whole
# buffer is printed (and a note to stderr). log_since NAME TEXT prints only
# the first of those lines that contains TEXT (a fixed string): one
# process fewer than a grep and a head, each about 50 ms on the debug
# kernel and more on a Debian userspace under TCG.
mark() {
	echo "nmiclock-selftest[$$]: mark $1" >/dev/kmsg
}

log_since() {
	dmesg | awk -v m="nmiclock-selftest[$$]: mark $1" -v name="$1" -v p="${2-}" '
		{
			all[na++] = $0
			i = index($0, m)
			if (i && i + length(m) == length($0) + 1) { n = 0; seen = 1; next }
		}
		seen { line[n++] = $0 }
		function out(l) {
			if (p == "") { print l; return 0 }
			if (index(l, p)) { print l; return 1 }
			return 0
		}
		END {
			if (seen) {
				for (j = 0; j < n; j++) if (out(line[j])) exit
				exit
			}
			print "(kernel log wrapped past mark " name ": whole log)" | "cat >&2"
			for (j = 0; j < na; j++) if (out(all[j])) exit
		}'
}

# --- the architecture ---------------------------------------------------------------

# What differs per architecture: the counter pair of the setting `counter`
# (ordered, bare), the clocksource the kernel's timekeeping should run on
# (the stress run's reference reads it), the source of real NMIs that
# is always there (x86: NMI IPIs; arm64: PMU overflows as pseudo-NMIs), and
# the counter wrap of the tear check (cases_clock.sh), far longer than a
# vCPU's hiccup: QEMU's single-threaded TCG (our arm64 guest) switches
# vCPUs every 100 ms.
case $(uname -m) in
aarch64) ORDERED=cntvct_ordered BARE=cntvct CLOCKSOURCE=arch_sys_counter NMI_SOURCE=perf_hw
	TEAR_WRAP_MS=1000 ;;
*) ORDERED=tsc_ordered BARE=tsc CLOCKSOURCE=tsc NMI_SOURCE=ipi TEAR_WRAP_MS=128 ;;
esac

# wait_clocksource: the stress run's reference (ktime_get_raw_fast_ns)
# disagrees with the counter until the kernel's timekeeping runs on it (on
# x86 about 1.7 s after boot in the VM, when the TSC takes over): wait up
# to 10 s for that. Once the kernel has marked the TSC unstable it never
# comes back: then say so (once) and go on, the cases still run against
# the clocksource there is.
wait_clocksource() {
	cs=/sys/devices/system/clocksource/clocksource0/current_clocksource
	[ -e "$SCRATCH/no-clocksource" ] && return 0
	i=0
	while ! state_is $cs $CLOCKSOURCE 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	state_is $cs $CLOCKSOURCE 2>/dev/null && return 0
	echo "note: clocksource is $(cat $cs 2>/dev/null), not $CLOCKSOURCE: the stress run's reference is not counter-based" \
		"($(dmesg | grep -m1 -o 'Marking TSC unstable.*' || echo "$CLOCKSOURCE not chosen"))"
	touch "$SCRATCH/no-clocksource"
}

# --- what the suite changes on the machine, and puts back ------------------------

# The destructive cases step the real-time clock and slew it, switch the
# clocksource or take CPUs offline: they run only when asked, with -d or
# NMICLOCK_DESTRUCTIVE=1 (nmiclock.sh sets DESTRUCTIVE), as the timers
# selftests' run_destructive_tests. What a default run changes is the
# perf sysctls (perf_unthrottle.sh), which it puts back at exit, on a
# signal too; what a destructive case changes, it puts back itself, and the
# exit puts back what a signal left changed. t_left_as_found checks it.

# destructive WHAT: true when destructive cases run, else prints the SKIP
# line, saying WHAT the case would do.
destructive() {
	[ "${DESTRUCTIVE:-0}" = 1 ] && return 0
	echo "SKIP: it $1: a destructive case, run with -d or NMICLOCK_DESTRUCTIVE=1"
	return 1
}

PERF_RATE=/proc/sys/kernel/perf_event_max_sample_rate
PERF_PCT=/proc/sys/kernel/perf_cpu_time_max_percent
CS_FILE=/sys/devices/system/clocksource/clocksource0/current_clocksource
CS_AVAILABLE=/sys/devices/system/clocksource/clocksource0/available_clocksource
CPUS_ONLINE=/sys/devices/system/cpu/online

# ntp_freq: NTP's frequency offset (adjtimex -f units, 2^-16 ppm), empty
# without adjtimex, which then goes unchecked, and is said so. busybox's
# applet prints it with no option ("freq.adjust: N"), Debian's adjtimex
# package with -p ("frequency: N"); both set it with -f.
ntp_freq() {
	command -v adjtimex >/dev/null || return 0
	out=$(adjtimex 2>/dev/null)
	[ -n "$out" ] || out=$(adjtimex -p 2>/dev/null)
	printf '%s\n' "$out" | sed -n -e 's/.*freq\.adjust: *\(-\{0,1\}[0-9][0-9]*\).*/\1/p' \
		-e 's/^ *frequency: *\(-\{0,1\}[0-9][0-9]*\).*/\1/p'
}

# centis UPTIME: /proc/uptime's seconds (two decimals) in centiseconds, in
# $cs_v (no fork; a leading 0 is no octal here).
centis() {
	cs_v=$((${1%.*} * 100 + 1${1#*.} - 100))
}

# realtime_offset: CLOCK_REALTIME minus /proc/uptime's clock, as "LO HI"
# in centiseconds: read where `date +%s` turns to the next second (busybox's
# date has no %N), between reads of the uptime, so within two date calls.
# Only a step of the time moves it (NTP's slewing moves both clocks alike,
# and there is no suspend in a suite run).
realtime_offset() {
	i=0 ps= pu1=
	while [ $i -lt 1000 ]; do
		read -r u1 _ </proc/uptime
		s=$(date +%s)
		read -r u2 _ </proc/uptime
		if [ -n "$ps" ] && [ "$s" != "$ps" ]; then
			centis "$pu1"
			hi=$((s * 100 - cs_v))
			centis "$u2"
			echo "$((s * 100 - cs_v)) $hi"
			return 0
		fi
		ps=$s pu1=$u1 i=$((i + 1))
	done
	return 1
}

# step_time DELTA: CLOCK_REALTIME stepped by DELTA whole seconds, at a
# second's turn (date -s sets whole seconds), so that a pair (+1 s, -1 s)
# leaves it within two date calls of where it was.
step_time() {
	s0=$(date +%s)
	i=0
	while s=$(date +%s) && [ "$s" = "$s0" ] && [ $i -lt 1000 ]; do i=$((i + 1)); done
	set_time $((s + $1))
}

# set_time SECONDS: CLOCK_REALTIME set to SECONDS since the epoch
# (settimeofday); busybox's date says when the kernel refuses, but exits 0.
set_time() {
	out=$(date -s "@$1" 2>&1) || return 1
	case $out in *"can't"* | *nvalid*) return 1 ;; esac
}

# reads_after: waits until the run's target has been read in task context
# since the call, 5 s at most (a loaded host may not run the writers for a
# while; a disturbance no read follows is not tested).
reads_after() {
	# nmiclock's own clock: no target, no task-context reads of one.
	says "$DIR/config" target nmiclock && return 0
	r0=$(stat_value "$DIR/stats" task_reads)
	i=0
	while [ "$(stat_value "$DIR/stats" task_reads)" = "$r0" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || return 1
		sleep 0.05
	done
}

# --- disturbances of the kernel's clocks, during a run ---------------------------
# What the kernel lets a run's clocks undergo (cases_target.sh's disturbed
# runs, campaign.sh's cells). disturb_begin notes what they change,
# disturb_round WHAT does one round of WHAT, adding what failed to
# $disturb_bad (disturb_failed prints them), disturb_end WHAT... puts back what they changed:
#   cs       the clocksource switched through every one offered, and back
#            to the first
#   time     CLOCK_REALTIME stepped back by 1 s and forward by 1 s, at
#            second turns (step_time: settimeofday, through date -s)
#   slew     NTP's frequency offset set to +500 ppm, then -500 ppm, the
#            most it takes (adjtimex -f), and back to what it was
#   offset   an adjtime() slew (ADJ_OFFSET_SINGLESHOT, 500 ppm until
#            consumed) of +100 ms, then -100 ms (busybox's adjtimex -o,
#            Debian's --singleshot), cancelled at the end: the time may
#            end up to 0.2 ms off
#   hotplug  CPU 1 offline and back
# disturb_possible WHAT: WHAT can be done here (else a line why, false).
disturb_possible() {
	case $1 in
	cs)
		n=$(wc -w <$CS_AVAILABLE 2>/dev/null)
		[ "${n:-0}" -ge 2 ] || { echo "one clocksource ($(cat $CS_FILE))"; return 1; } ;;
	slew | offset)
		command -v adjtimex >/dev/null || { echo "no adjtimex (busybox's applet, or Debian's package)"; return 1; } ;;
	hotplug)
		[ -w /sys/devices/system/cpu/cpu1/online ] || { echo "CPU 1 cannot go offline"; return 1; } ;;
	time) ;;
	*) echo "no such disturbance"; return 1 ;;
	esac
}

disturb_begin() {
	disturb_sources=$(cat $CS_AVAILABLE 2>/dev/null)
	disturb_first=$(cat $CS_FILE)
	disturb_freq=$(ntp_freq)
	disturb_bad=
	disturb_offset=-o
	adjtimex --help 2>&1 | grep -q singleshot && disturb_offset=--singleshot
}

disturb_round() {
	case $1 in
	cs)
		for s in $disturb_sources; do
			echo "$s" >$CS_FILE 2>/dev/null || disturb_bad="$disturb_bad|cs"
			sleep 0.1
		done ;;
	time)
		# Without an RTC (arm64's virt machine) the time starts at 0,
		# below which it cannot go: a date first.
		now=$(date +%s)
		[ "$now" -ge 1000000000 ] || set_time 1800000000 || disturb_bad="$disturb_bad|time"
		step_time -1 || disturb_bad="$disturb_bad|time"
		reads_after || disturb_bad="$disturb_bad|(no read after a time step)"
		step_time 1 || disturb_bad="$disturb_bad|time" ;;
	slew)
		adjtimex -f $((500 << 16)) >/dev/null 2>&1 || disturb_bad="$disturb_bad|slew"
		sleep 0.2
		adjtimex -f $((-500 << 16)) >/dev/null 2>&1 || disturb_bad="$disturb_bad|slew"
		sleep 0.2 ;;
	offset)
		adjtimex $disturb_offset 100000 >/dev/null 2>&1 || disturb_bad="$disturb_bad|offset"
		sleep 0.2
		adjtimex $disturb_offset -100000 >/dev/null 2>&1 || disturb_bad="$disturb_bad|offset"
		sleep 0.2 ;;
	hotplug)
		[ -w /sys/devices/system/cpu/cpu1/online ] || return 0
		echo 0 >/sys/devices/system/cpu/cpu1/online || disturb_bad="$disturb_bad|hotplug"
		sleep 0.1
		echo 1 >/sys/devices/system/cpu/cpu1/online || disturb_bad="$disturb_bad|hotplug" ;;
	esac
}

disturb_failed() {
	[ -z "$disturb_bad" ] ||
		echo "FAILED: $(printf '%s\n' "$disturb_bad" | tr '|' '\n' | sort -u | grep . | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
}

disturb_end() {
	echo "$disturb_first" >$CS_FILE
	case " $* " in *" slew "*) adjtimex -f "${disturb_freq:-0}" >/dev/null 2>&1 ;; esac
	case " $* " in *" offset "*) adjtimex $disturb_offset 0 >/dev/null 2>&1 ;; esac
}

# state_snapshot FILE: what the suite leaves as it found it, a "name value"
# per line.
state_snapshot() {
	{
		echo "clocksource $(cat $CS_FILE 2>/dev/null)"
		echo "cpus_online $(cat $CPUS_ONLINE 2>/dev/null)"
		echo "perf_event_max_sample_rate $(cat $PERF_RATE 2>/dev/null)"
		echo "perf_cpu_time_max_percent $(cat $PERF_PCT 2>/dev/null)"
		echo "ntp_frequency $(ntp_freq)"
	} >"$1"
}

# snapshot_value FILE NAME: a value of state_snapshot FILE, in $sv.
snapshot_value() {
	sv=
	while read -r k v; do
		[ "$k" = "$2" ] && { sv=$v; return 0; }
	done <"$1"
	return 1
}

# cpu_list LIST: the CPUs of a sysfs list ("0-3,6"), one a line.
cpu_list() {
	printf '%s\n' "$1" | tr ',' '\n' | while IFS=- read -r a b; do
		[ -n "$a" ] || continue
		i=$a
		while [ "$i" -le "${b:-$a}" ]; do echo "$i"; i=$((i + 1)); done
	done
}

# restore_state: what the suite changed, as state_snapshot found it at the
# start ($SCRATCH/before): the perf sysctls, and with destructive cases on,
# what one interrupted may have left: the clocksource, offline CPUs, NTP's
# frequency (without them nothing of the suite's changes those, and a
# change the kernel made itself, a TSC marked unstable, is not undone).
# Idempotent; quiet when nothing was changed.
restore_state() {
	b=$SCRATCH/before
	[ -s "$b" ] || return 0
	if snapshot_value "$b" perf_event_max_sample_rate && [ -n "$sv" ]; then
		rate0=$sv
		snapshot_value "$b" perf_cpu_time_max_percent
		"$here/perf_unthrottle.sh" --restore "$rate0" "$sv"
	fi
	[ "${DESTRUCTIVE:-0}" = 1 ] || return 0
	if snapshot_value "$b" clocksource && [ -n "$sv" ] && [ "$(cat $CS_FILE)" != "$sv" ]; then
		echo "$sv" >$CS_FILE 2>/dev/null ||
			echo "nmiclock.sh: could not put back the clocksource $sv" >&2
	fi
	if snapshot_value "$b" cpus_online && [ -n "$sv" ]; then
		for c in $(cpu_list "$sv"); do
			f=/sys/devices/system/cpu/cpu$c/online
			[ -e "$f" ] && [ "$(cat "$f")" = 0 ] && { echo 1 >"$f" ||
				echo "nmiclock.sh: could not bring CPU $c back online" >&2; }
		done
	fi
	if snapshot_value "$b" ntp_frequency && [ -n "$sv" ] && [ "$(ntp_freq)" != "$sv" ]; then
		adjtimex -f "$sv" >/dev/null 2>&1 ||
			echo "nmiclock.sh: could not put back NTP's frequency $sv" >&2
	fi
}

# t_left_as_found: the suite's last word on the machine: once it has put
# back what it changed, the time, NTP's frequency, the clocksource, the
# perf sysctls and the online CPUs are as they were at its start.
t_left_as_found() {
	[ -s "$SCRATCH/before" ] || { echo "no snapshot from the suite's start"; return 1; }
	restore_state
	state_snapshot "$SCRATCH/after"
	ret=0 same=
	while read -r k v; do
		snapshot_value "$SCRATCH/after" "$k"
		if [ "$k" = ntp_frequency ] && [ -z "$v" ]; then
			echo "ntp_frequency: not compared: no adjtimex (busybox's applet, or Debian's package) to read it with"
		elif [ "$sv" = "$v" ]; then
			same="$same $k"
		else
			echo "$k: '$v' at the start, '$sv' now"
			ret=1
		fi
	done <"$SCRATCH/before"
	if [ "${DESTRUCTIVE:-0}" = 1 ]; then
		echo "real time: not compared: the destructive cases stepped it, in pairs at second turns"
	elif [ -s "$SCRATCH/offset" ] && now=$(realtime_offset); then
		read -r lo0 hi0 <"$SCRATCH/offset"
		lo1=${now% *} hi1=${now#* }
		# The uptime's centisecond either side.
		if [ $((lo1 - 1)) -gt "$hi0" ] || [ $((hi1 + 1)) -lt "$lo0" ]; then
			echo "real time: stepped: its offset to the uptime was $lo0..$hi0 cs, now $lo1..$hi1 cs"
			ret=1
		else
			same="$same real_time(offset to the uptime $lo0..$hi0 cs, then $lo1..$hi1 cs)"
		fi
	else
		echo "real time: could not read its offset"
		ret=1
	fi
	echo "as found:$same"
	return $ret
}

# --- the documentation ----------------------------------------------------------------

# Documentation/nmiclock.rst, found from the suite's own directory: beside
# nmiclock.sh where the suite is installed (scripts/vm-run, the kselftest
# Makefile's TEST_FILES), else in the source tree this suite is in.
DOC=$here/nmiclock.rst
if [ ! -e "$DOC" ] && [ -e "$here/../../../../Documentation/nmiclock.rst" ]; then
	DOC=$here/../../../../Documentation/nmiclock.rst
fi

# doc_list FILE NAME: the names of the list NAME of the reStructuredText
# FILE, one a line, in order: every ``double-backquoted`` token of the
# lines that begin (at column 0) with two backquotes, the terms of a
# definition list, from the comment `.. doc-list: NAME` to the next
# `.. end doc-list` (indented lines are descriptions: not read). Names of
# every such list, if there are several. Exits non-zero, with a message on
# stderr, when FILE cannot be read or a list NAME does not end before the
# next list or the end of FILE. scripts/test-docs, on the host, reads
# this function and doc_diff from here: they use nothing else of this file.
doc_list() {
	awk -v name="$2" '
		{ sub(/[ \t\r]+$/, "") }
		/^\.\. doc-list: / && inlist { bad = FNR; exit }
		$0 == ".. doc-list: " name { inlist = FNR; next }
		$0 == ".. end doc-list" { inlist = 0; next }
		inlist && /^``/ {
			s = $0
			while (match(s, /``[^`]+``/)) {
				print substr(s, RSTART + 2, RLENGTH - 4)
				s = substr(s, RSTART + RLENGTH)
			}
		}
		END {
			if (bad || inlist) {
				printf "%s: the list \"%s\" of line %d has no \".. end doc-list\" before %s\n",
					FILENAME, name, inlist, bad ? "the list of line " bad : "the end" | "cat >&2"
				exit 2
			}
		}' "$1"
}

# doc_diff WHAT LIVE DOCUMENTED [DOC]: compares two lists of names (files,
# one a line: what the code has, what DOC, Documentation/nmiclock.rst
# unless given, lists) and prints one line per difference: "WHAT 'x' is in
# the code but not in DOC", "WHAT 'x' is documented but not in the code",
# "WHAT 'x' is documented twice"; nothing when they agree.
doc_diff() {
	awk -v what="$1" -v doc="${4:-Documentation/nmiclock.rst}" '
		$0 == "" { next }
		FILENAME == ARGV[1] { if (!($0 in live)) { live[$0] = 1; l[++nl] = $0 } next }
		$0 in documented { printf "%s \047%s\047 is documented twice\n", what, $0; next }
		{ documented[$0] = 1; d[++nd] = $0 }
		END {
			for (i = 1; i <= nl; i++)
				if (!(l[i] in documented))
					printf "%s \047%s\047 is in the code but not in %s\n", what, l[i], doc
			for (i = 1; i <= nd; i++)
				if (!(d[i] in live))
					printf "%s \047%s\047 is documented but not in the code\n", what, d[i]
		}' "$2" "$3"
}
