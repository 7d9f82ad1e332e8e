#!/bin/bash
# The measurements behind issue #6's notes that npurt-bench does not make:
# builds the probes against the runtime in build/cmake and runs them in one
# VM boot. Usage: tools/perf/run.sh (after `make all`); results on stdout.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/perf-probes
mkdir -p "$out"
lib=$top/build/cmake/lib
inc=$top/libnpurt/include
for p in enqueue_loop copy_pairs; do
	g++ -O2 -std=c++20 -I"$inc" "$top/tools/perf/$p.cpp" -o "$out/$p" \
		-L"$lib" -lnpurt -Wl,-rpath,"$lib"
done
gcc -O2 "$top/tools/perf/tlb_alias.c" -o "$out/tlb_alias"
gcc -O2 "$top/tools/perf/copy_movers.c" -o "$out/copy_movers"
cat > "$out/guest.sh" <<GUEST
#!/bin/sh
dbg=\$(dirname \$(ls -d /sys/kernel/debug/dri/*/npu_engines /sys/kernel/debug/accel/*/npu_engines 2>/dev/null | head -1))
echo "== enqueue, idle device"; $out/enqueue_loop 20000 1 3; $out/enqueue_loop 20000 4 3
echo "== enqueue, device kept busy (no flusher runs)"
echo 20000 > \$dbg/inject_latency_us; $out/enqueue_loop 20000 1 3; echo 0 > \$dbg/inject_latency_us
echo "== pinned 4 MiB copies, six buffer pairs per process"
for i in 1 2 3; do $out/copy_pairs 4194304 8; done
echo "== rep movsb at several distances"; $out/tlb_alias
echo "== copy loops (the copy engine's mover)"; $out/copy_movers
GUEST
chmod +x "$out/guest.sh"
"$top/tools/vmrun" -o "$out" -- sh -c "$out/guest.sh > $out/probes.txt 2>&1"
cat "$out/probes.txt"
