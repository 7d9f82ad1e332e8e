import copy

import pytest

import torch

import torch_npurt
from torch_npurt import npu

from conftest import check_masked_encoder, sgd_steps


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 32), torch.nn.GELU(approximate="tanh"),
                               torch.nn.Linear(32, 4))


def train(model, device, steps=5):
    torch.manual_seed(1)
    data = [(torch.randn(8, 16), torch.randn(8, 4)) for _ in range(steps)]
    model = model.to(device)
    losses = sgd_steps(model, device, data, torch.nn.functional.mse_loss, 0.05)
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_mlp_matches_cpu(dev):
    m = mlp()
    cpu_losses, cpu_params = train(copy.deepcopy(m), "cpu")
    npu_losses, npu_params = train(m, dev)
    torch.testing.assert_close(torch.tensor(npu_losses), torch.tensor(cpu_losses),
                               rtol=1e-4, atol=1e-5)
    for p, q in zip(npu_params, cpu_params):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    assert npu_losses[-1] < npu_losses[0]


def test_autograd_native_ops(dev):
    a = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, 4, requires_grad=True)
    an, bn = a.detach().to(dev).requires_grad_(), b.detach().to(dev).requires_grad_()
    ((an @ bn).exp().sum() * 2).backward()
    ((a @ b).exp().sum() * 2).backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(bn.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)


def test_fallback_report(capsys, fallbacks):
    # cumsum is not in the op set (counted whatever ran before this test).
    torch.ones(2, 2, device=npu.torch_device(0)).cumsum(0)
    counts = fallbacks()
    assert any(k.startswith("aten::cumsum") for k in counts), counts
    torch_npurt._fallback_report()
    err = capsys.readouterr().err
    assert "CPU fallback" in err and "aten::cumsum" in err


def cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                               torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.ConvTranspose2d(4, 3, 2, stride=2, groups=1),
                               torch.nn.Conv2d(3, 6, 3, stride=2, groups=3),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(6, 3))


def train_cnn(model, device, steps=4):
    torch.manual_seed(1)
    data = [(torch.randn(4, 2, 8, 8), torch.randint(0, 3, (4,))) for _ in range(steps)]
    model = model.to(device)
    losses = sgd_steps(model, device, data, torch.nn.functional.cross_entropy, 0.1)
    model.eval()
    with torch.no_grad():
        evaluated = model(data[0][0].to(device)).cpu()
    return losses, [t.detach().cpu() for t in model.state_dict().values()], evaluated


def test_cnn_matches_cpu(dev, fallbacks):
    # Convolutions (and transposed and grouped ones) reach ATen's
    # convolution_overrideable, which has no CPU kernel for the fallback to
    # call; BatchNorm's running statistics are updated in place by an op
    # whose schema (1.13) does not say so. Both must match the CPU,
    # running statistics included (state_dict holds them).
    m = cnn()
    cpu_losses, cpu_state, cpu_eval = train_cnn(copy.deepcopy(m), "cpu")
    npu_losses, npu_state, npu_eval = train_cnn(m, dev)
    torch.testing.assert_close(torch.tensor(npu_losses), torch.tensor(cpu_losses),
                               rtol=1e-4, atol=1e-5)
    for p, q in zip(npu_state, cpu_state):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(npu_eval, cpu_eval, rtol=1e-4, atol=1e-5)
    assert m[1].num_batches_tracked.item() == 4
    assert m[1].running_var.cpu().ne(1).all()
    assert fallbacks().get("aten::convolution_backward_overrideable", 0) >= 4


def test_convolution_operands_on_two_devices(dev):
    x = torch.ones(1, 1, 4, 4, device=dev)
    with pytest.raises(RuntimeError, match="same device"):
        torch.nn.functional.conv2d(x, torch.ones(1, 1, 2, 2))
    with pytest.raises(RuntimeError, match="same device"):
        torch.nn.functional.conv2d(x, torch.ones(1, 1, 2, 2, device=dev), torch.ones(1))
    # Nothing was lost: the same call with its operands on the NPU works.
    out = torch.nn.functional.conv2d(x, torch.ones(1, 1, 2, 2, device=dev))
    assert out.device == x.device and out.cpu().eq(4).all()


