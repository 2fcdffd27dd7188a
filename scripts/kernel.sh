#!/usr/bin/env bash
# make kernel KSM=rust|c: unpack the kernel once, add rksm's files and patches, configure, build with
# ccache, and leave build/bzImage-$KSM. Both kernels share one tree, one output directory and one
# config but for the KSM implementation choice, so switching is an incremental rebuild.
#
# FLAVOR=bench builds the kernels that make bench times instead: the same config without the
# debugging options the tests want (lockdep, DEBUG_VM, KUnit; kernel/config/bench.config), in
# build/obj-bench, leaving build/bzImage-bench-$KSM.
#
# FLAVOR=um builds the native kernels of make bench: User-Mode Linux (ARCH=um, a kernel that runs
# as a host process, one CPU) from the same tree, on kernel/config/um.config, in build/obj-um,
# leaving build/linux-um-$KSM (scripts/um.sh boots it).
#
# PREPARE=1 only unpacks the tree, applies the patches and links the project's files (what
# kunit.py, which configures and builds on its own, needs first).
#
# FLAVOR=debug builds the test kernels with the memory-safety checkers on (KASAN, KFENCE, kmemleak,
# UBSAN, Rust debug assertions; kernel/config/debug.config), in build/obj-debug, leaving
# build/bzImage-debug-$KSM: what the race regressions and the torture run on.
#
# ARCH=arm64 PAGE=4K|16K|64K builds any of the QEMU flavours for arm64 (QEMU's virt machine,
# kernel/config/arch-arm64.config) with that page size instead, in their own output directories
# (build/obj-arm64-16k, build/obj-debug-arm64-16k, ...), leaving build/Image-$KSM-arm64-16k,
# build/Image-debug-$KSM-arm64-16k, ... The source tree is the same one. Without ARCH, the host's
# x86_64 (kernel/config/arch-x86_64.config), as before.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KSM=${KSM:-rust}
case $KSM in rust|c) ;; *) die "KSM must be rust or c, not '$KSM'" ;; esac
FLAVOR=${FLAVOR:-test}
# The target (lib.sh's target()); kbuild's ARCH stays unset for x86_64, as it always was.
if [ "$FLAVOR" = um ]; then
	case ${ARCH:-um} in
	um|x86|x86_64) ;;
	*) die "FLAVOR=um is x86_64's native kernel, not one for ARCH=$ARCH" ;;
	esac
	unset ARCH
fi
target
if [ "$TARGET" = arm64 ]; then export ARCH=arm64; else unset ARCH; fi
case $FLAVOR in
test) NAME=$KSM$SFX; OBJ=$B/obj$SFX ;;
bench) NAME=bench-$KSM$SFX; OBJ=$B/obj-bench$SFX ;;
debug) NAME=debug-$KSM$SFX; OBJ=$B/obj-debug$SFX ;;
um) NAME=um-$KSM; OBJ=$B/obj-um; TARGET=um; export ARCH=um ;;
*) die "FLAVOR must be test, bench, debug or um, not '$FLAVOR'" ;;
esac

# The alignment of loops, in bytes, that a kernel is built with (see build()): 64 for the
# kernels that make bench times (bench, and um: the native ones), the compilers' default
# elsewhere; LOOP_ALIGN sets it for any flavour (1: the default).
loop_align() {
	local a=${LOOP_ALIGN:-}
	[ -z "$a" ] && { [ "$FLAVOR" = bench ] || [ "$FLAVOR" = um ]; } && a=64
	echo "${a:-1}"
}

