#!/bin/bash
# make test: the host-only unit tests, then one VM boot that runs every suite
# against the loaded module (tests/vm-suites.sh), then one summary line over
# everything. Exits non-zero on any failure.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
host=$build/test-results
vmout=$build/vm
rm -rf "$host"
mkdir -p "$host"

echo "== host unit tests"
"$build/cmake/bin/npurt_unit_tests" > "$host/npurt_unit_tests.gtest.log" 2>&1
echo $? > "$host/npurt_unit_tests.rc"
tail -n 3 "$host/npurt_unit_tests.gtest.log"
# Kernel code that also runs in user space (the op set's numerics).
make -s -C "$top/tests/host" O="$host" > "$host/host-make.out" 2>&1
grep -h "^# Totals" "$host"/*.ktap.log 2>/dev/null

echo "== VM suites (one boot)"
"$top/tools/vmrun" --out "$vmout" -- "$top/tests/vm-suites.sh" "$build" "$vmout/results"
rc=$?
# The VM run itself is a test: a clean kernel log, a module that unloads.
if [ "$rc" = 0 ]; then
	echo "kernel log clean, module unloaded" > "$host/vm-kernel-log-and-unload.cmd.log"
else
	echo "vmrun exited $rc (see its message above and $vmout/dmesg.txt)" \
		> "$host/vm-kernel-log-and-unload.cmd.log"
fi
echo "$rc" > "$host/vm-kernel-log-and-unload.rc"

echo "== vmrun's own failure reports"
"$top/tests/vmrun-tests.sh" "$host"

echo "== summary"
"$top/tests/summarize.sh" "$host" "$vmout/results"
