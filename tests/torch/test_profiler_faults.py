"""Profiler traces with ATen op names; device faults with their Python call site."""
import inspect
import json
import os
import time

import pytest
import torch

import torch_npurt
from torch_npurt import npu
from torch_npurt.npu import profiler

HERE = os.path.basename(__file__)


def debugfs_dir(index=0):
    d = npu.get_device_properties(index).debugfs_path
    return d if d and os.access(os.path.join(d, "inject_fault"), os.W_OK) else None


def test_profiler_trace_names_ops(dev, tmp_path):
    a = torch.randn(64, 64).to(dev)
    npu.synchronize()
    with profiler.profile(tmp_path / "trace.json"):
        b = a @ a  # the mm line
        c = b + a
        c.relu_()
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    sites = [e.get("args", {}).get("site", "") for e in events if e.get("ph") == "X"]
    assert any("aten::mm" in s for s in sites), sites
    assert any("aten::add" in s for s in sites), sites
    assert any("aten::relu_" in s for s in sites), sites
    assert any(HERE + ":" in s for s in sites), sites
    assert "gemm" in profiler.summary()
    with pytest.raises(ValueError):
        profiler.export_chrome_trace("")


def test_each_line_and_op_keeps_its_own_call_site(dev, tmp_path):
    # Sites are cached by code location and op name: two ops on two lines
    # of one loop, and two fallback ops (names built at run time) on one
    # line, each keep their own.
    a = torch.ones(8, device=dev)
    frame = inspect.currentframe()
    with profiler.profile(tmp_path / "trace.json"):
        for _ in range(3):
            add_line = frame.f_lineno + 1
            b = a + 1
            mul_line = frame.f_lineno + 1
            c = a * 2
            for f in (torch.sin, torch.cos):
                fallback_line = frame.f_lineno + 1
                f(a)
    npu.synchronize()
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    sites = {e.get("args", {}).get("site", "") for e in events if e.get("ph") == "X"}

    def named(line, op):
        return any("%s:%d" % (HERE, line) in s and op in s for s in sites)
    assert named(add_line, "aten::add"), sites
    assert named(mul_line, "aten::mul"), sites
    assert not named(add_line, "aten::mul") and not named(mul_line, "aten::add"), sites
    assert named(fallback_line, "aten::sin"), sites
    assert named(fallback_line, "aten::cos"), sites
    assert b.cpu().tolist() == [2.0] * 8 and c.cpu().tolist() == [2.0] * 8


def test_call_site_switch(dev):
    assert npu.call_sites()
    npu.set_call_sites(False)
    try:
        x = torch.ones(4, device=dev) * 2
        assert x.cpu().tolist() == [2.0] * 4
    finally:
        npu.set_call_sites(True)


def test_fault_names_python_line_op_and_stream(dev):
    d = debugfs_dir()
    if d is None:
        pytest.skip("no debugfs fault injection (run in the VM as root)")
    a = torch.randn(32, 32).to(dev)
    s = npu.Stream()
    npu.synchronize()
    with open(os.path.join(d, "inject_fault"), "w") as f:
        f.write("1\n")
    with npu.stream(s):
        with pytest.raises(RuntimeError) as info:
            line = __import__("inspect").currentframe().f_lineno + 1
            b = a @ a
            s.synchronize()
    msg = str(info.value)
    assert "%s:%d" % (HERE, line) in msg, msg
    assert "aten::mm" in msg, msg
    assert "stream" in msg and "id=%d" % s.stream_id in msg, msg
    s.recover()
    with npu.stream(s):
        b = a @ a
    s.synchronize()
    torch.testing.assert_close(b.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)


def test_dispatch_cost_of_call_sites(dev):
    """Not a timed test: prints the cost ratio (the report quotes it)."""
    x = torch.ones(16, device=dev)

    def run(n=300):
        t = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        npu.synchronize()
        return (time.perf_counter() - t) / n

    run(50)
    npu.set_call_sites(False)
    try:
        off = min(run() for _ in range(3))
    finally:
        npu.set_call_sites(True)
    on = min(run() for _ in range(3))
    print("\ndispatch cost of a tiny add_: call sites on %.1f us, off %.1f us, ratio %.3f" %
          (on * 1e6, off * 1e6, on / off))
