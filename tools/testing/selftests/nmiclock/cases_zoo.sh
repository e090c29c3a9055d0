# SPDX-License-Identifier: GPL-2.0
#
# cases_zoo.sh: the zoo (samples/zoo/README.md): clock bugs that shipped in
# the kernel, each modelled by one module that registers the bug and its fix
# as two targets, zoo_ENTRY and zoo_ENTRY_fixed. The bug must be caught (an
# expected failure, with how soon), the fix must survive with its windows
# hit; a bug not caught fails the suite, as any blind detector does.
# Sourced by nmiclock.sh, after cases_target.sh (its helpers); registers
# its cases in order.
#
# An entry is one line below:
#
#   zoo_add ENTRY COMMIT ARCHES "WHAT" [OTHER...]
#
# ENTRY names the module (zoo_ENTRY.ko) and its two targets; COMMIT is the
# fixing commit; ARCHES is "any" or the `uname -m` values where the
# mechanism applies (elsewhere the cases SKIP and say so); OTHER are more
# targets of the module: NAME (another buggy form, caught; NAME@COMMIT if
# another commit fixed it) or -NAME (a negative control: a bug only
# out-of-order hardware shows, which under emulation must NOT be caught,
# reported as a SKIP that says so).

# zoo_ko ENTRY: the module of ENTRY, beside the module under test or in
# its samples/zoo/; an ENTRY that is a module's path (a --with entry's),
# that module.
zoo_ko() {
	case $1 in /*.ko) [ -e "$1" ] && { echo "$1"; return 0; }; return 1 ;; esac
	for d in "$(dirname "$module")/samples/zoo" "$(dirname "$module")"; do
		[ -e "$d/zoo_$1.ko" ] && { echo "$d/zoo_$1.ko"; return 0; }
	done
	return 1
}

# A stress_prep: loads $zoo_entry's module and selects $target.
zoo_load() {
	ko=$(zoo_ko "$zoo_entry") || { echo "zoo_$zoo_entry.ko not found"; return 1; }
	insmod "$ko" || { echo "insmod $ko failed"; return 1; }
	echo "target=$target" >"$DIR/config" || { echo "target=$target refused"; return 1; }
}

# zoo_applies ARCHES: true where the mechanism applies (else prints why not).
zoo_applies() {
	case " $1 " in
	*" any "* | *" $(uname -m) "*) return 0 ;;
	esac
	echo "SKIP: the mechanism is $1's, this is $(uname -m)"
	return 1
}

# What a zoo run reported, on one line: the nonzero anomaly counts and the
# largest steps.
zoo_found() {
	out=
	for k in target_stalls backwards cross_cpu_backwards reference_mismatches \
		unpromised_backwards unpromised_cross_cpu_backwards steps_back_allowed; do
		st $k
		[ "${st:-0}" != 0 ] && out="$out $k=$st"
	done
	for k in max_backstep_ns max_cross_backstep_ns max_reference_error_ns; do
		st $k
		[ "${st:-0}" != 0 ] && out="$out $k=$st"
	done
	echo "${out# }"
}

# zoo_caught ENTRY ARCHES TARGET: TARGET must be caught. The run ends at
# its first anomaly only (min_window_hits out of reach): some bugs come
# only once the CPUs' reads meet just so, or once a second has passed
# (evcntr32's first wrap), and a run ended by its window hits would miss
# them; a bug not caught in CATCH_CAP_S is a failure, as in caught(),
# once the run met CATCH_BLIND_HITS windows (fewer: a skip).
zoo_caught() {
	zoo_applies "$2" || return $KSFT_SKIP
	zoo_entry=$1 target=$3 stress_prep=zoo_load
	tries=$(zoo_tries "$1") try=1
	while :; do
		caught min_window_hits=1000000000
		rc=$?
		[ "$verdict" = INCONCLUSIVE ] && [ $try -lt $tries ] || break
		echo "not caught in run $try of $tries: a fresh run (zoo_tries)"
		try=$((try + 1))
	done
	stress_prep=
	[ $rc = $KSFT_XFAIL ] && echo "found: $(zoo_found)"
	return $rc
}

# zoo_tries ENTRY: the runs (each of up to CATCH_CAP_S) a bug has to be
# caught in; a run that ends with no anomaly goes to a fresh one (a new
# load), which is not a weaker check: every run must still find the bug
# or say nothing, and a bug missed in all of them fails.
# arch_timer_seq on arm64: its race of two CPUs on one TCG thread (see
# FREEZE_SPIN_NS in its module) was caught in 31 runs of 32 in the arm64
# guest, 27 of them within 3 s, the slowest in 29 s; the 32nd met nothing
# in 60 s. Such a
# run stays blind to the end (its reads never fall so that another read
# follows the high one within its excess), a fresh one does not.
zoo_tries() {
	case $1:$(uname -m) in
	arch_timer_seq:aarch64) echo 2 ;;
	*) echo 1 ;;
	esac
}

# zoo_survive: survives(), in a run of ZOO_S (on past it until the
# windows are met): an entry's update is a window of window_ns, so a
# second meets its 100 window hits many times over.
zoo_survive() {
	pressure_s=$PRESSURE_S PRESSURE_S=$ZOO_S
	survives
	rc=$?
	PRESSURE_S=$pressure_s
	return $rc
}

# zoo_survives ENTRY ARCHES TARGET: TARGET must survive, its windows hit.
zoo_survives() {
	zoo_applies "$2" || return $KSFT_SKIP
	zoo_entry=$1 target=$3 stress_prep=zoo_load
	zoo_survive
	rc=$?
	stress_prep=
	echo "found: $(zoo_found)"
	return $rc
}

# zoo_control ENTRY ARCHES TARGET: a bug only out-of-order hardware shows.
# Under emulation it must not be caught (caught, the model is wrong); on
# hardware a catch is the expected failure and no catch says what it
# means.
zoo_control() {
	zoo_applies "$2" || return $KSFT_SKIP
	zoo_entry=$1 target=$3 stress_prep=zoo_load
	if [ "$(environment)" = qemu-tcg ]; then
		zoo_survive
		rc=$?
		stress_prep=
		echo "found: $(zoo_found)"
		[ $rc = $KSFT_SKIP ] && return $KSFT_SKIP
		[ $rc = 0 ] || { echo "a bug of out-of-order hardware, caught under emulation: the model is wrong"; return 1; }
		echo "SKIP: negative control: not caught under TCG, as expected (in-order vCPUs cannot show it)"
		return $KSFT_SKIP
	fi
	caught
	rc=$?
	stress_prep=
	case $rc in
	"$KSFT_XFAIL") echo "found: $(zoo_found)" ;;
	"$KSFT_XPASS") echo "SKIP: not caught on this CPU in $(hits) window hits: it may order these reads"; return $KSFT_SKIP ;;
	esac
	return $rc
}

# Where the module runs, as its stats say (qemu-tcg, kvm, bare-metal, ...).
environment() {
	load >/dev/null 2>&1 || return
	stat_value "$DIR/stats" environment
	unload >/dev/null 2>&1
}

zoo_add() {
	entry=$1 commit=$2 arches=$3 what=$4
	shift 4
	eval "t_zoo_$entry() { zoo_caught $entry '$arches' zoo_$entry; }"
	case_add "t_zoo_$entry" "zoo: $commit $what: the bug is caught"
	for other in "$@"; do
		by=$commit
		case $other in *@*) by=${other#*@} other=${other%@*} ;; esac
		case $other in
		-*)
			other=${other#-}
			eval "t_zoo_$other() { zoo_control $entry '$arches' zoo_$other; }"
			case_add "t_zoo_$other" "zoo: $by $what, the part only out-of-order hardware shows: a negative control under emulation" ;;
		*)
			eval "t_zoo_$other() { zoo_caught $entry '$arches' zoo_$other; }"
			case_add "t_zoo_$other" "zoo: $by $what ($other): the bug is caught" ;;
		esac
	done
	eval "t_zoo_${entry}_fixed() { zoo_survives $entry '$arches' zoo_${entry}_fixed; }"
	case_add "t_zoo_${entry}_fixed" "zoo: $commit $what: the fix survives"
}

# ARCHES: where the kernel code ran (the models would run anywhere, but an
# entry says what nmiclock catches where the bug was). A race between two
# CPUs (arch_timer_seq, trace_global_plus1) is met less surely in arm64's
# guest, whose single TCG thread runs one vCPU at a time: arch_timer_seq
# scales its gap wider there.
zoo_add sc_seqcount 1809bfa44e10 aarch64 "generic sched_clock() under a seqcount, read from NMI"
zoo_add fast_mono 4396e058c52e any "NMI-safe CLOCK_MONOTONIC: the timekeeper's seqcount, then the latch and its documented step"
zoo_add tk_debug 27727df240c7 any "CONFIG_DEBUG_TIMEKEEPING's seqcount in the NMI path" \
	tk_debug_v48@58bfea953255
zoo_add arch_timer_seq 75a19a0202db aarch64 "arm64 counter read outside the seqlock" -arch_timer_ooo
zoo_add cyc2ns 20d1c86a5776 x86_64 "x86 cyc2ns scale and offset stored apart"
zoo_add cpufreq 84599f8a59e7 x86_64 "x86 sched_clock() rescaled by cpufreq without an offset"
zoo_add pvclock 489fb490dbf8 x86_64 "pvclock: per-vCPU records and no global synchronization point"
zoo_add scd_clamp 5b7dba4 x86_64 "sched_clock_local() clamped back below a remote coupling"
zoo_add evcntr32 7bb8bc6eb550 aarch64 "arm64 perf: a 64-bit counter read through 32 bits"
zoo_add trace_global aafe104aa909 any "trace_clock_global() under its spinlock" \
	trace_global_plus1@89529d8b8f8d
zoo_add fsl_a008585 f6dc1576cd51 aarch64 "FSL A-008585 counter erratum, the re-read workaround"
zoo_add hisi_161010101 bb42ca474010 aarch64 "HiSilicon 161010101 counter erratum, the workaround"
zoo_add a73_858921 fa8d815fac96 aarch64 "Cortex-A73 858921 counter erratum, the workaround"
zoo_add sun50i_a64 c950ca8c35ee aarch64 "Allwinner A64 counter erratum, the workaround"
# Not fixed upstream: found by the campaign (samples/zoo/zoo_hpet_shared.c);
# its "fix" is what we would send.
zoo_add hpet_shared unfixed x86_64 "x86 read_hpet(): a waiter gets the lock holder's older value, an NMI reads directly"

# Entries of one's own (scripts/zoo --with DIR): NMICLOCK_ZOO_WITH lists
# KO:BUG:FIX, a module and the two targets it registers, a bug and its fix
# (named BUG and BUG_fixed); each pair is judged as the zoo's own: the bug
# caught, the fix surviving with its windows hit, on any architecture.
for with in ${NMICLOCK_ZOO_WITH-}; do
	with_ko=${with%%:*} with_bug=${with#*:}
	with_fix=${with_bug#*:} with_bug=${with_bug%%:*}
	eval "t_zoo_with_$with_bug() { zoo_caught '$with_ko' any '$with_bug'; }"
	case_add "t_zoo_with_$with_bug" "zoo: --with $(basename "$with_ko") $with_bug: the bug is caught"
	eval "t_zoo_with_$with_fix() { zoo_survives '$with_ko' any '$with_fix'; }"
	case_add "t_zoo_with_$with_fix" "zoo: --with $(basename "$with_ko") $with_bug: the fix survives"
done
