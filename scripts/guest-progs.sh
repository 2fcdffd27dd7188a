#!/usr/bin/env bash
# Build the project's guest-side programs (static) into build/tests/; with ARCH=arm64, cross-built
# into build/tests-arm64/ (an arm64 guest sees them at build/tests: scripts/vm-guest.sh).
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
	[ -x "$exe" ] && [ "$exe" -nt "$src" ] && [ "$exe" -nt "$PROJECT/tests/vm/util.h" ] && continue
	$CC -O2 -static -Wall -Werror -o "$exe" "$src" || die "cannot build $src"
done
# The initramfs of the small QEMU guests that tests boot inside the VM (make bench's qemu part,
# tests/vm/mem_merge.py): nothing but nested_init as /init. x86 only: they boot build/bzImage-c.
if [ "$TARGET" = x86_64 ] && ! [ "$out/nested.cpio" -nt "$out/nested_init" ]; then
	rm -rf "$out/nested"
	mkdir -p "$out/nested"
	cp "$out/nested_init" "$out/nested/init"
	(cd "$out/nested" && echo init | cpio -o -H newc --quiet) > "$out/nested.cpio"
	rm -rf "$out/nested"
fi
