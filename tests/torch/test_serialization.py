"""torch.save / torch.load(map_location=...) and deepcopy of NPU tensors."""
import copy
import io

import pytest
import torch

from torch_npurt import npu


def roundtrip(obj, **kw):
    b = io.BytesIO()
    torch.save(obj, b)
    b.seek(0)
    return torch.load(b, **kw)


def test_save_load_tensor(dev):
    x = torch.randn(5, 7)
    d = x.to(dev)
    y = roundtrip(d)
    assert y.device == dev and torch.equal(y.cpu(), x)
    assert roundtrip(d, map_location="cpu").device.type == "cpu"
    assert torch.equal(roundtrip(d, map_location="cpu"), x)
    assert roundtrip(x, map_location="npu").device == dev
    assert roundtrip(x, map_location="npu:0").device == dev
    assert roundtrip(x, map_location=dev).device == dev
    assert roundtrip(d, map_location={"npu:0": "cpu"}).device.type == "cpu"
    # A function gets the CPU storage: returning it keeps it there (as for CUDA).
    assert roundtrip(d, map_location=lambda s, loc: s).device.type == "cpu"
    # Views keep sharing one storage, dtypes are kept.
    h = torch.arange(12, dtype=torch.int32).to(dev)
    a, b = roundtrip([h[2:6], h.view(3, 4).t()])
    a[0] = 100
    assert b.cpu()[2, 0].item() == 100 and b.dtype == torch.int32


def test_load_bad_location(dev):
    b = io.BytesIO()
    torch.save(torch.ones(2).to(dev), b)
    b.seek(0)
    with pytest.raises(RuntimeError, match="device_count"):
        torch.load(b, map_location="npu:%d" % npu.device_count())


def test_save_load_module(dev, tmp_path):
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).npu()
    torch.save(m.state_dict(), tmp_path / "m.pt")
    sd = torch.load(tmp_path / "m.pt")
    assert all(v.is_npu for v in sd.values())
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    m2.load_state_dict(torch.load(tmp_path / "m.pt", map_location="cpu"))
    for (k, v), v2 in zip(m.state_dict().items(), m2.state_dict().values()):
        assert torch.equal(v.cpu(), v2), k
    # A whole module is not weights only (torch >= 2.6 loads only weights by
    # default, on every device); the state dict above loaded either way.
    whole = roundtrip(m, weights_only=False)
    assert next(whole.parameters()).is_npu


def test_deepcopy(dev):
    x = torch.randn(6, 4).to(dev)
    views = [x, x[1:3], x.t()]
    c = copy.deepcopy(views)
    assert all(v.is_npu for v in c) and torch.equal(c[0].cpu(), x.cpu())
    c[0][1, 0] = 42.0
    assert c[1].cpu()[0, 0].item() == 42.0  # the copies share a new storage
    assert x.cpu()[1, 0].item() != 42.0  # not the old one
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)).npu()
    m2 = copy.deepcopy(m)
    for a, b in zip(m.state_dict().values(), m2.state_dict().values()):
        assert b.is_npu and torch.equal(a.cpu(), b.cpu())
        assert a.data_ptr() != b.data_ptr() or a.numel() == 0
    # torch 2.x deprecates TypedStorage (Tensor.storage()).
    s = x.untyped_storage() if hasattr(x, "untyped_storage") else x.storage()
    s2 = s.clone()
    assert s2.device == s.device and s2.cpu().tolist() == s.cpu().tolist()
    assert torch.randn(3).storage().untyped().npu().is_npu
