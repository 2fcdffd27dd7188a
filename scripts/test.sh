#!/usr/bin/env bash
# make test: set up, build both kernels and the guest programs, boot each kernel once and run
# every suite in it (KUnit at boot on the rksm kernel, the kernel's KSM selftests, rksm's
# workloads; before the boots, the kernel crate's misuses that must not compile,
# scripts/compile-fail.sh, and the KUnit suites through kunit.py on User-Mode Linux,
# scripts/kunit.sh), boot the rksm kernel once more with its init left out (ksmrace noinit), then boot the debug kernels (FLAVOR=debug: KASAN, KFENCE, kmemleak, UBSAN, ...)
# for the short fault sweeps (FAULTS_SWEEP, default short; 0 leaves them out), rksm's race
# regressions and a short torture (scripts/torture.sh, TORTURE_SECONDS per run, default 180;
# TORTURE=0 leaves them out; CONTROL=1 runs the sweeps and the torture on C's debug kernel too, as
# make torture does), then print one table per suite and
# `N passed, N failed`. Exits non-zero on any failure. FAULT=panic|warning|selftest injects a
# failure on purpose (tests/vm/guest-tests.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KERNELS=${KERNELS:-c rust}
t0=$SECONDS
"$PROJECT/scripts/setup.sh"
for k in $KERNELS; do KSM=$k "$PROJECT/scripts/kernel.sh"; done
TORTURE=${TORTURE:-1}
# The debug kernels booted: rksm's. C's debug boot is the control that tells a defect of a sweep
# or of the torture from one of rksm's; C's code does not change from one landing to the next, so
# the control runs in make torture, before a landing that changes those tests, or here with
# CONTROL=1. (A defect of C's own, its smart scan keeping pairs apart, can fail it at random:
# Documentation/mm/rksm-measurements.rst, "make test runs", has its cost and CI's failure.)
DEBUG=
for k in $KERNELS; do
	[ "$k" = rust ] || [ "${CONTROL:-0}" = 1 ] && DEBUG="$DEBUG $k"
done
DEBUG=${DEBUG# }
[ -n "$DEBUG" ] || TORTURE=0
if [ "$TORTURE" = 1 ]; then
	for k in $DEBUG; do FLAVOR=debug KSM=$k "$PROJECT/scripts/kernel.sh"; done
fi
"$PROJECT/scripts/selftests.sh"
"$PROJECT/scripts/guest-progs.sh"

rm -rf "$B/test"
# Misuses of the kernel crate that must not compile, against the rksm test kernel's crate (the
# last kernel built in build/obj; with KERNELS="rust c", the C kernel was, so rebuild rksm's).
if [[ " $KERNELS " == *" rust "* ]]; then
	grep -q '^CONFIG_KSM_RUST=y' "$B/obj/.config" || KSM=rust "$PROJECT/scripts/kernel.sh"
	mkdir -p "$B/test/rust/compile_fail"
	set +e
	"$PROJECT/scripts/compile-fail.sh" > "$B/test/rust/compile_fail/compile_fail.out" 2>&1
	echo $? > "$B/test/rust/compile_fail/compile_fail.rc"
	set -e
	# The patch series (make series): git am applies it to a pristine 6.12.117 and it gives the
	# tree these kernels were built from.
	d=$B/test/rust/series
	mkdir -p "$d"
	set +e
	CHECK=1 "$PROJECT/scripts/series.sh" > "$d/git_am.log" 2>&1
	rc=$?
	set -e
	{
		echo "1..1"
		[ $rc = 0 ] || printf 'not '
		echo "ok 1 - make series: git am on a pristine 6.12.117 gives build/linux's tree"
		sed 's/^/# /' "$d/git_am.log"
	} > "$d/git_am.out"
	echo $rc > "$d/git_am.rc"
fi
# The KUnit suites through the kernel's own runner, kunit.py, on User-Mode Linux (make kunit).
if [[ " $KERNELS " == *" rust "* ]]; then
	NO_REPORT=1 "$PROJECT/scripts/kunit.sh" || true
fi
for k in $KERNELS; do
	boot_guest_tests "$k" "$k" "${TEST_TIMEOUT:-2400}" "${FAULT:-}"
done
names=$KERNELS
[[ " $KERNELS " == *" rust "* ]] && names="$names um"
# rksm with its init left out, as if init had failed: asking for KSM must fail cleanly (ENOMEM).
if [[ " $KERNELS " == *" rust "* ]]; then
	out=$B/test/rust-noinit/races
	mkdir -p "$out"
	set +e
	KSM=rust VM_RUN=$B/vm/test-rust-noinit TIMEOUT=600 APPEND="initcall_blacklist=__rksm_init" \
		CMD="$B/tests/ksmrace noinit > $out/noinit.out 2>&1; echo \$? > $out/noinit.rc" \
		"$PROJECT/scripts/vm.sh"
	echo $? > "$B/test/rust-noinit/vm.rc"
	set -e
	names="$names rust-noinit"
fi
if [ "$TORTURE" = 1 ]; then
	# rksm's torture in one run that switches between one and two scanner threads; the race
	# regressions on rksm only (make torture runs them on C too: they pass there).
	KERNELS=$DEBUG DURATION=${TORTURE_SECONDS:-180} THREADS="1,2" RACES=rust MM=0 NO_REPORT=1 \
		BUILT=1 FAULTS_SWEEP=${FAULTS_SWEEP:-short} \
		"$PROJECT/scripts/torture.sh"
	for k in $DEBUG; do names="$names $k-debug"; done
fi
say "tests done in $(elapsed $((SECONDS - t0)))"
# shellcheck disable=SC2086
python3 "$PROJECT/tests/report.py" $names
