"""torch's own operator database (OpInfo: the sample inputs torch tests every
backend with) on the NPU, compared with the CPU: the results of float32 and
complex64 samples, and the gradients of float32 ones. A few ops run
natively and the rest through the CPU fallback, so this checks what is
around them for every op: copies in and out, views, the conjugate and
negative keys, in-place and out= results, autograd, and that results stay
on the NPU. Ops with random results are left out; sparse ones must give the
CPU's results (COO) or fail with torch's error (CSR), not crash."""
import contextlib
import itertools
import re
import sys
import types
import unittest

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map



@contextlib.contextmanager
def _test_helper_stand_ins():
    """torch's test helpers import modules only torch's own test runs need,
    which Debian does not package (expecttest): stand-ins for the import,
    removed afterwards."""
    made = []

    def stand_in(name, **attrs):
        try:
            __import__(name)
        except ImportError:
            for part in range(1, name.count(".") + 2):
                n = ".".join(name.split(".")[:part])
                if n not in sys.modules or n in made:
                    sys.modules[n] = types.ModuleType(n)
                    made.append(n)
            for k, v in attrs.items():
                setattr(sys.modules[name], k, v)
    stand_in("expecttest", TestCase=unittest.TestCase, ACCEPT=False)
    try:
        yield
    finally:
        for n in made:
            sys.modules.pop(n, None)


try:
    with _test_helper_stand_ins():
        from torch.testing._internal.common_methods_invocations import op_db
except Exception as e:  # a torch whose test helpers need more
    pytest.skip(f"torch's OpInfo database does not import: {e}", allow_module_level=True)

RANDOM = ("rand", "dropout", "bernoulli", "multinomial", "normal", "uniform", "empty",
          "poisson", "exponential", "cauchy", "geometric", "log_normal", "rrelu")
SKIPPED = {
    # torch's own CPU kernel crashes under QEMU TCG (vector gathers), with
    # or without the NPU.
    "grid_sampler_2d": "torch's CPU kernel crashes under QEMU TCG",
    "nn.functional.grid_sample": "torch's CPU kernel crashes under QEMU TCG",
    # Samples that are views into a larger base: a moved view has only its
    # own elements, so the offsets reach past them (on CUDA too).
    "as_strided.partial_views": "samples are views into a larger base",
}
# Arguments that stay on the CPU, as on CUDA.
CPU_ARGUMENTS = {"tensor_split"}


def _name(op):
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _sparse(op):
    return op.name.startswith("sparse.") or op.name == "to_sparse"


def _torch_expects_failure(op, cls_name, test_name, dtype):
    """Whether torch's own suite skips this test of the op or expects it to
    fail (as_strided_scatter's gradients in 1.13, for one)."""
    for d in op.decorators:
        if (getattr(d, "cls_name", None) == cls_name and getattr(d, "test_name", None) == test_name
                and getattr(d, "device_type", None) in (None, "cpu")
                and (getattr(d, "dtypes", None) is None or dtype in d.dtypes)
                and getattr(d, "active_if", True)):
            return True
    return False


def _ops(dtype, grad=False):
    out = []
    for op in op_db:
        if any(r in op.name for r in RANDOM) or dtype not in op.supported_dtypes("cpu"):
            continue
        if grad and not op.supports_autograd:
            continue
        marks = [pytest.mark.skip(reason=SKIPPED[_name(op)])] if _name(op) in SKIPPED else []
        if grad and _torch_expects_failure(op, "TestGradients", "test_fn_grad", dtype):
            marks = [pytest.mark.skip(reason="torch's own suite expects its gradient to fail")]
        out.append(pytest.param(op, id=_name(op), marks=marks))
    return out


def _to(tree, device, grad):
    def move(x):
        if not isinstance(x, torch.Tensor):
            return x
        y = x.detach().to(device)
        return y.requires_grad_(True) if grad and x.requires_grad else y
    return tree_map(move, tree)


def _run(op, sample, device, grad):
    keep = device if op.name not in CPU_ARGUMENTS else "cpu"
    inp = _to(sample.input, device, grad)
    args, kwargs = _to(sample.args, keep, grad), _to(sample.kwargs, keep, grad)
    out = op(inp, *args, **kwargs)
    if not grad:
        return out
    leaves = [t for t in tree_flatten((inp, args, kwargs))[0]
              if isinstance(t, torch.Tensor) and t.requires_grad]
    outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)
            and t.requires_grad and t.dtype.is_floating_point]
    if not leaves or not outs:
        return None
    sum(o.sum() for o in outs).backward()
    return [t.grad for t in leaves]


def _compare(op, dtype, grad, samples, dev):
    try:
        made = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=grad),
                                     samples))
    except Exception as e:  # torch 1.13's cross_entropy samples under Python 3.11
        pytest.skip(f"torch's sample inputs fail: {e}")
    for i, sample in enumerate(made):
        # Results stay on the NPU, unless the sample names a device (to(),
        # factories).
        on_npu = isinstance(sample.input, torch.Tensor) and "device" not in sample.kwargs and \
            not any(isinstance(a, torch.device) or a in ("cpu", "cuda")
                    for a in tree_flatten(sample.args)[0] if not isinstance(a, torch.Tensor))
        try:
            expected = _run(op, sample, "cpu", grad)
        except Exception:
            continue  # a sample the CPU refuses (error inputs)
        if expected is None:
            continue
        got = _run(op, sample, dev, grad)
        flat_expected, flat_got = tree_flatten(expected)[0], tree_flatten(got)[0]
        assert len(flat_got) == len(flat_expected), (i, got)
        for e, g in zip(flat_expected, flat_got):
            if not isinstance(e, torch.Tensor):
                continue
            assert isinstance(g, torch.Tensor), (i, type(g))
            if on_npu:
                assert g.device.type == dev.type, (i, g.device)
            torch.testing.assert_close(g.cpu(), e, equal_nan=True, check_stride=False,
                                       atol=1e-4, rtol=1e-4, msg=lambda m: f"sample {i}: {m}")


@pytest.mark.parametrize("op", _ops(torch.float32))
def test_float32(op, dev):
    if _sparse(op):
        # Sparse COO tensors work on the NPU; sparse CSR ones raise torch's
        # error for a layout the backend lacks (1.13 says the latter).
        sample = next(iter(op.sample_inputs("cpu", torch.float32)))
        expected = _run(op, sample, "cpu", False)
        try:
            got = _run(op, sample, dev, False)
        except (NotImplementedError, RuntimeError) as e:
            assert re.search("Could not run|Unsupported device type for Sparse", str(e)), e
            return
        assert got.layout == expected.layout and got.device.type == dev.type
        torch.testing.assert_close(got.cpu().to_dense(), expected.to_dense())
        return
    _compare(op, torch.float32, False, 3, dev)


@pytest.mark.parametrize("op", [p for p in _ops(torch.complex64)
                                if not _sparse(p.values[0])])
def test_complex64(op, dev):
    _compare(op, torch.complex64, False, 2, dev)


@pytest.mark.parametrize("op", [p for p in _ops(torch.float32, grad=True)
                                if not _sparse(p.values[0])])
def test_gradients(op, dev):
    _compare(op, torch.float32, True, 2, dev)


@pytest.mark.no_npu_ok
def test_the_database_was_run():
    # The sweep covers torch's operators, not a handful (a torch whose
    # OpInfo database shrank, or an exclusion grown too wide, shows here).
    assert len(_ops(torch.float32)) > 400