def test_batch_norm_functional_updates_running_stats(dev):
    x = torch.randn(6, 3, 5)
    mean, var = torch.zeros(3), torch.ones(3)
    mean_n, var_n = mean.to(dev), var.to(dev)
    y = torch.nn.functional.batch_norm(x, mean, var, training=True, momentum=0.5)
    y_n = torch.nn.functional.batch_norm(x.to(dev), mean_n, var_n, training=True, momentum=0.5)
    torch.testing.assert_close(y_n.cpu(), y, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mean_n.cpu(), mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(var_n.cpu(), var, rtol=1e-5, atol=1e-6)
    assert mean.abs().sum() > 0
    # Evaluation reads the statistics and leaves them alone.
    before = mean_n.cpu()
    torch.nn.functional.batch_norm(x.to(dev), mean_n, var_n, training=False)
    torch.testing.assert_close(mean_n.cpu(), before)


def test_norms_of_an_empty_batch(dev):
    # native_batch_norm's CPU kernel in torch 1.13 divides by zero on an
    # empty input (SIGFPE: the process died; group_norm reached it on the
    # NPU); on the CPU torch gives empty results.
    gn = torch.nn.GroupNorm(2, 4).to(dev)
    x = torch.empty(0, 4, 3, device=dev, requires_grad=True)
    out = gn(x)
    assert out.shape == (0, 4, 3) and out.device == x.device
    out.sum().backward()
    assert x.grad.shape == (0, 4, 3) and gn.weight.grad.cpu().eq(0).all()
    # A batch with rows still matches the CPU's.
    x = torch.randn(2, 4, 3)
    torch.testing.assert_close(torch.nn.functional.group_norm(x.to(dev), 2).cpu(),
                               torch.nn.functional.group_norm(x, 2), rtol=1e-5, atol=1e-5)
    out, mean, invstd = torch.native_batch_norm(torch.empty(0, 3, device=dev), None, None,
                                                None, None, True, 0.1, 1e-5)
    assert out.shape == (0, 3) and mean.shape == (3,) and mean.cpu().isnan().all()
    running = torch.ones(3, device=dev)
    out = torch.nn.functional.batch_norm(torch.empty(0, 3, device=dev), running,
                                         running.clone(), training=True)
    assert out.shape == (0, 3) and running.cpu().eq(1).all()


@pytest.mark.parametrize("make", [
    lambda: torch.nn.LSTM(5, 4, num_layers=2, bidirectional=True, batch_first=True),
    lambda: torch.nn.GRU(5, 4, num_layers=2, bidirectional=True),
    lambda: torch.nn.LSTMCell(5, 4),
    lambda: torch.nn.GRUCell(5, 4, bias=False),
], ids=["lstm", "gru", "lstm_cell", "gru_cell"])
def test_rnn_matches_cpu(dev, make):
    # torch 2.x runs these on PrivateUse1 through CUDA's fused cells, which
    # have no CPU kernel; the reference runs without oneDNN, whose RNN code
    # crashes under QEMU TCG (torch's own, with or without the NPU).
    torch.manual_seed(0)
    m = make()
    mn = copy.deepcopy(m).to(dev)
    x = torch.randn(3, 5) if isinstance(m, torch.nn.RNNCellBase) else torch.randn(2, 3, 5)
    with torch.backends.mkldnn.flags(enabled=False):
        out = m(x)
        out = out[0] if isinstance(out, tuple) else out
        out.square().sum().backward()
    out_n = mn(x.to(dev))
    out_n = out_n[0] if isinstance(out_n, tuple) else out_n
    out_n.square().sum().backward()
    torch.testing.assert_close(out_n.cpu(), out, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(mn.named_parameters(), m.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=name)


# Adagrad's foreach step adds to its state in place; Adam, AdamW and RMSprop
# end in _foreach_addcdiv_. On torch 1.13 the fallback lost in-place list
# updates (SGD's foreach step left the weights as they were) and left
# _foreach_sqrt's results on the CPU (Adam failed on mixed devices).
@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True),
    lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=True),
    lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=True),
    lambda ps: torch.optim.RMSprop(ps, lr=0.01, foreach=True),
    lambda ps: torch.optim.Adagrad(ps, lr=0.1, foreach=True),
], ids=["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_foreach_optimizers_match_cpu(dev, make):
    torch.manual_seed(0)
    cpu_params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(4))]
    npu_params = [torch.nn.Parameter(p.detach().to(dev)) for p in cpu_params]
    steps = []
    for params in (cpu_params, npu_params):
        opt = make(params)
        torch.manual_seed(1)
        for _ in range(3):
            for p in params:
                p.grad = torch.randn(p.shape).to(p.device)
            opt.step()
        steps.append(params)
    for c, n in zip(*steps):
        assert n.device == dev
        torch.testing.assert_close(n.detach().cpu(), c.detach(), rtol=1e-4, atol=1e-5)
    # The steps moved the weights (a lost update would leave them as made).
    torch.manual_seed(0)
    assert not torch.equal(npu_params[0].detach().cpu(), torch.randn(5, 3))


