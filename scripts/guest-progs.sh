#!/usr/bin/env bash
# Build the project's guest-side programs (static) into build/tests/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mkdir -p "$B/tests"
for src in "$PROJECT"/tests/vm/*.c; do
	exe=$B/tests/$(basename "$src" .c)
	[ -x "$exe" ] && [ "$exe" -nt "$src" ] && continue
	gcc -O2 -static -Wall -Werror -o "$exe" "$src" || die "cannot build $src"
done
