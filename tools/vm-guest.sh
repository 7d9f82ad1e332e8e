#!/bin/bash
# Runs inside the vmrun guest (or on a real host with vmrun --host): load
# the module stack, run the command, unload, save the kernel log. Results go
# to files in the output folder; vmrun reads them.
set -u

out=$1
. "$out/guest.env"
export NPU_KO NPU_PARAMS NPU_OUT NPU_REPO
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root

finish() {
	echo "$1" > "$out/status"
	dmesg > "$out/dmesg.txt" 2>&1
	sync
	exit 0
}

# kmemleak, on kernels that have it (the debug lane): what boot left
# unreferenced is not ours, so it is cleared before the run; after the
# command and again after the unload, a scan reports what was lost.
kmemleak=/sys/kernel/debug/kmemleak
kmemleak_scan() {
	[ -w "$kmemleak" ] || return 0
	# Objects younger than 5 s are not reported yet. A scan takes about
	# 40 s under emulation, so a second one only confirms what the first
	# found (a pointer in flight can make a false suspect; kmemleak.rst).
	sleep 6
	echo scan > "$kmemleak"
	if [ -n "$(cat "$kmemleak")" ]; then
		echo scan > "$kmemleak"
		cat "$kmemleak" >> "$out/kmemleak.txt"
	fi
	echo clear > "$kmemleak"
}
if [ -w "$kmemleak" ]; then
	echo scan > "$kmemleak"
	echo clear > "$kmemleak"
fi

if ! modprobe -a drm drm_shmem_helper gpu-sched > "$out/insmod.log" 2>&1; then
	finish deps-failed
fi
if [ "$NPU_LOAD" = 1 ]; then
	# shellcheck disable=SC2086
	if ! insmod "$NPU_KO" $NPU_PARAMS > "$out/insmod.log" 2>&1; then
		dmesg | grep -i npu | tail -5 >> "$out/insmod.log"
		finish load-failed
	fi
fi

timeout -k 10 "$NPU_TIMEOUT" bash "$out/cmd.sh"
rc=$?
echo "$rc" > "$out/rc"

status=ok
[ "$rc" = 124 ] && status=timeout
kmemleak_scan
# The command may have unloaded or reloaded the module itself.
if grep -q '^npu ' /proc/modules; then
	if ! rmmod npu > "$out/rmmod.log" 2>&1; then
		status=unload-failed
	fi
fi
kmemleak_scan
finish "$status"
