#!/usr/bin/env bash
# Development tool: a short `make bench` (ksmpages workloads only) on the bench kernels that are
# already built, printing the median MiB/s per kernel, workload and thread count.
#   IMPLS="c rust" MODES=best,worst REPS=2 THREADS=1,2 scripts/dev/quickbench.sh
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
IMPLS=${IMPLS:-c rust}
MODES=${MODES:-best,worst,prefix}
REPS=${REPS:-2}
THREADS=${THREADS:-1,2}
out=$B/quick
mkdir -p "$out"
for k in $IMPLS; do
	t=$THREADS
	[ "$k" = c ] && t=1
	rm -f "$out/raw-$k.jsonl"
	KSM=$k KERNEL=$B/bzImage-bench-$k VM_RUN=$B/vm/run-quick-$k QUIET=1 \
		CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl $k --out $out/raw-$k.jsonl \
		--reps $REPS --modes $MODES --threads $t --parts ksmpages" "$PROJECT/scripts/vm.sh" >/dev/null
done
python3 - "$out" $IMPLS <<'PY'
import json, statistics, sys
rows = {}
for k in sys.argv[2:]:
    for line in open("%s/raw-%s.jsonl" % (sys.argv[1], k)):
        r = json.loads(line)
        if "mib_per_s" in r:
            rows.setdefault((r["workload"], k, r["threads"]), []).append(
                (r["mib_per_s"], r["ksmd_cpu_s"], r["verified"]))
for (w, k, t), v in sorted(rows.items()):
    print("%-8s %-4s %dT  MiB/s %s  median %.1f  cpu %s  verified %s" % (
        w, k, t, [x[0] for x in v], statistics.median(x[0] for x in v),
        [x[1] for x in v], all(x[2] for x in v)))
PY