inputs_hash() {
	{
		stat -c '%n %s %Y' "$TARBALL"
		echo "$KSM $FLAVOR ${CLIPPY:-0} $(loop_align)"
		[ "$TARGET" = arm64 ] && echo "$TARGET $PAGE"
		cd "$PROJECT"
		tree_map | while read -r p _; do sha256sum "$p"; done
		sha256sum kernel/config/* kernel/patches/* scripts/kernel.sh scripts/lib.sh
	} | sha256sum | cut -d' ' -f1
}

unpack() {
	[ -f "$SRC/.rksm-unpacked" ] && return
	say "unpacking $(basename "$TARBALL") into build/linux"
	rm -rf "$SRC" "$B/linux.tmp"
	mkdir -p "$B/linux.tmp"
	tar -xf "$TARBALL" -C "$B/linux.tmp"
	mv "$B/linux.tmp/linux-source-$KVER" "$SRC"
	rmdir "$B/linux.tmp"
	touch "$SRC/.rksm-unpacked"
}

# Symlink the project's files into the tree; drop links whose target is gone.
link_files() {
	find "$SRC" -xdev -type l -lname "$PROJECT/*" ! -exec test -e {} \; -delete 2>/dev/null || true
	tree_map | while read -r p t; do
		mkdir -p "$(dirname "$SRC/$t")"
		if [ -e "$SRC/$t" ] && ! [ -L "$SRC/$t" ]; then
			die "$p would overwrite the kernel's own $t: the project must not replace kernel files"
		fi
		ln -sfn "$PROJECT/$p" "$SRC/$t"
	done
}

# Apply kernel/patches/ idempotently: the series applied last is kept in the tree, and reverted
# (newest first) when the series changes.
apply_patches() {
	local applied=$SRC/.rksm-patches want have p
	want=$({ cat "$PROJECT"/kernel/patches/*.patch 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)
	have=$({ cat "$applied"/*.patch 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)
	[ "$want" = "$have" ] && return
	if [ -d "$applied" ]; then
		for p in $(ls -r "$applied"/*.patch 2>/dev/null); do
			patch -s -p1 -R -d "$SRC" < "$p" || die "cannot revert $(basename "$p")"
		done
	fi
	rm -rf "$applied"
	mkdir -p "$applied"
	for p in "$PROJECT"/kernel/patches/*.patch; do
		[ -e "$p" ] || continue
		say "patch $(basename "$p")"
		patch -s -p1 --no-backup-if-mismatch -d "$SRC" < "$p" || die "$(basename "$p") does not apply"
		cp "$p" "$applied/"
	done
}

configure() {
	local frags=("$PROJECT/kernel/config/base.config" "$PROJECT/kernel/config/arch-$TARGET.config"
		"$PROJECT/kernel/config/ksm-$KSM.config")
	[ "$FLAVOR" = um ] && frags=("$PROJECT/kernel/config/um.config" "$PROJECT/kernel/config/ksm-$KSM.config")
	if [ "$TARGET" = arm64 ]; then
		mkdir -p "$OBJ"
		echo "CONFIG_ARM64_${PAGE}_PAGES=y" > "$OBJ/page.config"
		frags+=("$OBJ/page.config")
	fi
	[ "$FLAVOR" = bench ] && frags+=("$PROJECT/kernel/config/bench.config")
	[ "$FLAVOR" = debug ] && frags+=("$PROJECT/kernel/config/debug.config")
	local key
	key=$({ cat "${frags[@]}" "$SRC/.rksm-patches"/*.patch 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)
	[ -f "$OBJ/.config" ] && [ "$(cat "$OBJ/.rksm-config" 2>/dev/null)" = "$key" ] && return
	say "configure: tinyconfig + $(printf '%s ' "${frags[@]}" | sed "s|$PROJECT/||g")"
	mkdir -p "$OBJ"
	kmake -s tinyconfig >/dev/null
	(cd "$SRC" && scripts/kconfig/merge_config.sh -m -O "$OBJ" "$OBJ/.config" "${frags[@]}") \
		> "$B/logs/config-$NAME.log"
	kmake -s olddefconfig >> "$B/logs/config-$NAME.log" 2>&1
	# Every option the fragments ask for (the last word on each) must have survived olddefconfig.
	local bad=0 line sym
	while read -r line; do
		case $line in
		CONFIG_*=*)
			grep -qxF "$line" "$OBJ/.config" || { echo "config: wanted $line, got: $(grep "^${line%%=*}=" "$OBJ/.config" || echo 'not set')" >&2; bad=1; } ;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }; sym=${sym%% *}
			! grep -q "^$sym=" "$OBJ/.config" || { echo "config: wanted $sym unset" >&2; bad=1; } ;;
		esac
	done < <(cat "${frags[@]}" | sed -n 's/^\(# \)\?\(CONFIG_[A-Za-z0-9_]*\)[= ].*/\2 &/p' |
		awk '{ last[$1] = substr($0, length($1) + 2) } END { for (s in last) print last[s] }')
	[ $bad = 0 ] || die "the kernel config lacks options the fragments ask for (see above)"
	echo "$key" > "$OBJ/.rksm-config"
}

