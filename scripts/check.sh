#!/usr/bin/env bash
# make check: the project's own files through the kernel's style tools: rustfmt (with the
# kernel's .rustfmt.toml) on every Rust file, checkpatch.pl on every patch (kernel/patches and
# kernel/upstream) and every C file, and the width of Rust comments, which rustfmt leaves alone.
# Exits non-zero on any complaint. FIX=1 (make fmt) rewrites the Rust files instead of checking.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ -f "$SRC/.rksm-unpacked" ] || die "the kernel tree is not unpacked: run make kernel"
cd "$PROJECT"
bad=0

# rustfmt follows symlinks to the real files, where the rksm crate's `mod kunit;` (tests/kunit,
# linked into the tree as samples/rust/rksm/kunit) would not resolve: the crate is checked in a
# dereferenced copy of its tree directory, and every other file in place.
fmt=(/usr/bin/rustfmt --edition 2021 --config-path "$SRC/.rustfmt.toml")
[ "${FIX:-0}" = 1 ] || fmt+=(--check)
mapfile -t rs < <(find rust -name '*.rs' | sort)
say "rustfmt${FIX:+ (fix)}: ${#rs[@]} files in rust/, and the rksm crate with tests/kunit"
"${fmt[@]}" "${rs[@]}" || bad=1
rm -rf "$B/fmt" && mkdir -p "$B/fmt" && cp -rL "$SRC/samples/rust/rksm" "$B/fmt/rksm"
(cd "$B/fmt/rksm" && "${fmt[@]}" rksm.rs) || bad=1
if [ "${FIX:-0}" = 1 ]; then
	# Copy the formatted crate back: kunit/ is tests/kunit, the rest samples/rust/rksm.
	for f in $(cd "$B/fmt/rksm" && find . -name '*.rs'); do
		case $f in
		./kunit/*) dst=tests/kunit/${f#./kunit/} ;;
		*) dst=samples/rust/rksm/${f#./} ;;
		esac
		cmp -s "$B/fmt/rksm/$f" "$dst" || cp "$B/fmt/rksm/$f" "$dst"
	done
	say "formatted"
	exit 0
fi

# checkpatch reads patches on stdin: given a path that git tracks, it would check the patch file
# as if it were source.
cp_args=(--no-tree --quiet --show-types --ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG)
for p in kernel/patches/*.patch; do
	say "checkpatch $p"
	extra=()
	# ARCH_HAS_PREFETCH is include/linux/prefetch.h's interface, which every architecture with a
	# prefetch() of its own defines (x86's processor.h too); checkpatch.pl's rule is against new
	# ARCH_HAS_ symbols (make series says so in the cover letter).
	case $p in *-um-x86-prefetch-*) extra=(--ignore DEFINE_ARCH_HAS) ;; esac
	"$SRC/scripts/checkpatch.pl" "${cp_args[@]}" "${extra[@]}" --strict - < "$p" || bad=1
done
for p in kernel/upstream/*.patch; do
	[ -e "$p" ] || continue
	say "checkpatch $p"
	# Its Fixes: tag names an upstream commit, which this repository's history cannot know.
	"$SRC/scripts/checkpatch.pl" "${cp_args[@]}" --ignore UNKNOWN_COMMIT_ID --strict - < "$p" ||
		bad=1
done
for c in rust/helpers/*.c; do
	say "checkpatch -f $c"
	"$SRC/scripts/checkpatch.pl" "${cp_args[@]}" --strict -f "$c" || bad=1
done
# Userspace test programs: kernel style, but with libc's types and the volatile sig_atomic_t
# that C requires of what a signal handler writes.
for c in tests/vm/*.c tests/vm/*.h; do
	say "checkpatch -f $c"
	"$SRC/scripts/checkpatch.pl" "${cp_args[@]}" --ignore PREFER_KERNEL_TYPES,VOLATILE -f "$c" || bad=1
done
# The bare-metal guests of mem_merge.py: no kernel headers (they define __packed and the like
# themselves), the x86 one's asm outb and inb are not function names, and its interrupt stub is
# declared for C from the asm that defines it.
for c in tests/vm/bare/*.c tests/vm/bare/*.h; do
	say "checkpatch -f $c"
	"$SRC/scripts/checkpatch.pl" "${cp_args[@]}" --ignore PREFER_KERNEL_TYPES,VOLATILE \
		--ignore PREFER_DEFINED_ATTRIBUTE_MACRO,EMBEDDED_FUNCTION_NAME,AVOID_EXTERNS -f "$c" ||
		bad=1
done
# rustfmt leaves comments as written, and checkpatch.pl --strict (make series) refuses a comment
# line over 100 columns.
say "Rust comments over 100 columns"
long=$(find rust samples tests/kunit -name '*.rs' -print0 | xargs -0 awk '
	{ l = $0; gsub(/\t/, "        ", l) }
	l ~ /^ *\/\// && length(l) > 100 { print FILENAME ":" FNR }')
[ -z "$long" ] || { echo "$long" >&2; bad=1; }
[ $bad = 0 ] || die "style check failed"
say "style: clean"
