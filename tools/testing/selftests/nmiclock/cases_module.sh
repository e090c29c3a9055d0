# SPDX-License-Identifier: GPL-2.0
#
# cases_module.sh: loading and unloading, the load message, the debugfs files
# and stats, the documentation's lists of them against the code, parameters
# good and bad, the sample consumer, the end checks (kmemleak, kernel log).
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

# What a kernel log line must not say: badness.re beside this script, the
# patterns scripts/vm-run reads too.
SPLAT_RE=
while IFS= read -r l; do
	case $l in '' | '#'*) ;; *) SPLAT_RE=${SPLAT_RE:+$SPLAT_RE|}$l ;; esac
done <"$here/badness.re"

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

# What stats' environment may say here, as an extended regular
# expression, from what user space sees of the machine (not what the
# module reads): on x86 the hypervisor flag of /proc/cpuinfo (without it,
# bare-metal), on arm64 the device tree's root (QEMU's virt machine:
# qemu-tcg, or kvm when KVM runs it); and QEMU's TCG-only "max" CPU (x86:
# model name "QEMU TCG CPU ..."; arm64: MIDR implementer 0x00, for
# software, part 0x051, 'Q'): qemu-tcg.
environment_expected() {
	case $(uname -m) in
	x86_64)
		if ! grep -q '^flags.* hypervisor' /proc/cpuinfo; then
			echo 'bare-metal'
		elif grep -q '^model name.*: QEMU TCG CPU' /proc/cpuinfo; then
			echo 'qemu-tcg'
		else
			echo 'qemu-tcg|kvm|hypervisor:[!-~]+'
		fi ;;
	aarch64)
		if ! cat /sys/firmware/devicetree/base/compatible /proc/device-tree/compatible 2>/dev/null |
			tr '\0' '\n' | grep -qx 'linux,dummy-virt'; then
			echo 'kvm|bare-metal'
		elif grep -q '^CPU implementer.*: 0x00$' /proc/cpuinfo &&
			grep -q '^CPU part.*: 0x051$' /proc/cpuinfo; then
			echo 'qemu-tcg'
		else
			echo 'qemu-tcg|kvm'
		fi ;;
	*) echo 'qemu-tcg|kvm|bare-metal|hypervisor:[!-~]+' ;;
	esac
}

t_stats_parse() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	tmp=$(scratch stats)
	stats_copy "$DIR/stats" "$tmp" || { echo "read failed"; return 1; }
	ret=0
	[ -s "$tmp" ] || { echo "stats is empty"; ret=1; }
	bad=$(grep -vcE '^[a-z][a-z0-9_]*: [^ ].*$' "$tmp")
	[ "$bad" -eq 0 ] || { echo "$bad line(s) are not 'key: value':"; grep -vE '^[a-z][a-z0-9_]*: [^ ].*$' "$tmp"; ret=1; }
	dups=$(cut -d: -f1 "$tmp" | sort | uniq -d)
	[ -z "$dups" ] || { echo "duplicate keys: $dups"; ret=1; }
	# Which keys there must be is the documentation's list: t_documented.
	for key in online_cpus counter_khz counter_mult counter_shift stats_reads counter_bits \
		clock_reads epoch_updates now_ns; do
		st $key
		v=$st
		is_number "$v" || { echo "$key: '$v' is not a number"; ret=1; }
	done
	[ "$st_state" = idle ] || { echo "state is not idle"; ret=1; }
	[ "$st_activity" = none ] || { echo "activity is not none"; ret=1; }
	[ "$st_clock" = latch ] || { echo "default clock is not latch"; ret=1; }
	[ "$st_arch" = "$(uname -m)" ] || { echo "arch is $st_arch, uname -m says $(uname -m)"; ret=1; }
	env=$st_environment
	want=$(environment_expected)
	echo "environment: $env (expected: $want)"
	printf '%s\n' "$env" | grep -qxE "$want" || { echo "environment '$env' does not match '$want'"; ret=1; }
	# For emulated(), which later cases call with the module unloaded.
	printf '%s\n' "$env" >"$SCRATCH/environment"
	[ "$st_counter" = $ORDERED ] || { echo "default counter is not $ORDERED"; ret=1; }
	[ "$st_counter_bits" = 64 ] || { echo "default counter_bits is not 64"; ret=1; }
	[ "$st_acct" = cmpxchg ] || { echo "default acct is not cmpxchg"; ret=1; }
	cpus=$(online_cpus)
	[ "$st_online_cpus" = "$cpus" ] ||
		{ echo "online_cpus $st_online_cpus != $cpus CPUs in /proc/cpuinfo"; ret=1; }
	khz=$st_counter_khz
	shift_=$st_counter_shift
	if is_number "$khz" && [ "$khz" -gt 0 ] && is_number "$shift_"; then
		[ "$shift_" -ge 1 ] && [ "$shift_" -le 32 ] ||
			{ echo "counter_shift $shift_ outside 1..32 for a $khz kHz counter"; ret=1; }
	else
		echo "counter_khz '$khz' is not a positive number"; ret=1
	fi
	# Counters move: every read of stats reads the clock once.
	tmp2=$(scratch stats)
	cat "$DIR/stats" >"$tmp2"
	for key in stats_reads clock_reads now_ns; do
		st $key
		a=$st
		b=$(stat_value "$tmp2" $key)
		if is_number "$a" && is_number "$b"; then
			[ "$b" -gt "$a" ] || { echo "$key did not advance: $a then $b"; ret=1; }
		fi
	done
	return $ret
}

