#!/bin/sh
# The command `vng --exec` runs in every guest of scripts/vm.sh: the steps around the command
# that virtme-ng's init does not take. The init (virtme-ng-init on x86_64, its shell virtme-init
# on arm64) has mounted the root (read-only 9p), /proc, /sys, /dev, /run, debugfs, tracefs, the
# project read-write, and udevd has named the ports that carry this script's output and status.
# Usage: sh vm-guest.sh RUN_DIR (cmd.sh and cwd there; rc is written there).
RUN=$1
# The kernel's console, which vm.sh keeps as RUN/console.log: the markers and kmemleak's report go
# there, beside the kernel's log.
CON=/dev/ttyS0
[ -e /dev/ttyAMA0 ] && CON=/dev/ttyAMA0
# udevd only had to name the ports: it must not compete with the tests for the two vCPUs.
udevadm control --exit 2>/dev/null
PROJ=$(sed -n 's/.*rksm\.proj=\([^ ]*\).*/\1/p' /proc/cmdline)
# An empty /tmp (not the host's under an overlay) and a writable /root for HOME; a project under
# one of them (a clone in /tmp, say) is moved back on top.
mkdir -p /run/vm-proj
mount --bind "$PROJ" /run/vm-proj
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /root
if [ -e "$PROJ/scripts/vm-guest.sh" ]; then
	umount /run/vm-proj
else
	mkdir -p "$PROJ"
	mount --move /run/vm-proj "$PROJ"
fi
# /dev/pts (the shell init of arm64 guests fails to mount it: their root has no tty group).
grep -q " /dev/pts devpts " /proc/mounts || mount -t devpts devpts /dev/pts
# An arm64 guest runs the test programs cross-built for it (scripts/guest-progs.sh,
# scripts/selftests.sh) where the scripts look for them.
if [ "$(uname -m)" = aarch64 ]; then
	for d in tests selftests; do
		[ -d "$PROJ/build/$d-arm64" ] || continue
		mkdir -p "$PROJ/build/$d"
		mount --bind "$PROJ/build/$d-arm64" "$PROJ/build/$d"
	done
fi
# A kernel with kmemleak (FLAVOR=debug): what boot left unreferenced is forgotten, so that what
# the scan after the command reports is the command's.
KMEMLEAK=/sys/kernel/debug/kmemleak
if [ -e $KMEMLEAK ]; then
	echo scan > $KMEMLEAK
	echo clear > $KMEMLEAK
fi
echo "vm-guest: running $RUN/cmd.sh" > $CON
# A clean environment (the init's carries the kernel command line's unknown arguments), standard
# error into standard output: vng's own standard error is the kernel's log.
env -i HOME=/root TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	/bin/sh -c "cd \"\$(cat '$RUN/cwd')\" && exec /bin/sh '$RUN/cmd.sh'" < /dev/null 2>&1
rc=$?
echo "vm-guest: command exited with status $rc" > $CON
# Leaks: two scans (an object must look unreferenced in a scan at least 5 s after it was
# allocated), their reports into the kernel log, where scripts/vm.sh fails the run on them.
if [ -e $KMEMLEAK ]; then
	echo scan > $KMEMLEAK
	sleep 6
	echo scan > $KMEMLEAK
	cat $KMEMLEAK > $CON
	echo "vm-guest: kmemleak scanned" > $CON
fi
# vm.sh's own record of the status (vng's is 255 also for a guest that never finished).
echo "$rc" > "$RUN/rc"
sync
exit "$rc"
