#!/usr/bin/env bash
# make bench: C KSM and rksm side by side. Builds both kernels, boots each with the same VM
# settings (scripts/vm.sh: 2 vCPUs, 2 GiB, two NUMA nodes) and runs tests/vm/ksmbench.py in it:
# ksmpages best/worst/prefix, ksm_tests -P/-H and two then three QEMU guests, REPS times each.
# Then tests/bench_report.py writes build/bench/results.json, prints the rksm/C ratio table
# (medians) and draws build/bench/memfree.png.
# Then the native part: the same ksmpages workloads on User-Mode Linux kernels (FLAVOR=um of
# scripts/kernel.sh, booted by scripts/um.sh: the kernel as a host process, no emulator, one
# CPU so one scanner thread), NATIVE_REPS boots each (default 5), taking turns, every byte
# verified; bench_report.py --native prints their table beside the TCG one and writes
# build/bench/results-native.json.
# The running cost (PARTS=cost, tests/vm/ksmbench.py's cost-chains, cost-copies, cost-walk, sparse):
# once merging settled, CPU per GiB per full scan and the scanner's mmap lock holds (COST_MIB,
# default 256), and a sparse area's scan and unmerges (tests/vm/sparse.c: SPARSE_GIB, default
# 1024, on rksm; C_SPARSE_GIB, default 64, on C, whose unmerge visits every address: minutes a
# terabyte under TCG); natively too (NATIVE_COST_MIB, default 1024; NATIVE_SPARSE_GIB, 16 on
# both; NATIVE_COST_PASSES full scans timed, default 10: UML counts CPU time in ticks), where
# there are no trace events for the lock holds. bench_report.py prints them.
# REPS (default 3), MIB per process (default 256), PROCS (2), MODES (best,worst,prefix),
# PARTS (ksmpages,selftests,qemu,cost,native), THREADS (scanner threads to try on rksm, default
# "1,2"); TCG=0 leaves out every run under TCG (PARTS=cost TCG=0: the running cost natively only).
# The kernels timed are built with FLAVOR=bench (the test config without lockdep and the other
# costly debugging checks, kernel/config/bench.config); FLAVOR=test times the test kernels.
# ARCH=arm64 PAGE=4K|16K|64K: the arm64 kernels of that page size under TCG (an emulator's
# figures: TCG translates arm64 to x86 code, so they say how the two kernels compare there, not
# what arm64 hardware gives). Their default PARTS is ksmpages,selftests,cost (the cost under TCG
# only): the QEMU guests' part would nest a second emulated arm64 machine in the first, and the
# native part is User-Mode Linux, which exists for x86 only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
target

t0=$SECONDS
FLAVOR=${FLAVOR:-bench}
case $FLAVOR in bench) img=$IMAGE-bench ;; test) img=$IMAGE ;; *) die "FLAVOR: bench or test" ;; esac
EXTRA_PKGS=python3-matplotlib "$PROJECT/scripts/setup.sh"
if [ "$TARGET" = arm64 ]; then
	parts=${PARTS:-ksmpages,selftests,cost}
	for p in qemu native; do
		echo ",$parts," | grep -q ",$p," && die "PARTS=$p runs on x86_64 only (see the top of this script)"
	done
else
	parts=${PARTS:-ksmpages,selftests,qemu,cost,native}
fi
has_part() { echo "$parts" | tr ',' '\n' | grep -qx "$1"; }
tcg=${TCG:-1}
if [ "$parts" != native ] && [ "$tcg" != 0 ]; then
	for k in c rust; do FLAVOR=$FLAVOR KSM=$k "$PROJECT/scripts/kernel.sh"; done
fi
"$PROJECT/scripts/selftests.sh"
"$PROJECT/scripts/guest-progs.sh"

# The QEMU guests' initramfs is build/tests/nested.cpio (scripts/guest-progs.sh).

mkdir -p "$B/bench"
rm -f "$B"/bench/raw-*.jsonl
rm -rf "$B"/vm/bench-*
# The host's speed drifts by tens of percent within minutes (TCG on a shared machine): the
# kernels take turns, one boot per repetition each, so that each C run has an rksm run next
# to it in time; the report takes the ratio of each such pair. The QEMU guests take minutes to
# boot: one boot per kernel runs all their repetitions.
REPS=${REPS:-3}
threads_rust=${THREADS:-1,2}
run_bench() { # kernel, run directory, output, ksmbench arguments...
	local k=$1 run=$2 out=$3 threads=1 sparse=${SPARSE_GIB:-1024}
	shift 3
	[ "$k" = rust ] && threads=$threads_rust
	[ "$k" = c ] && sparse=${C_SPARSE_GIB:-64}
	KSM=$k KERNEL=$B/$img-$k$SFX VM_RUN=$B/vm/$run TIMEOUT=${BENCH_TIMEOUT:-7200} \
		CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl $k --out $B/bench/$out \
--mib ${MIB:-256} --procs ${PROCS:-2} --modes ${MODES:-best,worst,prefix} --threads $threads \
--cost-mib ${COST_MIB:-256} --sparse-gib $sparse $*" \
		"$PROJECT/scripts/vm.sh" || die "the benchmark failed on the $k kernel (build/vm/$run/)"
}
near=$(echo "$parts" | tr ',' '\n' | { grep -vE '^(qemu|native)$' || true; } | paste -sd, -)
[ "$tcg" = 0 ] && near=
if [ -n "$near" ]; then
	for rep in $(seq "$REPS"); do
		for k in c rust; do
			say "bench, repetition $rep of $REPS, on the $k kernel ($near)"
			run_bench $k bench-$k-$rep raw-$k-$rep.jsonl --reps 1 --first-rep $((rep - 1)) \
				--parts "$near"
		done
	done
