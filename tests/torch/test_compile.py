"""torch.compile on NPU tensors: inductor has no NPU code generator, so
graphs on the NPU run with aot_eager (a warning says so); results and
gradients are eager's."""
import pytest
import torch

from torch_npurt import _patches

pytestmark = pytest.mark.skipif(not hasattr(torch, "_TorchCompileInductorWrapper"),
                                reason="torch %s: no torch.compile" % torch.__version__)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def test_compiled_module_matches_eager(dev):
    model = _mlp().to(dev)
    ref = _mlp().to(dev)
    _patches._compile_warned = False
    compiled = torch.compile(model)
    x = torch.randn(5, 8, device=dev)
    with pytest.warns(UserWarning, match="aot_eager"):
        y = compiled(x)
    assert y.device == dev
    torch.testing.assert_close(y.cpu(), ref(x).cpu())
    # Gradients through the compiled graph (AOTAutograd's backward).
    y.square().sum().backward()
    ref(x).square().sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-4, atol=1e-5)
    # Another batch size recompiles and stays right; the warning was once.
    x2 = torch.randn(3, 8, device=dev)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(compiled(x2).cpu(), ref(x2).cpu())


def test_graph_that_makes_npu_tensors_from_cpu_inputs(dev):
    @torch.compile
    def f(x):
        return (x.to(dev) * 2 + 1).sum(dim=0)

    x = torch.arange(12.0).reshape(3, 4)
    out = f(x)
    assert out.device == dev
    torch.testing.assert_close(out.cpu(), (x * 2 + 1).sum(dim=0))


@pytest.mark.no_npu_ok
def test_only_npu_graphs_leave_inductor():
    def cpu_fn(x):
        return x.relu() + 1

    gm = torch.fx.symbolic_trace(cpu_fn)
    assert not _patches._graph_on_npu(gm, [torch.ones(2)])
    # Parameters on the NPU count, as inputs do.
    if torch.npu.is_available():
        m = torch.fx.symbolic_trace(torch.nn.Linear(2, 2).npu())
        assert _patches._graph_on_npu(m, [torch.ones(2)])
