# SPDX-License-Identifier: GPL-2.0
#
# What a kernel log line must not say: one extended regex (grep -E) per
# line, joined with "|" by their readers, scripts/vm-run (the console of
# every guest: exit 123) and the suite (cases_module.sh, the kernel log of
# its run). Lines starting with "#" and empty lines are not patterns.
WARNING:
BUG:
Oops
kernel BUG at
general protection fault
UBSAN:
KASAN:
kmemleak: [0-9]+ new suspected
unreferenced object 0x
blocked for more than [0-9]+ seconds
rcu: INFO: .*stall
Uhhuh\. NMI received
Dazed and confused
panicked at
Watchdog detected hard LOCKUP
soft lockup
Marking TSC unstable
perf: interrupt took too long
