#!/usr/bin/env bash
# Development tool: where a native ksmpages run's time goes. Boots a User-Mode Linux kernel
# (FLAVOR=um) under host `perf record` (1999 Hz), runs one workload (2 x MIB MiB, ksmd at full
# speed, one thread, every byte verified), and prints the UML kernel thread's samples in the
# 50 ms windows where KSM code ran: symbols, and the host kernel's share (UML's own costs:
# system calls that change the host's mappings, ptrace, switches).
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
perf record -q -F 1999 -o "$out.data" -- env KSM="$KSM" KERNEL="$kernel" UM_RUN="$B/um/prof-run" \
	QUIET=1 CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl $KSM --out $out.jsonl \
--threads 1 --reps 1 $args" \
	"$PROJECT/scripts/um.sh" > /dev/null
perf script -i "$out.data" -F tid,time,ip,sym,dso 2> /dev/null > "$out.script"
python3 - "$out.script" "$(basename "$kernel")" "$out.jsonl" "$MODE" <<'PY' | tee "$out.txt"
import collections, json, re, sys
script, image, results, mode = sys.argv[1:]
line_re = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
samples = []
for line in open(script, errors="replace"):
    m = line_re.match(line)
    if m:
        tid, t, sym, dso = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        samples.append((tid, t, sym.split("+")[0], dso.rsplit("/", 1)[-1]))
own = collections.Counter(s[0] for s in samples if s[3] == image)
main = own.most_common(1)[0][0]
ksm = re.compile(r"rksm|ksm", re.I)
windows = {int(t / 0.05) for tid, t, sym, dso in samples if tid == main and ksm.search(sym)}
chosen = [s for s in samples if s[0] == main and int(s[1] / 0.05) in windows]
by_sym = collections.Counter()
host = 0
for tid, t, sym, dso in chosen:
    if dso == image:
        by_sym[re.sub(r"^_R\w*?rksm\w*?(\d+)", "", sym)[:70]] += 1
    else:
        host += 1
n = len(chosen)
rec = [json.loads(l) for l in open(results)][0]
rate = ("%.0f MiB/s" % rec["mib_per_s"] if "mib_per_s" in rec
        else "%.4f CPU s/GiB/pass" % rec["cpu_s_per_gib_pass"])
print("%s, %s: %s; sampled %.2f s in %d windows; host kernel %.1f%%"
      % (image, mode, rate, n / 1999, len(windows),
         100 * host / max(n, 1)))
for sym, k in by_sym.most_common(25):
    print("  %5.1f%%  %s" % (100 * k / n, sym))
PY