def test_foreach_ops_keep_results_on_the_npu(dev):
    xs = [torch.arange(1.0, 4.0), torch.full((2, 2), 4.0)]
    ds = [x.to(dev) for x in xs]
    for got, want in zip(torch._foreach_sqrt(ds), torch._foreach_sqrt(xs)):
        assert got.device == dev
        torch.testing.assert_close(got.cpu(), want)
    torch._foreach_mul_(ds, 2.0)
    torch._foreach_add_(ds, ds, alpha=0.5)
    for got, x in zip(ds, xs):
        assert got.device == dev
        torch.testing.assert_close(got.cpu(), x * 3.0)
    norms = torch._foreach_norm(ds)
    assert all(n.device == dev for n in norms)
    cat = torch.cat([d.flatten() for d in ds])
    assert cat.device == dev


def test_transformer_encoder_with_padding_mask_in_eval(dev):
    """torch 2.x's encoder turns a masked batch into nested tensors in eval
    mode, which have no NPU kernels; the NPU takes the dense path."""
    enc = check_masked_encoder(lambda m: m.to(dev))
    assert getattr(enc, "use_nested_tensor", True)  # the module's own setting is kept (2.x)


def test_moving_a_module_keeps_its_parameters(dev):
    # As .cuda() does: an optimizer made before the move trains the moved
    # parameters (with new Parameters it updated the CPU copies, silently).
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    params = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.to(dev)
    assert all(p is q for p, q in zip(model.parameters(), params))
    assert all(p.device == dev for p in params)
    before = model.weight.detach().cpu().clone()
    model(torch.randn(3, 4, device=dev)).sum().backward()
    opt.step()
    assert not torch.equal(model.weight.detach().cpu(), before), "the optimizer missed them"
    # Back to the CPU, gradients along.
    model.cpu()
    assert model.weight is params[0] and model.weight.grad.device.type == "cpu"


def test_data_assignment_between_cpu_and_npu(dev):
    # `param.data = param.to(device)`: FSDP's move, and torch_npu scripts'.
    p = torch.nn.Parameter(torch.arange(3.0))
    p.data = p.to(dev)
    assert p.device == dev and p.requires_grad and p.is_leaf
    (p * 2).sum().backward()
    assert p.grad.device == dev and p.grad.cpu().tolist() == [2.0, 2.0, 2.0]
    p.data = p.data.cpu()
    assert p.device.type == "cpu" and p.tolist() == [0.0, 1.0, 2.0]
    assert torch._has_compatible_shallow_copy_type(torch.ones(1, device=dev), torch.ones(1))
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device=dev))
    # Not between kinds of tensor, as on CUDA.
    sparse = torch.ones(2).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(torch.ones(2, device=dev), sparse)
    q = torch.ones(2, device=dev)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        q.data = sparse
    assert q.device == dev and q.cpu().tolist() == [1.0, 1.0], "the failed assignment lost it"
