#!/bin/bash
# run-bounded.sh OUT_DIR [NPU_FUZZ]: the bounded fuzzer run of the VM suites
# (tests/vm-suites.sh), inside the guest with npu.ko loaded: about 36 s in
# two runs, one with a fixed seed (the same calls every time: a regression
# shows as a change) and one with a seed from the clock (new calls every
# time; printed, so a failure reproduces with --seed). Each writes its
# summary.json, and on a failure the streams' logs and replay files, under
# OUT_DIR/fixed and OUT_DIR/fresh.
#
# NPU_FUZZ is the fuzzer (default: build/cmake/bin/npu-fuzz of this tree).
# NPU_FUZZ_SECONDS (default 18) is the length of each run.
# Exit status: 0 if both runs passed (no kernel report, no failure).
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: run-bounded.sh OUT_DIR [NPU_FUZZ]}
fuzz=${2:-$top/build/cmake/bin/npu-fuzz}
secs=${NPU_FUZZ_SECONDS:-18}
# 0x16: the issue that asked for the fuzzer.
fixed_seed=0x16f022
fresh_seed=$(printf '0x%x' "$(date +%s%N)")

mkdir -p "$out/fixed" "$out/fresh"
rc=0
for run in "fixed $fixed_seed" "fresh $fresh_seed"; do
	set -- $run
	echo "== npu-fuzz, $1 seed $2, $secs s"
	"$fuzz" --seed "$2" --seconds "$secs" --procs 2 --threads 2 --fds 3 --out "$out/$1" ||
		rc=1
done
[ "$rc" = 0 ] && echo "npu-fuzz: both runs passed (seeds $fixed_seed and $fresh_seed)" ||
	echo "npu-fuzz: a run failed (seeds $fixed_seed and $fresh_seed)"
exit "$rc"
