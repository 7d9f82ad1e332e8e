#!/bin/bash
# Tests of tools/vmrun's own failure reports: each case is one result in
# RESULTS_DIR (NAME.cmd.log + NAME.rc). Two of them boot the VM.
#
# usage: vmrun-tests.sh RESULTS_DIR
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
results=$1
vmrun=$top/tools/vmrun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$results"

# expect NAME WANT_RC MESSAGE_REGEX CMD...: passes when CMD exits with
# WANT_RC and its stderr matches MESSAGE_REGEX ("-": stderr must be empty).
expect() {
	local name=$1 want=$2 regex=$3
	shift 3
	"$@" > "$tmp/out" 2> "$tmp/err"
	local rc=$? ok=1
	[ "$rc" = "$want" ] || ok=0
	if [ "$regex" = - ]; then
		[ ! -s "$tmp/err" ] || ok=0
	else
		grep -Eq -- "$regex" "$tmp/err" || ok=0
	fi
	{
		echo "command: $*"
		echo "exit: $rc (wanted $want), stderr must match: $regex"
		cat "$tmp/err"
	} > "$results/vmrun-$name.cmd.log"
	if [ "$ok" = 1 ]; then echo 0; else echo 1; fi > "$results/vmrun-$name.rc"
	echo "vmrun-$name: $([ "$ok" = 1 ] && echo ok || echo FAIL)"
}

printf '[    1.0] npu: loaded\n' > "$tmp/clean.txt"
printf '[    1.0] WARNING: CPU: 0 PID: 1 at drivers/npu.c:1 x\n[    1.1] Call Trace:\n' \
	> "$tmp/warn.txt"
printf '[    1.0] INFO: rcu_sched self-detected stall on CPU\n' > "$tmp/rcu.txt"
printf '[    1.0] possible circular locking dependency detected\n' > "$tmp/lockdep.txt"

# The debug kernel's start-up banners: clean.
printf '[    7.170700] rcu: \tRCU lockdep checking is enabled.\n[   28.145983] kmemleak: Kernel memory leak detector initialized (mem pool available: 14666)\n' \
	> "$tmp/banner.txt"
{
	cat "$tmp/banner.txt"
	printf '[  300.1] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)\n'
} > "$tmp/leak.txt"
expect logcheck-clean 0 - "$top/tools/vm-logcheck" "$tmp/clean.txt"
expect logcheck-kmemleak-banner 0 - "$top/tools/vm-logcheck" "$tmp/banner.txt"
expect logcheck-kmemleak-report 1 'suspected memory leaks' "$top/tools/vm-logcheck" "$tmp/leak.txt"
expect logcheck-warn 1 'warning or error report' "$top/tools/vm-logcheck" "$tmp/warn.txt"
expect logcheck-rcu 1 'stall on CPU' "$top/tools/vm-logcheck" "$tmp/rcu.txt"
expect logcheck-lockdep 1 'circular locking' "$top/tools/vm-logcheck" "$tmp/lockdep.txt"
expect no-command 2 'no command given' "$vmrun"
expect bad-timeout 2 'takes whole seconds' "$vmrun" -t soon -- true
expect bad-option 2 "unknown option '--bogus'" "$vmrun" --bogus -- true
expect missing-kernel 1 'kernel image /boot/vmlinuz-0.0.0-none is missing' \
	"$vmrun" -k 0.0.0-none -- true
expect missing-module 1 'module .*/nonexistent.ko not found' \
	"$vmrun" -m "$tmp/nonexistent.ko" -- true
# These two boot the VM.
expect module-load-fails 1 'npu.ko failed to load: .*Invalid' \
	"$vmrun" --out "$tmp/vm1" -p num_devices=0 -- true
expect command-hangs 124 'command timed out after 2 s' \
	"$vmrun" --out "$tmp/vm2" -t 2 -- sleep 600
expect command-status 3 - "$vmrun" --out "$tmp/vm3" -- sh -c 'exit 3'
exit 0
