"""C++ extensions on the NPU: examples/torch/extension (built by `make` the
way a user builds one, setup.py with torch_npurt.utils.cpp_extension, into
build/torch-ext) runs its own operator through libnpurt on torch's current
stream, next to torch's ops."""
import importlib
import importlib.util
import os
import sys

import pytest
import torch

import torch_npurt
from torch_npurt import npu

from conftest import assert_close, queue_slow_writes, sgd_steps, slow_jobs

# build/python/torch_npurt -> build/torch-ext (the lanes' builds alike).
EXT_DIR = os.path.normpath(os.path.join(os.path.dirname(torch_npurt.__file__), "..", "..",
                                        "torch-ext"))


def _setuptools():
    return importlib.util.find_spec("setuptools") is not None


@pytest.fixture(scope="module")
def ext():
    if not os.path.isdir(EXT_DIR):
        if not _setuptools():
            pytest.skip("no setuptools: the example extension is not built")
        pytest.fail("%s missing: `make` builds the example extension there" % EXT_DIR)
    sys.path.insert(0, EXT_DIR)
    try:
        importlib.import_module("npurt_example_ext")
    finally:
        sys.path.remove(EXT_DIR)
    return torch.ops.npurt_example


def _expected(x, r, alpha):
    return torch.relu(x.float() * alpha + r.float())


@pytest.mark.parametrize("shape", [(3, 5), (1000,), (2, 3, 4), (0, 4), ()])
def test_scaled_residual_matches_the_cpu(ext, dev, shape):
    torch.manual_seed(0)
    x, r = torch.randn(shape), torch.randn(shape)
    got = ext.scaled_residual(x.to(dev), r.to(dev), 0.5)
    assert got.device == x.to(dev).device
    assert_close(got.cpu(), ext.scaled_residual(x, r, 0.5))
    assert_close(got.cpu(), _expected(x, r, 0.5))


def test_default_alpha_and_views(ext, dev):
    torch.manual_seed(1)
    x, r = torch.randn(6, 4), torch.randn(4, 6)
    # A transposed view and a slice: the op makes dense copies on the device.
    got = ext.scaled_residual(x.to(dev).t(), r.to(dev)[:, :].contiguous())
    assert_close(got.cpu(), _expected(x.t(), r, 1.0))
    y = torch.randn(8)
    got = ext.scaled_residual(y.to(dev)[::2], y.to(dev)[1::2], -2.0)
    assert_close(got.cpu(), _expected(y[::2], y[1::2], -2.0))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types(ext, dev, dtype):
    torch.manual_seed(2)
    x, r = torch.randn(64).to(dtype), torch.randn(64).to(dtype)
    got = ext.scaled_residual(x.to(dev), r.to(dev), 0.25)
    assert got.dtype == dtype
    torch.testing.assert_close(got.cpu().float(), _expected(x, r, 0.25), rtol=2e-2, atol=2e-2)


def test_gradients_match_the_cpu(ext, dev):
    """The op's autograd kernel (the example registers one for the Autograd
    key) gives the gradients of relu(alpha * x + r) on the NPU."""
    torch.manual_seed(3)
    x, r = torch.randn(5, 7), torch.randn(5, 7)
    xc, rc = x.clone().requires_grad_(), r.clone().requires_grad_()
    (_expected(xc, rc, 0.75) * torch.arange(35.0).view(5, 7)).sum().backward()
    xn, rn = x.to(dev).requires_grad_(), r.to(dev).requires_grad_()
    out = ext.scaled_residual(xn, rn, 0.75)
    assert out.requires_grad and out.grad_fn is not None
    (out * torch.arange(35.0, device=dev).view(5, 7)).sum().backward()
    assert xn.grad.device == xn.device
    assert_close(xn.grad.cpu(), xc.grad)
    assert_close(rn.grad.cpu(), rc.grad)


