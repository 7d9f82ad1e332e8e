#!/bin/bash
# make test: the host-only unit tests, then each lane (tests/lane.sh: one VM
# boot per lane running every suite against the loaded module), then one
# summary line over everything. Exits non-zero on any failure.
#
# NPU_LANES picks the lanes (default "stock debian13 debug debug13 packages
# packages13"; `make test-debug` is NPU_LANES="debug debug13", `make
# test-packages` NPU_LANES="packages packages13").
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
out=$build/test-results
lanes=${NPU_LANES:-stock debian13 debug debug13 packages packages13}
rm -rf "$out"
mkdir -p "$out/host"
host=$out/host

echo "== host unit tests"
"$build/cmake/bin/npurt_unit_tests" > "$host/npurt_unit_tests.gtest.log" 2>&1
echo $? > "$host/npurt_unit_tests.rc"
tail -n 3 "$host/npurt_unit_tests.gtest.log"
# Kernel code that also runs in user space (the op set's numerics).
make -s -C "$top/tests/host" O="$host" > "$host/host-make.out" 2>&1
grep -h "^# Totals" "$host"/*.ktap.log 2>/dev/null
"$top/tests/install-check.sh" "$host"
echo "make install (staged): $(tail -n 1 "$host/make-install.cmd.log")"

dirs=("host=$host")
for lane in $lanes; do
	mkdir -p "$out/$lane"
	"$top/tests/lane.sh" "$lane" "$out/$lane"
	dirs+=("$lane=$out/$lane")
done

echo "== vmrun's own failure reports"
"$top/tests/vmrun-tests.sh" "$host"

echo "== summary"
"$top/tests/summarize.sh" "${dirs[@]}"
