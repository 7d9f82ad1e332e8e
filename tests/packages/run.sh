#!/bin/bash
# tests/packages/run.sh RESULTS [RELEASE]: the packages lanes (make
# test-packages, and the last lanes of make test). RELEASE is bookworm (the
# packages lane: Debian 12, the packages make deb builds on this host) or
# trixie (packages13: Debian 13 and its 6.12, the packages built by make
# deb's script in a fresh Debian 13 root, as an operator there builds
# them). Each step is one result in RESULTS:
#   packages-build      make deb: dpkg-buildpackage, then lintian with only
#                       the tags packaging/lintian-expected explains
#   packages-install    apt-get install ./*.deb into a fresh root of the
#                       release (a copy of a cached debootstrap'd one under
#                       build/packages/root or build/packages13/root), DKMS
#                       building npu.ko against that root's kernel headers
#   packages-consumers  a C program built with pkg-config and a C++ one with
#                       CMake's find_package(npurt), against the installed
#                       libnpurt-dev
#   (in the VM)         booted from that root with its kernel, the module
#                       DKMS built loaded with modprobe: see in-vm.sh
#   packages-purge      apt-get purge --autoremove leaves no file behind
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build
results=$1
release=${2:-bookworm}
cache=${NPU_CACHE:-/var/cache/npu-stack}
# The base root: the kernel and headers DKMS builds for, a compiler and
# cmake for the consumers, udev, and torch (python3-torch-npurt's
# dependency, a large download: cached); for trixie also what building
# the packages needs (they are built in the root, before the snapshot).
rootpkgs="linux-image-amd64 linux-headers-amd64 kmod build-essential cmake pkg-config udev python3 python3-torch busybox procps"
case "$release" in
bookworm)
	base=$cache/debian12-packages
	work=$build/packages
	debs=$build/deb
	;;
trixie)
	base=$cache/debian13-packages
	work=$build/packages13
	debs=$build/deb13
	rootpkgs="$rootpkgs debhelper dh-dkms dpkg-dev lintian libdrm-dev libtorch-dev pybind11-dev ccache"
	;;
*)
	echo "run.sh: unknown release $release" >&2
	exit 1
	;;
esac
root=$work/root
vmout=$work/vm
pkgs="npu-dkms libnpurt0 libnpurt-dev npu-tools python3-torch-npurt"
mkdir -p "$results"

record() {
	echo "$3" > "$results/$1.cmd.log"
	echo "$2" > "$results/$1.rc"
	[ "$2" = 0 ] && echo "$1: ok" || { echo "$1: FAILED: $3" | head -n 20; }
}
in_root() {
	"$top/tools/sysroot/in-root" "$root" / "$@"
}

echo "== packages ($release): a fresh root"
if ! "$top/tools/sysroot/make-root" "$release" "$base" "$rootpkgs" \
	> "$results/make-root.out" 2>&1; then
	record packages-install 1 "$(tail -n 30 "$results/make-root.out")"
	exit 0
fi
rm -rf --one-file-system "$root"
mkdir -p "$(dirname "$root")"
cp -a "$base" "$root"
kver=$(ls "$root/lib/modules" | sort -rV | head -n 1)

echo "== packages ($release): build"
# bookworm: on this host (Debian 12); trixie: in the fresh root.
[ "$release" = bookworm ] || export NPU_DEB_ROOT=$root
if ! "$top/tools/packages/build-debs" "$debs" > "$results/build-debs.out" 2>&1; then
	record packages-build 1 "$(tail -n 30 "$results/build-debs.out")"
	exit 0
fi
unset NPU_DEB_ROOT
record packages-build 0 "$(ls "$debs"/*.deb; tail -n 1 "$results/build-debs.out")"

