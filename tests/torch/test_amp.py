"""Mixed precision: torch.autocast("npu"), torch.npu.amp.autocast and
GradScaler (torch >= 2.3; torch 1.13's autocast knows only cuda and cpu)."""
import pytest
import torch

import torch_npurt
from torch_npurt import npu

AUTOCAST = torch_npurt._C._autocast_registered()
needs_autocast = pytest.mark.skipif(not AUTOCAST, reason="torch %s: no NPU autocast"
                                    % torch.__version__)


def test_supported_dtypes():
    assert npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert npu.is_bf16_supported()


@pytest.mark.skipif(AUTOCAST, reason="autocast is there")
def test_autocast_says_what_torch_lacks():
    with pytest.raises(RuntimeError, match="autocast on the NPU needs torch >= 2.3"):
        npu.amp.autocast()
    with pytest.raises(RuntimeError, match="needs torch >= 2.3"):
        npu.amp.GradScaler()


@pytest.mark.no_npu_ok
def test_amp_imports_as_torch_cuda_amp():
    from torch.npu.amp import GradScaler, autocast, custom_bwd, custom_fwd
    assert autocast is npu.amp.autocast and GradScaler is npu.amp.GradScaler
    assert callable(custom_fwd) and callable(custom_bwd)
    assert set(npu.amp.__all__) == {"autocast", "GradScaler", "custom_fwd", "custom_bwd"}


@pytest.mark.skipif(not AUTOCAST or not hasattr(torch.amp, "custom_fwd"),
                    reason="torch %s: no device-generic custom_fwd" % torch.__version__)
def test_custom_fwd_and_bwd(dev):
    class MatMul(torch.autograd.Function):
        @staticmethod
        @torch.npu.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            # Autocast is off inside: the product stays float32.
            return a.mm(b)

        @staticmethod
        @torch.npu.amp.custom_bwd
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad.mm(b.t()), a.t().mm(grad)

    a = torch.randn(4, 8, device=dev, requires_grad=True)
    b = torch.randn(8, 2, device=dev, dtype=torch.half, requires_grad=True)
    with torch.npu.amp.autocast():
        assert a.mm(a.t()).dtype == torch.float16
        out = MatMul.apply(a, b)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert a.grad.shape == a.shape and b.grad.dtype == torch.half


@needs_autocast
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_casts_by_policy(dev, dtype):
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4).to(dev)
    x = torch.randn(3, 8, device=dev)
    with torch.autocast(device_type=dev.type, dtype=dtype):
        y = lin(x)  # lower precision
        conv = torch.nn.functional.conv1d(x.view(3, 1, 8), torch.ones(2, 1, 3, device=dev))
        p = torch.softmax(y, dim=1)  # float32
        s = y.float() + x[:, :4].to(dtype)  # promoted: add has no policy, keeps float32
    assert y.dtype == dtype and conv.dtype == dtype
    assert p.dtype == torch.float32
    assert s.dtype == torch.float32
    ref = torch.nn.functional.linear(x.cpu().to(dtype).float(), lin.weight.cpu().to(dtype).float(),
                                     lin.bias.cpu().to(dtype).float())
    torch.testing.assert_close(y.cpu().float(), ref, rtol=2e-2, atol=2e-2)
    # Outside the block nothing is cast.
    assert lin(x).dtype == torch.float32


@needs_autocast
def test_npu_amp_autocast_is_torch_autocast(dev):
    with npu.amp.autocast(dtype=torch.bfloat16):
        assert torch.is_autocast_enabled(dev.type)
        assert torch.get_autocast_dtype(dev.type) == torch.bfloat16
        y = torch.mm(torch.ones(2, 2, device=dev), torch.ones(2, 2, device=dev))
    assert y.dtype == torch.bfloat16
    assert not torch.is_autocast_enabled(dev.type)
    with npu.amp.autocast(enabled=False):
        assert torch.mm(torch.ones(2, 2, device=dev), torch.ones(2, 2, device=dev)).dtype \
            == torch.float32


@needs_autocast
def test_grad_scaler_training(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = npu.amp.GradScaler(init_scale=1024.0)
    x, target = torch.randn(32, 8, device=dev), torch.randn(32, 1, device=dev)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        with npu.amp.autocast():
            loss = torch.nn.functional.mse_loss(model(x).float(), target)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    assert scaler.get_scale() == 1024.0  # finite gradients: no backoff
    # An infinite gradient skips the step and halves the scale.
    before = [p.detach().cpu() for p in model.parameters()]
    opt.zero_grad()
    with npu.amp.autocast():
        loss = model(x).float().sum() * float("inf")
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0
    for p, q in zip(model.parameters(), before):
        torch.testing.assert_close(p.detach().cpu(), q)


@needs_autocast
def test_amp_names_are_classes(dev):
    scaler = npu.amp.GradScaler()
    assert isinstance(scaler, npu.amp.GradScaler)
    assert isinstance(scaler, torch.amp.GradScaler)
    ctx = npu.amp.autocast(dtype=torch.bfloat16)
    assert isinstance(ctx, npu.amp.autocast) and isinstance(ctx, torch.autocast)

    class Mine(npu.amp.GradScaler):
        pass

    assert Mine(init_scale=8.0).get_scale() == 8.0
