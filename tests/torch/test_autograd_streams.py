"""Backward of work done on a side stream (1.13's engine syncs only CUDA
streams; the package inserts the waits)."""
import torch

from torch_npurt import npu


def model_and_data(seed=0):
    torch.manual_seed(seed)
    m = torch.nn.Linear(64, 32)
    x = torch.randn(16, 64)
    w = torch.randn(16, 32)
    return m, x, w


def cpu_grads():
    m, x, w = model_and_data()
    ((m(x) * w).sum()).backward()
    return m.weight.grad, m.bias.grad


def test_backward_of_side_stream_forward(dev):
    gw, gb = cpu_grads()
    m, x, w = model_and_data()
    m.npu()
    xd, wd = x.to(dev), w.to(dev)
    npu.synchronize()
    s = npu.Stream()
    busy = torch.randn(128, 128).to(dev) / 12
    npu.synchronize()
    # The side stream is kept busy before the forward: without the waits
    # the backward (default stream) would read values not yet written.
    # (A gate cannot hold it: the backward's wait for an event recorded
    # behind a host function blocks until the record happened.)
    with npu.stream(s):
        # Each GEMM is one launch: several of them batched into one job must
        # stay well under job_timeout_ms even on a loaded machine (a 256^3
        # GEMM takes about 0.25 s in the guest; RUNTIME_NEEDS.md 10).
        for _ in range(4):
            busy = busy @ busy
        loss = (m(xd) * wd).sum()
    loss.backward()
    npu.synchronize()
    torch.testing.assert_close(m.weight.grad.cpu(), gw, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.bias.grad.cpu(), gb, rtol=1e-4, atol=1e-4)


def test_backward_inside_side_stream(dev):
    gw, gb = cpu_grads()
    m, x, w = model_and_data()
    m.npu()
    s = npu.Stream()
    with npu.stream(s):
        xd, wd = x.to(dev), w.to(dev)
        loss = (m(xd) * wd).sum()
        loss.backward()
        # The gradients are ordered before later work on the caller's stream.
        g2 = m.weight.grad * 1
    s.synchronize()
    torch.testing.assert_close(g2.cpu(), gw, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.bias.grad.cpu(), gb, rtol=1e-4, atol=1e-4)
    # torch.autograd.grad, on the side stream too.
    xd2 = x.to(dev).requires_grad_()
    with npu.stream(s):
        (gx,) = torch.autograd.grad((m(xd2) * wd).sum(), [xd2])
        gx = gx + 0
    s.synchronize()
    mc, xc, _ = model_and_data()
    xc.requires_grad_()
    (gxc,) = torch.autograd.grad((mc(xc) * w).sum(), [xc])
    torch.testing.assert_close(gx.cpu(), gxc, rtol=1e-4, atol=1e-4)


def _slow_implicit_gradient(monkeypatch, busy):
    """torch.ones_like, which backward calls for a scalar's implicit
    gradient, made slow on the stream it runs on: four GEMMs (about a
    second in the guest) ahead of the fill, into a block that held NaN. A
    backward not ordered after the fill reads NaN (the bug of CI's flaky
    test_backward_inside_side_stream: the fill ran on the caller's side
    stream, the 1.13 engine's kernels on the default stream)."""
    ones_like = torch.ones_like
    calls = []

    def slow_ones_like(t, *args, **kwargs):
        if t.device.type == "cpu":
            return ones_like(t, *args, **kwargs)
        poison = torch.full_like(t, float("nan"))
        npu.current_stream().synchronize()
        del poison
        b = busy
        for _ in range(4):
            b = b @ b
        calls.append(npu.current_stream())
        return ones_like(t, *args, **kwargs)

    monkeypatch.setattr(torch, "ones_like", slow_ones_like)
    return calls


def test_implicit_gradient_is_written_before_the_backward_reads_it(dev, monkeypatch):
    gw, gb = cpu_grads()
    m, x, w = model_and_data()
    m.npu()
    busy = torch.randn(128, 128).to(dev) / 12
    npu.synchronize()
    s = npu.Stream()
    calls = _slow_implicit_gradient(monkeypatch, busy)
    with npu.stream(s):
        xd, wd = x.to(dev), w.to(dev)
        (m(xd) * wd).sum().backward()
        # The caller's stream is its own again once backward returns.
        assert npu.current_stream() == s
        g2 = m.weight.grad * 1
    assert len(calls) == 1
    s.synchronize()
    torch.testing.assert_close(g2.cpu(), gw, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.bias.grad.cpu(), gb, rtol=1e-4, atol=1e-4)
    # torch.autograd.grad makes its implicit gradient the same way.
    xd2 = x.to(dev).requires_grad_()
    with npu.stream(s):
        (gx,) = torch.autograd.grad((m(xd2) * wd).sum(), [xd2])
        gx = gx + 0
    assert len(calls) == 2
    s.synchronize()
    mc, xc, _ = model_and_data()
    xc.requires_grad_()
    (gxc,) = torch.autograd.grad((mc(xc) * w).sum(), [xc])
    torch.testing.assert_close(gx.cpu(), gxc, rtol=1e-4, atol=1e-4)


def test_failed_backward_gives_back_the_callers_stream(dev):
    m, x, w = model_and_data()
    m.npu()
    s = npu.Stream()
    with npu.stream(s):
        loss = (m(x.to(dev)) * w.to(dev)).sum()
        loss.backward()
        try:
            loss.backward()  # the graph was freed by the first
        except RuntimeError as e:
            assert "second time" in str(e)
        else:
            raise AssertionError("a second backward through a freed graph did not raise")
        assert npu.current_stream() == s
    assert npu.current_stream() == npu.default_stream()
