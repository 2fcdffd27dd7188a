# Shared settings for rksm's scripts: sourced, not run.
# shellcheck shell=bash

PROJECT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=$PROJECT/build
SRC=$B/linux
OBJ=$B/obj
KVER=6.12
TARBALL=/usr/src/linux-source-$KVER.tar.xz

# build/logs holds every script's logs (a fresh clone has no build/ yet). ccache in masquerade
# mode: build/ccache-bin/clang is ccache, which runs llvm-19's clang.
mkdir -p "$B/ccache-bin" "$B/logs"
[ -L "$B/ccache-bin/clang" ] || ln -sfn /usr/bin/ccache "$B/ccache-bin/clang"
export PATH=$B/ccache-bin:/usr/lib/llvm-19/bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH
export LIBCLANG_PATH=/usr/lib/llvm-19/lib
# One cache per user, shared by every checkout (paths are relative to build/, see BASEDIR), so
# that a fresh clone on a machine that built before reuses its objects.
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rksm/ccache}
export CCACHE_BASEDIR=$B
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}

# Every kernel make invocation: one source tree, one output directory.
kmake() {
	make -C "$SRC" O="$OBJ" LLVM=1 \
		RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc \
		CLIPPY_DRIVER=/usr/bin/clippy-driver RUSTFMT=/usr/bin/rustfmt \
		BINDGEN="${CARGO_HOME:-$HOME/.cargo}/bin/bindgen" "$@"
}

# What in a kernel log fails a run whatever its command said (scripts/vm.sh, scripts/um.sh).
# shellcheck disable=SC2034
SPLAT='BUG:|WARNING:|Oops|KASAN|UBSAN|Kernel panic|general protection fault|possible circular locking|possible recursive locking|inconsistent lock state|DEBUG_LOCKS_WARN_ON|INFO: possible|INFO: task .* blocked|list_(add|del) corruption|Call Trace:|unreferenced object|BUG kmalloc|KFENCE:'
# The guest kernel's log, less the stack dumps of warn_alloc() (a failed allocation's warning)
# when ALLOC_FAILURES_OK=1: under fault injection (tests/vm/ksmfail.c) they are expected, and
# their "Call Trace:" is no splat. Every other line of SPLAT still counts.
console_log() {
	if [ "${ALLOC_FAILURES_OK:-0}" = 1 ]; then
		awk '{ l[NR] = $0 }
		END {
			for (i = 1; i <= NR; i++) {
				if (l[i] ~ /Call Trace:/) {
					w = 0
					for (j = i + 1; j <= i + 8 && j <= NR; j++)
						if (l[j] ~ /warn_alloc/)
							w = 1
					if (w)
						continue
				}
				print l[i]
			}
		}' "$1"
	else
		cat "$1"
	fi
}

# Compiler and clippy warnings of the project's code in a kernel build log (rustc's and clippy's
# start a line; clang's name the file). The kernel's own code is not ours to fix.
# shellcheck disable=SC2034
OWN_WARNINGS='^(warning|error)(\[|:)|(samples/rust/rksm|kunit_suite|rust/kernel/(mm|rb|ksm|kthread|sysfs|slab)).*: warning:'

# Which project files go where in the kernel tree (scripts/kernel.sh links them, scripts/series.sh
# commits them): lines of "project-path tree-path".
tree_map() {
	(cd "$PROJECT" && find rust samples Documentation -type f ! -name '*~' 2>/dev/null | sort | sed 's|.*|& &|' || true)
	(cd "$PROJECT" && find tests/kunit -type f -name '*.rs' 2>/dev/null | sort |
		sed 's|^tests/kunit/\(.*\)|& samples/rust/rksm/kunit/\1|' || true)
}

# The target of a QEMU kernel, from ARCH and PAGE: TARGET (x86_64, the host's, or arm64), PAGE
# (4K; arm64 also 16K or 64K), SFX (what the names and output directories of arm64 kernels carry,
# -arm64-16k), IMAGE (bzImage or Image). x86_64 names carry nothing, as before arm64 came.
target() {
	TARGET=${ARCH:-x86_64}
	case $TARGET in x86|x86_64) TARGET=x86_64 ;; esac
	PAGE=${PAGE:-4K}
	SFX=
	IMAGE=bzImage
	case $TARGET in
	x86_64) [ "$PAGE" = 4K ] || die "PAGE=$PAGE: x86_64 has 4K pages only" ;;
	arm64)
		case $PAGE in 4K|16K|64K) ;; *) die "PAGE must be 4K, 16K or 64K, not '$PAGE'" ;; esac
		SFX=-arm64-$(echo "$PAGE" | tr K k)
		IMAGE=Image ;;
	*) die "ARCH must be x86_64 or arm64, not '$TARGET'" ;;
	esac
}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

elapsed() { # seconds -> "3m07s"
	printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}

# Boot one kernel once with every guest suite (tests/vm/guest-tests.sh NAME [FAULT]; KUnit at boot
# on rksm's), for make test and make test-arm64: results in build/test/NAME, the boot's status in
# build/test/NAME/vm.rc. ARCH and PAGE, when set, choose the target.
boot_guest_tests() { # name ksm timeout [fault]
	local name=$1 k=$2 limit=$3 fault=${4:-} kunit=0
	[ "$k" = rust ] && kunit=1
	mkdir -p "$B/test/$name"
	set +e
	KSM=$k KUNIT=$kunit VM_RUN=$B/vm/test-$name TIMEOUT=$limit \
		CMD="sh $PROJECT/tests/vm/guest-tests.sh $name $fault" "$PROJECT/scripts/vm.sh"
	echo $? > "$B/test/$name/vm.rc"
	set -e
}
