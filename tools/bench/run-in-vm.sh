#!/bin/sh
# `make bench` inside the VM: npurt-bench, then the PyTorch section (where
# the backend was built), in one boot.
# usage: run-in-vm.sh BUILD_DIR OUT_DIR [npurt-bench args...]
build=$1
out=$2
shift 2
top=$(cd "$(dirname "$0")/../.." && pwd)
"$build/cmake/bin/npurt-bench" --out "$out" "$@" || exit
if [ -d "$build/python/torch_npurt" ]; then
	PYTHONPATH="$build/python" /usr/bin/python3 "$top/tools/bench/torch_bench.py" "$out"
fi
