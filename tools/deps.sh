#!/bin/sh
# Install, idempotently, every Debian package the build and the tests need.
# Safe to run repeatedly: it only calls apt when something is missing.
#
# deps.sh --deb: only what building the Debian packages needs (make deb),
# by names every Debian release has: an operator on Debian 13 builds its
# packages so, where the tests' Debian 12 kernel source does not exist.
set -eu

DEB_PKGS="debhelper dh-dkms dkms lintian dpkg-dev git ccache cmake g++ pkg-config
libdrm-dev python3 python3-torch libtorch-dev pybind11-dev"
PKGS="qemu-system-x86 debhelper dh-dkms dkms lintian dpkg-dev linux-image-amd64 linux-headers-amd64 libdrm-dev
busybox-static cpio debootstrap linux-source-6.1 sparse xz-utils kmod pkg-config
cmake g++ ccache libgtest-dev clang-format clang-tidy python3
flex bison bc libelf-dev libssl-dev
python3-torch libtorch-dev pybind11-dev python3-pytest python3-setuptools"
mode=${1:-all}
[ "$mode" = --deb ] && PKGS=$DEB_PKGS

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	echo "deps: installing:$missing"
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO=sudo
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
[ "$mode" = --deb ] && exit 0

# The kselftest harness headers and checkpatch come from the kernel source
# tarball; unpack just the files we use into build/linux-src once.
top=$(cd "$(dirname "$0")/.." && pwd)
dst="$top/build/linux-src"
if [ ! -f "$dst/.done" ]; then
	tarball=$(ls /usr/src/linux-source-6.1.tar.xz 2>/dev/null | head -n 1)
	if [ -z "$tarball" ]; then
		echo "deps: linux-source-6.1 tarball not found under /usr/src" >&2
		exit 1
	fi
	echo "deps: extracting kselftest harness and checkpatch from $tarball"
	rm -rf "$dst"
	mkdir -p "$dst"
	tar -xJf "$tarball" -C "$dst" --strip-components=1 \
		--wildcards \
		'linux-source-6.1/tools/testing/selftests/kselftest_harness.h' \
		'linux-source-6.1/tools/testing/selftests/kselftest.h' \
		'linux-source-6.1/scripts/checkpatch.pl' \
		'linux-source-6.1/scripts/spelling.txt' \
		'linux-source-6.1/scripts/const_structs.checkpatch'
	touch "$dst/.done"
fi

# The Debian 13 lane's root (its kernel, g++ 14, Python 3.13, torch 2.6):
# made once in the cache outside the clone (about 1.5 GB of packages), and
# named build/debian13 in the tree. NPU_SKIP_DEBIAN13=1 skips it.
if [ "${NPU_SKIP_DEBIAN13:-0}" != 1 ]; then
	cache=${NPU_CACHE:-/var/cache/npu-stack}
	"$top/tools/sysroot/make-root" trixie "$cache/debian13"
	mkdir -p "$top/build"
	ln -sfn "$cache/debian13" "$top/build/debian13"
fi
