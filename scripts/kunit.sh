#!/usr/bin/env bash
# make kunit: rksm's KUnit suites and the kernel crate's doctests through the kernel's own runner,
# tools/testing/kunit/kunit.py, on User-Mode Linux (the kernel as a host process: native speed,
# one CPU), with samples/rust/rksm/.kunitconfig. kunit.py configures and builds the kernel in
# build/obj-kunit, boots it, parses its KTAP and prints its summary; the results go to
# build/test/um/kunit.json and the kernel log to build/test/um/kunit.log, then a table.
#
# The same suites also run at boot of the rksm test kernel under QEMU (make test): there with two
# CPUs, two NUMA nodes, THP and lockdep, which UML lacks (lockdep on 6.12's UML reports an unlock
# imbalance of its own during early boot and turns itself off).
#
# With ARCH=arm64 PAGE=4K|16K|64K, kunit.py runs them on arm64 instead (--arch=arm64: its QEMU
# virt machine under TCG, one CPU), with that page size, built in build/obj-kunit-arm64-16k, ...;
# the results go to build/test/um-arm64-16k, ... (the name says which runner, not which kernel).
#
# KUNIT_FILTER (glob) selects suites. NO_REPORT=1 leaves the table to the caller (make test).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
target

NAME=um$SFX
OUT=$B/test/$NAME
KB=$B/obj-kunit$SFX
ARCH_OPTS=()
if [ "$TARGET" = arm64 ]; then
	ARCH_OPTS=(--arch=arm64 --kconfig_add "CONFIG_ARM64_${PAGE}_PAGES=y")
	unset ARCH
fi
PREPARE=1 "$PROJECT/scripts/kernel.sh"
rm -rf "$OUT"
mkdir -p "$OUT"
say "kunit.py run on ${TARGET/x86_64/UML}${SFX:+ ($PAGE pages)} (build: build/obj-kunit$SFX, log: build/logs/kunit-$NAME.log)"
t0=$SECONDS
set +e
(cd "$SRC" && python3 tools/testing/kunit/kunit.py run --kunitconfig=samples/rust/rksm \
	"${ARCH_OPTS[@]}" \
	--build_dir="$KB" --jobs="$(nproc)" --timeout=900 --json="$OUT/kunit.json" \
	--make_options LLVM=1 --make_options RUSTC=/usr/bin/rustc \
	--make_options RUSTDOC=/usr/bin/rustdoc --make_options RUSTFMT=/usr/bin/rustfmt \
	--make_options BINDGEN="${CARGO_HOME:-$HOME/.cargo}/bin/bindgen" \
	${KUNIT_FILTER:+"$KUNIT_FILTER"}) > "$B/logs/kunit-$NAME.log" 2>&1
rc=$?
set -e
echo $rc > "$OUT/kunit.rc"
cp "$KB/test.log" "$OUT/kunit.log" 2>/dev/null || true
# kunit.py's summary: every suite and case line, the totals.
grep -E '^\[[0-9:]+\] (=+ |\[(PASSED|FAILED|SKIPPED|CRASHED)\]|Testing complete|Elapsed)' \
	"$B/logs/kunit-$NAME.log" | grep -vE '\] \[PASSED\] rust_doctest_' || true
# The project's code builds without warnings here too (see scripts/kernel.sh); kunit.py's UML
# config turns on FORTIFY_SOURCE, whose own compile-time tests print warnings by design.
if grep -nE "$OWN_WARNINGS" "$B/logs/kunit-$NAME.log" | grep -v 'lib/test_fortify/' > "$OUT/warnings"; then
	cat "$OUT/warnings" >&2
	echo "kunit: the UML build printed warnings in the project's code" >&2
	rc=1
	echo 1 > "$OUT/kunit.rc"
fi
say "kunit.py done in $(elapsed $((SECONDS - t0))), status $rc"
[ "${NO_REPORT:-0}" = 1 ] && exit $rc
python3 "$PROJECT/tests/report.py" "$NAME"
