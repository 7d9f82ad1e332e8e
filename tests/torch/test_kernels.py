"""Native kernels against the CPU, in each dtype, with broadcasting,
non-contiguous and empty inputs; and that they did not fall back."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: (1e-5, 1e-6), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2),
       torch.int32: (0, 0)}


def rnd(shape, dtype):
    if dtype == torch.int32:
        return torch.randint(-20, 20, shape, dtype=dtype)
    return torch.randn(shape).to(dtype)


def check(dev, fn, *cpu_args, rtol=None, atol=None):
    npu_args = [a.to(dev) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    got = fn(*npu_args)
    try:
        exp = fn(*cpu_args)
    except RuntimeError as e:
        # Some CPU kernels lack half types in 1.13: the reference is then
        # computed in float32 and rounded.
        if "not implemented for" not in str(e):
            raise
        exp = fn(*[a.float() if isinstance(a, torch.Tensor) and a.dtype in
                   (torch.float16, torch.bfloat16) else a for a in cpu_args]).to(got.dtype)
    dt = exp.dtype
    r, a = TOL.get(dt, (1e-5, 1e-6))
    assert_close(got.cpu(), exp, rtol=rtol if rtol is not None else r,
                 atol=atol if atol is not None else a)


def no_native_fallback(d):
    bad = {k: v for k, v in d.items() if not k.startswith(("aten::_local_scalar_dense",
                                                            "aten::normal_", "aten::random_",
                                                            "aten::equal"))}
    assert not bad, bad


BINOPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=0.5),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=2),
}


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32])
@pytest.mark.parametrize("op", sorted(BINOPS))
def test_binary(dev, op, dtype, fallbacks):
    f = BINOPS[op]
    if dtype == torch.int32 and op in ("div", "add_alpha", "sub_alpha"):
        pytest.skip("not native for int32 (falls back): covered in test_fallbacks")
    a, b = rnd((8, 5), dtype), rnd((8, 5), dtype)
    if op == "div":
        b = b.abs() + 0.5
    check(dev, f, a, b)
    check(dev, f, a, b[0])  # broadcast a row
    check(dev, f, a, b[:, :1])  # broadcast a column
    check(dev, f, a[:1], b)  # broadcast the other side
    check(dev, f, a.t(), b.t())  # non-contiguous
    check(dev, f, a[:, ::2], b[:, ::2])
    check(dev, f, a[:0], b[:0])  # empty
    check(dev, f, rnd((), dtype), b)  # 0-dim NPU tensor
    no_native_fallback(fallbacks())


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32])
def test_scalar_forms(dev, dtype, fallbacks):
    a = rnd((6, 7), dtype)
    s = 3 if dtype == torch.int32 else 2.5
    check(dev, lambda x: x + s, a)
    check(dev, lambda x: x - s, a)
    check(dev, lambda x: x * s, a)
    check(dev, lambda x: s * x, a)
    check(dev, lambda x: torch.maximum(x, torch.tensor(s, dtype=dtype)), a)
    if dtype != torch.int32:
        check(dev, lambda x: x / s, a)
        check(dev, lambda x: s - x, a)
    no_native_fallback(fallbacks())


@pytest.mark.parametrize("dtype", FLOATS)
def test_promotion(dev, dtype, fallbacks):
    a = rnd((4, 4), dtype)
    b = rnd((4, 4), torch.float32)
    i = rnd((4, 4), torch.int32)
    check(dev, lambda x, y: x + y, a, b)  # -> float32
    check(dev, lambda x, y: x * y, i, b)  # int32 * float32 -> float32
    check(dev, lambda x: x * 0.1, i)  # int32 * float scalar -> float32
    no_native_fallback(fallbacks())


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32])
def test_inplace_and_out(dev, dtype, fallbacks):
    a, b = rnd((5, 6), dtype), rnd((5, 6), dtype)
    x = a.to(dev)
    x += b.to(dev)
    x.mul_(b.to(dev))
    x.sub_(b[0].to(dev))
    e = ((a + b) * b) - b[0]
    assert_close(x.cpu(), e, *TOL[dtype])
    # In place on a view, and with self-aliasing.
    y = a.to(dev)
    y[:, 1:3] += 1
    ye = a.clone()
    ye[:, 1:3] += 1
    assert_close(y.cpu(), ye, *TOL[dtype])
    z = a.to(dev)
    z[1:] += z[:-1]  # partial overlap
    ze = a.clone()
    ze[1:] += ze[:-1].clone()
    assert_close(z.cpu(), ze, *TOL[dtype])
    out = torch.empty(5, 6, dtype=dtype, device=dev)
    torch.add(a.to(dev), b.to(dev), out=out)
    assert_close(out.cpu(), a + b, *TOL[dtype])
    out2 = torch.empty(0, dtype=dtype, device=dev)  # resized
    torch.mul(a.to(dev), b.to(dev), out=out2)
    assert_close(out2.cpu(), a * b, *TOL[dtype])
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        a[0].to(dev).add_(b.to(dev))
    no_native_fallback(fallbacks())


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary(dev, dtype, fallbacks):
    a = rnd((9, 4), dtype) * 3
    check(dev, torch.relu, a)
    check(dev, torch.exp, a, rtol=TOL[dtype][0] * 4)
    check(dev, lambda x: F.gelu(x, approximate="tanh"), a, rtol=TOL[dtype][0] * 4,
          atol=TOL[dtype][1] * 4)
    check(dev, torch.relu, a.t())
    check(dev, torch.exp, a[:0])
    x = a.to(dev)
    x.relu_()
    assert_close(x.cpu(), a.float().relu().to(dtype), *TOL[dtype])
    x = a.to(dev)
    x.exp_()
    assert_close(x.cpu(), a.float().exp().to(dtype), rtol=TOL[dtype][0] * 4, atol=TOL[dtype][1])
    no_native_fallback(fallbacks())


def test_unary_int_and_fallbacks(dev, fallbacks):
    i = rnd((4, 4), torch.int32)
    check(dev, torch.relu, i)
    no_native_fallback(fallbacks())
    # erf GELU and int exp are not in the op set: right results, through the CPU.
    a = torch.randn(5, 5)
    check(dev, F.gelu, a)
    check(dev, torch.exp, i)
    d = fallbacks()
    assert any(k.startswith("aten::gelu") for k in d), d


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul(dev, dtype, fallbacks):
    tol = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2),
           torch.bfloat16: (2e-2, 2e-2)}[dtype]
    a, b = torch.randn(7, 5), torch.randn(5, 3)

    def ref(fn, *args):
        # CPU half matmul is missing in 1.13: compare against float32.
        return fn(*[t.to(dtype).float() for t in args]).to(dtype)

    def run(fn, *args):
        return fn(*[t.to(dtype).to(dev) for t in args]).cpu()

    for fn, args in [
        (torch.mm, (a, b)),
        (lambda x, y: x.t().mm(y.t()), (a.t().contiguous(), b.t().contiguous())),
        (lambda x, y: x @ y, (a, b)),
        (lambda c, x, y: torch.addmm(c, x, y), (torch.randn(3), a, b)),
        (lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2), (torch.randn(7, 3), a, b)),
        (lambda x, y: torch.bmm(x, y), (torch.randn(4, 7, 5), torch.randn(4, 5, 3))),
        (lambda x, w, bias: F.linear(x, w, bias), (a, torch.randn(3, 5), torch.randn(3))),
        (lambda x, w: F.linear(x, w), (torch.randn(2, 7, 5), torch.randn(3, 5))),
    ]:
        assert_close(run(fn, *args), ref(fn, *args), *tol)
    # Empty and k == 0.
    assert run(torch.mm, torch.randn(0, 5), b).shape == (0, 3)
    assert torch.equal(run(torch.mm, torch.randn(4, 0), torch.randn(0, 3)),
                       torch.zeros(4, 3, dtype=dtype))
    no_native_fallback(fallbacks())
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(a.to(dev), a.to(dev))


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum(dev, dtype, fallbacks):
    # Half-precision sums of up to 120 terms: the device and the CPU add in
    # different orders, so allow a few units in the last place.
    tol = {torch.float32: (1e-5, 1e-5), torch.float16: (5e-3, 5e-3),
           torch.bfloat16: (4e-2, 4e-2)}[dtype]
    x = torch.randn(4, 5, 6).to(dtype)
    for fn in [lambda t: t.sum(0), lambda t: t.sum(1), lambda t: t.sum(2),
               lambda t: t.sum(-1, keepdim=True), lambda t: t.sum((0, 2)),
               lambda t: t.sum((1, 2)), lambda t: t.sum(), lambda t: t.t().sum(0) if t.dim() == 2 else t.sum(0),
               lambda t: t[:, 1:4].sum(1), lambda t: t.sum(1, dtype=torch.float32)]:
        check(dev, fn, x, rtol=tol[0], atol=tol[1])
    check(dev, lambda t: t.sum(0), torch.randn(0, 3).to(dtype))
    check(dev, lambda t: t.sum(), torch.randn(()).to(dtype))
    no_native_fallback(fallbacks())
    # int32 sums to int64 in torch: not in the op set, still right.
    i = rnd((3, 4), torch.int32)
    check(dev, lambda t: t.sum(1), i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_mean(dev, dtype, fallbacks):
    tol = {torch.float32: (1e-5, 1e-5), torch.float16: (5e-3, 5e-3),
           torch.bfloat16: (4e-2, 4e-2)}[dtype]
    x = torch.randn(4, 5, 6).to(dtype)
    for fn in [lambda t: t.mean(), lambda t: t.mean(0), lambda t: t.mean(-1, keepdim=True),
               lambda t: t.mean((0, 2)), lambda t: t[:, 1:4].mean(1),
               lambda t: t.mean(1, dtype=torch.float32)]:
        check(dev, fn, x, rtol=tol[0], atol=tol[1])
    check(dev, lambda t: t.mean(0), torch.randn(()).to(dtype))
    no_native_fallback(fallbacks())
    empty = torch.randn(0, 3).to(dtype).to(dev).mean(0).cpu()
    assert empty.shape == (3,) and bool(torch.isnan(empty).all())
    with pytest.raises(RuntimeError, match="dtype"):
        torch.ones(3, dtype=torch.int32).to(dev).mean()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_sums_accumulate_in_float32(dev, dtype, fallbacks):
    # As CUDA's kernels: summed in float32, divided, rounded once. A half
    # partial sum overflowed (70000 ones: inf) or rounded (257 in bf16 is
    # 256) before the mean divided it.
    assert torch.ones(70000, dtype=dtype).to(dev).mean().item() == 1.0
    assert torch.ones(257, dtype=dtype).to(dev).mean().item() == 1.0
    x = torch.ones(2, 300, 3, dtype=dtype).to(dev)
    assert torch.equal(x.mean((0, 2)).cpu(), torch.ones(300, dtype=dtype))
    assert x.sum((0, 1)).cpu().tolist() == [600.0] * 3
    # Non-adjacent dims: one rounding at the end, not one per pass.
    y = torch.full((257, 2, 257), 1.0, dtype=dtype)
    assert y.to(dev).sum((0, 2)).cpu().tolist() == y.float().sum((0, 2)).to(dtype).tolist()
    out = torch.empty(2, dtype=dtype).to(dev)
    torch.sum(y.to(dev), (0, 2), out=out)
    assert out.cpu().tolist() == y.float().sum((0, 2)).to(dtype).tolist()
    a = torch.full((1000,), 10.0, dtype=dtype).to(dev)
    loss = torch.nn.functional.mse_loss(a, torch.zeros_like(a))
    assert loss.dtype == dtype and loss.item() == 100.0
    no_native_fallback(fallbacks())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_amax_and_max(dev, dtype, fallbacks):
    x = rnd((4, 5, 6), dtype) if dtype == torch.int32 else torch.randn(4, 5, 6).to(dtype)
    for fn in [lambda t: t.max(), lambda t: t.amax(0), lambda t: t.amax(-1, keepdim=True),
               lambda t: t.amax((0, 2)), lambda t: t[:, 1:4].amax(1), lambda t: t.amax(),
               lambda t: torch.amax(t.transpose(0, 2), 1)]:
        check(dev, fn, x, rtol=0, atol=0)
    check(dev, lambda t: t.max(), torch.ones(()).to(dtype))
    no_native_fallback(fallbacks())
    if dtype.is_floating_point:
        y = torch.randn(3, 4).to(dtype)
        y[1, 2] = float("nan")
        got = y.to(dev).amax(1).cpu()
        want = y.float().amax(1).to(dtype)
        assert bool(torch.isnan(got[1])) and torch.equal(got[[0, 2]], want[[0, 2]])
        assert bool(torch.isnan(y.to(dev).max().cpu()))
    # Empty inputs: as torch (an error, or an empty result).
    with pytest.raises(RuntimeError):
        torch.ones(0, 3).to(dtype).to(dev).max()
    if dtype in (torch.float32, torch.int32):  # 1.13's CPU amax has no half types
        assert torch.ones(0, 3).to(dtype).to(dev).amax(1).shape == (0,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_softmax_and_its_gradient(dev, dtype, fallbacks):
    tol = {torch.float32: (1e-5, 1e-6), torch.float16: (2e-3, 1e-3),
           torch.bfloat16: (2e-2, 1e-2)}[dtype]
    x = (torch.randn(6, 7, 5) * 4).to(dtype)
    for dim in (0, 1, -1):
        check(dev, lambda t: torch.softmax(t, dim), x, rtol=tol[0], atol=tol[1])
    check(dev, lambda t: torch.softmax(t.transpose(0, 2), 1), x, rtol=tol[0], atol=tol[1])
    if dtype == torch.float16:
        got = torch.softmax(x.to(dev), -1, dtype=torch.float32)
        assert got.dtype == torch.float32
        assert_close(got.cpu(), torch.softmax(x.float(), -1), rtol=1e-5, atol=1e-6)
    # -inf entries (attention masks) give 0; a row of them gives NaN, as torch.
    m = torch.randn(3, 4)
    m[0, 1] = float("-inf")
    m[2, :] = float("-inf")
    got = torch.softmax(m.to(dev), -1).cpu()
    assert got[0, 1] == 0 and bool(torch.isnan(got[2]).all())
    assert_close(got[:2], torch.softmax(m, -1)[:2], rtol=1e-5, atol=1e-6)
    # The gradient, through autograd.
    xc = torch.randn(5, 8, requires_grad=True)
    xd = xc.detach().to(dev).requires_grad_()
    w = torch.randn(5, 8)
    (torch.softmax(xd, 1) * w.to(dev)).sum().backward()
    (torch.softmax(xc, 1) * w).sum().backward()
    assert_close(xd.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-6)
    no_native_fallback(fallbacks())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_and_its_gradient(dev, reduction, fallbacks):
    import warnings
    x = torch.randn(16, 10, requires_grad=True)
    y = torch.randn(16, 10)
    xd = x.detach().to(dev).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 1.13's CPU kernel warned of a resize
        ld = torch.nn.functional.mse_loss(xd, y.to(dev), reduction=reduction)
        (ld.sum() if reduction == "none" else ld).backward()
    lc = torch.nn.functional.mse_loss(x, y, reduction=reduction)
    (lc.sum() if reduction == "none" else lc).backward()
    assert_close(ld.cpu(), lc.detach(), rtol=1e-5, atol=1e-5)
    assert_close(xd.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)
    no_native_fallback(fallbacks())


def test_unsupported_dtypes_fall_back(dev, fallbacks):
    a = torch.randn(4, 4, dtype=torch.float64)
    check(dev, lambda x, y: x + y, a, a)
    check(dev, torch.mm, a, a)
    b = torch.rand(4) > 0.5
    check(dev, lambda x: x & x, b)
    c = torch.randn(4, dtype=torch.complex64)
    check(dev, lambda x: x * x, c)
    assert fallbacks()


def test_misc_through_fallback(dev):
    x = torch.randn(6, 5)
    for fn in [lambda t: t.max(1).values,
               lambda t: torch.cat([t, t], 0), lambda t: t.sort(1).values, lambda t: t.argmax(),
               lambda t: torch.where(t > 0, t, -t), lambda t: t.pow(2)]:
        check(dev, fn, x)