build() {
	local log=$B/logs/kernel-$NAME.log steps=0 total last="" t0=$SECONDS next=0 line
	# A full build's step count, shown as the total when the tree builds from nothing.
	total=0
	[ -f "$OBJ/vmlinux" ] || total=$(cat "$OBJ/.rksm-steps" 2>/dev/null || echo 2070)
	say "build KSM=$KSM FLAVOR=$FLAVOR${SFX:+ ARCH=$ARCH PAGE=$PAGE} (log: build/logs/kernel-$NAME.log)"
	set +e
	# The bench kernels align every loop, C and Rust alike, to 64 bytes. Under TCG, code that
	# straddles a 4 KiB page cannot chain its translation blocks, and a hot loop that does runs
	# about half as fast (measured: rksm's page checksum loop, 1.5 us against 2.9 us per page
	# depending on where the link put it); the kernel's default alignment of loops (1 byte)
	# would make each kernel's speed depend on where its hot loops happen to fall. The native
	# (um) kernels do the same: there it left rksm's speed as it was and made C KSM's worst case
	# faster (Documentation/mm/rksm-measurements.rst, "Loop alignment, natively").
	local align=() target=$IMAGE image=arch/x86/boot/bzImage out=$IMAGE-$NAME
	[ "$TARGET" = arm64 ] && image=arch/arm64/boot/Image
	local a
	a=$(loop_align)
	[ "$a" != 1 ] && align=(KCFLAGS=-falign-loops=$a KRUSTFLAGS=-Cllvm-args=-align-loops=$a)
	[ "$FLAVOR" = um ] && target=linux image=linux out=linux-$NAME
	kmake -j"$(nproc)" ${CLIPPY:+CLIPPY=1} "${align[@]}" $target > "$log" 2>&1 &
	local pid=$!
	while IFS= read -r line; do
		case $line in
		"  "[A-Z]*) steps=$((steps + 1)); last=${line#"  "} ;;
		esac
		if [ $SECONDS -ge $next ]; then
			if [ "$total" -gt 0 ]; then
				printf '  [KSM=%s] %5d/%d steps  %s  %s\n' "$KSM" $steps "$total" "$(elapsed $((SECONDS - t0)))" "$last" >&2
			else
				printf '  [KSM=%s] %5d steps  %s  %s\n' "$KSM" $steps "$(elapsed $((SECONDS - t0)))" "$last" >&2
			fi
			next=$((SECONDS + 15))
		fi
	done < <(tail -n +1 -F --pid=$pid "$log" 2>/dev/null)
	wait $pid
	local rc=$?
	set -e
	if [ $rc != 0 ]; then
		grep -E 'error|warning|Error' "$log" | head -40 >&2 || true
		tail -n 30 "$log" >&2
		die "kernel build failed (KSM=$KSM), full log: build/logs/kernel-$NAME.log"
	fi
	# The project's code builds without compiler or clippy warnings (rustc's and clippy's start a
	# line; clang's name the file). The kernel's own code is not ours to fix.
	if grep -nE "$OWN_WARNINGS" "$log" >&2; then
		die "the kernel build printed warnings (KSM=$KSM), see build/logs/kernel-$NAME.log"
	fi
	[ $steps -gt 1000 ] && echo $steps > "$OBJ/.rksm-steps"
	cp "$OBJ/$image" "$B/$out"
	# Its symbols, for profiles and scripts/dev/loops.py.
	cp "$OBJ/vmlinux" "$B/vmlinux-$NAME"
	say "build/$out ready ($steps steps, $(elapsed $((SECONDS - t0))))"
}

if [ -n "${PREPARE:-}" ]; then
	unpack
	apply_patches
	link_files
	exit 0
fi
OUT=$IMAGE-$NAME
[ "$FLAVOR" = um ] && OUT=linux-$NAME
hash=$(inputs_hash)
if [ -z "${FORCE:-}" ] && [ -f "$B/$OUT" ] && [ "$(cat "$B/$OUT.inputs" 2>/dev/null)" = "$hash" ]; then
	say "build/$OUT is up to date"
	exit 0
fi
unpack
apply_patches
link_files
configure
build
echo "$hash" > "$B/$OUT.inputs"
