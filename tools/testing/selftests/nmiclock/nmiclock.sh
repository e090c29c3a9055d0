#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# nmiclock.sh: kselftest suite for nmiclock.ko, KTAP output.
#
# Usage: nmiclock.sh [-q] [-d] [-m MODULE.ko] [-c CYCLES] [-t PATTERN]
#                   [-x PATTERN] [-l]
#
#   -q            quick (also NMICLOCK_QUICK=1, for a kselftest runner,
#                 which passes no options): every case, with shorter runs
#                 (3 s checks and acct runs instead of 5, 2 s wake runs
#                 instead of 3, 2 s per target clock instead of 3 (and
#                 two kernel clocks of the
#                 seven, sched_clock and ktime_get_mono_fast_ns, whose
#                 updates differ), stress runs of 3 s instead of 10 and
#                 5, 5 load/unload, 10 start/stop and 4 CPU hotplug
#                 cycles instead of 20, 50 and 8, 20 random writes per
#                 file instead of 60 in the hostile-input case, one bad
#                 value of one name and one number parameter instead of
#                 three or four of every parameter: the same parser
#                 refuses them all).  For debug kernels, whose point is
#                 that every path runs under lockdep, KASAN and kmemleak;
#                 the full run measures how much the checks catch.
#   -d            destructive cases too (also NMICLOCK_DESTRUCTIVE=1): they
#                 step the real-time clock (in pairs, -1 s then +1 s, at
#                 second turns) and slew it, switch the clocksource,
#                 take CPU 1 offline and empty and stop the trace buffer,
#                 putting back what can be; without, they SKIP and say so.  For
#                 throwaway machines (scripts/vm-run's guests)
#   -m MODULE.ko  the module to test (default: $NMICLOCK_KO, else
#                 nmiclock.ko beside this script, as the kernel's kselftest
#                 runner has it, else ../nmiclock.ko, as in the VM at
#                 /opt/nmiclock, else the nmiclock.ko of the source tree
#                 this script is in)
#   -c CYCLES     load/unload cycles (default: 20, or 5 with -q)
#   -t PATTERN    run only the cases whose function or description matches
#                 PATTERN (grep -E); the plan counts those (also
#                 NMICLOCK_CASES=PATTERN, for a kselftest runner)
#   -x PATTERN    leave out the cases whose function matches PATTERN
#                 (grep -E, anchored at the start of the function name)
#   -l            list the cases (function and description) and exit
#   -h            print this and exit 0 (bad usage prints it and exits 1)
#
# Runs as root, in the VM (scripts/vm-run) or on a machine whose running
# kernel the module was built for.  Loads and unloads the module itself; a
# copy already loaded is unloaded first.  What it changes on the machine
# (the perf sysctls, and with -d the above) it puts back at exit, on a
# signal too, and its last cases check that it did (t_left_as_found).
# Exit status is kselftest's: 0 all passed, 1 something failed (or bad
# usage), 4 everything skipped.  The last line is KTAP's "# Totals:".
#
# The cases live in cases_*.sh beside this script, the helpers they share
# (KTAP, loading, the kernel log) in lib.sh.

cycles=
quick=${NMICLOCK_QUICK:-0}
pattern=${NMICLOCK_CASES:-}
exclude=
list=0
module=${NMICLOCK_KO:-}
DESTRUCTIVE=${NMICLOCK_DESTRUCTIVE:-0}
here=$(cd "$(dirname "$0")" && pwd)

while getopts qdm:c:t:x:lh opt; do
	case $opt in
	q) quick=1 ;;
	d) DESTRUCTIVE=1 ;;
	m) module=$OPTARG ;;
	c) cycles=$OPTARG ;;
	t) pattern=$OPTARG ;;
	x) exclude=$OPTARG ;;
	l) list=1 ;;
	h) sed -n '4,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) sed -n '4,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 1 ;;
	esac
done

case $quick in
0 | 1) ;;
*) echo "NMICLOCK_QUICK=$quick: want 0 or 1" >&2; exit 1 ;;
esac

