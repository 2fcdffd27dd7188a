#!/usr/bin/env bash
# make test-arm64: make test's suites on arm64 (QEMU's virt machine under TCG, two NUMA nodes),
# for each page size of PAGES (default "4K 16K 64K"): C KSM's kernel and rksm's of that page size
# in the same run, each booted once with tests/vm/guest-tests.sh (the kernel's KSM selftests
# unmodified, the sysfs ABI against C's, rksm's workloads with every byte checked, the life cycle;
# KUnit at boot on rksm's), then one table per suite and `N passed, N failed`. Results go to
# build/test/$KSM-arm64-16k, ... Exits non-zero on any failure.
#
# The root is Debian's arm64 one (scripts/root-arm64.sh); the selftests and the test programs are
# cross-built (scripts/selftests.sh, scripts/guest-progs.sh with ARCH=arm64).
#
# Environment: PAGES, KERNELS (default "c rust"), TEST_TIMEOUT (seconds per boot, default 5400).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PAGES=${PAGES:-4K 16K 64K}
KERNELS=${KERNELS:-c rust}
export ARCH=arm64
t0=$SECONDS
"$PROJECT/scripts/setup.sh"
"$PROJECT/scripts/root-arm64.sh"
PREPARE=1 "$PROJECT/scripts/kernel.sh"
"$PROJECT/scripts/selftests.sh"
"$PROJECT/scripts/guest-progs.sh"

names=()
for page in $PAGES; do
	export PAGE=$page
	target
	for k in $KERNELS; do
		name=$k$SFX
		KSM=$k "$PROJECT/scripts/kernel.sh"
		rm -rf "$B/test/$name"
		boot_guest_tests "$name" "$k" "${TEST_TIMEOUT:-5400}"
		names+=("$name")
	done
done
say "arm64 tests done in $(elapsed $((SECONDS - t0)))"
python3 "$PROJECT/tests/report.py" "${names[@]}"
