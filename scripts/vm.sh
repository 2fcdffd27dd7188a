#!/usr/bin/env bash
# make vm KSM=rust|c CMD='...': boot build/bzImage-$KSM with virtme-ng (vng: 2 vCPUs, 2 GiB, two
# NUMA nodes; KVM when a trial boot shows it works, TCG otherwise), run CMD in the guest with the
# host's file system as its root (read-only; the project read-write), print its output, and exit
# with its status. Exits non-zero too when the guest kernel's log shows a splat (BUG, WARNING,
# Oops, KASAN, KFENCE, UBSAN, lockdep, a kmemleak report, panic) or the command never ran.
#
# Environment: KSM, CMD, KUNIT=1 (run the built-in KUnit suites at boot), KUNIT_FILTER (glob),
# APPEND (more kernel arguments), TIMEOUT (seconds, default 1800), ACCEL (kvm|tcg), QUIET=1 (no
# command output on stdout; it is still in the run directory), VM_RUN (run directory, under the
# project), ARCH=arm64 PAGE=4K|16K|64K (boot build/Image-$KSM-arm64-16k, ...: QEMU's arm64 virt
# machine, with build/arm64/root, scripts/root-arm64.sh, for the root, the test programs of
# build/tests-arm64 and build/selftests-arm64 seen at build/tests and build/selftests, and 512 MiB
# more on node 1 from virtio-mem, the memory arm64 can hot-remove). A KERNEL
# named Image-* is an arm64 one. The run directory keeps cmd.sh, console.log (the kernel's log),
# output.log (the command's) and rc (its status).
#
# vng makes the QEMU command line, the root over 9p, the mounts and the command's output and
# status. What stays here, because vng 1.42 cannot do it:
#  - the time limit (coreutils timeout kills vng's process group, QEMU with it);
#  - the KVM trial boot: vng takes KVM whenever /dev/kvm opens, and nested KVM on these machines
#    hangs guests;
#  - the kernel log in a file of its own: vng writes the console to its standard error (-v), so
#    its two streams are split here, both through pipes (QEMU opens /proc/self/fd/1 and 2 once per
#    port, with O_TRUNC: regular files there would overwrite each other);
#  - the splat grep and the kmemleak check: vng reports only the command's status, and 255 both
#    for a command that exited 255 and for a guest that never finished;
#  - the steps around the command, in the guest (scripts/vm-guest.sh): kmemleak's scans, an empty
#    /tmp and a writable /root, arm64's test programs, RUN/rc.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KSM=${KSM:-rust}
CMD=${CMD:-true}
TIMEOUT=${TIMEOUT:-1800}
# An arm64 KERNEL's name says its page size (Image-debug-rust-arm64-16k).
case $(basename "${KERNEL:-}") in
Image-*-arm64-*) ARCH=arm64 PAGE=$(basename "$KERNEL" | sed 's/.*-arm64-//' | tr k K) ;;
Image-*) ARCH=arm64 ;;
esac
target
KERNEL=${KERNEL:-$B/$IMAGE-$KSM$SFX}
[ -f "$KERNEL" ] || die "$KERNEL is missing: run make kernel KSM=$KSM${SFX:+ ARCH=$TARGET PAGE=$PAGE}"
[ -x "$B/venv/bin/vng" ] || die "virtme-ng is missing: run make setup"
# vng runs virtme-run by name.
export PATH=$B/venv/bin:$PATH

