#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# campaign.sh: the guest's side of scripts/campaign: every clock the
# loaded nmiclock can read, each under each disturbance this machine
# allows, a stress run a cell, one load of the modules for them all.
#
# Usage: campaign.sh [-s SECONDS] [-r READS] [-c CLOCKS] [-d DISTURBANCES] [-x CELLS] [-l]
#
#   -s SECONDS  each cell's run: SECONDS (default 10), and on to the end
#               of its disturbance's first round; its coverage target the
#               module's for a run of SECONDS
#   -r READS    end each cell once READS NMI-context reads are in, SECONDS
#               then the cap (coverage: 1 window hit, as the suite's
#               disturbed runs)
#   -c CLOCKS   only the rows whose clock matches CLOCKS (grep -E, the
#               whole name)
#   -d DISTURBANCES only the columns whose name matches DISTURBANCES
#               (grep -E, the whole name: none, time, slew, offset, cs,
#               hotplug, conversion, stutter)
#   -x CELLS    cells done before (CLOCK/DISTURBANCE, space-separated):
#               not run again
#   -l          print the plan and exit
#
# The rows: the module's built-in targets (its target parameter's values),
# the tracers' clocks (samples/nmiclock_trace_clocks.ko, loaded here, where
# the kernel has CONFIG_TRACE_CLOCK) and every clock another module
# registered before (scripts/vm-run --with). The columns: none, time,
# slew, offset, cs, hotplug (lib.sh's disturb_round; one not possible here
# is said, and left out), and for nmiclock's own clock the module's
# disturb=conversion and disturb=stutter.
#
# Prints "campaign: plan CLOCK/DISTURBANCE..." and "campaign: skipped
# DISTURBANCE: WHY" first, then for each cell "=== cell CLOCK DISTURBANCE",
# the run's files as run.sh prints them ("== config", "== End of test",
# "== stats", "== anomalies", "== histogram", "== percpu", "== series",
# "== disturbance"), "=== cell end CLOCK DISTURBANCE", and a progress line
# "campaign: [K/N] CLOCK under DISTURBANCE: VERDICT ...; ~T left". What
# it changes (the clocksource, NTP's frequency and offset, CPU 1, the
# time, the perf sysctls, the console's log level) it puts back at exit.
# Exit status: 0 the plan was run (whatever the verdicts), 4 nmiclock is
# not loaded, 1 a cell could not be run.

here=$(cd "$(dirname "$0")" && pwd)
secs=10 reads=0 done_cells= list=0 only= only_d=
while getopts "s:r:c:d:x:l" o; do
	case $o in
	s) secs=$OPTARG ;;
	r) reads=$OPTARG ;;
	c) only=$OPTARG ;;
	d) only_d=$OPTARG ;;
	x) done_cells=$OPTARG ;;
	l) list=1 ;;
	*) sed -n '/^# Usage:/,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 1 ;;
	esac
done
. "$here/lib.sh"
DESTRUCTIVE=1

[ -d "$DIR" ] || { echo "campaign: nmiclock is not loaded (no $DIR)"; exit 4; }
module=
for m in "$here/nmiclock.ko" "$here/../nmiclock.ko"; do
	[ -e "$m" ] && { module=$m; break; }
done

# The rows. The built-in targets, from the module's declaration (its
# target parameter's values, in .modinfo), nmiclock's own first.
clocks=$(module_targets "$module" | tr '\n' ' ')
[ -n "$clocks" ] || { echo "campaign: no targets in $module's target parameter"; exit 1; }
# The tracers' clocks, where this kernel has them.
loaded_here=
for d in "$(dirname "$module")/samples" "$(dirname "$module")"; do
	tc=$d/nmiclock_trace_clocks.ko
	[ -e "$tc" ] || continue
	insmod "$tc" && loaded_here=nmiclock_trace_clocks
	break
done
# What registered since nmiclock loaded: the providers' clocks and the
# tracers', in the order they came.
registered=$(dmesg | sed -n 's/.*nmiclock: target \([a-z0-9_]*\) registered.*/\1/p' | awk '!seen[$0]++' | tr '\n' ' ')
clocks="$clocks $registered"
[ -z "$only" ] || clocks=$(printf '%s\n' $clocks | grep -xE -- "$only" | tr '\n' ' ')
[ -n "$clocks" ] || { echo "campaign: no clock matches -c '$only'"; exit 1; }

# The columns.
cols=none
for d in time slew offset cs hotplug; do
	if why=$(disturb_possible $d); then
		cols="$cols $d"
	else
		echo "campaign: skipped $d: $why"
	fi
done
plan=
for c in $clocks; do
	for d in $cols; do plan="$plan $c/$d"; done
	[ "$c" = nmiclock ] && plan="$plan $c/conversion $c/stutter"
