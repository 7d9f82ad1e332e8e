import pytest
import torch

import torch_npurt
from conftest import assert_close

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.float64, torch.bool, torch.uint8, torch.int8]


def sample(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(-50, 50, shape).to(dtype) if dtype != torch.uint8 else \
        torch.randint(0, 200, shape).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip(dev, dtype):
    x = sample((7, 9), dtype)
    y = x.to(dev)
    assert y.dtype == dtype and y.shape == x.shape
    assert torch.equal(y.cpu(), x)
    assert torch.equal(y.clone().cpu(), x)  # device-to-device


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8])
def test_noncontiguous_copies(dev, dtype, fallbacks):
    x = sample((6, 10), dtype)
    d = x.to(dev)
    cases = {
        "t": lambda t: t.t(),
        "slice": lambda t: t[1:5, 2:7],
        "step": lambda t: t[::2, ::3],
        "expand_row": lambda t: t[0].expand(4, 10),
        "expand_col": lambda t: t[:, :1].expand(6, 5),
        "select_col": lambda t: t[:, 3],
        "perm3": lambda t: t.reshape(2, 3, 10).permute(2, 0, 1),
    }
    for name, f in cases.items():
        assert torch.equal(f(d).cpu(), f(x)), name  # D2H of a view
        assert torch.equal(f(d).contiguous().cpu(), f(x).contiguous()), name  # D2D
        # H2D into a view of a device tensor.
        z = torch.zeros_like(x).to(dev)
        zc = torch.zeros_like(x)
        f(zc).copy_(f(x)) if name not in ("expand_row", "expand_col") else None
        if name not in ("expand_row", "expand_col"):
            f(z).copy_(f(x))
            assert torch.equal(z.cpu(), zc), name
    # Every view was copied by the device (one strided copy each), none
    # through the host.
    assert not any("through the host" in k for k in fallbacks()), fallbacks()


def test_views_alias(dev, fallbacks):
    x = torch.zeros(4, 6, device=dev)
    v = x.view(24)
    v[5] = 1.0
    x[2].fill_(2.0)
    x.t()[0, 3] = 5.0
    x[:, 4:6] = torch.ones(4, 2, device=dev) * 3
    s = x.as_strided((2, 2), (6, 1), 1)
    s.zero_()
    u = x.view(-1).unfold(0, 4, 4)
    assert u.shape == (6, 4)
    exp = torch.zeros(4, 6)
    exp.view(24)[5] = 1.0
    exp[2].fill_(2.0)
    exp.t()[0, 3] = 5.0
    exp[:, 4:6] = 3
    exp.as_strided((2, 2), (6, 1), 1).zero_()
    assert torch.equal(x.cpu(), exp)
    assert torch.equal(u.cpu(), exp.view(-1).unfold(0, 4, 4))
    assert x.reshape(6, 4).data_ptr() == x.data_ptr()
    assert x.unsqueeze(0).squeeze(0).data_ptr() == x.data_ptr()
    d = fallbacks()
    for op in ("aten::view", "aten::as_strided", "aten::_reshape_alias", "aten::unfold",
               "aten::alias", "aten::t", "aten::transpose.int", "aten::select.int"):
        assert op not in d, d


def test_resize(dev):
    x = torch.arange(6, dtype=torch.float32).to(dev)
    x.resize_(2, 3)
    assert x.shape == (2, 3)
    assert torch.equal(x.cpu(), torch.arange(6.0).reshape(2, 3))
    x.resize_(4, 4)  # grows: old contents kept
    assert torch.equal(x.view(-1)[:6].cpu(), torch.arange(6.0))
    x.resize_(0)
    assert x.numel() == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_and_zero(dev, dtype):
    for value in (0, 1, 3, -2, 0.5, True):
        if dtype == torch.uint8 and isinstance(value, int) and value < 0:
            continue
        x = torch.empty(5, 3, dtype=dtype, device=dev)
        x.fill_(value)
        assert torch.equal(x.cpu(), torch.full((5, 3), value).to(dtype)), value
        x[:, 1].fill_(0)
        e = torch.full((5, 3), value).to(dtype)
        e[:, 1] = 0
        assert torch.equal(x.cpu(), e)
    x.zero_()
    assert torch.equal(x.cpu(), torch.zeros(5, 3, dtype=dtype))
    assert torch.equal(torch.full((1000,), 2.5, device=dev).cpu(), torch.full((1000,), 2.5))


@pytest.mark.parametrize("dtype,value", [(torch.float32, 1.0), (torch.float16, -2.5),
                                         (torch.int32, 7), (torch.int64, 3), (torch.int64, -1),
                                         (torch.float64, 0.1)])
