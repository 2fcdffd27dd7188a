#!/usr/bin/env bash
# Development tool: A/B timing of an old and a new rksm source, each built in more than one code
# layout, on the ksmpages workloads. Under TCG a code change that does nothing at run time (code
# that never runs, placed before rksm's) moves the medians of scripts/dev/ab.sh by a few percent,
# and more turns do not average that away: it is the same for every boot of one image. So each
# side is built twice or more, the second time with code padding ahead of rksm's (see
# Documentation/mm/rksm-measurements.rst, "The restructuring of 2026-11-26 (issue 21), old image
# against new"), and every image is booted once per turn, in an order that rotates. Prints, per
# workload, the median over turns of mean(NEW)/mean(OLD), and the median of every pair's per-turn
# ratio, so that the layout's share is seen.
#   OLD="build/ab/A1 build/ab/A2" NEW="build/ab/N1 build/ab/N2" MODES=worst,prefix ROUNDS=10 \
#   OUT=build/ab/layouts scripts/dev/ab-layouts.sh
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
read -r -a old <<< "${OLD:?old images}"
read -r -a new <<< "${NEW:?new images}"
MODES=${MODES:-best,worst,prefix}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-10}
out=${OUT:-$B/ab/layouts}
rm -rf "$out"
mkdir -p "$out"
imgs=("${old[@]}" "${new[@]}")
n=${#imgs[@]}
for r in $(seq "$ROUNDS"); do
	for k in $(seq 0 $((n - 1))); do
		i=$(((k + r) % n))
		side=$( [ "$i" -lt "${#old[@]}" ] && echo "old$i" || echo "new$((i - ${#old[@]}))")
		echo "turn $r/$ROUNDS: $side (${imgs[$i]})" >&2
		KSM=rust KERNEL=${imgs[$i]} VM_RUN=$out/run QUIET=1 \
			CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl rust --out $out/$side-$r.jsonl \
			--reps 1 --modes $MODES --threads $THREADS --parts ksmpages" "$PROJECT/scripts/vm.sh" >/dev/null
	done
done
python3 - "$out" "$ROUNDS" "${#old[@]}" "${#new[@]}" <<'PY'
import json, statistics, sys
out, rounds, nold, nnew = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sides = ["old%d" % i for i in range(nold)] + ["new%d" % i for i in range(nnew)]
runs = {}
for s in sides:
    for r in range(1, rounds + 1):
        for line in open("%s/%s-%d.jsonl" % (out, s, r)):
            x = json.loads(line)
            if "mib_per_s" in x:
                assert x["verified"], x
                runs.setdefault(x["workload"], {}).setdefault(s, {})[r] = x["mib_per_s"]
print("%-7s %-26s %s" % ("", "mean(new)/mean(old)", "pairs new_i/old_j (median over turns)"))
for w, by in sorted(runs.items()):
    turns = [r for r in range(1, rounds + 1) if all(r in by[s] for s in sides)]
    mean = lambda ss, r: statistics.mean(by[s][r] for s in ss)
    olds, news = sides[:nold], sides[nold:]
    whole = [mean(news, r) / mean(olds, r) for r in turns]
    pairs = ["%s/%s %.3f" % (n, o, statistics.median(by[n][r] / by[o][r] for r in turns))
             for n in news for o in olds]
    nulls = ["%s/%s %.3f" % (b, a, statistics.median(by[b][r] / by[a][r] for r in turns))
             for ss in (olds, news) for a, b in zip(ss, ss[1:])]
    print("%-7s %.3f (%.3f-%.3f)       %s | same source: %s" % (
        w, statistics.median(whole), min(whole), max(whole), ", ".join(pairs), ", ".join(nulls)))
PY
