#!/bin/busybox sh
# /init of rksm's test VM (busybox, in an initramfs). Mounts the host's root (an arm64 guest: its
# own, build/arm64/root) read-only and the project read-write over 9p, runs the command from
# build/vm/<run>/cmd.sh in a chroot of that root with its output on the second console (ttyS1;
# arm64: hvc0), records its exit status, and powers off.
/bin/busybox mkdir -p /bin /proc /sys /dev /host
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

for a in $(cat /proc/cmdline); do
	case $a in
	rksm.proj=*) PROJ=${a#rksm.proj=} ;;
	rksm.run=*) RUN=${a#rksm.run=} ;;
	esac
done

# The kernel's console and the command's output (see scripts/vm.sh).
CON=/dev/ttyS0
OUT=/dev/ttyS1
if [ -e /dev/ttyAMA0 ]; then
	CON=/dev/ttyAMA0
	OUT=/dev/hvc0
fi

fail() {
	echo "vm-init: $*" > $CON
	reboot -f
}

mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /host ||
	fail "cannot mount the host root"
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mkdir -p /host/dev/pts /host/dev/shm 2>/dev/null
mount -t devpts devpts /host/dev/pts
mount -t tmpfs tmpfs /host/dev/shm
mount -t tmpfs tmpfs /host/tmp
mount -t tmpfs tmpfs /host/run
mount -t tmpfs tmpfs /host/root
mount -t debugfs debugfs /host/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /host/sys/kernel/tracing 2>/dev/null
# The project may live under a directory the tmpfs mounts above just hid (a clone in /tmp, say):
# its mount point is made afresh there.
mkdir -p "/host$PROJ" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 proj "/host$PROJ" ||
	fail "cannot mount the project directory"

# An arm64 guest runs the test programs cross-built for it (scripts/guest-progs.sh,
# scripts/selftests.sh) where the scripts look for them.
if [ "$(uname -m)" = aarch64 ]; then
	for d in tests selftests; do
		[ -d "/host$PROJ/build/$d-arm64" ] || continue
		mkdir -p "/host$PROJ/build/$d"
		mount --bind "/host$PROJ/build/$d-arm64" "/host$PROJ/build/$d"
	done
fi

stty -F $OUT raw -echo 2>/dev/null
# A kernel with kmemleak (FLAVOR=debug): what boot left unreferenced is forgotten, so that what
# the scan after the command reports is the command's.
# (debugfs is mounted in the chroot only: /sys/kernel/debug here is an empty directory.)
KMEMLEAK=/host/sys/kernel/debug/kmemleak
if [ -e $KMEMLEAK ]; then
	echo scan > $KMEMLEAK
	echo clear > $KMEMLEAK
fi
echo "vm-init: running $RUN/cmd.sh" > $CON
chroot /host /usr/bin/env -i HOME=/root TERM=dumb \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	/bin/sh -c "cd \"\$(cat '$RUN/cwd')\" && exec /bin/sh '$RUN/cmd.sh'" \
	< /dev/null > $OUT 2>&1
rc=$?
echo "vm-init: command exited with status $rc" > $CON
# Leaks: two scans (an object must look unreferenced in a scan at least 5 s after it was
# allocated), their reports into the kernel log, where scripts/vm.sh fails the run on them.
if [ -e $KMEMLEAK ]; then
	echo scan > $KMEMLEAK
	sleep 6
	echo scan > $KMEMLEAK
	cat $KMEMLEAK > $CON
	echo "vm-init: kmemleak scanned" > $CON
fi
echo "$rc" > "/host$RUN/rc"
sync
umount "/host$PROJ" 2>/dev/null
reboot -f