# Lengths of the runs (see -q).
if [ $quick = 1 ]; then
	CHECK_S=3 ACCT_S=3 STRESS_S=3 PRESSURE_S=3 START_STOP=10 HOTPLUG=4 FUZZ_WRITES=20 TARGET_S=2 WAKE_S=2
	: "${cycles:=5}"
else
	CHECK_S=5 ACCT_S=5 STRESS_S=10 PRESSURE_S=5 START_STOP=50 HOTPLUG=8 FUZZ_WRITES=60 TARGET_S=3 WAKE_S=3
	: "${cycles:=20}"
fi
# Catching runs that found nothing are repeated this often before a
# catching case gives up (its design went uncaught: the probe is blind).
WAKE_TRIES=5
# The zoo's fixes run this long at least (cases_zoo.sh).
ZOO_S=1

. "$here/lib.sh"
# The interface cases after the runs: they are bound by the shell and
# the syscalls, the runs by their duration, so on a loaded host (the
# guests of scripts/run-tests side by side) they come when it has eased.
for f in module clock acct wake stress target zoo interface; do
	. "$here/cases_$f.sh"
done
# The fault case after every other: its time is module loads, one per
# attempt, bound by the CPU (the stress runs are bound by their
# duration): where the suite shares the machine, as in scripts/run-tests,
# the other work is done by then.
case_add t_fault_inject "every allocation of init and of start failed in turn: a clean error, nothing left or leaked, the module loads again (debug kernels)"
# Last: what must hold once everything else has run.
case_add t_left_as_found "the suite leaves time, NTP frequency, clocksource, perf sysctls and online CPUs as it found them"
case_add t_kmemleak "kmemleak finds no leak after unload (debug kernels)"
case_add t_kernel_log_clean "kernel log has no splats"

if [ $list = 1 ]; then
	selected_cases "$pattern" "$exclude"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || skip_all "must be run as root"
if [ -z "$module" ]; then
	for m in "$here/nmiclock.ko" "$here/../nmiclock.ko" "$here/../../../../nmiclock.ko"; do
		[ -e "$m" ] && { module=$m; break; }
	done
fi
[ -n "$module" ] && [ -e "$module" ] || skip_all "nmiclock.ko not found (build it, or pass -m)"
is_number "$cycles" || { echo "-c needs a number" >&2; exit 1; }
case $DESTRUCTIVE in
'') DESTRUCTIVE=0 ;;
0 | 1) ;;
*) echo "NMICLOCK_DESTRUCTIVE=$DESTRUCTIVE: want 0 or 1" >&2; exit 1 ;;
esac
if ! grep -q ' /sys/kernel/debug ' /proc/mounts; then
	mount -t debugfs debugfs "$DEBUGFS" || skip_all "debugfs not available"
fi

sample=$(dirname "$module")/samples/nmiclock_sample.ko
[ -e "$sample" ] || sample=$(dirname "$module")/nmiclock_sample.ko

ktap_print_header
ktap_print_msg "module: $module$([ $quick = 1 ] && echo ' (quick: shorter runs)'), $(uname -m)$([ "$DESTRUCTIVE" = 1 ] && echo ', destructive cases too')"
# What the suite must leave as it found it (t_left_as_found; put back at
# exit by restore_state), once the kernel has chosen its clocksource.
wait_clocksource | while IFS= read -r line; do ktap_print_msg "$line"; done
state_snapshot "$SCRATCH/before"
realtime_offset >"$SCRATCH/offset" || : >"$SCRATCH/offset"
# perf must not throttle the sample counters (see perf_unthrottle.sh).
"$here/perf_unthrottle.sh" | while IFS= read -r line; do ktap_print_msg "$line"; done
# Suspected leaks from before the suite are not ours.
[ -e "$KMEMLEAK" ] && echo clear >"$KMEMLEAK"
mark suite
if is_loaded; then
	ktap_print_msg "nmiclock was loaded; unloading it first"
	unload || ktap_print_msg "rmmod nmiclock failed; insmod will fail too"
fi
run_cases "$pattern" "$exclude"
ktap_finished
