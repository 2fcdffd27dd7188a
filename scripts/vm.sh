#!/usr/bin/env bash
# make vm KSM=rust|c CMD='...': boot build/bzImage-$KSM in QEMU (2 vCPUs, 2 GiB, two NUMA nodes;
# KVM when a trial boot shows it works, TCG otherwise), run CMD in the guest with the host's file
# system visible, print its output, and exit with its status. Exits non-zero too when the guest
# kernel's log shows a splat (BUG, WARNING, Oops, KASAN, KFENCE, UBSAN, lockdep, a kmemleak report,
# panic) or the command never ran.
#
# Environment: KSM, CMD, KUNIT=1 (run the built-in KUnit suites at boot), KUNIT_FILTER (glob),
# APPEND (more kernel arguments), TIMEOUT (seconds, default 1800), ACCEL (kvm|tcg), QUIET=1 (no
# command output on stdout; it is still in the run directory), VM_RUN (run directory to use),
# ARCH=arm64 PAGE=4K|16K|64K (boot build/Image-$KSM-arm64-16k, ...: QEMU's arm64 virt machine,
# with build/arm64/root, scripts/root-arm64.sh, for the root, and the test programs of
# build/tests-arm64 and build/selftests-arm64 seen at build/tests and build/selftests). A KERNEL
# named Image-* is an arm64 one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KSM=${KSM:-rust}
CMD=${CMD:-true}
TIMEOUT=${TIMEOUT:-1800}
case $(basename "${KERNEL:-}") in Image-*) ARCH=arm64 ;; esac
target
KERNEL=${KERNEL:-$B/$IMAGE-$KSM$SFX}
[ -f "$KERNEL" ] || die "$KERNEL is missing: run make kernel KSM=$KSM${SFX:+ ARCH=$TARGET PAGE=$PAGE}"

# The guest's root (mounted read-only) and the busybox of its initramfs.
ROOT=/
BUSYBOX=/bin/busybox
if [ "$TARGET" = arm64 ]; then
	"$PROJECT/scripts/root-arm64.sh"
	ROOT=$B/arm64/root
	BUSYBOX=$ROOT/bin/busybox
fi

mkdir -p "$B/vm"
INITRD=$B/vm/initramfs-$TARGET.cpio
if ! [ -f "$INITRD" ] || [ "$PROJECT/scripts/vm-init.sh" -nt "$INITRD" ] || [ "$BUSYBOX" -nt "$INITRD" ]; then
	rm -rf "$B/vm/initramfs"
	mkdir -p "$B/vm/initramfs/bin"
	cp "$BUSYBOX" "$B/vm/initramfs/bin/busybox"
	cp "$PROJECT/scripts/vm-init.sh" "$B/vm/initramfs/init"
	chmod +x "$B/vm/initramfs/init"
	(cd "$B/vm/initramfs" && find . | cpio -o -H newc --quiet) > "$INITRD"
fi

RUN=$(realpath -m "${VM_RUN:-$B/vm/run-$KSM}")
rm -rf "$RUN"
mkdir -p "$RUN"
printf '%s\n' "$CMD" > "$RUN/cmd.sh"
pwd > "$RUN/cwd"

qemu_cmd() { # accel
	local accel=$1 cpu=max machine
	shift
	[ "$accel" = kvm ] && cpu=qemu64
	machine="qemu-system-x86_64 -machine q35 -cpu $cpu"
	# Pointer authentication's architected algorithm (QARMA) is slow to emulate: QEMU's own
	# (impdef) keeps every check and is much faster under TCG.
	[ "$TARGET" = arm64 ] && machine="qemu-system-aarch64 -machine virt -cpu max,pauth-impdef=on"
	echo "$machine" -nodefaults -display none -no-reboot \
		-accel "$accel" -smp 2,sockets=2,cores=1,threads=1 -m 2G \
		-object memory-backend-ram,id=m0,size=1G -numa node,nodeid=0,cpus=0,memdev=m0 \
		-object memory-backend-ram,id=m1,size=1G -numa node,nodeid=1,cpus=1,memdev=m1 \
		-kernel "$KERNEL" -initrd "$INITRD" \
		-virtfs "local,path=$ROOT,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$PROJECT,mount_tag=proj,security_model=none,multidevs=remap" \
		-device virtio-rng-pci
}

# The console (the kernel's log, to console.log) and the command's output (to stdout): two 8250
# ports on x86_64; on arm64's virt machine, whose QEMU 7.2 has one UART, the PL011 and a virtio
# console (hvc0).
serial_opts() { # console log file
	if [ "$TARGET" = arm64 ]; then
		echo "-serial file:$1 -device virtio-serial-pci -chardev stdio,id=out,signal=off" \
			"-device virtconsole,chardev=out"
	else
		echo "-serial file:$1 -chardev stdio,id=out,signal=off -serial chardev:out"
	fi
}

