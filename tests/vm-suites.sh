#!/bin/bash
# Runs inside the VM (through tools/vmrun), with npu.ko loaded at its default
# parameters: every kselftest and GoogleTest suite, the examples, and the
# suites that need other module parameters (reloading the module for each).
# Each suite leaves a log in RESULTS; tests/summarize.sh counts them.
#
# usage: vm-suites.sh BUILD_DIR RESULTS_DIR
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$1
results=$2
bin=$build/cmake/bin
ksft=$build/kselftest
suite_timeout=${NPU_SUITE_TIMEOUT:-900}

rm -rf "$results"
mkdir -p "$results"

# run NAME KIND CMD...: KIND is gtest, ktap or cmd (pass = exit 0). The
# seconds it took are printed after it (where a lane's time goes: CI has a
# budget).
run() {
	local name=$1 kind=$2 start=$SECONDS
	shift 2
	echo "=== $name"
	local log=$results/$name.$kind.log
	timeout -k 5 "$suite_timeout" "$@" > "$log" 2>&1
	local rc=$?
	echo "$rc" > "$results/$name.rc"
	[ "$rc" = 124 ] && echo "TIMEOUT after $suite_timeout s" >> "$log"
	tail -n 3 "$log"
	echo "($((SECONDS - start)) s)"
}

# The lane's own parameters (vmrun -p: NPU_PARAMS) stay; the shape's come
# after them and win.
reload() {
	rmmod npu 2>/dev/null
	# shellcheck disable=SC2068,SC2086
	insmod "$NPU_KO" $NPU_PARAMS $@
}

# A check with no output of its own: record pass or fail with a reason.
check() {
	local name=$1 ok=$2 why=$3
	echo "=== $name"
	echo "$why" > "$results/$name.cmd.log"
	if [ "$ok" = 1 ]; then echo 0; else echo 1; fi > "$results/$name.rc"
	echo "$why"
}

# The GoogleTest suites that the debug lane's `make test` subset (core)
# leaves to `make test-debug` (rest), to fit CI's time: the copy matrix
# (sizes x offsets x kinds) and the op set's numerics against the CPU
# (about 4 minutes under the debug kernel), and the stress tests that
# repeat one path for minutes there (millions of strided runs: 205 s;
# peer links flapping while the peer allocates: 280 s; four threads on
# streams: 100 s; VMM until device memory runs out: 29 s). The kernel
# paths they take are in the other GoogleTest suites and in the debug13
# lane's kselftests.
core_skips='AsyncCopies/AsyncCopyMatrix.*:Ops*:OpsValidation.*:Profiler.*'
core_skips+=':StridedCopies.ViewsOfMillionsOfRuns*:Peer.LinksChangeWhileThePeerAllocates'
core_skips+=':StreamThreads.*:Vmm.LimitAndDeviceMemoryRunOut'