# The documentation and the code name the same stats keys, debugfs files
# and module parameters: the lists `.. doc-list: stats`, `debugfs` and
# `parameters` of Documentation/nmiclock.rst (read by doc_list) against
# the keys of stats (all of its lines: per CPU and histogram-like counts
# are files of their own, percpu and histogram), the files of $DIR and
# those of /sys/module/nmiclock/parameters, both ways. The scripts'
# options are scripts/test-docs's, on the host. Then it proves it can
# fail: a made-up key in the code only, and one in the doc only, must be
# reported, each alone; and doc_list must read the terms of a list it is
# given, and only them.
t_documented() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	[ -f "$DOC" ] || {
		echo "SKIP: no nmiclock.rst beside nmiclock.sh (install Documentation/nmiclock.rst there to check it)"
		return 4
	}
	ret=0
	for list in stats debugfs parameters; do
		live=$(scratch "live-$list")
		documented=$(scratch "doc-$list")
		case $list in
		stats)
			what="stats key"
			sed -n 's/^\([a-z][a-z0-9_]*\):.*/\1/p' "$DIR/stats" >"$live"
			live_stats=$live doc_stats=$documented
			;;
		debugfs) what="debugfs file"; ls -1 "$DIR" >"$live" ;;
		parameters) what="module parameter"; ls -1 /sys/module/nmiclock/parameters >"$live" ;;
		esac
		[ -s "$live" ] || { echo "no ${what}s found"; ret=1; }
		doc_list "$DOC" $list >"$documented" || ret=1
		if [ ! -s "$documented" ]; then
			echo "Documentation/nmiclock.rst lists no ${what}s (no terms in a list '.. doc-list: $list')"
			ret=1
			continue
		fi
		diffs=$(doc_diff "$what" "$live" "$documented") || { echo "doc_diff failed"; ret=1; }
		[ -z "$diffs" ] || { printf '%s\n' "$diffs"; ret=1; }
		echo "$list: $(grep -c . "$live") in the code, $(grep -c . "$documented") documented"
	done

	# The check can fail: a made-up stats key in the code only, then one in
	# the doc only, is reported, and nothing else changes.
	fake=nmiclock_selftest_made_up_key
	base=$(doc_diff "stats key" "$live_stats" "$doc_stats")
	extra=$(scratch extra)
	for side in code doc; do
		if [ $side = code ]; then
			{ cat "$live_stats"; echo $fake; } >"$extra"
			got=$(doc_diff "stats key" "$extra" "$doc_stats" | sort)
			line="stats key '$fake' is in the code but not in Documentation/nmiclock.rst"
		else
			{ cat "$doc_stats"; echo $fake; } >"$extra"
			got=$(doc_diff "stats key" "$live_stats" "$extra" | sort)
			line="stats key '$fake' is documented but not in the code"
		fi
		want=$(printf '%s\n%s\n' "$base" "$line" | grep . | sort)
		[ "$got" = "$want" ] && continue
		added=$(printf '%s\n' "$got" | grep -vxF -e "$base")
		echo "the check cannot fail: a made-up stats key '$fake' in the $side only was not reported alone; what it added: ${added:-nothing}"
		ret=1
	done
	# doc_list reads the terms (at column 0, several a line) of its list,
	# and nothing else.
	rst=$(scratch rst)
	printf '%s\n' '.. doc-list: other' '' '``x``' '' '.. end doc-list' '' \
		'.. doc-list: stats' '' '``a``, ``b``' '    ``not_a_term``' '``c`` (the count)' '' \
		'.. end doc-list' '' '``y``' >"$rst"
	got=$(doc_list "$rst" stats | tr '\n' ' ')
	[ "$got" = "a b c " ] || { echo "the check cannot fail: doc_list read '$got' from a list of a, b and c"; ret=1; }
	return $ret
}