def test_fill_of_64_mib(dev, dtype, value):
    # One fill task (or a few doubling copies for 8-byte values): a
    # broadcast of one element per element timed out the engine at this size.
    n = (64 << 20) // torch.empty((), dtype=dtype).element_size()
    x = torch.full((n,), value, dtype=dtype, device=dev)
    want = torch.tensor(value, dtype=dtype)
    got = x.cpu()
    assert bool((got == want).all()), (dtype, value)
    ones = torch.ones(n, dtype=dtype, device=dev)
    assert bool((ones.cpu() == 1).all())


CASTS = [torch.float32, torch.float16, torch.bfloat16, torch.int32]


@pytest.mark.parametrize("src", CASTS)
@pytest.mark.parametrize("dst", CASTS)
def test_casts(dev, src, dst, fallbacks):
    x = (torch.randn(33, 7) * 100).to(src)
    x[0, 0] = 70000 if src in (torch.float32, torch.bfloat16, torch.int32) else x[0, 0]
    got = x.to(dev).to(dst).cpu()
    assert torch.equal(got, x.to(dst)), (src, dst)
    native = dst != torch.int32 or src == torch.int32
    assert native == (not any("through the host" in k for k in fallbacks())), fallbacks()
    # Non-contiguous source.
    assert torch.equal(x.to(dev).t().to(dst).cpu(), x.t().to(dst))


def test_index_with_device_indices(dev):
    x = torch.arange(20.0).reshape(5, 4)
    d = x.to(dev)
    idx = torch.tensor([4, 0, 2])
    assert torch.equal(d[idx.to(dev)].cpu(), x[idx])
    cols = torch.tensor([3, 0])
    assert torch.equal(d[:, cols.to(dev)].cpu(), x[:, cols])
    mask = x > 7
    assert torch.equal(d[mask.to(dev)].cpu(), x[mask])
    d[idx.to(dev)] = torch.zeros(3, 4, device=dev)
    x[idx] = 0
    assert torch.equal(d.cpu(), x)


def test_copy_between_dtypes_and_devices(dev):
    x = torch.randn(10)
    y = torch.empty(10, dtype=torch.float64, device=dev)
    y.copy_(x)
    assert torch.equal(y.cpu(), x.double())
    h = torch.empty(10, dtype=torch.float16)
    h.copy_(y)
    assert torch.equal(h, x.double().half())
    # Broadcasting copy_.
    z = torch.empty(3, 10, device=dev)
    z.copy_(x)
    assert torch.equal(z.cpu(), x.expand(3, 10))


def test_large_strided_and_empty(dev, fallbacks):
    x = torch.randn(5000, 8)
    d = x.to(dev)
    assert torch.equal(d[:, 2:5].contiguous().cpu(), x[:, 2:5])
    # Scattered views of more elements than any per-element scheme takes,
    # in 8-byte elements the transpose op does not move, and a view of
    # more dimensions than one strided copy holds.
    y = torch.randint(-1000, 1000, (40, 30, 20), dtype=torch.int64)
    dy = y.to(dev)
    assert torch.equal(dy.permute(2, 0, 1).contiguous().cpu(), y.permute(2, 0, 1))
    assert torch.equal(dy[:, ::3, 1::2].contiguous().cpu(), y[:, ::3, 1::2])
    z = torch.randn([2] * 10)
    dz = z.to(dev)
    perm = list(reversed(range(10)))
    assert torch.equal(dz.permute(perm).contiguous().cpu(), z.permute(perm))
    # Copies between overlapping views of one tensor read the source first.
    w = torch.arange(64.0).reshape(8, 8)
    dw = w.to(dev)
    dw[:, 1:] = dw[:, :-1]
    w[:, 1:] = w[:, :-1].clone()
    assert torch.equal(dw.cpu(), w)
    dw.t()[1:, :] = dw.t()[:-1, :]
    w.t()[1:, :] = w.t()[:-1, :].clone()
    assert torch.equal(dw.cpu(), w)
    assert not any("through the host" in k for k in fallbacks()), fallbacks()
    e = torch.empty(0, 4, device=dev)
    assert e.t().contiguous().shape == (4, 0)
    assert e.cpu().shape == (0, 4)


def test_writes_into_self_overlapping_tensors_are_refused(dev):
    # As on CUDA: which of the writes to a shared element wins would be
    # arbitrary (x[0] became 3 here).
    x = torch.zeros(1).to(dev).expand(3)
    other = torch.tensor([1.0, 2.0, 3.0]).to(dev)
    for write in [lambda: x.add_(other), lambda: x.copy_(other),
                  lambda: x.copy_(torch.tensor([1.0, 2.0, 3.0])),
                  lambda: torch.add(other, other, out=x)]:
        with pytest.raises(RuntimeError, match="single memory location"):
            write()
    assert x.cpu().tolist() == [0.0, 0.0, 0.0]
    # A size-1 dimension of stride 0 shares nothing.
    y = torch.zeros(3, 1).to(dev)
    y.add_(1)
    assert y.cpu().tolist() == [[1.0]] * 3


