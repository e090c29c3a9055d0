# SPDX-License-Identifier: GPL-2.0
#
# cases_acct.sh: the acct updater, task and hrtimer sides on every CPU.
# Sourced by nmiclock.sh, after lib.sh; registers its cases in order.

# acct_run VARIANT [PARAM...]: an ACCT_S seconds run of the acct updater, task side and hrtimer
# side on every CPU; leaves the results in $acct_out. Fails unless both
# sides ran on every CPU and updates were applied.
acct_run() {
	load acct="$@" || { echo "insmod acct=$* failed"; return 1; }
	acct_out=$(scratch)
	ret=0
	echo $((ACCT_S * 1000)) >"$DIR/acct" || { echo "writing $((ACCT_S * 1000)) to acct failed"; ret=1; }
	stats_copy "$DIR/acct" "$acct_out"
	grep -vE '^(cpu|irq_period|min_delta|state|runs|cpus)' "$acct_out" | tr '\n' ' '; echo
	[ "$(stat_value "$DIR/stats" acct)" = "$1" ] || { echo "stats does not say acct: $1"; ret=1; }
	cpus=$(online_cpus)
	n=$(grep -cE '^cpu[0-9]+: task_calls=[1-9][0-9]* irq_calls=[1-9][0-9]* updates=[1-9]' "$acct_out")
	[ "$n" -eq "$cpus" ] || { echo "task side, hrtimer side and updates on $n of $cpus CPUs"; ret=1; }
	unload
	return $ret
}

# t_acct_clean VARIANT: no bad delta, no backward step, integrals add up.
t_acct_clean() {
	acct_run "$1" || return 1
	ret=0
	for key in bad_deltas timexpd_backwards integral_mismatches; do
		st $key
		v=$st
		[ "$v" = 0 ] || { echo "$key: $v"; ret=1; }
	done
	return $ret
}

t_acct_cmpxchg() { t_acct_clean cmpxchg; }

t_acct_irqsave() { t_acct_clean irqsave; }

# racy must be caught: with the task side pausing 20 us between its read
# and its write of acct_timexpd, the hrtimer side (every 100 us on the same
# CPU) lands in that window, and applies an interval the task applies
# again, or moves acct_timexpd back.
t_acct_racy() {
	acct_run racy tear_window_ns=20000 || return 1
	bad=$st_bad_deltas
	back=$st_timexpd_backwards
	mis=$st_integral_mismatches
	if [ $((bad + back + mis)) -gt 0 ]; then
		echo "XFAIL: caught: $bad bad deltas, $back backward steps, $mis integral mismatches" \
			"in $st_updates updates"
		return $KSFT_XFAIL
	fi
	echo "XPASS: racy applied $st_updates updates with no bad delta: the checker is blind"
	return $KSFT_XPASS
}

case_add t_acct_cmpxchg "acct=cmpxchg: $ACCT_S s task + hrtimer updates, no bad delta, no backward step"
case_add t_acct_irqsave "acct=irqsave: $ACCT_S s task + hrtimer updates, no bad delta, no backward step"
case_add t_acct_racy "acct=racy, task side pausing 20 us: $ACCT_S s task + hrtimer updates, caught"