done
if [ -n "$only_d" ]; then
	plan=$(for cell in $plan; do
		printf '%s\n' "${cell#*/}" | grep -qxE -- "$only_d" && printf ' %s' "$cell"
	done)
	[ -n "$plan" ] || { echo "campaign: no disturbance matches -d '$only_d'"; exit 1; }
fi
echo "campaign: plan$plan"
[ $list = 0 ] || exit 0

wait_clocksource
state_snapshot "$SCRATCH/before"
"$here/perf_unthrottle.sh"
read -r printk_was _ </proc/sys/kernel/printk
disturb_begin
trap 'echo "$printk_was" >/proc/sys/kernel/printk; restore_state; disturb_end slew offset
	[ -z "$loaded_here" ] || rmmod $loaded_here; rm -rf "$SCRATCH"' EXIT
# The End of test lines are read from the log, not the console.
echo 5 >/proc/sys/kernel/printk

todo=
for cell in $plan; do
	case " $done_cells " in *" $cell "*) continue ;; esac
	todo="$todo $cell"
done
total=$(echo $todo | wc -w)
echo "campaign: $total cells to run$([ -z "$done_cells" ] || echo " ($(echo $done_cells | wc -w) done before)"), each ${secs} s$([ "$reads" = 0 ] || echo " or $reads reads")"

# cell CLOCK DISTURBANCE: one cell's run, its files printed. The cell
# stops its run itself: after SECONDS (or READS), and not before one
# whole round of its disturbance, so that every round happens inside the
# run however slow the host; duration_s is then the cap, and the
# coverage target the module's for a run of SECONDS, set as
# min_window_hits (show.rs: 100 a second, 1 for a kernel clock, whose
# stats name its bracketed update).
cell() {
	case $2 in
	conversion | stutter) mod=$2 ;;
	*) mod=none ;;
	esac
	echo "target=$1 disturb=$mod" >"$DIR/config" ||
		{ echo "campaign: $1/$2: the settings were refused"; return 1; }
	if [ "$reads" != 0 ]; then
		min=1 cap=$secs
	else
		min=$((secs * 100))
		[ "$(stat_value "$DIR/stats" kernel_update)" = - ] || min=$secs
		cap=$((secs * 2 + 60))
	fi
	echo "duration_s=$cap until=duration min_window_hits=$min" >"$DIR/config" ||
		{ echo "campaign: $1/$2: the settings were refused"; return 1; }
	disturb_begin
	mark "cell-$1-$2"
	uptime_cs
	t_cell=$up_cs
	echo start >"$DIR/control" || { echo "campaign: $1/$2: the run did not start"; return 1; }
	rounds=0 stopped=
	while :; do
		uptime_cs
		if [ "$reads" != 0 ]; then
			[ "$(stat_value "$DIR/stats" nmi_samples)" -lt "$reads" ] || { stopped=" (stopped at $reads reads)"; break; }
		elif [ $((up_cs - t_cell)) -ge $((secs * 100)) ]; then
			case $2 in none | conversion | stutter) break ;; esac
			[ $rounds = 0 ] || break
		fi
		state_is "$DIR/control" running ||
			{ disturb_bad="$disturb_bad|(the run ended before the disturbance did)"; break; }
		case $2 in
		none | conversion | stutter) sleep 0.2 ;;
		*)
			disturb_round "$2"
			state_is "$DIR/control" running && rounds=$((rounds + 1)) ;;
		esac
	done
	state_is "$DIR/control" running && echo stop >"$DIR/control"
	i=0
	while ! state_is "$DIR/control" done && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	disturb_end "$2"
	echo "=== cell $1 $2"
	for f in config stats anomalies histogram percpu series; do
		echo "== $f"
		cat "$DIR/$f"
		[ $f = config ] || continue
		echo "== End of test"
		log_since "cell-$1-$2" "End of test"
		log_since "cell-$1-$2" "End of test, continued"
	done
	echo "== disturbance"
	case $2 in
	none) echo "none" ;;
	conversion | stutter) echo "disturb=$2 (the module's writers)" ;;
	*) echo "$rounds rounds of $2 inside the run$([ "$2" = cs ] && echo " ($disturb_sources)")$stopped" ;;
	esac
	disturb_failed
	echo "=== cell end $1 $2"
}

k=0 ret=0
uptime_s
t0=$up_s
for c in $todo; do
	k=$((k + 1))
	cell "${c%/*}" "${c#*/}" || { ret=1; continue; }
	uptime_s
	el=$((up_s - t0))
	v=$(stat_value "$DIR/stats" verdict)
	echo "campaign: [$k/$total] ${c%/*} under ${c#*/}: $v," \
		"$(stat_value "$DIR/stats" nmi_samples) NMI reads," \
		"$(($(stat_value "$DIR/stats" window_hits_local) + $(stat_value "$DIR/stats" window_hits_remote))) window hits" \
		"of $(stat_value "$DIR/stats" window_hits_needed); $(hms $el) elapsed, ~$(hms $((el * (total - k) / k))) left"
done
exit $ret
