#!/usr/bin/env bash
# Development tool: A/B timing of two rksm kernel images on the ksmpages workloads, booted in
# turns (A, B, A, B, ...) so that the host's drift hits both alike; prints each run's MiB/s and
# the median of the per-turn ratios B/A.
#   IMG_A=build/ab/A IMG_B=build/ab/B MODES=best,prefix THREADS=1 ROUNDS=4 scripts/dev/ab.sh
# IMPL=c for two C KSM images (default rust).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
IMG_A=${IMG_A:?image A} IMG_B=${IMG_B:?image B}
MODES=${MODES:-best,prefix}
THREADS=${THREADS:-1}
IMPL=${IMPL:-rust}
ROUNDS=${ROUNDS:-4}
out=$IMG_B.ab
rm -rf "$out"
mkdir -p "$out"
for r in $(seq "$ROUNDS"); do
	for side in A B; do
		img=IMG_$side
		img=${!img}
		KSM=$IMPL KERNEL=$img VM_RUN=$IMG_B.run QUIET=1 \
			CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl $IMPL --out $out/$side-$r.jsonl \
			--reps 1 --modes $MODES --threads $THREADS --parts ksmpages" "$PROJECT/scripts/vm.sh" >/dev/null
	done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {}
for side in "AB":
    for r in range(1, rounds + 1):
        for line in open("%s/%s-%d.jsonl" % (out, side, r)):
            x = json.loads(line)
            if "mib_per_s" in x:
                assert x["verified"], x
                runs.setdefault((x["workload"], x["threads"], side), []).append(
                    (x["mib_per_s"], x["ksmd_cpu_s"]))
for (w, t, side) in sorted(k for k in runs if k[2] == "A"):
    a, b = runs[(w, t, "A")], runs[(w, t, "B")]
    ratios = [y[0] / x[0] for x, y in zip(a, b)]
    print("%-7s %dT  A %s  B %s  B/A median %.3f (%.3f-%.3f)  cpu A %.2f B %.2f" % (
        w, t, [x[0] for x in a], [y[0] for y in b], statistics.median(ratios), min(ratios),
        max(ratios), statistics.median(x[1] for x in a), statistics.median(y[1] for y in b)))
PY
