#!/usr/bin/env bash
# make torture: the torture (tests/vm/torture.c) and the race regressions (tests/vm/ksmrace.c)
# on the debug kernels (FLAVOR=debug: KASAN, KFENCE, kmemleak, UBSAN, lockdep, Rust debug
# assertions: kernel/config/debug.config), C KSM as the control and rksm with 1 and 2 scanner
# threads; one table per kernel and `N passed, N failed`. Exits non-zero on any failure, or any
# splat or leak in a kernel log. Results go to build/test/$KSM-debug.
#
# Environment: DURATION (seconds per torture run, default 1800), THREADS (rksm's scanner thread
# counts, one torture run per word, default "1 2"; "1,2" is one run that switches between them),
# KERNELS (default "c rust"), RACES (the kernels that also run the race regressions, default all
# of KERNELS), MM=0 (leave out the kernel's mm selftests run with every process merged,
# tests/vm/mm-merge-any.sh), NO_REPORT=1 (leave the verdict to the caller: make test runs a short
# torture this way and reports it with its other suites), BUILT=1 (the debug kernels are built
# already), FAULTS=1 (the scanner threads' allocations fail at random, FAULT_PERCENT percent of
# them, default 1, during each torture),
# FAULTS_SWEEP=1 (the fault sweeps first, tests/vm/ksmfail.c, every N, with 1 and 2 scanner
# threads on rksm; FAULTS_SWEEP=short: the short sweeps make test runs). ARCH=arm64 PAGE=4K|16K|64K
# runs it on arm64's debug kernels of that page size (results in build/test/$KSM-debug-arm64-16k,
# ...; the root and the cross-built programs as make test-arm64 has them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
target

KERNELS=${KERNELS:-c rust}
DURATION=${DURATION:-1800}
THREADS=${THREADS:-1 2}
RACES=${RACES:-$KERNELS}
t0=$SECONDS
"$PROJECT/scripts/setup.sh"
# make test built the debug kernels before its other boots (BUILT=1): building them again here
# switched the debug object directory's configuration twice more for nothing (2 min 17 s).
if [ "${BUILT:-0}" != 1 ]; then
	for k in $KERNELS; do FLAVOR=debug KSM=$k "$PROJECT/scripts/kernel.sh"; done
fi
"$PROJECT/scripts/guest-progs.sh"
"$PROJECT/scripts/selftests.sh"
names=()
for k in $KERNELS; do
	th=1
	[ "$k" = rust ] && th=$THREADS
	n=$(echo "$th" | wc -w)
	races=0
	[[ " $RACES " == *" $k "* ]] && races=1
	# Results as those of kernel "$k-debug$SFX" (build/test/$k-debug, build/vm/test-$k-debug).
	name=$k-debug$SFX
	rm -rf "$B/test/$name"
	mkdir -p "$B/test/$name"
	set +e
	# ZONE_MOVABLE on the top 256 MiB of each node (kernelcore=: 768 MiB of each node's 1 GiB
	# for the kernel; node 1's movable zone then begins on a 128 MiB memory block), so that
	# ksmrace's offline scenario can offline blocks that hold KSM pages.
	# A failed allocation's warning is expected where allocations are made to fail.
	# rksm also runs the torture under merge_scope mm and memcg, half as long each (and a
	# 20 s control), after its own runs.
	afo=0 sweep_t=0 scope_t=0
	[ "$k" = rust ] && scope_t=$((DURATION + 2100))
	case "${FAULTS_SWEEP:-0}" in 1) sweep_t=7200 ;; short) sweep_t=1800 ;; esac
	[ "${FAULTS:-0}" = 1 ] || [ "$sweep_t" != 0 ] && afo=1
	ALLOC_FAILURES_OK=$afo KSM=$k KERNEL=$B/$IMAGE-debug-$k$SFX VM_RUN=$B/vm/test-$name \
		TIMEOUT=$(((DURATION + 900) * n + 900 + ${MM:-1} * 2700 + sweep_t + scope_t)) \
		APPEND="kernelcore=1536M" \
		CMD="RACES=$races MM=${MM:-1} FAULTS=${FAULTS:-0} FAULT_PERCENT=${FAULT_PERCENT:-1} FAULTS_SWEEP=${FAULTS_SWEEP:-0} sh $PROJECT/tests/vm/torture-guest.sh $name $DURATION $th" \
		"$PROJECT/scripts/vm.sh"
	echo $? > "$B/test/$name/vm.rc"
	set -e
	names+=("$name")
done
say "torture done in $(elapsed $((SECONDS - t0)))"
[ "${NO_REPORT:-0}" = 1 ] && exit 0
python3 "$PROJECT/tests/report.py" "${names[@]}"
