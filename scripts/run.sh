#!/usr/bin/env bash
# make run: boot the rksm kernel and merge the seed's ksmpages workloads (best: all pages equal;
# worst: equal but the last 8 bytes) in two processes, with progress and a final table.
# MIB (per process, default 256), PROCS (default 2), MODES (default best,worst).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KSM=${KSM:-rust}
KSM=$KSM "$PROJECT/scripts/kernel.sh"
"$PROJECT/scripts/guest-progs.sh"
KSM=$KSM VM_RUN=$B/vm/run CMD="python3 $PROJECT/tests/vm/ksmrun.py --mode ${MODES:-best,worst} \
--procs ${PROCS:-2} --mib ${MIB:-256} --cow" exec "$PROJECT/scripts/vm.sh"
