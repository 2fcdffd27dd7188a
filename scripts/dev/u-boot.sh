#!/usr/bin/env bash
# Development tool: upstream ksm_tests -U as the first and only command after each of BOOTS
# fresh boots (default 40) of the test kernel (KSM=rust or c), counting the boots where it fails
# (Documentation/mm/rksm.rst, "Upstream tests and their settings"). For a failing boot, the test's
# output and the ksm trace events are kept in build/u-boot/fail-N.{out,trace}.
#   KSM=rust BOOTS=40 scripts/dev/u-boot.sh
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
KSM=${KSM:-rust}
d=$B/u-boot
rm -rf "$d"
mkdir -p "$d"
cat > "$d/guest.sh" <<G
t=/sys/kernel/tracing
[ -d \$t/events ] || mount -t tracefs none \$t
echo 1 > \$t/events/ksm/enable
echo > \$t/trace
$B/selftests/ksm_tests -U > $d/last.out 2>&1
r=\$?
grep -v '^#' \$t/trace > $d/last.trace
echo "rc \$r"
G
fails=0
boots=${BOOTS:-40}
for i in $(seq "$boots"); do
	KSM=$KSM QUIET=1 CMD="sh $d/guest.sh" TIMEOUT=300 "$PROJECT/scripts/vm.sh" > /dev/null 2>&1
	r=$(grep -a '^rc' "$B/vm/run-$KSM/output.log" | head -1 || true)
	if [ "$r" != "rc 0" ]; then
		fails=$((fails + 1))
		cp "$d/last.out" "$d/fail-$fails.out"
		cp "$d/last.trace" "$d/fail-$fails.trace"
	fi
	echo "boot $i: ${r:-no result}, $fails failed so far"
done
echo "ksm_tests -U failed in $fails of $boots fresh boots ($KSM)"
