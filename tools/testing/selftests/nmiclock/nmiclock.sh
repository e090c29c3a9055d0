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
STATS_KEYS="version state online_cpus tsc_khz tsc_mult tsc_shift stats_reads"
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
	for key in online_cpus tsc_khz tsc_mult tsc_shift stats_reads; do
		v=$(stat_value "$tmp" $key)
		is_number "$v" || { echo "$key: '$v' is not a number"; ret=1; }
	done
	[ "$(stat_value "$tmp" state)" = idle ] || { echo "state is not idle"; ret=1; }
	cpus=$(grep -c '^processor' /proc/cpuinfo)
	[ "$(stat_value "$tmp" online_cpus)" = "$cpus" ] ||
		{ echo "online_cpus $(stat_value "$tmp" online_cpus) != $cpus CPUs in /proc/cpuinfo"; ret=1; }
	khz=$(stat_value "$tmp" tsc_khz)
	shift_=$(stat_value "$tmp" tsc_shift)
	if is_number "$khz" && [ "$khz" -gt 0 ] && is_number "$shift_"; then
		[ "$shift_" -ge 1 ] && [ "$shift_" -le 32 ] ||
			{ echo "tsc_shift $shift_ outside 1..32 for a $khz kHz TSC"; ret=1; }
	fi
	r1=$(stat_value "$tmp" stats_reads)
	r2=$(stat_value "$DIR/stats" stats_reads)
	if is_number "$r1" && is_number "$r2"; then
		[ "$r2" -gt "$r1" ] || { echo "stats_reads did not advance: $r1 then $r2"; ret=1; }
	fi
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

ktap_plan 8
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
run_case "kernel log has no splats" t_kernel_log_clean
ktap_finish