# Every file of the root but the volatile ones (apt's lists and, on Debian
# 13, the AppStream catalogue apt-get update fetches; the mount points
# in-root makes for this repository and the caches), less the backups
# useradd/userdel leave of the test's users and the module signing key
# dkms makes on first use, which dkms's purge keeps on purpose (it may be
# enrolled in the firmware).
snapshot() {
	in_root sh -c "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run \
		-o -path /tmp -o -path /var/cache -o -path /var/lib/apt -o -path /var/lib/dpkg \
		-o -path /var/lib/swcatalog -o -path /var/lib/app-info \
		-o -path /var/log -o -path /etc/ld.so.cache -o -path $top \\) -prune -o -print" |
		grep -vxE '/etc/(shadow|gshadow|passwd|group|subuid|subgid)-|/var/lib/dkms(/mok\.(key|pub))?' |
		sort
}
snapshot > "$work/before.txt"

echo "== packages: install"
mkdir -p "$root/tmp/debs"
for p in $pkgs; do cp "$debs"/"$p"_*.deb "$root/tmp/debs/"; done
if ! in_root env DEBIAN_FRONTEND=noninteractive sh -c \
	"apt-get update -qq && apt-get install -y --no-install-recommends /tmp/debs/*.deb" \
	> "$results/apt-install.out" 2>&1; then
	record packages-install 1 "$(tail -n 30 "$results/apt-install.out")"
	exit 0
fi
ko=$(ls "$root/lib/modules/$kver/updates/dkms/npu.ko"* 2>/dev/null | head -n 1)
if [ -z "$ko" ]; then
	record packages-install 1 "DKMS built no npu.ko for $kver: $(tail -n 20 "$results/apt-install.out")"
	exit 0
fi
record packages-install 0 "installed $pkgs; DKMS built $ko ($(in_root dkms status npu 2>&1 | tr '\n' ' '))"

echo "== packages: consumers of libnpurt-dev"
cp -r "$top/tests/packages/consumer.c" "$top/tests/packages/cmake" "$root/tmp/"
if in_root sh -c 'set -e
	useradd -m -G render npu-user
	useradd -m npu-outsider
	cc -O2 -o /home/npu-user/consumer_pc /tmp/consumer.c $(pkg-config --cflags --libs npurt)
	cmake -S /tmp/cmake -B /tmp/cmake-build -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build /tmp/cmake-build >/dev/null
	cp /tmp/cmake-build/consumer_cmake /home/npu-user/
	cp /home/npu-user/consumer_pc /home/npu-outsider/
	ldd /home/npu-user/consumer_pc | grep -qE "libnpurt.so.0 => (/usr)?/lib/x86_64-linux-gnu/libnpurt.so.0"' \
	> "$results/consumers.out" 2>&1; then
	record packages-consumers 0 "built with pkg-config and find_package(npurt); linked to the installed libnpurt.so.0"
else
	record packages-consumers 1 "$(tail -n 30 "$results/consumers.out")"
fi

echo "== packages: the root booted, as a user of the render group"
"$top/tools/vmrun" --root "$root" --no-module --out "$vmout" --mem 3072 -t 900 -- \
	"$top/tests/packages/in-vm.sh" "$vmout/results"
rc=$?
record packages-vm-boot "$rc" "vmrun exited $rc (kernel log: $vmout/dmesg.txt)"
cp "$vmout"/results/* "$results"/ 2>/dev/null

echo "== packages: purge"
in_root sh -c 'userdel -r npu-user; userdel -r npu-outsider' > "$results/purge.out" 2>&1
rm -rf "$root/tmp/debs" "$root/tmp/consumer.c" "$root/tmp/cmake" "$root/tmp/cmake-build"
if ! in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y --autoremove $pkgs \
	>> "$results/purge.out" 2>&1; then
	record packages-purge 1 "$(tail -n 30 "$results/purge.out")"
	exit 0
fi
snapshot > "$work/after.txt"
left=$(diff "$work/before.txt" "$work/after.txt")
if [ -n "$left" ]; then
	record packages-purge 1 "files differ after the purge (< before, > after):
$left"
else
	record packages-purge 0 "apt-get purge --autoremove left the root as it was"
fi
exit 0