fi
if [ "$tcg" != 0 ] && echo "$parts" | tr ',' '\n' | grep -qx qemu; then
	for k in c rust; do
		say "bench on the $k kernel (QEMU guests, $REPS repetitions)"
		run_bench $k bench-$k-qemu raw-$k-qemu.jsonl --reps "$REPS" --parts qemu
	done
fi
# Natively: the ksmpages workloads with PARTS native, the running cost with PARTS cost; on
# x86_64 only (User-Mode Linux), so arm64's running cost is measured under TCG alone.
native_parts=
if [ "$TARGET" = x86_64 ]; then
	native_parts=$(for p in native cost; do if has_part $p; then echo $p; fi; done | sed 's/^native$/ksmpages/' | paste -sd, -)
fi
native=0
[ -n "$native_parts" ] && native=1
if [ $native = 1 ]; then
	rm -f "$B"/bench/raw-um-*.jsonl
	rm -rf "$B"/um/bench-*
	for rep in $(seq "${NATIVE_REPS:-5}"); do
		for k in c rust; do
			FLAVOR=um KSM=$k "$PROJECT/scripts/kernel.sh"
			say "native bench (User-Mode Linux), repetition $rep of ${NATIVE_REPS:-5}, $k"
			KSM=$k UM_RUN=$B/um/bench-$k-$rep QUIET=1 TIMEOUT=${BENCH_TIMEOUT:-7200} \
				CMD="python3 $PROJECT/tests/vm/ksmbench.py --impl $k \
--out $B/bench/raw-um-$k-$rep.jsonl --mib ${MIB:-256} --procs ${PROCS:-2} \
--modes ${MODES:-best,worst,prefix} --threads 1 --reps 1 --first-rep $((rep - 1)) \
--parts $native_parts --cost-mib ${NATIVE_COST_MIB:-1024} --cost-passes ${NATIVE_COST_PASSES:-10} \
--sparse-gib ${NATIVE_SPARSE_GIB:-16}" \
				"$PROJECT/scripts/um.sh" || die "the native benchmark failed on the $k kernel (build/um/bench-$k-$rep/)"
			cat "$B/um/bench-$k-$rep/output.log"
		done
	done
	# Lookups alone, at native memory speed: KUnit rksm_lookup and rksm_lookup_large on the
	# native rksm kernel.
	has_part native && for rep in 1 2 3; do
		say "native lookups (KUnit rksm_lookup), boot $rep of 3"
		KSM=rust UM_RUN=$B/um/bench-lookups-$rep QUIET=1 CMD=true \
			APPEND="kunit.enable=1 kunit.filter_glob=rksm_lookup*" "$PROJECT/scripts/um.sh" ||
			die "the lookup benchmark failed (build/um/bench-lookups-$rep/)"
	done
fi
rc=0
native_raw=()
if [ $native = 1 ]; then
	for k in c rust; do
		cat "$B"/bench/raw-um-$k-*.jsonl > "$B/bench/raw-um-$k.jsonl"
		native_raw+=("$B/bench/raw-um-$k.jsonl")
	done
fi
if ls "$B"/bench/raw-c-*.jsonl > /dev/null 2>&1; then
	for k in c rust; do
		cat "$B"/bench/raw-$k-*.jsonl > "$B/bench/raw-$k.jsonl"
	done
	# Debian's python has matplotlib (a pyenv python on PATH may not).
	accel=$(cat "$B/vm/accel" 2> /dev/null || echo tcg)
	[ "$TARGET" = arm64 ] && accel=tcg
	/usr/bin/python3 "$PROJECT/tests/bench_report.py" --accel "$accel" --config "$FLAVOR" --machine "$TARGET $PAGE" \
		"$B/bench/raw-c.jsonl" "$B/bench/raw-rust.jsonl" ${native_raw[@]+--native-raw "${native_raw[@]}"} || rc=1
fi
if [ $native = 1 ]; then
	echo
	echo "Native (User-Mode Linux, 1 CPU; the kernel runs as a host process):"
	/usr/bin/python3 "$PROJECT/tests/bench_report.py" --native \
		"$B/bench/raw-um-c.jsonl" "$B/bench/raw-um-rust.jsonl" || rc=1
	if has_part native; then
		echo
		echo "Native lookups (KUnit rksm_lookup, User-Mode Linux): C KSM's order against rksm's:"
		/usr/bin/python3 "$PROJECT/tests/bench_report.py" --lookups \
			"$B"/um/bench-lookups-*/console.log || rc=1
	fi
fi
say "bench done in $(elapsed $((SECONDS - t0)))"
exit $rc