t_rmmod() {
	is_loaded || { echo "SKIP: module not loaded"; return 4; }
	unload || { echo "rmmod nmiclock failed"; return 1; }
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

# The sample consumer: it refuses to load unless the clock moved forward at
# every read; its first read must also be the time (nmiclock's clock starts
# at local_clock(), which stamps printk lines): within 500 ms of its line's
# stamp. That is far more than the two ever differ, but a vCPU descheduled
# between the read and the print moves the stamp by milliseconds; a clock
# stuck at 0 is off by the uptime, seconds by now.
t_sample() {
	[ -e "$sample" ] || { echo "SKIP: $sample not found"; return 4; }
	load || { echo "insmod nmiclock failed"; return 1; }
	ret=0
	mark sample
	insmod "$sample" || { echo "insmod $sample failed"; ret=1; }
	log_since sample | grep 'nmiclock_sample: ' | sed 's/^\[[^]]*\] //'
	log_since sample | grep -q 'nmiclock_sample: 5 reads, strictly increasing' ||
		{ echo "no 'nmiclock_sample: 5 reads, strictly increasing' in the kernel log"; ret=1; }
	off=$(log_since sample | awk '/nmiclock_sample: read 0: [0-9]+ ns$/ {
		stamp = $0; sub(/^\[ */, "", stamp); sub(/\].*/, "", stamp)
		split(stamp, p, "."); us = p[1] * 1000000 + p[2]
		v = $(NF - 1) / 1000; d = us - v; if (d < 0) d = -d
		printf "%d", d; exit }')
	echo "read 0 is ${off:-?} us from its line's local_clock() stamp"
	{ is_number "$off" && [ "$off" -le 500000 ]; } || { echo "read 0 is not the time"; ret=1; }
	rmmod nmiclock_sample || { echo "rmmod nmiclock_sample failed"; ret=1; }
	unload || ret=1
	return $ret
}

# The exported clock never steps back, whatever nmiclock does to it: with
# nmiclock_reader reading nmiclock_sched_clock() back to back on every CPU,
# REBUILDS config writes each rebuild the clock (counter_bits and clock
# switched to and fro, one key a write; the counter stays the ordered one:
# a bare counter read may go back across CPUs on real hardware), and the
# reader must count no step back on any CPU nor across CPUs, and have read
# all the while. The latch is rebuilt while it runs, the seqcount only
# while it does not: a running seqcount's readers wait 50 us for its
# writer, then read the tear, and a writer held up longer inside the
# publish makes them (once in about twenty runs on the debug kernel, 18 ms
# back, the publish then run with interrupts on; a vCPU the host
# deschedules there still would): the seqcount's own weakness, which no
# rebuild can help.
REBUILDS=400
t_rebuild_monotonic() {
	r=$(dirname "$sample")/nmiclock_reader.ko
	[ -e "$r" ] || { echo "SKIP: $r not found"; return 4; }
	load || { echo "insmod nmiclock failed"; return 1; }
	ret=0
	insmod "$r" || { unload; echo "insmod $r failed"; return 1; }
	i=0
	while [ $i -lt $REBUILDS ]; do
		case $((i % 4)) in
		0) w=counter_bits=63 ;;
		1) w=clock=seqcount ;;
		2) w=clock=latch ;;
		3) w=counter_bits=64 ;;
		esac
		echo "$w" >"$DIR/config" || { echo "config $w refused"; ret=1; break; }
		i=$((i + 1))
	done
	read -r report </sys/module/nmiclock_reader/parameters/report
	echo "$i rebuilds; reader: $report"
	rmmod nmiclock_reader || { echo "rmmod nmiclock_reader failed"; ret=1; }
	unload || ret=1
	case $report in
	*" back_cpu=0 "*" back_cross=0 "*) ;;
	*) echo "the exported clock stepped back"; ret=1 ;;
	esac
	reads=${report#reads=}
	reads=${reads%% *}
	{ is_number "$reads" && [ "$reads" -ge $((REBUILDS * 10)) ]; } ||
		{ echo "the reader read $reads times, want $((REBUILDS * 10)) at least"; ret=1; }
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
		duration_s=86401 autostart=2 autostart=yes min_window_hits=-1 \
		min_window_hits=1000000001 until=forever until=VERDICT disturb=bogus \
		disturb=; do
		name=${p%%=*}
		# -q: the first bad value of one name and one number parameter
		# (every parameter goes through the same parser; a failed
		# insmod waits for RCU grace periods, slow on a debug kernel).
		if [ $quick = 1 ]; then
			case $name in clock | counter_bits) ;; *) continue ;; esac
			case " $seen " in *" $name "*) continue ;; esac
		fi
		seen="$seen $name"
		k=$((k + 1))
		mark "param$k"
		err=$(insmod "$module" "$p" 2>&1) && { echo "$p: loaded"; unload; ret=1; continue; }
		insmod_refused "$err" || { echo "$p: want EINVAL, got: $err"; ret=1; }
		is_loaded && { echo "$p: module loaded anyway"; unload; ret=1; }
		msg=$(log_since "param$k" | grep "nmiclock: .*$name" | head -n 1)
		[ -n "$msg" ] || { echo "$p: no log line naming $name"; ret=1; }
		echo "$p: ${msg#*] }"
	done
	return $ret
}

