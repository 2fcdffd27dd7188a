#!/usr/bin/env bash
# Boot build/linux-um-$KSM (User-Mode Linux: the kernel as a host process, FLAVOR=um of
# scripts/kernel.sh) with the host's root file system read-only over hostfs and the project
# read-write, run CMD in it, and exit with its status; non-zero too when the kernel log shows a
# splat or the command never ran. The UML kernel's timings are native: no emulator between its
# code and the processor.
#
# Each page a UML process maps is a host mapping of the UML kernel's process, so merging hundreds
# of MiB needs more than the host's default vm.max_map_count (65530): this raises it to
# UM_MAX_MAP_COUNT (2000000) when it is lower.
#
# Environment: KSM, CMD, MEM (default 2G), TIMEOUT (seconds, default 1800), QUIET=1, UM_RUN
# (run directory, default build/um/run-$KSM), APPEND (more kernel arguments).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KSM=${KSM:-rust}
CMD=${CMD:-true}
TIMEOUT=${TIMEOUT:-1800}
KERNEL=${KERNEL:-$B/linux-um-$KSM}
[ -x "$KERNEL" ] || die "$KERNEL is missing: run FLAVOR=um KSM=$KSM scripts/kernel.sh"

want=${UM_MAX_MAP_COUNT:-2000000}
if [ "$(cat /proc/sys/vm/max_map_count)" -lt "$want" ]; then
	say "raising the host's vm.max_map_count to $want (each page of a UML process is a host mapping)"
	if [ "$(id -u)" = 0 ]; then
		sysctl -q -w vm.max_map_count="$want"
	else
		sudo sysctl -q -w vm.max_map_count="$want"
	fi || die "cannot raise vm.max_map_count to $want"
fi

RUN=$(realpath -m "${UM_RUN:-$B/um/run-$KSM}")
rm -rf "$RUN"
mkdir -p "$RUN"
printf '%s\n' "$CMD" > "$RUN/cmd.sh"
pwd > "$RUN/cwd"
# /init of the UML kernel, run from the host's root: the host's /tmp, /run and /root are hidden
# under tmpfs, the project is mounted read-write.
cat > "$RUN/init" <<INIT
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts 2>/dev/null
mount -t tmpfs tmpfs /dev/shm
for d in /tmp /run /root; do mount -t tmpfs tmpfs \$d; done
mkdir -p "$PROJECT" 2>/dev/null
mount -t hostfs -o "$PROJECT" none "$PROJECT" || echo "um: cannot mount the project" > /dev/console
cd "\$(cat '$RUN/cwd')" && /bin/sh '$RUN/cmd.sh' < /dev/null > '$RUN/output.log' 2>&1
echo \$? > '$RUN/rc'
sync
exec /bin/busybox poweroff -f
INIT
chmod +x "$RUN/init"

say "boot $(basename "$KERNEL") (User-Mode Linux, 1 CPU, ${MEM:-2G})"
t0=$SECONDS
set +e
timeout "$TIMEOUT" "$KERNEL" mem="${MEM:-2G}" rootfstype=hostfs rootflags=/ ro init="$RUN/init" \
	con0=fd:0,fd:1 con=null panic=-1 loglevel=7 ${APPEND:-} < /dev/null > "$RUN/console.log" 2>&1
qrc=$?
set -e
[ "${QUIET:-0}" = 1 ] || cat "$RUN/output.log" 2>/dev/null || true

status=0
if [ "$qrc" = 124 ]; then
	echo "um: timed out after ${TIMEOUT}s" >&2
	status=124
fi
if grep -qE "$SPLAT" "$RUN/console.log" 2>/dev/null; then
	echo "um: the kernel log shows a problem ($RUN/console.log):" >&2
	grep -nE -A12 "$SPLAT" "$RUN/console.log" | head -60 >&2
	status=3
fi
if ! [ -f "$RUN/rc" ]; then
	echo "um: the command never finished (console: $RUN/console.log)" >&2
	tail -n 20 "$RUN/console.log" >&2 2>/dev/null || true
	[ $status = 0 ] && status=2
else
	[ $status = 0 ] && status=$(cat "$RUN/rc")
fi
say "um: done in $(elapsed $((SECONDS - t0))), status $status"
exit "$status"