def test_a_model_with_the_op_trains(ext, dev):
    """A layer calling the op learns on the NPU as its CPU twin does."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return ext.scaled_residual(self.lin(x), x, 0.5)

    torch.manual_seed(4)
    cpu = Block()
    npu_model = Block()
    npu_model.load_state_dict(cpu.state_dict())
    npu_model.to(dev)
    data = [(torch.randn(16, 8), torch.randn(16, 8))] * 5
    losses = [sgd_steps(model, device, data, torch.nn.functional.mse_loss, 0.1)
              for model, device in ((cpu, "cpu"), (npu_model, dev))]
    assert losses[1][-1] < losses[1][0]
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-5)


def test_bad_arguments_are_errors(ext, dev):
    x = torch.ones(4, device=dev)
    with pytest.raises(RuntimeError, match="float32, float16 or bfloat16 tensors, got Int"):
        ext.scaled_residual(x.int(), x.int(), 1.0)
    with pytest.raises(RuntimeError, match=r"x has shape \[4\], residual \[2, 2\]"):
        ext.scaled_residual(x, x.view(2, 2), 1.0)
    with pytest.raises(RuntimeError, match="x is Float, residual Half"):
        ext.scaled_residual(x, x.half(), 1.0)
    # One operand on the CPU: the NPU kernel runs (the NPU's key is higher)
    # and refuses it.
    with pytest.raises(RuntimeError, match="must be an NPU tensor, got one on cpu"):
        ext.scaled_residual(x, torch.ones(4), 1.0)
    # The device still works.
    assert ext.scaled_residual(x, x, 1.0).cpu().tolist() == [2.0] * 4


def test_the_op_runs_on_the_current_stream(ext, dev):
    assert ext.current_stream() == npu.current_stream().npu_stream
    s = npu.Stream()
    with npu.stream(s):
        assert ext.current_stream() == s.npu_stream
        assert ext.current_stream(0) == s.npu_stream
    assert ext.current_stream() == npu.current_stream().npu_stream
    # A stream made outside torch and handed to it.
    other = npu.Stream()
    with npu.stream(npu.ExternalStream(other.npu_stream)):
        assert ext.current_stream() == other.npu_stream


def test_ordered_with_torch_ops_on_a_side_stream(ext, dev):
    """The op reads what torch's ops queued before it on the same stream,
    with no synchronisation between them, and torch's next op reads its
    result: all three are in one stream's order."""
    s = npu.Stream()
    x = torch.zeros(1 << 16, device=dev)
    r = torch.full((1 << 16,), -1.0, device=dev)
    npu.synchronize()
    with slow_jobs(2000), npu.stream(s):
        queue_slow_writes(x, dev)  # x := 2, landing late
        y = ext.scaled_residual(x, r, 3.0)  # relu(3 * 2 - 1) = 5
        z = y * 2
    s.synchronize()
    assert z.cpu().unique().tolist() == [10.0]


def test_a_failed_runtime_call_is_a_python_error(ext, dev):
    with pytest.raises(RuntimeError, match=r"npurtLaunchOp\(.*\) failed: npurtErrorInvalidValue: "
                                           r"npurtLaunchOp: operand a 0x[0-9a-f]+ is not device "
                                           r"memory .*\(scaled_residual\.cpp:\d+\)"):
        ext.launch_on_host_memory(16)
    with pytest.raises(RuntimeError, match="n must be in 1..2"):
        ext.launch_on_host_memory(-1)
    # Reported once: the thread's error was reset, and work goes on.
    y = ext.scaled_residual(torch.ones(3, device=dev), torch.ones(3, device=dev), 1.0)
    assert y.cpu().tolist() == [2.0] * 3


def test_stream_handle_operator(dev):
    ops = torch.ops.torch_npurt
    assert ops._stream_handle(0, 0) == 0  # the default stream is NULL, as CUDA's
    s = npu.Stream()
    assert ops._stream_handle(0, s.stream_id) == s.npu_stream
    with pytest.raises(RuntimeError, match="unknown NPU stream id 123456"):
        ops._stream_handle(0, 123456)
    with pytest.raises((RuntimeError, IndexError), match="NPU device 99 requested"):
        ops._stream_handle(99, 0)


@pytest.mark.no_npu_ok
def test_build_helpers():
    if not _setuptools():
        pytest.skip("no setuptools: torch.utils.cpp_extension does not import")
    from torch_npurt.utils import cpp_extension
    inc = cpp_extension.include_paths()
    assert any(os.path.isfile(os.path.join(d, "torch_npurt", "extension.h")) for d in inc)
    assert any(os.path.isfile(os.path.join(d, "npurt", "npurt.h")) for d in inc)
    libs = cpp_extension.library_paths()
    assert any(os.path.exists(os.path.join(d, "libnpurt.so")) for d in libs)
    e = cpp_extension.NpuExtension("m", ["m.cpp"], libraries=["z"], include_dirs=["/x"])
    assert e.libraries[:1] == ["z"] and "npurt" in e.libraries and "c10" in e.libraries
    assert e.include_dirs[0] == "/x" and set(inc) <= set(e.include_dirs)
    assert set(libs) <= set(e.runtime_library_dirs)


@pytest.mark.no_npu_ok
@pytest.mark.parametrize("call", ["load", "load_inline"])
def test_jit_builds_add_the_paths(monkeypatch, call):
    """torch's JIT builds (which need ninja and minutes of compiling in the
    VM) get the headers and -lnpurt added to what the caller passed."""
    if not _setuptools():
        pytest.skip("no setuptools: torch.utils.cpp_extension does not import")
    import torch.utils.cpp_extension as torch_ext
    from torch_npurt.utils import cpp_extension
    seen = {}

    def fake(name, sources, **kwargs):
        seen.update(kwargs, name=name, sources=sources)
        return "module"
    monkeypatch.setattr(torch_ext, call, fake)
    assert getattr(cpp_extension, call)("m", ["m.cpp"], extra_include_paths=["/x"],
                                        extra_ldflags=["-lz"], verbose=True) == "module"
    assert seen["name"] == "m" and seen["sources"] == ["m.cpp"] and seen["verbose"]
    assert seen["extra_include_paths"] == ["/x"] + cpp_extension.include_paths()
    lib = cpp_extension.library_paths()[0]
    assert seen["extra_ldflags"] == ["-lz", "-L" + lib, "-Wl,-rpath," + lib, "-lnpurt"]
