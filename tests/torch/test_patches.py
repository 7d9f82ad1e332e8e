"""torch_npu's spellings on torch 1.13 (privateuseone underneath)."""
import pytest
import torch

from torch_npurt import npu


def test_tensor_npu_and_is_npu():
    x = torch.randn(3)
    y = x.npu()
    assert y.is_npu and not x.is_npu
    assert y.device == torch.device("privateuseone", npu.current_device())
    assert torch.equal(y.cpu(), x)
    assert x.npu(0).device.index == 0
    assert x.npu("npu:0").device.index == 0


def test_to_npu_strings():
    x = torch.randn(3)
    for spelling in ("npu", "npu:0"):
        assert x.to(spelling).is_npu
        assert x.to(device=spelling).is_npu
    assert x.to("npu", torch.float16).dtype == torch.float16
    assert x.npu().to("cpu").device.type == "cpu"


def test_factories_device_npu():
    assert torch.zeros(2, 3, device="npu").is_npu
    assert torch.ones(2, device="npu:0").is_npu
    assert torch.full((2,), 7.0, device="npu").cpu().tolist() == [7.0, 7.0]
    assert torch.arange(5, device="npu").cpu().tolist() == [0, 1, 2, 3, 4]
    assert torch.tensor([1, 2], device="npu").cpu().tolist() == [1, 2]
    r = torch.randn(4, 4, device="npu")
    assert r.is_npu and r.shape == (4, 4)
    assert torch.zeros_like(r, device="npu").is_npu
    assert torch.eye(3, device="npu").cpu().equal(torch.eye(3))


def test_module_npu_and_to():
    m = torch.nn.Linear(4, 2)
    m.npu()
    assert all(p.is_npu for p in m.parameters())
    m.to("cpu")
    assert not any(p.is_npu for p in m.parameters())
    m.to("npu")
    assert all(p.is_npu for p in m.parameters())


def test_torch_device_npu_is_documented_limit():
    # torch 1.13 parses device strings in C++: "npu" cannot be added there.
    if int(torch.__version__.split(".")[0]) >= 2:
        pytest.skip("torch >= 2 names the device npu")
    with pytest.raises(RuntimeError):
        torch.device("npu")


@pytest.mark.no_npu_ok
def test_torchscript_finds_torchs_factories():
    """torch 1.13's factories are wrapped (device="npu"); TorchScript finds
    builtins by identity and failed to script any function calling them."""
    @torch.jit.script
    def f(n: int):
        return torch.zeros(n) + torch.arange(n) + torch.full([n], 2.0)
    assert torch.equal(f(3), torch.tensor([2.0, 3.0, 4.0]))