# Fault injection (debug kernels: CONFIG_FAULT_INJECTION, FAILSLAB,
# FAIL_PAGE_ALLOC, their debugfs and stack-trace filter): every allocation
# that module init, then `start`, asks for is failed in turn, the Nth by
# /proc/self/fail-nth, which the kernel keeps per task across exec. Only
# allocations with module code within the 32 innermost frames of their
# stack trace count (the stack-trace filter, from the end of the kernel's
# image up: module space), so neither insmod's exec nor the loader's own
# work before init does, and none that kmemleak makes for its own
# records (__alloc_object()): failing those tests kmemleak, not nmiclock.
# Allocations made in other tasks (kthreadd forking the module's threads,
# work items) are not failed. Whether the Nth was failed is told by the
# faults' `times` counters, which each injected fault decrements.
# Each failure must be a clean error (an errno): a failed init leaves the
# module unloaded with nothing behind; a failed start leaves its run idle
# and the module able to start again, which the next attempt, on the same
# load, shows; a fault the module tolerates must leave it working. Each
# phase ends when an attempt succeeds with no fault left to inject, or
# fails at FAULT_MAX attempts. Then the module unloads with nothing left
# behind and loads again, and the kernel log since the start shows no
# splat. A leak is t_kmemleak's to find, at the end of the same suite
# (kmemleak reports objects 5 s old, with their backtraces): a scan here
# would wait for them.
FAULT_MAX=200
FAULT_ATTRS="$DEBUGFS/failslab $DEBUGFS/fail_page_alloc"

# ksym_range SYMBOL: from SYMBOL's address in /proc/kallsyms to the next
# higher one's, "0xSTART 0xEND" (kallsyms lists the kernel's symbols in
# address order, all of the same width); fails where kallsyms hides the
# addresses.
ksym_range() {
	awk -v f="$1" '
		a != "" && ($1 "") > a { print "0x" a, "0x" $1; ok = 1; exit }
		a == "" && $3 == f && $1 !~ /^0+$/ { a = $1 "" }
		END { exit !ok }' /proc/kallsyms
}

