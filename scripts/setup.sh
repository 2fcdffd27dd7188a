#!/usr/bin/env bash
# One-time, idempotent host set-up for rksm: Debian packages, bindgen, nothing else.
# Quiet when everything is already present.
set -euo pipefail

PKGS=(linux-source-6.12 rustc-web rust-web-src clang-19 lld-19 llvm-19 libclang-19-dev
      qemu-system-x86 flex bison libelf-dev libssl-dev bc cpio ccache libnuma-dev
      busybox-static python3 rsync kmod rust-web-clippy rustfmt-web procps
      python3-venv udev file)
# EXTRA_PKGS: what one command needs beyond these (make bench: python3-matplotlib for its plot).
read -r -a extra <<< "${EXTRA_PKGS:-}"
PKGS+=("${extra[@]}")
# ARCH=arm64 (make test-arm64, and make kernel, vm, torture or bench with it): the emulator, the
# cross compiler for the test programs, and what builds the guests' Debian root.
case ${ARCH:-} in arm64) PKGS+=(qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross mmdebstrap) ;; esac
BINDGEN_VERSION=0.73.2

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BINDGEN=${CARGO_HOME:-$HOME/.cargo}/bin/bindgen
if ! [ -x "$BINDGEN" ] || ! "$BINDGEN" --version 2>/dev/null | grep -q " $BINDGEN_VERSION"; then
	echo "setup: cargo install bindgen-cli $BINDGEN_VERSION"
	# Build bindgen with the system compiler so that no rustup toolchain is needed.
	RUSTC=/usr/bin/rustc cargo install --quiet --locked --version "$BINDGEN_VERSION" bindgen-cli
fi

# Debian's ksmtuned, unpacked (not installed: installed, it would start and drive the host's KSM)
# into build/ksmtuned, where the guest test tests/vm/ksmtuned.py runs its script unmodified.
KSMTUNED_VERSION=4.20150326+b1
KSMTUNED=$(cd "$(dirname "$0")/.." && pwd)/build/ksmtuned
if ! [ -f "$KSMTUNED/usr/sbin/ksmtuned" ] || ! [ -f "$KSMTUNED/version-$KSMTUNED_VERSION" ]; then
	echo "setup: unpacking Debian's ksmtuned $KSMTUNED_VERSION into build/ksmtuned"
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && apt-get download -qq "ksmtuned=$KSMTUNED_VERSION" 2>/dev/null); then
		SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
		$SUDO apt-get update -qq
		(cd "$tmp" && apt-get download -qq "ksmtuned=$KSMTUNED_VERSION")
	fi
	rm -rf "$KSMTUNED"
	mkdir -p "$KSMTUNED"
	dpkg-deb -x "$tmp"/ksmtuned_*.deb "$KSMTUNED"
	touch "$KSMTUNED/version-$KSMTUNED_VERSION"
	rm -rf "$tmp"
fi

# virtme-ng (vng), pinned with its dependencies, in a venv of Debian's python3: scripts/vm.sh boots
# every guest with it. udev (above) is for the guests, whose root is this host's: virtme-ng's init
# finds its command's output and status ports by the names udev gives them.
VENV=$(cd "$(dirname "$0")/.." && pwd)/build/venv
REQ=$(dirname "$0")/vng-requirements.txt
if ! [ -x "$VENV/bin/vng" ] || ! cmp -s "$REQ" "$VENV/requirements.txt"; then
	echo "setup: pip install virtme-ng into build/venv ($(sed -n 's/^virtme-ng==//p' "$REQ"))"
	rm -rf "$VENV"
	/usr/bin/python3 -m venv "$VENV"
	"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ"
	cp "$REQ" "$VENV/requirements.txt"
fi
