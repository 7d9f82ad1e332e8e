"""The PyTorch section of `make bench`: what torch_npurt adds over libnpurt.

Each figure is measured against a limit taken in the same run (libnpurt's own
pinned copy through ctypes, or the same work on torch's CPU backend), as the
rest of npurt-bench does; the ratio's goal says what "good" means. Runs
inside the VM after npurt-bench (one boot: importing torch takes most of a
minute under TCG).

usage: torch_bench.py OUT_DIR [--runs N]
"""
import ctypes
import json
import os
import statistics
import sys
import time

import torch

import torch_npurt as torch_npu

MIB = 1 << 20


def runtime():
    """libnpurt itself, the copy the torch_npurt extension loaded."""
    path = os.path.join(os.path.dirname(torch_npu._C.__file__), "..", "..", "cmake", "lib",
                        "libnpurt.so.0")
    lib = ctypes.CDLL(path if os.path.exists(path) else "libnpurt.so.0")
    for name in ("npurtMalloc", "npurtMallocHost", "npurtMemcpy", "npurtFree",
                 "npurtFreeHost"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def timed(fn, sync):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


class Bench:
    def __init__(self, runs):
        self.runs = runs
        self.figures = []

    def figure(self, name, unit, measure, limit_name, limit, goal, note, scale=1.0):
        """measure() and limit() return seconds for one sample each; the
        ratio of each run is measured/limit."""
        values, limits, ratios = [], [], []
        measure()  # warm up both (allocations, pins, kernels)
        limit()
        for _ in range(self.runs):
            m, lim = measure(), limit()
            values.append(m * scale)
            limits.append(lim * scale)
            ratios.append(m / lim)
        f = {
            "section": "torch", "figure": name, "unit": unit,
            "median": statistics.median(values), "min": min(values), "max": max(values),
            "limit": limit_name, "limit_median": statistics.median(limits),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "goal": goal,
            "met": statistics.median(ratios) <= goal, "note": note,
        }
        self.figures.append(f)
        print(f"{name:44s} {f['median']:10.3f} {unit:6s} vs {limit_name:34s} "
              f"{f['limit_median']:10.3f}  ratio {f['ratio']:6.2f} "
              f"[{f['ratio_min']:.2f}..{f['ratio_max']:.2f}]  goal <= {goal:g} "
              f"{'ok' if f['met'] else 'MISSED'}", flush=True)


def copies(b, lib, dev):
    n = 64 * MIB
    sync = torch_npu.npu.synchronize
    d, h = ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.npurtMalloc(ctypes.byref(d), ctypes.c_size_t(n)) == 0
    assert lib.npurtMallocHost(ctypes.byref(h), ctypes.c_size_t(n)) == 0
    ctypes.memset(h, 1, n)

    def npurt_h2d():
        return timed(lambda: lib.npurtMemcpy(d, h, ctypes.c_size_t(n), 1), sync)

    def npurt_d2h():
        return timed(lambda: lib.npurtMemcpy(h, d, ctypes.c_size_t(n), 2), sync)

    pageable = torch.ones(n // 4)
    pinned = pageable.pin_memory()
    on_dev = pageable.to(dev)
    gbs = n / 1e9
    b.figure(".npu() of 64 MiB (pageable)", "ms",
             lambda: timed(lambda: pageable.npu(), sync), "libnpurt pinned npurtMemcpy H2D",
             npurt_h2d, 2.0, f"{gbs:.3f} GB per copy; staged or pinned by libnpurt", 1e3)
    b.figure(".npu() of 64 MiB (pin_memory())", "ms",
             lambda: timed(lambda: pinned.npu(), sync), "libnpurt pinned npurtMemcpy H2D",
             npurt_h2d, 1.25, "the engine reads the pinned tensor directly", 1e3)
    def fresh_cpu_tensor():
        return timed(lambda: torch.empty(n // 4).fill_(1.0), lambda: None)

    # .cpu() makes a new pageable tensor: the guest kernel faults in and
    # zeroes its 64 MiB first (under TCG several times the copy itself), a
    # cost the CPU pays to make the same tensor, and the limit here. The
    # engine's part is the copy_ figure below, against the pinned copy.
    b.figure(".cpu() of 64 MiB", "ms",
             lambda: timed(lambda: on_dev.cpu(), sync),
             "the CPU making the same new tensor", fresh_cpu_tensor, 2.0,
             "into a new pageable tensor, as torch's .cpu(): its first touch (pages "
             "faulted in and zeroed) is the limit's too", 1e3)
    reused = torch.empty(n // 4)
    b.figure("copy_ of 64 MiB into a CPU tensor", "ms",
             lambda: timed(lambda: reused.copy_(on_dev), sync), "libnpurt pinned npurtMemcpy D2H",
             npurt_d2h, 2.0, "into pageable memory touched before (pinned by libnpurt, cached)",
             1e3)
    lib.npurtFree(d)
    lib.npurtFreeHost(h)


def dispatch(b, dev):
    n = 2000
    a_dev = torch.ones(4, device=dev)
    a_cpu = torch.ones(4)
    sync = torch_npu.npu.synchronize

    def loop(a):
        for _ in range(n):
            a.add(a)

    b.figure("tiny op (add of 4 floats) per call", "us",
             lambda: timed(lambda: loop(a_dev), sync) / n, "the same op on torch's CPU",
             lambda: timed(lambda: loop(a_cpu), lambda: None) / n, 4.0,
             "enqueue cost: dispatch, the Python call site, allocation from the pool, "
             "a batched launch", 1e6)
    torch_npu.npu.set_call_sites(False)
    b.figure("tiny op, call sites off", "us",
             lambda: timed(lambda: loop(a_dev), sync) / n, "the same op on torch's CPU",
             lambda: timed(lambda: loop(a_cpu), lambda: None) / n, 4.0,
             "NPURT_TORCH_CALL_SITES=0: faults then name the op, not the Python line", 1e6)
    torch_npu.npu.set_call_sites(True)


def training(b, dev):
    torch.manual_seed(0)

    def make(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 10)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(64, 256).to(device)
        y = torch.randn(64, 10).to(device)

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        return step

    npu_step, cpu_step = make(dev), make("cpu")
    sync = torch_npu.npu.synchronize
    b.figure("MLP training step (64x256 -> 512 -> 256 -> 10)", "ms",
             lambda: timed(npu_step, sync), "the same step on torch's CPU",
             lambda: timed(cpu_step, lambda: None), 3.0,
             "forward, backward and SGD; GEMMs on the emulated compute engines", 1e3)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    if not torch_npu.npu.is_available():
        print("torch section: no NPU", file=sys.stderr)
        return 1
    dev = torch_npu.npu.torch_device(0)
    b = Bench(runs)
    print(f"\n[torch] torch {torch.__version__}, torch_npurt on {torch_npu.npu.get_device_name(0)}"
          f", {runs} runs each (medians; ratio = figure / limit, per run)")
    copies(b, runtime(), dev)
    dispatch(b, dev)
    training(b, dev)
    with open(os.path.join(out, "bench-torch.json"), "w") as f:
        json.dump(b.figures, f, indent=1)
    missed = [f["figure"] for f in b.figures if not f["met"]]
    print(f"[torch] {len(b.figures) - len(missed)} of {len(b.figures)} goals met"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