# run_all_suites TAG FILTER: every kselftest, then the GoogleTest suite
# with FILTER (none when FILTER is empty).
run_all_suites() {
	local tag=$1 filter=$2
	for t in "$ksft"/*_test; do
		[ -x "$t" ] && run "ksft-$(basename "$t")$tag" ktap "$t"
	done
	[ -z "$filter" ] ||
		run "npurt_vm_tests$tag" gtest "$bin/npurt_vm_tests" --gtest_filter="$filter"
}

# NPU_SUITES: all (the default); core (the debug lane in `make test`, to
# fit CI's time): the runtime's suites at the default parameters (the
# GoogleTest suite less core_skips, the examples) and the tools' checks;
# kernel (the debug13 lane in `make test`): the kselftests less their
# exhaustion scenes (NPU_EXHAUSTION=skip: thousands of objects each, about
# 15 minutes under a debug kernel; the stock lanes run them) and the
# tools' checks. The two debug lanes of `make test` so split the work:
# every uAPI path under 6.12's checkers, the runtime's use of it under
# 6.1's. rest: what core leaves out (every kselftest, core_skips) and the
# runs after them, which repeat those code paths with other settings and
# device shapes, and the PyTorch suite.
suites=${NPU_SUITES:-all}
if [ "$suites" != rest ]; then
	# Default parameters: what the subset takes of every suite.
	case "$suites" in
	core) run npurt_vm_tests gtest "$bin/npurt_vm_tests" --gtest_filter="-$core_skips" ;;
	kernel) NPU_EXHAUSTION=skip run_all_suites "" "" ;;
	*) run_all_suites "" "*" ;;
	esac
fi
if [ "$suites" != rest ] && [ "$suites" != kernel ]; then
	run example_device_query cmd "$bin/example_device_query"
	run example_streams_events cmd "$bin/example_streams_events"
	run example_pinned_copies cmd "$bin/example_pinned_copies"
	run example_host_func cmd "$bin/example_host_func"
	run example_fault_report cmd "$bin/example_fault_report"
	run example_profile_trace cmd "$bin/example_profile_trace" "$results/profile_trace.json"
fi
if [ "$suites" != rest ]; then
	run npu-smi cmd "$bin/npu-smi"
	run npu-smi-json cmd "$bin/npu-smi" --json
	run npu-smi-query cmd "$bin/npu-smi" -q -i 0
	run npu-smi-dmon cmd "$bin/npu-smi" dmon -d 0.2 -c 2
	"$bin/npu-smi" -l 0 > "$results/npu-smi-bad.out" 2>&1
	rc=$?
	check npu-smi-bad-usage "$([ "$rc" = 2 ] && echo 1 || echo 0)" \
		"npu-smi -l 0 exits $rc (want 2): $(cat "$results/npu-smi-bad.out")"
	# The node kind follows the kernel: accel nodes where it has
	# drivers/accel (6.12), render nodes before (6.1).
	if [ -d /sys/class/accel ]; then kind=/dev/accel/accel; else kind=/dev/dri/renderD; fi
	nodes=$(grep -o '"node": "[^"]*"' "$results/npu-smi-json.cmd.log")
	if [ -n "$nodes" ] && ! echo "$nodes" | grep -v -q "\"node\": \"$kind"; then
		check npu-smi-node-kind 1 "npu-smi names ${kind}* nodes: $(echo $nodes)"
	else
		check npu-smi-node-kind 0 "npu-smi's nodes are not all ${kind}*: '$(echo $nodes)'"
	fi
fi
# CUDA-style programs ported by tests/compat/port.sh (not in the debug
# lane's core: their megabyte ops are slow there).
if [ "$suites" = all ]; then
	for p in deviceQuery bandwidthTest asyncAPI simpleStreams simpleMultiCopy \
		simpleCallback simpleIPC simpleZeroCopy simpleMultiGPU simpleStreamPriorities simpleP2P \
		streamOrderedAllocation simpleCudaGraphs unifiedMemory simplePitchLinear \
		graphMemoryNodes streamOrderedAllocationIPC; do
		run "compat_$p" cmd "$bin/compat_$p"
	done
fi
# Bounded runs of the uAPI fuzzer (tools/fuzz: two seeds, about 30 s) and
# the soak (tools/soak: processes with faults, hangs and kills injected,
# about 25 s, then the module unloaded, checked for leaks and reloaded), so
# a regression either would find shows in `make test`; `make fuzz` and
# `make soak` run them longer.
if [ "$suites" = all ]; then
	NPU_FUZZ_SECONDS=${NPU_FUZZ_SECONDS:-15} run npu-fuzz cmd \
		"$top/tools/fuzz/run-bounded.sh" "$results/fuzz" "$bin/npu-fuzz"
	run npu-soak cmd "$top/tools/soak/run-bounded.sh" "$results/soak" "$bin/npu-soak"
fi
if [ "$suites" = core ] || [ "$suites" = kernel ]; then
	exit 0
fi
if [ "$suites" = rest ]; then
	# What core leaves out: every kselftest, and the GoogleTest cases.
	run_all_suites "" ""
	run npurt_vm_tests-core-skips gtest "$bin/npurt_vm_tests" --gtest_filter="$core_skips"
fi
# The PyTorch backend: all its pytest files in one Python process (importing
# torch takes most of a minute under TCG). Only where it was built, and not
# under `make test-debug` the debug kernel takes about 9 minutes to import
# torch).
if [ -d "$build/python/torch_npurt" ]; then
	NPURT_TORCH_REQUIRE_NPU=1 PYTHONPATH="$build/python" run torch_npurt pytest \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider "$top/tests/torch"
fi
# Waits that sleep at once (no polling of the completion record) and a
# malformed setting (which means the default).
NPURT_SPIN_US=0 run npurt_vm_tests-spin_us=0 gtest "$bin/npurt_vm_tests" \
	--gtest_filter='Streams.*:Events.*:AsyncCopies.*'
NPURT_SPIN_US=junk run npurt_vm_tests-spin_us=junk gtest "$bin/npurt_vm_tests" \
	--gtest_filter='Streams.*'

# Other shapes of the device, with the suites they concern (a full pass
# per shape would multiply the run time): 1 and 4 NPUs for discovery and
# multi-device memory, and a small device memory (128 MiB) on which the
# out-of-memory paths run for real.
shape_suites() {
	local tag=$1 filter=$2
	shift 2
	for t in "$@"; do
		run "ksft-$t-$tag" ktap "$ksft/$t"
	done
	run "npurt_vm_tests-$tag" gtest "$bin/npurt_vm_tests" --gtest_filter="$filter"
}
for shape in num_devices=1 num_devices=4 mem_size_mb=128; do
	if ! reload "$shape"; then
		check "load-$shape" 0 "insmod $shape failed"
		continue
	fi
	case "$shape" in
	num_devices=*)
		NPU_EXPECT_DEVICES=${shape#num_devices=} shape_suites "$shape" \
			'Devices.*:Memory.*:AsyncCopies.DeviceToDeviceAcrossNpus:Events.StreamWaitEventAcrossDevices' \
			npu_query_test npu_prime_test ;;
	*)
		shape_suites "$shape" 'Memory.*:SafeFree.AllocationWaits*' npu_mem_test npu_prime_test npu_ops_test ;;
	esac
done

# Bad module parameters are refused, and the module loads afterwards.
for p in num_devices=0 num_devices=17 mem_size_mb=1 copy_engines=0 compute_engines=9; do
	if reload "$p" 2>/dev/null; then
		check "reject-$p" 0 "insmod $p succeeded; it must fail"
	else
		check "reject-$p" 1 "insmod $p refused"
	fi
done
if reload; then
	check reload-after-rejects 1 "module loads after refused parameters"
else
	check reload-after-rejects 0 "module no longer loads after refused parameters"
fi
exit 0
