#!/bin/bash
# make install, checked for real in a mount namespace of its own with an
# empty folder over the prefix (nothing on the host changes): the installed
# tools start without ldconfig or LD_LIBRARY_PATH (their RUNPATH names the
# prefix's library folder, which the loader does not search on its own),
# and a program built with the installed npurt.pc runs. One result,
# make-install, in RESULTS_DIR.
#
# usage: install-check.sh RESULTS_DIR
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build/cmake
results=$1
mkdir -p "$results"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")

if [ "$(id -u)" != 0 ] || [ -z "$prefix" ] || [ "$prefix" = / ] || [ "$prefix" = /usr ]; then
	echo "skipped: needs root and a prefix other than / or /usr (have '$prefix')" \
		> "$results/make-install.cmd.log"
	echo 0 > "$results/make-install.rc"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/prefix"
# shellcheck disable=SC2016
unshare --mount --propagation private -- /bin/bash -c '
	set -eu
	prefix=$1 libdir=$2 build=$3 top=$4 tmp=$5
	mkdir -p "$prefix"
	mount --bind "$tmp/prefix" "$prefix"
	cmake --install "$build" > "$tmp/install.out"
	echo "installed into $prefix (an empty folder bound over it)"
	for f in "$prefix"/bin/npu-smi "$prefix"/bin/npurt-bench; do
		readelf -d "$f" | grep -E "RUNPATH|RPATH" || echo "$f: no RUNPATH"
		"$f" --help > /dev/null
		echo "$f --help: started"
	done
	# What make install then runs, ldconfig, into a cache of this
	# namespace only.
	ldconfig -C "$tmp/ld.so.cache"
	mount --bind "$tmp/ld.so.cache" /etc/ld.so.cache
	cc -O2 -o "$tmp/consumer" "$top/tests/packages/consumer.c" \
		$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs npurt)
	out=$("$tmp/consumer" 2>&1 || true)
	echo "consumer built with $prefix/$libdir/pkgconfig/npurt.pc ran: $out"
	! echo "$out" | grep -q "error while loading shared libraries"
' _ "$prefix" "$libdir" "$build" "$top" "$tmp" > "$results/make-install.cmd.log" 2>&1
echo $? > "$results/make-install.rc"
