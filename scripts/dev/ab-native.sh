#!/usr/bin/env bash
# Development tool: same-run A/B of UML images natively (FLAVOR=um), on the ksmpages workloads
# (merge rate, MiB/s) or, with PART=cost, on the running cost (ksmbench's cost part: 1 GiB,
# PASSES full scans timed, CPU seconds per GiB per pass). Each turn boots every image once, in an
# order that rotates; prints per workload and image the median and, against the first image, the
# median of the per-turn ratios and their range.
#   IMAGES="build/ab/um/A build/ab/um/B" ROUNDS=5 scripts/dev/ab-native.sh
#   PART=cost IMAGES="build/ab/um/A build/ab/um/B build/linux-um-c" scripts/dev/ab-native.sh
# An image whose file name ends in -c is C KSM's; the others are rksm's (KSM=c: all C's).
# An old source gets a UML kernel from the tree with its rust/, samples/ and tests/kunit/
# checked out (kernel/ unchanged since), FLAVOR=um KSM=rust scripts/kernel.sh, and a copy of
# build/linux-um-rust.
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
		impl=${KSM:-rust}
		case ${imgs[$i]} in *-c) impl=c ;; esac
		if [ "${PART:-ksmpages}" = cost ]; then
			args="--parts cost --cost-shapes ${SHAPES:-chains,copies} --cost-mib ${MIB:-1024} \
--cost-passes ${PASSES:-10} --sparse-gib 0"
		else
			args="--mib ${MIB:-256} --procs 2 --modes ${MODES:-best,worst,prefix} --parts ksmpages"
		fi
		say "turn $r/$ROUNDS: image $i ($(basename "${imgs[$i]}"), $impl)"
		KSM=$impl KERNEL=${imgs[$i]} UM_RUN=$out/run QUIET=1 \
			CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl $impl --out $out/img$i-$r.jsonl \
--threads 1 --reps 1 --first-rep $((r - 1)) $args" "$PROJECT/scripts/um.sh" >/dev/null ||
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
        cost = rec.get("cpu_s_per_gib_pass")
        rate[(int(i), int(r), rec["workload"])] = rec["mib_per_s"] if cost is None else cost
works = sorted({k[2] for k in rate})
unit = "CPU s/GiB" if works[0].startswith("cost") else "MiB/s"
print("%-12s %-22s %9s %10s %13s" % ("workload", "image", unit, "/ image 0", "(turns)"))
for w in works:
    for i, img in enumerate(imgs):
        turns = sorted(r for (j, r, x) in rate if j == i and x == w)
        med = statistics.median(rate[(i, r, w)] for r in turns)
        ratios = [rate[(i, r, w)] / rate[(0, r, w)] for r in turns if (0, r, w) in rate]
        print("%-12s %-22s %9.4g %9.3fx %13s" % (w, os.path.basename(img)[:22], med,
              statistics.median(ratios), "%.3f-%.3f" % (min(ratios), max(ratios))))
PY