# KVM only if a short trial boot works (nested KVM here exists as a device but hangs guests).
accel() {
	if [ -n "${ACCEL:-}" ]; then echo "$ACCEL"; return; fi
	# arm64 on this x86_64 host is emulated whatever the host has.
	[ "$TARGET" = arm64 ] && { echo tcg; return; }
	if [ -f "$B/vm/accel" ]; then cat "$B/vm/accel"; return; fi
	local a=tcg t=$B/vm/kvm-trial
	if [ "$TARGET" = x86_64 ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
		rm -rf "$t"; mkdir -p "$t"; echo true > "$t/cmd.sh"; pwd > "$t/cwd"
		say "trial boot under KVM (once per machine)"
		# shellcheck disable=SC2046
		timeout 20 $(qemu_cmd kvm) -append "console=ttyS0 panic=-1 kunit.enable=0 rksm.proj=$PROJECT rksm.run=$t" \
			-serial "file:$t/console.log" -serial null >/dev/null 2>&1 || true
		[ "$(cat "$t/rc" 2>/dev/null)" = 0 ] && a=kvm
	fi
	echo $a > "$B/vm/accel"
	echo $a
}
ACCEL=$(accel)
if [ "$ACCEL" = tcg ]; then ACCEL_OPT=tcg,thread=multi; else ACCEL_OPT=kvm; fi
# ICOUNT=1 (development, TCG only): guest time counts guest instructions (1 ns each, one host
# thread for both vCPUs), so that single-thread timings repeat whatever else the host does.
ICOUNT_OPT=
if [ "${ICOUNT:-0}" = 1 ]; then ACCEL_OPT=tcg,thread=single; ICOUNT_OPT="-icount shift=0,sleep=off"; fi

KUNIT_ARGS="kunit.enable=0"
if [ "${KUNIT:-0}" = 1 ]; then
	KUNIT_ARGS="kunit.enable=1${KUNIT_FILTER:+ kunit.filter_glob=$KUNIT_FILTER}"
fi
# KASAN kernels boot with 4-level paging: 6.12's identify_cpu() clears the boot CPU's feature
# words, LA57 with them, while interrupts are on, and KASAN's address check then takes the direct
# map of 5-level paging (QEMU's "max" CPU has LA57) for a wild access (a splat at boot, seen once
# in a few boots, from rcu_is_watching() in an interrupt; nothing of KSM has run yet).
PAGING=
case $TARGET/$(basename "$KERNEL") in x86_64/*debug*) PAGING=no5lvl ;; esac
CONSOLE=ttyS0
[ "$TARGET" = arm64 ] && CONSOLE=ttyAMA0
APPEND_ALL="console=$CONSOLE panic=-1 loglevel=7 $PAGING $KUNIT_ARGS rksm.proj=$PROJECT rksm.run=$RUN ${APPEND:-}"

say "boot $(basename "$KERNEL") ($ACCEL, 2 vCPUs, 2 GiB, 2 NUMA nodes)"
t0=$SECONDS
set +e
# shellcheck disable=SC2046
timeout "$TIMEOUT" $(qemu_cmd "$ACCEL_OPT") $ICOUNT_OPT -append "$APPEND_ALL" \
	$(serial_opts "$RUN/console.log") < /dev/null | if [ "${QUIET:-0}" = 1 ]; then cat > "$RUN/output.log"; else tee "$RUN/output.log"; fi
qrc=${PIPESTATUS[0]}
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
# A kernel with kmemleak must have been scanned after the command (scripts/vm-init.sh): a scan
# that never ran reports no leak.
if grep -q "kmemleak: Kernel memory leak detector initialized" "$RUN/console.log" 2>/dev/null &&
	[ -f "$RUN/rc" ] && ! grep -q "vm-init: kmemleak scanned" "$RUN/console.log"; then
	echo "vm: the guest kernel has kmemleak, but no scan ran after the command" >&2
	[ $status = 0 ] && status=3
fi
if ! [ -f "$RUN/rc" ]; then
	echo "vm: the guest never finished the command (console: build/vm/$(basename "$RUN")/console.log)" >&2
	tail -n 20 "$RUN/console.log" >&2 2>/dev/null || true
	[ $status = 0 ] && status=2
else
	rc=$(cat "$RUN/rc")
	[ $status = 0 ] && status=$rc
fi
say "vm: done in $(elapsed $((SECONDS - t0))), status $status"
exit "$status"
