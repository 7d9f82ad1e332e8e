#!/bin/bash
# The bounded soak of `make test` (about 25 s of workload), inside the VM as
# root with npu.ko loaded: npu-soak with its figures in OUT_DIR/soak.json
# and its output in OUT_DIR/soak.log; with NPU_KO set (tools/vm-guest.sh
# exports it) the module is unloaded at the end, checked for leaks and
# loaded again with the parameters it had.
#
# usage: run-bounded.sh OUT_DIR [NPU_SOAK_BINARY [MORE_OPTIONS...]]
# exit 0 when the soak passed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: run-bounded.sh OUT_DIR [NPU_SOAK_BINARY [OPTIONS...]]}
soak=${2:-$top/build/cmake/bin/npu-soak}
shift $(( $# >= 2 ? 2 : 1 ))
mkdir -p "$out"
args=(--seconds "${SOAK_SECONDS:-25}" --json "$out/soak.json")
[ -n "${NPU_KO:-}" ] && args+=(--unload-check "$NPU_KO")
"$soak" "${args[@]}" "$@" 2>&1 | tee "$out/soak.log"
exit "${PIPESTATUS[0]}"