# ksym_addr SYMBOL: SYMBOL's address in /proc/kallsyms, "0xADDRESS".
ksym_addr() {
	awk -v f="$1" '$3 == f && $1 !~ /^0+$/ { print "0x" $1; ok = 1; exit } END { exit !ok }' /proc/kallsyms
}

# fault_set FILE VALUE: writes VALUE to the fault attribute FILE of each of
# FAULT_ATTRS, first keeping what it held for fault_restore.
fault_set() {
	for d in $FAULT_ATTRS; do
		[ -e "$d/$1" ] || continue
		read -r v <"$d/$1" && echo "$d/$1 $v" >>"$SCRATCH/fault-saved"
		echo "$2" >"$d/$1" || return 1
	done
}

fault_restore() {
	[ -e "$SCRATCH/fault-saved" ] || return 0
	restored=
	# The first value kept for each file is the one found.
	while read -r f v; do
		case " $restored " in *" $f "*) continue ;; esac
		echo "$v" >"$f"
		restored="$restored $f"
	done <"$SCRATCH/fault-saved"
	rm -f "$SCRATCH/fault-saved"
}

# fault_times: the faults' `times` counters summed, in $ft.
fault_times() {
	ft=0
	for d in $FAULT_ATTRS; do
		read -r v <"$d/times" && ft=$((ft + v))
	done
}

# fault_errno FILE: the error a tool printed in FILE, from its last ": "
# (insmod's, the shell's or dd's strerror), in $fe; empty if none.
fault_errno() {
	fe=
	while IFS= read -r l; do
		case $l in *': '*) fe=${l##*: } ;; esac
	done <"$1"
}

# fault_insmod N: insmod of the module with the Nth allocation failed.
# busybox's insmod, when finit_module() fails, tries init_module() with
# the file read into memory, whose init then runs with nothing left to
# fail: given the module through a pipe, which finit_module() refuses
# before any module code runs, it makes one attempt, init_module()'s.
fault_insmod() {
	if [ $FAULT_INSMOD = pipe ]; then
		cat "$module" | (echo "$1" >/proc/self/fail-nth && exec insmod /dev/stdin)
	else
		(echo "$1" >/proc/self/fail-nth && exec insmod "$module")
	fi
}

# fault_start N: writes start to control with the Nth allocation failed,
# its error on stderr (through dd where dash's echo would not name it, as
# expect_refused does).
fault_start() {
	if [ $REFUSED_BY = echo ]; then
		(echo "$1" >/proc/self/fail-nth && echo start >"$DIR/control")
	else
		echo start | (echo "$1" >/proc/self/fail-nth &&
			exec dd of="$DIR/control" bs=4096 >/dev/null)
	fi
}

# fault_try CMD N: one attempt, CMD N (fault_insmod or fault_start) with
# the Nth allocation failed: its exit status in $rc, the error it printed
# in $fe, and in $injected 1 if a fault was injected (a `times` counter
# went down), else 0.
fault_try() {
	attempts=$((attempts + 1))
	fault_times
	t0=$ft
	"$1" "$2" >/dev/null 2>"$err"
	rc=$?
	fault_times
	injected=0
	[ $ft -ge $t0 ] || injected=1
	fault_errno "$err"
}

