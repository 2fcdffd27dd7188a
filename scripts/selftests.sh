#!/usr/bin/env bash
# Build the kernel's own KSM selftests, unmodified, static, from the unpacked tree into
# build/selftests/ (static so that they run in the guest whatever its libraries), and the mm
# selftests that make test runs with every process merged (MM_TESTS, tests/vm/mm-merge-any.sh).
# With ARCH=arm64: cross-built into build/selftests-arm64/, with the arm64 guest root's libnuma
# (scripts/root-arm64.sh); an arm64 guest sees them at build/selftests (scripts/vm-guest.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
target

[ -f "$SRC/.rksm-unpacked" ] || die "the kernel tree is not unpacked: run make kernel"
out=$B/selftests
gcc=(gcc)
if [ "$TARGET" = arm64 ]; then
	"$PROJECT/scripts/root-arm64.sh"
	out=$B/selftests-arm64
	gcc=(aarch64-linux-gnu-gcc -idirafter "$B/arm64/root/usr/include"
		-L "$B/arm64/root/usr/lib/aarch64-linux-gnu")
fi
mkdir -p "$out"
cd "$SRC/tools/testing/selftests/mm"
for t in ksm_tests ksm_functional_tests; do
	if [ -x "$out/$t" ] && [ "$out/$t" -nt "$t.c" ] && [ "$out/$t" -nt vm_util.c ]; then
		continue
	fi
	say "build selftest $t"
	"${gcc[@]}" -O2 -static -Wall -I ../../../include/uapi -I ../../../include -I .. -I ../../../.. \
		-o "$out/$t" "$t.c" vm_util.c thp_settings.c -lnuma -lrt -lpthread 2> "$B/logs/selftest-$t.log" ||
		{ cat "$B/logs/selftest-$t.log" >&2; die "cannot build $t"; }
done

# mm selftests, run under PR_SET_MEMORY_MERGE. check_config.sh would write local_config.h; an
# empty one says what is true here: no liburing.
# shellcheck source=../tests/vm/mm-merge-any.sh
. "$PROJECT/tests/vm/mm-merge-any.sh"
mkdir -p "$out/include"
: > "$out/include/local_config.h"
for t in $MM_TESTS; do
	if [ -x "$out/$t" ] && [ "$out/$t" -nt "$t.c" ] && [ "$out/$t" -nt vm_util.c ]; then
		continue
	fi
	say "build selftest $t"
	"${gcc[@]}" -O2 -static -D_GNU_SOURCE -I "$out/include" -include sys/uio.h -include ../kselftest.h \
		-I ../../../include/uapi -I ../../../include -I .. -I ../../../.. \
		-o "$out/$t" "$t.c" vm_util.c thp_settings.c -lnuma -lrt -lpthread -lm \
		2> "$B/logs/selftest-$t.log" || { cat "$B/logs/selftest-$t.log" >&2; die "cannot build $t"; }
done
