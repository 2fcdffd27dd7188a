#!/usr/bin/env bash
# Development tool: same-run A/B of rksm images natively, on User-Mode Linux kernels
# (FLAVOR=um), on the ksmpages workloads. Each turn boots every image once, in an order that
# rotates; prints per workload and image the median MiB/s and, against the first image, the
# median of the per-turn ratios and their range.
#   IMAGES="build/ab/um/A build/ab/um/B" ROUNDS=5 scripts/dev/ab-native.sh
# KSM=c compares C KSM images (default: rksm).
# An old source gets a UML kernel from a worktree with kernel/config/um.config, patches 0006 and
# 0007 and today's scripts/kernel.sh, um.sh and lib.sh copied in (FLAVOR=um KSM=rust).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
read -r -a imgs <<< "${IMAGES:?images}"
ROUNDS=${ROUNDS:-5}
out=${OUT:-$B/ab/um/runs}
rm -rf "$out"
mkdir -p "$out"
n=${#imgs[@]}
for r in $(seq "$ROUNDS"); do
	for k in $(seq 0 $((n - 1))); do
		i=$(((k + r) % n))
		say "turn $r/$ROUNDS: image $i ($(basename "${imgs[$i]}"))"
		KSM=${KSM:-rust} KERNEL=${imgs[$i]} UM_RUN=$out/run QUIET=1 \
			CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl ${KSM:-rust} --out $out/img$i-$r.jsonl \
--mib ${MIB:-256} --procs 2 --modes ${MODES:-best,worst,prefix} --threads 1 --reps 1 \
--first-rep $((r - 1)) --parts ksmpages" "$PROJECT/scripts/um.sh" >/dev/null ||
			die "turn $r, image $i failed ($out/run)"
	done
done
python3 - "$out" "${imgs[@]}" <<'PY'
import glob, json, os, statistics, sys
out, imgs = sys.argv[1], sys.argv[2:]
rate = {}
for f in glob.glob(os.path.join(out, "img*-*.jsonl")):
    i, r = os.path.basename(f)[3:-6].split("-")
    for line in open(f):
        rec = json.loads(line)
        if not rec["verified"]:
            sys.exit("unverified run in %s" % f)
        rate[(int(i), int(r), rec["workload"])] = rec["mib_per_s"]
works = sorted({k[2] for k in rate}, key=["best", "worst", "prefix"].index)
print("%-8s %-22s %9s %10s %13s" % ("workload", "image", "MiB/s", "/ image 0", "(turns)"))
for w in works:
    for i, img in enumerate(imgs):
        turns = sorted(r for (j, r, x) in rate if j == i and x == w)
        med = statistics.median(rate[(i, r, w)] for r in turns)
        ratios = [rate[(i, r, w)] / rate[(0, r, w)] for r in turns if (0, r, w) in rate]
        print("%-8s %-22s %9.1f %9.3fx %13s" % (w, os.path.basename(img)[:22], med,
              statistics.median(ratios), "%.3f-%.3f" % (min(ratios), max(ratios))))
PY
