#!/usr/bin/env bash
# Development tool: where a native ksmpages run's time goes. Boots a User-Mode Linux kernel
# (FLAVOR=um) under host `perf record` (F samples a second, default 1999), runs one workload
# (2 x MIB MiB, ksmd at full speed, one thread, every byte verified), and splits the UML kernel
# thread's samples of the timed merge (from the first page read for as long as the run took)
# into page reads, KSM's own code, the kernel crate and its helpers, other kernel code and the
# host kernel (UML's own costs: system calls that change the host's mappings, ptrace,
# switches), each in ms per GiB merged, with its top symbols.
#   KSM=rust MODE=best scripts/dev/um-profile.sh      (KERNEL= another image)
# MODE=cost-chains (or cost-copies, cost-walk): the running cost instead, ksmbench's part cost
# over MIB MiB (default 1024) with PASSES full scans timed (default 60), so that the samples are
# mostly of the steady state.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
KSM=${KSM:-rust}
MODE=${MODE:-worst}
kernel=$(realpath "${KERNEL:-$B/linux-um-$KSM}")
out=$B/um/prof-$KSM-$MODE
mkdir -p "$B/um"
say "perf record of $(basename "$kernel"): $MODE, 2 x ${MIB:-256} MiB"
case $MODE in
cost-*)
	args="--parts cost --cost-shapes ${MODE#cost-} --cost-mib ${MIB:-1024} \
--cost-passes ${PASSES:-60} --sparse-gib 0" ;;
*) args="--mib ${MIB:-256} --procs 2 --modes $MODE --parts ksmpages" ;;
esac
perf record -q -F "${F:-1999}" -o "$out.data" -- env KSM="$KSM" KERNEL="$kernel" UM_RUN="$B/um/prof-run" \
	QUIET=1 CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl $KSM --out $out.jsonl \
--threads 1 --reps 1 $args" \
	"$PROJECT/scripts/um.sh" > /dev/null
perf script -i "$out.data" -F tid,time,ip,sym,dso 2> /dev/null > "$out.script"
python3 - "$out.script" "$(basename "$kernel")" "$out.jsonl" "$MODE" "${F:-1999}" <<'PY' | tee "$out.txt"
import collections, json, re, sys
script, image, results, mode = sys.argv[1:5]
hz = int(sys.argv[5])
line_re = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
samples = []
for line in open(script, errors="replace"):
    m = line_re.match(line)
    if m:
        tid, t, sym, dso = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        samples.append((tid, t, sym.split("+")[0], dso.rsplit("/", 1)[-1]))
own = collections.Counter(s[0] for s in samples if s[3] == image)
main = own.most_common(1)[0][0]
rec = [json.loads(l) for l in open(results)][0]
reads = re.compile(r"xxh64|memcmp|PageBytes.*(checksum|sample|compare)")
if "mib_per_s" in rec:
    # The timed merge: from the first page read (the first pass's first checksum) for as long
    # as the run took to merge, so that neither the workload's start (madvise) nor its end
    # (verify, exit, run=2), which hold KSM code too, count.
    first = min(t for tid, t, sym, dso in samples
                if tid == main and re.search(r"xxh64|PageBytes.*checksum", sym))
    chosen = [s for s in samples if s[0] == main and first <= s[1] <= first + rec["seconds"]]
    ms = 1000 * rec["seconds"] / (rec["mib_merged"] / 1024)
    rate, unit, what = "%.0f MiB/s" % rec["mib_per_s"], "ms/GiB", "the timed merge"
else:
    # The steady state: the 50 ms windows where KSM code ran (most of the run's samples).
    ksm = re.compile(r"rksm|ksm", re.I)
    windows = {int(t / 0.05) for tid, t, sym, dso in samples if tid == main and ksm.search(sym)}
    chosen = [s for s in samples if s[0] == main and int(s[1] / 0.05) in windows]
    ms = 1000 * rec["cpu_s_per_gib_pass"]
    rate, unit, what = "%.4f CPU s/GiB/pass" % rec["cpu_s_per_gib_pass"], "ms/GiB/pass", \
        "windows of KSM code"
own_ksm = re.compile(r"ksm|stable_|unstable_|cmp_and_merge|try_to_merge|chain|rmap_item|"
                     r"write_protect_page|replace_page")
def group_of(sample):
    _, _, sym, dso = sample
    if dso != image:
        return "host kernel"
    if reads.search(sym):
        return "page reads"
    if "rksm" in sym or (not sym.startswith("_R") and own_ksm.search(sym)):
        return "KSM's own code"
    if sym.startswith(("_R", "<", "kernel::", "rust_helper")):
        return "kernel crate, helpers"
    return "other kernel code"
group = collections.Counter()
by_sym = collections.defaultdict(collections.Counter)
for s in chosen:
    g = group_of(s)
    group[g] += 1
    by_sym[g][re.sub(r"^_R\w*?rksm\w*?(\d+)", "", s[2])[:70]] += 1
n = max(len(chosen), 1)
print("%s, %s: %s; %d samples (%.2f s) in %s" % (image, mode, rate, len(chosen),
                                                  len(chosen) / hz, what))
print("  %-22s %7s %12s" % ("group", "samples", unit))
for g, k in group.most_common():
    print("  %-22s %6.1f%% %12.0f" % (g, 100 * k / n, ms * k / n))
    for sym, j in by_sym[g].most_common(6):
        print("      %5.1f%%  %s" % (100 * j / n, sym))
if "mib_per_s" in rec:
    # The same split before the first merge (the first pass: every page read for its checksum)
    # and after it (the merges), by ksmwatch's first sample with pages_sharing above zero.
    t1 = next((t for t, _, _, sharing in rec["trace"] if sharing > 0), rec["seconds"])
    per_gib = 1000 / hz / (rec["mib_merged"] / 1024)
    for name, lo, hi in (("before the first merge", first, first + t1),
                         ("from the first merge on", first + t1, first + rec["seconds"])):
        part = [s for s in chosen if lo <= s[1] < hi]
        print("  %s: %.0f ms, %.0f ms/GiB of samples" % (name, 1000 * (hi - lo),
                                                           len(part) * per_gib))
        for g, k in collections.Counter(map(group_of, part)).most_common():
            print("      %-22s %5.0f" % (g, k * per_gib))
PY
