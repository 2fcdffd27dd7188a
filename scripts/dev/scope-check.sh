#!/usr/bin/env bash
# Development tool: make test's scope_check_fails with its figures. Boots a debug kernel (TCG)
# and runs the torture RUNS times (default 3) for 20 s with one thread, checked as if
# merge_scope were mm (-S mm) under global, in the memory cgroup make test uses; prints each
# run's quiesce and frame figures. Test 10 must fail in every run.
#   KSM=rust scripts/dev/scope-check.sh        (KSM=c: C KSM's debug kernel)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
KSM=${KSM:-rust}
"$PROJECT/scripts/guest-progs.sh" > /dev/null
guest=$B/dev-scope-guest.sh
cat > "$guest" <<SH
cg=/sys/fs/cgroup
grep -q " \$cg cgroup2 " /proc/mounts || mount -t cgroup2 none \$cg
echo +memory > \$cg/cgroup.subtree_control
mkdir -p \$cg/torture
echo 64M > \$cg/torture/memory.max
echo 512M > /sys/block/zram0/disksize && mkswap /dev/zram0 > /dev/null && swapon /dev/zram0
echo \$\$ > \$cg/torture/cgroup.procs
for run in \$(seq ${RUNS:-3}); do
	echo 2 > /sys/kernel/mm/ksm/run
	$B/tests/torture -q -d 20 -t 1 -S mm > $B/dev-scope-\$run.out 2>&1
	printf 'run %d: ' \$run
	grep -h -E 'full scans while|frames in 2 workers|^(not )?ok 10' $B/dev-scope-\$run.out |
		tr -s ' ' | tr '\n' ';'
	echo
done
SH
KERNEL=$B/bzImage-debug-$KSM KSM=$KSM QUIET=1 CMD="sh $guest" TIMEOUT=1800 "$PROJECT/scripts/vm.sh"
cat "$B/vm/run-$KSM/output.log"