def test_out_of_another_shape_is_resized_through_the_fallback(dev, fallbacks):
    # torch resizes a non-empty out= of another shape (with a warning);
    # the CPU fallback's copy back into it raised instead.
    x = torch.arange(12.0).reshape(3, 4)
    out = torch.empty(5).to(dev)
    with pytest.warns(UserWarning, match="resize"):
        r = torch.cumsum(x.to(dev), 0, out=out)
    assert r is out and out.shape == (3, 4)
    assert torch.equal(out.cpu(), torch.cumsum(x, 0))
    assert any("cumsum" in name for name in fallbacks())


def test_conjugate_views(dev, fallbacks):
    # x.conj() of a complex tensor is a view with the conjugate bit; every
    # copy of one used to recurse until the stack overflowed (a segfault).
    zc = torch.tensor([[1 + 2j, 3 - 1j, -2j], [0.5 + 0j, -1 + 1j, 4 + 4j]])
    z = zc.to(dev)
    assert z.conj().is_conj()
    assert torch.equal(z.conj().cpu(), zc.conj().resolve_conj())
    assert torch.equal(z.conj().resolve_conj().cpu(), zc.conj().resolve_conj())
    assert torch.equal(z.conj().clone().cpu(), zc.conj().resolve_conj())
    assert torch.equal(z.mH.contiguous().cpu(), zc.mH.contiguous())
    assert torch.equal((z.conj() * 2).cpu(), zc.conj() * 2)
    assert torch.equal(z.conj().to(torch.complex128).cpu(), zc.conj().to(torch.complex128))
    assert torch.equal((z.mH @ z).cpu(), zc.mH @ zc)
    # Into plain and conjugated destinations, on the device and the host.
    d = torch.zeros_like(z)
    d.copy_(z.conj())
    assert torch.equal(d.cpu(), zc.conj().resolve_conj())
    d = torch.zeros_like(z)
    d.conj().copy_(z)  # d's stored values become conj(z)
    assert torch.equal(d.cpu(), zc.conj().resolve_conj())
    d = torch.zeros_like(z)
    d.conj().copy_(z.conj())  # both bits: the stored values as they are
    assert torch.equal(d.cpu(), zc)
    h = torch.zeros_like(zc)
    h.conj().copy_(z)
    assert torch.equal(h, zc.conj().resolve_conj())
    d = torch.zeros_like(z)
    d.copy_(zc.conj())
    assert torch.equal(d.cpu(), zc.conj().resolve_conj())
    # The source is left as it was.
    assert torch.equal(z.cpu(), zc)
    # Gradients of complex functions (autograd makes conjugate views).
    x = torch.tensor([3 + 4j], device=dev, requires_grad=True)
    x.conj().abs().sum().backward()
    assert torch.allclose(x.grad.cpu(), torch.tensor([0.6 + 0.8j]))


def test_negative_views(dev):
    xc = torch.arange(6.0).reshape(2, 3)
    x = xc.to(dev)
    n = torch._neg_view(x)
    assert n.is_neg()
    assert torch.equal(n.cpu(), -xc)
    assert torch.equal(n.clone().cpu(), -xc)
    assert torch.equal((n + 1).cpu(), 1 - xc)
    assert torch.equal(n.to(torch.float64).cpu(), -xc.double())
    # Into pinned memory, non-blocking: dst is fixed up on the host after the
    # data has arrived.
    h = torch.empty(2, 3).pin_memory()
    h.copy_(n, non_blocking=True)
    torch_npurt.npu.synchronize()
    assert torch.equal(h, -xc)
    d = torch.zeros_like(x)
    torch._neg_view(d).copy_(x)
    assert torch.equal(d.cpu(), -xc)
    assert torch.equal(x.cpu(), xc)


def test_view_as_real_and_complex_alias(dev, fallbacks):
    zc = torch.tensor([1 + 2j, 3 - 1j])
    z = zc.to(dev)
    r = torch.view_as_real(z)
    assert r.shape == (2, 2) and r.data_ptr() == z.data_ptr()
    r.mul_(2)
    assert torch.equal(z.cpu(), zc * 2)
    c = torch.view_as_complex(r)
    assert c.data_ptr() == z.data_ptr()
    c.mul_(1j)
    assert torch.equal(z.cpu(), zc * 2j)
    assert torch.equal(torch.view_as_real(z.conj().resolve_conj()).cpu(),
                       torch.view_as_real((zc * 2j).conj().resolve_conj()))
    d = fallbacks()
    assert "aten::view_as_real" not in d and "aten::view_as_complex" not in d, d
