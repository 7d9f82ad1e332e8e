import copy

import torch

import torch_npurt
from torch_npurt import npu


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 32), torch.nn.GELU(approximate="tanh"),
                               torch.nn.Linear(32, 4))


def train(model, device, steps=5):
    torch.manual_seed(1)
    data = [(torch.randn(8, 16), torch.randn(8, 4)) for _ in range(steps)]
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
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


def test_fallback_report(capsys):
    torch.ones(2, 2, device=npu.torch_device(0)).mean()
    counts = torch_npurt.fallback_counts()
    assert any(k.startswith("aten::mean") for k in counts), counts
    torch_npurt._fallback_report()
    err = capsys.readouterr().err
    assert "CPU fallback" in err and "aten::mean" in err
