#!/bin/bash
# tests/lane.sh LANE RESULTS_DIR: one lane of `make test`: boot its kernel
# once with its npu.ko and run every VM suite (tests/vm-suites.sh), then
# record the boot itself as a test (a clean kernel log, kmemleak silent, a
# module that unloads). Each result lands in RESULTS_DIR for
# tests/summarize.sh.
#
# Lanes:
#   stock   Debian 12's kernel (6.1) with full preemption (preempt=full:
#           Debian builds it PREEMPT_DYNAMIC), the module from `make`.
#   debian13  Debian 13 whole: its kernel (6.12, where the NPUs are accel
#           nodes), g++ 14, Python 3.13 and torch 2.6, in the root that
#           `make deps` makes (build/debian13); the tree is built in that
#           root (tools/sysroot/build-lane, into build/lanes/debian13) and
#           the guest runs in it. Full preemption, as stock.
#   debug   the debug kernel (tools/debug-kernel/build: lockdep, KASAN,
#           kmemleak, DEBUG_OBJECTS, DEBUG_LIST, atomic-sleep checks,
#           full preemption, KCOV), built once and cached, and the module
#           built against it. NPU_DEBUG_SUITES=core (the default, to fit
#           CI's time): the runtime's suites (the GoogleTest suite
#           less its copy matrix, op numerics and stress tests, the
#           examples) and the tools' checks, at the default parameters
#           (the kselftests run under debug13's checkers); =all adds
#           every kselftest, those GoogleTest cases, the other
#           device shapes, the wait variants and the PyTorch suite
#           (`make test-debug` does).
#   debug13 the debug kernel built from Debian 13's source (6.12, in the
#           root's /usr/src, with accel nodes: tools/debug-kernel/
#           config.accel), the module built on the host against it, and the
#           Debian 13 root's user space (the debian13 lane's build) in the
#           guest. NPU_DEBUG13_SUITES=kernel (the default, for CI's time):
#           every kselftest less its exhaustion scenes and the tools'
#           checks; `make test-debug` runs
#           =all as on the debug lane.
#   packages  the Debian packages (make deb) installed in a fresh Debian 12
#           root, DKMS building the module, the root booted and the
#           packages used as a user of the render group, then purged
#           (tests/packages/run.sh; make test-packages).
#   packages13  the same on Debian 13: the packages built by make deb's
#           script in a fresh Debian 13 root (its g++ 14 and torch 2.6),
#           installed there, DKMS building the module for its 6.12, the
#           root booted (accel nodes) and used, then purged.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
lane=$1
results=$2
vmout=$build/lanes/$lane/vm
mkdir -p "$results" "$vmout"

# record NAME RC WHY: a lane step as one result.
record() {
	echo "$3" > "$results/$1.cmd.log"
	echo "$2" > "$results/$1.rc"
}

# build_in_root: the tree built in the Debian 13 root (the debian13 and
# debug13 lanes share it; incremental), into lane_build.
build_in_root() {
	echo "== build in the Debian 13 root"
	root=$build/debian13
	lane_build=$build/lanes/debian13
	if ! "$top/tools/sysroot/build-lane" "$root" "$lane_build" > "$results/build-lane.log" 2>&1; then
		tail -n 30 "$results/build-lane.log" >&2
		record debian13-build 1 "$(tail -n 30 "$results/build-lane.log")"
		return 1
	fi
}

args=()
suite_env=()
# Where the lane's build is: the tree's own, or one made for the lane.
lane_build=$build
case "$lane" in
stock)
	args=(--append preempt=full)
	;;
debian13)
	build_in_root || exit 1
	args=(--root "$root" --module "$lane_build/kernel/npu.ko" --append preempt=full)
	;;
debug|debug13)
	kargs=()
	suites=${NPU_DEBUG_SUITES:-core}
	if [ "$lane" = debug13 ]; then
		build_in_root || exit 1
		tarball=$(ls "$root"/usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -n 1)
		kargs=("${tarball:-$root/usr/src/linux-source.tar.xz}" "$top/tools/debug-kernel/config.accel")
		suites=${NPU_DEBUG13_SUITES:-kernel}
	fi
	echo "== debug kernel"
	if ! kdir=$("$top/tools/debug-kernel/build" "${kargs[@]}" 2> "$results/debug-kernel.log"); then
		cat "$results/debug-kernel.log" >&2
		record debug-kernel-build 1 "$(cat "$results/debug-kernel.log")"
		exit 1
	fi
	if ! ko=$("$top/tools/debug-kernel/module" "$kdir" "$build/lanes/$lane/module" \
		2> "$results/debug-module.log"); then
		cat "$results/debug-module.log" >&2
		record debug-module-build 1 "$(cat "$results/debug-module.log")"
		exit 1
	fi
	# la57=off: with 5-level paging (-cpu max has it) KASAN misreads
	# memory while CPU identification briefly clears that flag; 6.1 has
	# no no5lvl parameter. pci=noacpi: under KASAN the firmware's PCI
	# routing method runs into two 30 s AML loop timeouts; the guest's
	# virtio devices work without it (acpi=off would cost the second
	# CPU). job_timeout_ms: jobs are queued about 200x slower, so work
	# meant to wait behind a job must not see it time out first. -t:
	# every suite (make test-debug) takes over an hour in this guest.
	args=(--kernel-dir "$kdir" --module "$ko" --mem 3072 --cpu max,la57=off
		--append "kasan_multi_shot preempt=full pci=noacpi"
		-p job_timeout_ms=10000 -t 7200)
	# About 10x slower ioctls and 200x slower jobs than the stock kernel.
	suite_env=(env NPU_SUITE_TIMEOUT="${NPU_SUITE_TIMEOUT:-2400}" NPU_SUITES="$suites")
	[ "$lane" = debug ] || args+=(--root "$root")
	;;
packages)
	# No VM suites: tests/packages/run.sh builds the packages, installs
	# them in a fresh Debian 12 root, boots it and purges them.
	"$top/tests/packages/run.sh" "$results"
	exit 0
	;;
packages13)
	# The same on Debian 13 (6.12), the packages built in its root.
	"$top/tests/packages/run.sh" "$results" trixie
	exit 0
	;;
*)
	echo "lane.sh: unknown lane '$lane'" >&2
	exit 2
	;;
esac

echo "== VM suites, $lane lane (one boot)"
"$top/tools/vmrun" --out "$vmout" "${args[@]}" -- "${suite_env[@]}" \
	"$top/tests/vm-suites.sh" "$lane_build" "$vmout/results"
rc=$?
if [ "$rc" = 0 ]; then
	why="kernel log clean, kmemleak silent, module unloaded"
else
	why="vmrun exited $rc (see its message above, $vmout/dmesg.txt and $vmout/kmemleak.txt)"
fi
record vm-kernel-log-and-unload "$rc" "$why"
# The suites' own results, beside the lane's.
cp "$vmout"/results/* "$results"/ 2>/dev/null
echo "== $lane lane: $SECONDS s"
exit 0
