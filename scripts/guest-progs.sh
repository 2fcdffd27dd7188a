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
# The bare-metal guest of tests/vm/mem_merge.py, with no C library: tests/vm/bare/guest.c, a
# multiboot kernel for i386, or on arm64 tests/vm/bare/guest-arm64.c, an ELF image for QEMU's virt
# machine. QEMU boots it inside the VM of the same architecture.
bare=$PROJECT/tests/vm/bare
if [ "$TARGET" = arm64 ]; then
	guest=(guest-arm64 --target=aarch64-unknown-none-elf -mgeneral-regs-only -mstrict-align)
	emulation=aarch64elf
else
	guest=(guest --target=i386-unknown-none-elf -mno-sse -mno-mmx)
	emulation=elf_i386
fi
src=$bare/${guest[0]}
if ! { [ "$out/nested_bare.elf" -nt "$src.c" ] && [ "$out/nested_bare.elf" -nt "$src.ld" ] &&
	[ "$out/nested_bare.elf" -nt "$bare/bare.h" ]; }; then
	clang "${guest[@]:1}" -ffreestanding -fno-pic -fno-stack-protector -O2 -Wall -Wextra -Werror \
		-c -o "$out/nested_bare.o" "$src.c" &&
		ld.lld -m "$emulation" -T "$src.ld" --build-id=none -o "$out/nested_bare.elf" \
			"$out/nested_bare.o" || die "cannot build $src.c"
	rm -f "$out/nested_bare.o"
fi
# The initramfs of make bench's small Linux guests (its qemu part): nothing but nested_init as
# /init. x86 only: QEMU boots it inside the x86 VM.
if [ "$TARGET" = x86_64 ] && ! [ "$out/nested.cpio" -nt "$out/nested_init" ]; then
	rm -rf "$out/nested"
	mkdir -p "$out/nested"
	cp "$out/nested_init" "$out/nested/init"
	(cd "$out/nested" && echo init | cpio -o -H newc --quiet) > "$out/nested.cpio"
	rm -rf "$out/nested"
fi
