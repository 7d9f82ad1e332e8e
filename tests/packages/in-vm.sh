#!/bin/bash
# tests/packages/in-vm.sh RESULTS: inside the VM booted from the packages
# root (tests/packages/run.sh), as root: the module DKMS built loads with
# modprobe, udev applies the package's rule, and the installed programs run
# as npu-user (in the render group) while npu-outsider (not in it) is
# refused. One result per check in RESULTS.
set -u
results=$1
mkdir -p "$results"
record() {
	echo "$3" > "$results/$1.cmd.log"
	echo "$2" > "$results/$1.rc"
	echo "$1: $([ "$2" = 0 ] && echo ok || echo FAILED) - $3"
}
# Runs CMD as USER with the user's groups (the root's file system is
# read-only here: HOME is a tmpfs folder).
as() {
	local user=$1
	shift
	mkdir -p "/tmp/$user" && chown "$user:" "/tmp/$user"
	setpriv --reuid="$user" --regid="$user" --init-groups env HOME="/tmp/$user" "$@"
}

path=$(modinfo -n npu 2>&1)
if modprobe npu > "$results/modprobe.out" 2>&1 && grep -q '^npu ' /proc/modules; then
	record packages-modprobe 0 "modprobe npu loaded $path"
else
	record packages-modprobe 1 "modprobe npu failed ($path): $(cat "$results/modprobe.out")"
	exit 0
fi

# udev as on a booted system: the daemon (once it answers), then the add
# events again. The guest runs the root chrooted, where systemd's tools
# refuse to act unless told to.
export SYSTEMD_IGNORE_CHROOT=1
/lib/systemd/systemd-udevd --daemon > "$results/udevd.out" 2>&1
udevadm control --ping -t 30 >> "$results/udevd.out" 2>&1
udevadm trigger --action=add --subsystem-match=drm --subsystem-match=accel \
	>> "$results/udevd.out" 2>&1
udevadm settle -t 30 >> "$results/udevd.out" 2>&1
nodes=""
bad=""
for n in /dev/accel/accel* /dev/dri/renderD*; do
	[ -e "$n" ] || continue
	drv=$(basename "$(readlink -f "/sys/class/$(basename "$(dirname "$n")" | sed 's/dri/drm/')/$(basename "$n")/device/driver")")
	[ "$drv" = npu ] || continue
	nodes="$nodes $n"
	perm=$(stat -c '%G %a' "$n")
	[ "$perm" = "render 660" ] || bad="$bad $n($perm)"
done
if [ -n "$nodes" ] && [ -z "$bad" ]; then
	record packages-udev-rule 0 "render 660:$nodes"
else
	first=${nodes# }
	first=${first%% *}
	record packages-udev-rule 1 "nodes:${nodes:- none}; not render 660:$bad
$(cat "$results/udevd.out")
$([ -n "$first" ] && udevadm test "$(udevadm info -q path -n "$first")" 2>&1 | tail -n 25)"
fi

out=$(as npu-user /home/npu-user/consumer_pc 2>&1)
rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q '^PASS$'
record packages-consumer-pkg-config $? "$out"
out=$(as npu-user /home/npu-user/consumer_cmake 2>&1)
rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q '^PASS$'
record packages-consumer-cmake $? "$out"
out=$(as npu-user npu-smi 2>&1)
rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q 'npu-emu'
record packages-npu-smi $? "$out"
out=$(as npu-user python3 -c 'import torch, torch_npurt
x = (torch.ones(4).npu() * 2).cpu()
assert x.tolist() == [2.0] * 4, x
print("PASS", torch.__version__, torch_npurt.DEVICE_TYPE)' 2>&1)
rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q '^PASS'
record packages-torch-npurt $? "$out"
# What C++ extensions build against: the package's header, libnpurt-dev's
# headers and library, where torch_npurt.utils.cpp_extension says.
out=$(as npu-user python3 -c 'import os, torch_npurt
from torch_npurt.utils import cpp_extension as e
inc, lib = e.include_paths(), e.library_paths()
assert os.path.isfile(os.path.join(inc[0], "torch_npurt", "extension.h")), inc
assert os.path.isfile(os.path.join(inc[1], "npurt", "npurt.h")), inc
assert os.path.exists(os.path.join(lib[0], "libnpurt.so")), lib
print("PASS", inc, lib)' 2>&1)
rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q '^PASS'
record packages-torch-npurt-extension-paths $? "$out"
# Not in the render group: the nodes do not open, and the runtime says why.
out=$(as npu-outsider /home/npu-outsider/consumer_pc 2>&1)
rc=$?
[ "$rc" != 0 ] && echo "$out" | grep -qiE 'permission|no usable NPU'
record packages-outsider-refused $? "exit $rc: $out"

if modprobe -r npu > "$results/modprobe-r.out" 2>&1 && ! grep -q '^npu ' /proc/modules; then
	record packages-module-unload 0 "modprobe -r npu"
else
	record packages-module-unload 1 "$(cat "$results/modprobe-r.out")"
fi
exit 0
