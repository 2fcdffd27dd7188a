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
# The bare-metal guest of tests/vm/mem_merge.py (tests/vm/bare/guest.c, a multiboot kernel for
# i386 with no C library), and the initramfs of make bench's small Linux guests (its qemu part):
# nothing but nested_init as /init. x86 only: QEMU boots both inside the x86 VM.
bare=$PROJECT/tests/vm/bare
if [ "$TARGET" = x86_64 ] && ! { [ "$out/nested_bare.elf" -nt "$bare/guest.c" ] &&
	[ "$out/nested_bare.elf" -nt "$bare/guest.ld" ]; }; then
	clang --target=i386-unknown-none-elf -ffreestanding -fno-pic -fno-stack-protector \
		-mno-sse -mno-mmx -O2 -Wall -Wextra -Werror -c -o "$out/nested_bare.o" "$bare/guest.c" &&
		ld.lld -m elf_i386 -T "$bare/guest.ld" --build-id=none -o "$out/nested_bare.elf" \
			"$out/nested_bare.o" || die "cannot build $bare/guest.c"
	rm -f "$out/nested_bare.o"
fi
if [ "$TARGET" = x86_64 ] && ! [ "$out/nested.cpio" -nt "$out/nested_init" ]; then
	rm -rf "$out/nested"
	mkdir -p "$out/nested"
	cp "$out/nested_init" "$out/nested/init"
	(cd "$out/nested" && echo init | cpio -o -H newc --quiet) > "$out/nested.cpio"
	rm -rf "$out/nested"
fi
