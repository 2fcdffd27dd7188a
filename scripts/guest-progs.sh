#!/usr/bin/env bash
# Build the project's guest-side programs (static) into build/tests/; with ARCH=arm64, cross-built
# into build/tests-arm64/ (an arm64 guest sees them at build/tests: scripts/vm-init.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
target
out=$B/tests
CC=gcc
if [ "$TARGET" = arm64 ]; then
	out=$B/tests-arm64
	CC=aarch64-linux-gnu-gcc
fi
mkdir -p "$out"
for src in "$PROJECT"/tests/vm/*.c; do
	exe=$out/$(basename "$src" .c)
	[ -x "$exe" ] && [ "$exe" -nt "$src" ] && continue
	$CC -O2 -static -Wall -Werror -o "$exe" "$src" || die "cannot build $src"
done
