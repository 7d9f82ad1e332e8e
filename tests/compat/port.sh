#!/bin/sh
# port.sh IN OUT - the mechanical port of a CUDA host program to libnpurt:
# each kernel launch, which sits on one line marked "// npurt: CALL", is
# replaced by CALL (its op launch), then every "cuda" and "CUDA" in a name
# becomes "npurt" and "NPURT". Nothing else changes. A launch without the
# mark is an error: the port would not compile or would silently differ.
set -eu
in=$1
out=$2
if grep -n '<<<' "$in" | grep -v '// npurt: ' >&2; then
	echo "port.sh: $in: a kernel launch without a '// npurt: CALL' mark" >&2
	exit 1
fi
sed -e 's|^\([[:space:]]*\).*<<<.*// npurt: \(.*\)$|\1\2|' \
	-e 's/cuda/npurt/g' -e 's/CUDA/NPURT/g' "$in" > "$out.tmp"
mv "$out.tmp" "$out"
