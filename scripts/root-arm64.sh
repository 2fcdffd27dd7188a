#!/usr/bin/env bash
# The arm64 guests' root file system, build/arm64/root: Debian bookworm's arm64 packages, which
# the x86_64 guests take from the host's own root instead (scripts/vm.sh mounts it over 9p
# read-only, as it mounts /). Made once by mmdebstrap, again when the package list below changes.
#
# mmdebstrap's "extract" variant unpacks the packages and runs none of their maintainer scripts:
# they are arm64 programs, and this host runs none (no binfmt_misc, no qemu-user). What those
# scripts would have made that the tests use (the awk and which alternatives, mount points) is
# made here.
# libnuma-dev is in it for the cross-built test programs to link with (scripts/guest-progs.sh,
# scripts/selftests.sh), not for the guest.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PKGS=bash,dash,coreutils,util-linux,mount,procps,python3,gawk,grep,sed,findutils,kmod,numactl
PKGS+=,libnuma1,libnuma-dev,busybox-static,diffutils,time,debianutils
# virtme-ng's shell init (scripts/vm.sh) finds its command's ports by the names udev gives them.
PKGS+=,udev
# tests/vm/mem_merge.py boots QEMU guests inside the VM.
PKGS+=,qemu-system-arm
ROOT=$B/arm64/root
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

key=$(echo "bookworm $PKGS" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$ROOT/.rksm-root" 2>/dev/null)" != "$key" ]; then
	say "arm64 guest root: mmdebstrap bookworm ($PKGS) into build/arm64/root"
	rm -rf "$ROOT" "$B/arm64/root.tar"
	mkdir -p "$ROOT"
	mmdebstrap --quiet --variant=extract --architectures=arm64 --include="$PKGS" \
		bookworm "$B/arm64/root.tar" "$MIRROR" > "$B/logs/root-arm64.log" 2>&1 ||
		{ tail -20 "$B/logs/root-arm64.log" >&2; die "mmdebstrap failed (build/logs/root-arm64.log)"; }
	tar -C "$ROOT" -xf "$B/arm64/root.tar"
	rm -f "$B/arm64/root.tar"
	ln -sfn gawk "$ROOT/usr/bin/awk"
	ln -sfn which.debianutils "$ROOT/usr/bin/which"
	# virtme-ng's init ends with poweroff -f (systemd-sysv, which would give it, is not wanted).
	ln -sfn /bin/busybox "$ROOT/usr/sbin/poweroff"
	mkdir -p "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/tmp" "$ROOT/run" "$ROOT/root"
	echo "$key" > "$ROOT/.rksm-root"
fi
# The project's mount point: the root is mounted read-only in the guest.
mkdir -p "$ROOT$PROJECT"