RUN=$(realpath -m "${VM_RUN:-$B/vm/run-$KSM}")
case $RUN/ in "$PROJECT"/*) ;; *) die "VM_RUN=$RUN: the guest writes only under $PROJECT" ;; esac
rm -rf "$RUN"
mkdir -p "$RUN"
printf '%s\n' "$CMD" > "$RUN/cmd.sh"
pwd > "$RUN/cwd"

# Two NUMA nodes of 1 GiB of anonymous RAM each, but see N0 (vng's own --numa backs them with
# shared memfds, which get no transparent huge pages here), one vCPU each in a socket of its own
# (one socket over two nodes makes x86's topology_sane() warn), and a virtio RNG.
# Node 0 gets 2 GiB on arm64 with 64 KiB pages: vng's console buffers take 769 MiB there (below),
# and offlining a block of node 1 migrates its pages to node 0 only (offline_pages() leaves out
# the node going offline). With 1 GiB, node 0 was left with 50 MiB, under its min watermark, and
# offlining retried the migration's -ENOMEM until the test's 90 s ran out, on C as on rksm.
N0=1
[ "$TARGET" = arm64 ] && [ "$PAGE" = 64K ] && N0=2
QOPTS="-object memory-backend-ram,id=m0,size=${N0}G -numa node,nodeid=0,cpus=0,memdev=m0"
QOPTS+=" -object memory-backend-ram,id=m1,size=1G -numa node,nodeid=1,cpus=1,memdev=m1"
QOPTS+=" -device virtio-rng-pci"
# --force-9p: bookworm's virtiofsd is QEMU's old C one, which vng cannot start (it would try for
# 3 s per directory, then fall back to 9p anyway).
HOTPLUG= MEMORY="2 GiB"
VNG=(vng --run "$KERNEL" -v --skip-modules --force-9p --disable-microvm
	--cpus 2,sockets=2,cores=1,threads=1 --memory 2G)
if [ "$TARGET" = arm64 ]; then
	"$PROJECT/scripts/root-arm64.sh"
	VNG+=(--arch arm64 --root "$B/arm64/root" --rwdir "$PROJECT=$PROJECT")
	# Pointer authentication's architected algorithm (QARMA) is slow to emulate: QEMU's own
	# (impdef) keeps every check and is much faster under TCG.
	QOPTS+=" -cpu max,pauth-impdef=on"
	# Memory that can be hot-removed: arm64 never offlines boot memory, so node 1 gets 512 MiB
	# more from a virtio-mem device, onlined movable at boot (memhp_default_state below).
	# With 64 KiB pages, 1.5 GiB: vng's six console ports fill their receive queues with
	# buffers of a page each, 769 MiB of kmalloc-64k (48 MiB with 4 KiB pages), and ksmtuned's
	# test needs that much again for its QEMU stand-in. QEMU merges this -m with vng's
	# --memory 2G (which takes no maxmem).
	hp=512
	[ "$PAGE" = 64K ] && hp=1536
	QOPTS+=" -m $((N0 + 1))G,slots=1,maxmem=$((N0 * 1024 + 1024 + hp))M"
	QOPTS+=" -object memory-backend-ram,id=hp1,size=${hp}M"
	QOPTS+=" -device virtio-mem-pci,id=hpmem1,memdev=hp1,node=1,requested-size=${hp}M"
	HOTPLUG=memhp_default_state=online_movable MEMORY="$((N0 + 1)) GiB + $hp MiB virtio-mem"
else
	VNG+=(--rwdir "$PROJECT")
fi

vng_argv() { # accel run-directory kernel-arguments...: the vng command line, into ARGV
	local accel=$1 run=$2 q=$QOPTS a=()
	shift 2
	case $accel in
	# vng's KVM is -machine accel=kvm:tcg -cpu host: a KVM that fails falls back on TCG, where
	# the host CPU model stops QEMU, so the trial boot below passes only under a working KVM.
	kvm) q+=" -machine q35" ;;
	# ICOUNT=1 (development): guest time counts guest instructions (1 ns each, one host thread
	# for both vCPUs), so that single-thread timings repeat whatever else the host does.
	icount) a=(--disable-kvm); q+=" -accel tcg,thread=single -icount shift=0,sleep=off" ;;
	*) a=(--disable-kvm); q+=" -accel tcg,thread=multi" ;;
	esac
	# The root's 9p options are vng's but for cache=loose (the last rootflags= wins), as it
	# is read-only.
	ARGV=("${VNG[@]}" "${a[@]}" --qemu-opts="$q"
		--append "loglevel=7 rksm.proj=$PROJECT rksm.run=$run rootflags=version=9p2000.L,trans=virtio,access=any,msize=524288,cache=loose $*"
		--exec "sh $PROJECT/scripts/vm-guest.sh $run")
}

# KVM only if a short trial boot works (nested KVM here exists as a device but hangs guests).
accel() {
	if [ -n "${ACCEL:-}" ]; then echo "$ACCEL"; return; fi
	# arm64 on this x86_64 host is emulated whatever the host has.
	[ "$TARGET" = arm64 ] && { echo tcg; return; }
	if [ -f "$B/vm/accel" ]; then cat "$B/vm/accel"; return; fi
	local a=tcg t=$B/vm/kvm-trial
	if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
		rm -rf "$t"; mkdir -p "$t"; echo true > "$t/cmd.sh"; pwd > "$t/cwd"
		say "trial boot under KVM (once per machine)"
		vng_argv kvm "$t" kunit.enable=0
		{ timeout 20 "${ARGV[@]}" < /dev/null 2>&1 > /dev/null | cat > "$t/console.log"; } || true
		[ "$(cat "$t/rc" 2>/dev/null)" = 0 ] && a=kvm
	fi
	echo $a > "$B/vm/accel"
	echo $a
}
ACCEL=$(accel)
[ "${ICOUNT:-0}" = 1 ] && ACCEL=icount

KUNIT_ARGS="kunit.enable=0"
[ "${KUNIT:-0}" = 1 ] && KUNIT_ARGS="kunit.enable=1${KUNIT_FILTER:+ kunit.filter_glob=$KUNIT_FILTER}"
# KASAN kernels boot with 4-level paging: 6.12's identify_cpu() clears the boot CPU's feature
# words, LA57 with them, while interrupts are on, and KASAN's address check then takes the direct
# map of 5-level paging (QEMU's "max" CPU has LA57) for a wild access (a splat at boot, seen once
# in a few boots, from rcu_is_watching() in an interrupt; nothing of KSM has run yet).
PAGING=
case $TARGET/$(basename "$KERNEL") in x86_64/*debug*) PAGING=no5lvl ;; esac

say "boot $(basename "$KERNEL") with virtme-ng ($ACCEL, 2 vCPUs, $MEMORY, 2 NUMA nodes)"
t0=$SECONDS
# shellcheck disable=SC2086
vng_argv "$ACCEL" "$RUN" $PAGING $HOTPLUG $KUNIT_ARGS ${APPEND:-}
printf '%q ' "${ARGV[@]}" > "$RUN/vng.cmd"
set +e
{
	timeout "$TIMEOUT" "${ARGV[@]}" < /dev/null 2>&1 >&3 3>&- | cat > "$RUN/console.log"
	echo "${PIPESTATUS[0]}" > "$RUN/vng.rc"
} 3>&1 | if [ "${QUIET:-0}" = 1 ]; then cat > "$RUN/output.log"; else tee "$RUN/output.log"; fi
qrc=$(cat "$RUN/vng.rc")
set -e

status=0
if [ "$qrc" = 124 ]; then
	echo "vm: timed out after ${TIMEOUT}s" >&2
	status=124
fi
# Splats in the guest kernel's log fail the run whatever the command said.
if console_log "$RUN/console.log" 2>/dev/null | grep -qE "$SPLAT"; then
	echo "vm: the guest kernel log shows a problem (build/vm/$(basename "$RUN")/console.log):" >&2
	console_log "$RUN/console.log" | grep -nE -A12 "$SPLAT" | head -60 >&2
	status=3
fi
# A kernel with kmemleak must have been scanned after the command (scripts/vm-guest.sh): a scan
# that never ran reports no leak.
if grep -q "kmemleak: Kernel memory leak detector initialized" "$RUN/console.log" 2>/dev/null &&
	[ -f "$RUN/rc" ] && ! grep -q "vm-guest: kmemleak scanned" "$RUN/console.log"; then
	echo "vm: the guest kernel has kmemleak, but no scan ran after the command" >&2
	[ $status = 0 ] && status=3
fi
if ! [ -f "$RUN/rc" ]; then
	echo "vm: the guest never finished the command (vng status $qrc; console: build/vm/$(basename "$RUN")/console.log)" >&2
	tail -n 20 "$RUN/console.log" >&2 2>/dev/null || true
	[ $status = 0 ] && status=2
else
	rc=$(cat "$RUN/rc")
	# vng returns the status the guest's init sent back: one the guest script also wrote.
	if [ $status = 0 ] && [ "$qrc" != "$rc" ]; then
		echo "vm: vng returned $qrc, but the command exited with $rc" >&2
		status=2
	fi
	[ $status = 0 ] && status=$rc
fi
say "vm: done in $(elapsed $((SECONDS - t0))), status $status"
exit "$status"
