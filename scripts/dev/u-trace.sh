#!/usr/bin/env bash
# Development tool: the ksm_tests -U race (Documentation/mm/rksm.rst, "Upstream tests and their
# settings"). Boots the test kernel up to BOOTS times (default 16), runs scripts/dev/u-trace.c
# first thing with the ksm trace events on, and stops at the first failing run, printing its
# trace: the ksm events and the probe's steps (trace_marker) on one time line.
#   KSM=rust scripts/dev/u-trace.sh        (KSM=c: C KSM's test kernel)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
KSM=${KSM:-rust}
d=$B/u-trace
mkdir -p "$d"
gcc -static -O2 -o "$d/u" "$PROJECT/scripts/dev/u-trace.c"
cat > "$d/run.sh" <<SH
t=/sys/kernel/tracing
[ -d \$t/events ] || mount -t tracefs none \$t
echo 1 > \$t/events/ksm/enable
echo > \$t/trace
$d/u
r=\$?
grep -v '^#' \$t/trace > $d/trace.txt
echo "rc \$r"
SH
for i in $(seq "${BOOTS:-16}"); do
	APPEND="${APPEND:-}" KSM=$KSM QUIET=1 CMD="sh $d/run.sh" TIMEOUT=300 "$PROJECT/scripts/vm.sh" > /dev/null
	out=$B/vm/run-$KSM/output.log
	echo "boot $i: $(head -1 "$out")"
	if grep -q '^rc 1' "$out"; then
		sed 's/^ *//' "$d/trace.txt"
		exit 1
	fi
done