t_fault_inject() {
	[ -e /proc/self/fail-nth ] ||
		{ echo "SKIP: no /proc/self/fail-nth: a kernel without CONFIG_FAULT_INJECTION (the debug kernel has it)"; return 4; }
	[ -e "$DEBUGFS/failslab/require-start" ] ||
		{ echo "SKIP: no $DEBUGFS/failslab/require-start: CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS or CONFIG_FAULT_INJECTION_STACKTRACE_FILTER missing"; return 4; }
	image_end=$(ksym_addr _end) ||
		{ echo "SKIP: no address of _end in /proc/kallsyms (CONFIG_KALLSYMS_ALL, kptr_restrict)"; return 4; }
	[ -e "$DEBUGFS/fail_page_alloc" ] || FAULT_ATTRS=$DEBUGFS/failslab
	FAULT_INSMOD=file
	insmod 2>&1 | grep -q BusyBox && FAULT_INSMOD=pipe
	is_loaded && unload_all
	err=$(scratch err)
	ret=0
	# Every allocation of the module's may fail (not only those that
	# cannot sleep), pages of any order, with no log line of the fault
	# injection's own; the counters high enough never to run out.
	fault_set ignore-gfp-wait N && fault_set min-order 0 && fault_set verbose 0 &&
		fault_set times 1000000 && fault_set stacktrace-depth 32 &&
		fault_set require-start "$image_end" && fault_set require-end 0xffffffffffffffff ||
		{ echo "cannot set up fault injection in $DEBUGFS"; fault_restore; return 1; }
	if kmemleak_range=$(ksym_range __alloc_object); then
		fault_set reject-start "${kmemleak_range% *}" && fault_set reject-end "${kmemleak_range#* }"
	fi
	# synchronize_rcu() in every unload and failed init, expedited: the
	# attempts take half the time.
	read -r rcu_exp </sys/kernel/rcu_expedited 2>/dev/null && echo 1 >/sys/kernel/rcu_expedited
	mark fault-inject
	uptime_s
	t_begin=$up_s
	attempts=0 init_done= start_done= init_failed=0 start_failed=0 tolerated= tally_init= tally_start=
	# Init: the Nth allocation failed, until a load fails none.
	n=1
	while [ -z "$init_done" ] && [ $ret -eq 0 ]; do
		[ $n -le $FAULT_MAX ] || { echo "init still failing after $FAULT_MAX attempts (FAULT_MAX)"; ret=1; break; }
		mark "fault-$n"
		fault_try fault_insmod $n
		if [ $rc -ne 0 ] && [ $injected = 1 ]; then
			init_failed=$((init_failed + 1))
			[ -n "$fe" ] || { echo "init, allocation $n failed: insmod failed with no error message"; ret=1; }
			case "|$tally_init|" in *"|$fe|"*) ;; *) tally_init="$tally_init|$fe" ;; esac
			left=$(left_behind)
			[ -z "$left" ] || { echo "init, allocation $n failed ($fe): $left"; ret=1; }
		elif [ $rc -ne 0 ]; then
			echo "init, attempt $n: insmod failed with no fault injected ($fe): left behind by the attempt before?"
			ret=1
		elif [ $injected = 1 ]; then
			tolerated="$tolerated init:$n"
			unload || { echo "init, allocation $n failed and tolerated: rmmod failed"; ret=1; }
			left=$(left_behind)
			[ -z "$left" ] || { echo "init, allocation $n failed and tolerated: $left after rmmod"; ret=1; }
		else
			init_done=$n
		fi
		n=$((n + 1))
	done
	# Start: the Nth allocation failed, on the module loaded above, until a
	# start fails none. A failed start must leave it idle and able to
	# start again: the next attempt is the check.
	n=1
	while [ -z "$start_done" ] && [ $ret -eq 0 ]; do
		[ $n -le $FAULT_MAX ] || { echo "start still failing after $FAULT_MAX attempts (FAULT_MAX)"; ret=1; break; }
		is_loaded || load || { echo "start, attempt $n: insmod with no fault injected failed"; ret=1; break; }
		mark "fault-start-$n"
		fault_try fault_start $n
		if [ $rc -ne 0 ] && [ $injected = 1 ]; then
			start_failed=$((start_failed + 1))
			[ -n "$fe" ] || { echo "start, allocation $n failed: the write failed with no error message"; ret=1; }
			case "|$tally_start|" in *"|$fe|"*) ;; *) tally_start="$tally_start|$fe" ;; esac
			state_is "$DIR/control" idle ||
				{ echo "start, allocation $n failed ($fe): control says '$st_line', not idle"; ret=1; }
		elif [ $rc -ne 0 ]; then
			echo "start, attempt $n: the write failed with no fault injected ($fe)"
			ret=1
		else
			[ $injected = 1 ] && tolerated="$tolerated start:$n" || start_done=$n
			echo stop >"$DIR/control" || { echo "start, attempt $n: stop failed"; ret=1; }
			i=0
			while ! state_is "$DIR/control" done && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
			state_is "$DIR/control" done || { echo "start, attempt $n: the run did not stop"; ret=1; }
		fi
		n=$((n + 1))
	done
	# After the failures, the module unloads with nothing left behind, and
	# loads and unloads again.
	if is_loaded; then
		unload || { echo "rmmod after the start attempts failed"; ret=1; }
		left=$(left_behind)
		[ -z "$left" ] || { echo "after the start attempts: $left after rmmod"; ret=1; }
		load && unload || { echo "the module does not load and unload again after the attempts"; ret=1; }
	fi
	fault_restore
	[ -z "${rcu_exp:-}" ] || echo "$rcu_exp" >/sys/kernel/rcu_expedited
	is_loaded && unload
	uptime_s
	last=$up_s
	echo "$attempts attempts in $((last - t_begin)) s"
	echo "init: ${init_failed} allocations failed in turn (errors: ${tally_init#|}), attempt ${init_done:-?} loaded with none left to fail"
	echo "start: ${start_failed} allocations failed in turn (errors: ${tally_start#|}), attempt ${start_done:-?} started with none left to fail"
	echo "faults tolerated (the module loaded or started, then unloaded clean):${tolerated:- none}"
	[ $init_failed -gt 0 ] && [ $start_failed -gt 0 ] ||
		{ echo "no fault was injected into init or start: is fail-nth kept across exec?"; ret=1; }
	# A splat, with the attempt it followed.
	found=$(log_since fault-inject | SPLAT_RE=$SPLAT_RE awk '
		/nmiclock-selftest\[[0-9]+\]: mark fault-(start-)?[0-9]+$/ { a = $NF; next }
		$0 ~ ENVIRON["SPLAT_RE"] { print a ": " $0 }')
	[ -z "$found" ] || { echo "kernel log:"; printf '%s\n' "$found" | head -n 20; ret=1; }
	return $ret
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

# Whether this runs under emulation (QEMU TCG): nmiclock's environment, as
# stats said it (kept by t_stats_parse), else (that case not run) a
# hypervisor the kernel does not recognise. There the host preempts vCPUs
# mid-handler, and slow NMI handlers are the emulator's.
emulated() {
	if [ -s "$SCRATCH/environment" ]; then
		[ "$(cat "$SCRATCH/environment")" = qemu-tcg ]
		return
	fi
	grep -q '^flags.* hypervisor' /proc/cpuinfo && ! dmesg | grep -q 'Hypervisor detected'
}

t_kernel_log_clean() {
	log=$(log_since suite | grep -v 'nmiclock-selftest\[')
	ret=0
	found=$(printf '%s\n' "$log" | grep -E "$SPLAT_RE")
	if [ -n "$found" ]; then
		echo "kernel log reports problems since the suite started:"
		echo "$found"
		ret=1
	fi
	# "NMI handler (NAME) took too long to run: N msecs", per handler.
	slow=$(printf '%s\n' "$log" | sed -nE 's/.*NMI handler \(([^)]*)\) took too long to run: ([0-9.]+) msecs.*/\1|\2/p' |
		awk -F'|' '{ n[$1]++; if ($2 + 0 > w[$1]) w[$1] = $2 + 0 }
			END { for (h in n) printf "%s: %d times, worst %.3f ms; ", h, n[h], w[h] }')
	echo "NMI handlers that took too long to run: ${slow:-none}"
	if [ -n "$slow" ] && ! emulated; then
		echo "not under emulation: slow NMI handlers are real"
		ret=1
	fi
	return $ret
}

case_add t_insmod "insmod"
case_add t_load_message "load message logged"
case_add t_debugfs "debugfs dir and root-only stats present and readable"
case_add t_stats_parse "stats parses as key: value with sane values"
case_add t_documented "Documentation/nmiclock.rst lists every stats key, debugfs file and module parameter, and no other"
case_add t_rmmod "rmmod"
case_add t_nothing_left "rmmod leaves nothing behind"
case_add t_cycles "$cycles load/unload cycles"
case_add t_variants "every clock variant loads and says so"
case_add t_sample "sample consumer loads, reads and unloads"
case_add t_rebuild_monotonic "the exported clock never steps back on any CPU or across CPUs during $REBUILDS config rebuilds"
case_add t_bad_params "bad module parameters: EINVAL, a log line, nothing loaded"
