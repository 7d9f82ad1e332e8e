"""torch_npurt.contrib.transfer_to_npu: code written for CUDA runs on the NPU
unchanged. Each test imports the module (as a script does) and puts torch
back afterwards, so the rest of the suite sees torch as it was."""
import io

import pytest
import torch

import torch_npurt
from torch_npurt import _transfer, npu

from conftest import check_masked_encoder

AUTOCAST = torch_npurt._C._autocast_registered()
GENERATOR = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 1)


@pytest.fixture
def transfer():
    from torch_npurt.contrib import transfer_to_npu  # noqa: F401  as a script does
    assert _transfer.applied()
    try:
        yield
    finally:
        _transfer.restore()


def _on_npu(t, index=0):
    return t.device.type == npu._DEVICE_TYPE and t.device.index == index


def test_a_cuda_training_loop_runs_on_the_npu(transfer):
    """A training step as a CUDA tutorial writes it, against the CPU."""
    assert torch.cuda.is_available() and torch.cuda.device_count() == npu.device_count()
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model.load_state_dict(cpu_model.state_dict())
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    assert all(_on_npu(p) and p.is_cuda for p in model.parameters())
    x = torch.randn(16, 4)
    target = torch.randn(16, 1)
    for m, xs, ts in ((cpu_model, x, target), (model, x.cuda(), target.to(device))):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(xs), ts)
            loss.backward()
            opt.step()
    torch.cuda.synchronize()
    for p, q in zip(model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
    assert torch.cuda.memory_allocated() == npu.memory_allocated() > 0
    assert torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated()


def test_cuda_device_spellings_name_npus(transfer, dev):
    x = torch.arange(6.0)
    for spelling in ("cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0), 0):
        assert _on_npu(x.to(spelling)), spelling
        assert _on_npu(torch.zeros(2, device=spelling)), spelling
    assert _on_npu(x.to(device="cuda:0", dtype=torch.float64))
    assert x.to("cuda", torch.float16).dtype == torch.float16
    assert _on_npu(x.cuda()) and _on_npu(x.cuda(0)) and _on_npu(x.cuda("cuda:0"))
    assert _on_npu(x.cuda(non_blocking=True))
    assert _on_npu(torch.ones(2, 2, device="cuda").new_zeros(3))
    assert _on_npu(x.new_full((2,), 7.0, device="cuda:0"))
    assert _on_npu(torch.tensor([1, 2], device="cuda")) and _on_npu(torch.eye(2, device=0))
    assert _on_npu(torch.randn(3, device="cuda")) and _on_npu(torch.full((2,), 1, device="cuda"))
    assert _on_npu(torch.arange(4, device=torch.device("cuda")))
    y = torch.zeros(3, device="cuda")
    assert y.is_cuda and not x.is_cuda
    assert _on_npu(torch.nn.Linear(2, 2).cuda().weight)
    assert _on_npu(torch.nn.Linear(2, 2).to("cuda:0").weight)
    # What is not a CUDA device is untouched.
    assert x.to("cpu").device.type == "cpu" and x.to(dev).device == dev
    # Bad spellings fail as torch's own do, and a missing NPU says which.
    with pytest.raises(RuntimeError, match="Invalid device string"):
        x.to("cuda:x")
    with pytest.raises((RuntimeError, IndexError), match="NPU|npu"):
        torch.zeros(2, device="cuda:%d" % (npu.device_count() + 3))


def test_torch_cuda_is_the_npu_module(transfer, dev):
    assert torch.cuda.current_device() == npu.current_device()
    torch.cuda.set_device("cuda:0")
    torch.cuda.set_device(torch.device("cuda", 0))
    with torch.cuda.device("cuda:0"):
        assert npu.current_device() == 0
    assert torch.cuda.get_device_name(torch.device("cuda")) == npu.get_device_name(0)
    assert torch.cuda.get_device_properties("cuda:0").total_memory == \
        npu.get_device_properties(0).total_memory
    with pytest.raises((RuntimeError, IndexError), match="NPU"):
        torch.cuda.set_device("cuda:%d" % (npu.device_count() + 3))
    # Streams and events.
    s = torch.cuda.Stream()
    assert isinstance(s, npu.Stream) and isinstance(torch.cuda.current_stream(), npu.Stream)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(s):
        start.record()
        z = torch.ones(64, 64, device="cuda") @ torch.ones(64, 64, device="cuda")
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    torch.cuda.current_stream().wait_stream(s)
    assert z[0, 0].item() == 64.0
    # The submodules, as code imports them.
    from torch.cuda import amp as cuda_amp
    from torch.cuda.memory import _record_memory_history  # noqa: F401
    from torch.cuda.streams import Event
    assert Event is npu.Event
    assert (cuda_amp.GradScaler is npu.amp.GradScaler) == AUTOCAST
    assert torch.cuda.CUDAGraph is npu.NPUGraph and torch.cuda.graphs.CUDAGraph is npu.NPUGraph
    # Legacy types.
    t = torch.cuda.FloatTensor(2, 3)
    assert _on_npu(t) and t.dtype == torch.float32
    assert _on_npu(torch.arange(3).type("torch.cuda.FloatTensor"))
    assert torch.arange(3).type(torch.cuda.LongTensor).dtype == torch.int64
    # Seeds.
    torch.cuda.manual_seed_all(5)
    a = torch.rand(4, device="cuda").cpu()
    torch.cuda.manual_seed(5)
    assert torch.equal(torch.rand(4, device="cuda").cpu(), a)


def test_a_cuda_checkpoint_loads_onto_the_npu(transfer, monkeypatch):
    """A checkpoint saved on a CUDA machine (storages tagged "cuda:0")."""
    state = {"w": torch.arange(6.0).reshape(2, 3), "step": 7}
    buf = io.BytesIO()
    with monkeypatch.context() as m:
        m.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save(state, buf)
    for kwargs in ({}, {"map_location": "cuda:0"}, {"map_location": torch.device("cuda")},
                   {"map_location": {"cuda:0": "cuda:0"}}):
        buf.seek(0)
        loaded = torch.load(buf, **kwargs)
        assert _on_npu(loaded["w"]), kwargs
        assert torch.equal(loaded["w"].cpu(), state["w"]) and loaded["step"] == 7
    buf.seek(0)
    assert torch.load(buf, map_location="cpu")["w"].device.type == "cpu"
    buf.seek(0)
    assert torch.load(buf, map_location={"cuda:0": "cpu"})["w"].device.type == "cpu"
    # Without the transfer the same file names CUDA, which is not there.
    _transfer.restore()
    buf.seek(0)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(buf)


@pytest.mark.skipif(not AUTOCAST, reason="torch %s: no NPU autocast" % torch.__version__)
def test_cuda_mixed_precision_runs_on_the_npu(transfer):
    a = torch.randn(8, 8, device="cuda")
    with torch.autocast("cuda"):
        assert (a @ a).dtype == torch.float16 and _on_npu(a @ a)
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    with torch.cuda.amp.autocast():
        assert (a @ a).dtype == torch.float16
    for scaler in (torch.cuda.amp.GradScaler(), torch.amp.GradScaler(),
                   torch.amp.GradScaler("cuda")):
        model = torch.nn.Linear(8, 1).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with torch.autocast("cuda"):
            loss = model(a).float().sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() > 0


@pytest.mark.skipif(not GENERATOR, reason="torch %s: no NPU generator" % torch.__version__)
def test_cuda_generator_is_an_npu_generator(transfer):
    g = torch.Generator("cuda").manual_seed(3)
    assert g.device.type == npu._DEVICE_TYPE and isinstance(g, torch.Generator)
    assert isinstance(torch.default_generator, torch.Generator)
    ref = torch.Generator().manual_seed(3)
    torch.testing.assert_close(torch.randn(5, device="cuda", generator=g).cpu(),
                               torch.randn(5, generator=ref))
    assert torch.Generator().device.type == "cpu"


def test_cuda_pinned_loader(transfer):
    data = torch.utils.data.TensorDataset(torch.arange(12.0).reshape(6, 2))
    for kwargs in ({}, {"pin_memory_device": "cuda"}):
        loader = torch.utils.data.DataLoader(data, batch_size=3, pin_memory=True, **kwargs)
        for (batch,) in loader:
            assert batch.is_pinned(), kwargs
            assert _on_npu(batch.cuda(non_blocking=True))


def test_restore_puts_torch_back(transfer, dev):
    before_zeros = torch.zeros
    _transfer.restore()
    assert not _transfer.applied()
    assert torch.zeros is not before_zeros and torch.Generator is torch._C.Generator
    assert "is_cuda" not in torch.Tensor.__dict__
    t = torch.ones(2, device=dev)
    assert not t.is_cuda
    with pytest.raises((RuntimeError, AssertionError)):
        torch.zeros(2, device="cuda")
    with pytest.raises(ValueError, match="expected an NPU device"):
        npu.set_device("cuda:0")
    assert torch.cuda.Stream is not npu.Stream
    assert not any(e[2] is _transfer._cuda_storage_to_npu
                   for e in torch.serialization._package_registry)
    # Imported again (in any order of the suite's files), it applies again.
    from torch_npurt.contrib import transfer_to_npu  # noqa: F401
    assert _transfer.applied() and torch.ones(1, device="cuda").is_cuda


def test_torchscript_still_compiles(transfer, dev):
    @torch.jit.script
    def f(n: int):
        return torch.zeros(n) + torch.arange(n) + torch.ones(n)
    assert torch.equal(f(3), torch.tensor([1.0, 2.0, 3.0]))
    # A TorchScript archive through torch.load (torch.jit.load underneath).
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), buf)
    buf.seek(0)
    m = torch.load(buf, weights_only=False)
    assert isinstance(m, torch.jit.ScriptModule)


def test_cuda_storage_idiom_and_tags_in_a_dict(transfer, monkeypatch):
    state = {"w": torch.arange(4.0)}
    buf = io.BytesIO()
    with monkeypatch.context() as m:
        m.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save(state, buf)
    buf.seek(0)
    w = torch.load(buf, map_location=lambda storage, loc: storage.cuda(0))["w"]
    assert _on_npu(w) and torch.equal(w.cpu(), state["w"])
    buf.seek(0)
    w = torch.load(buf, map_location={"cuda:0": "cuda:0"})["w"]
    assert _on_npu(w)


def test_torch_internals_that_ask_is_cuda(transfer, dev):
    """is_cuda is True for NPU tensors now: torch's own paths that ask it
    (attention's fast path, the transformer's nested tensors) still work,
    and CUDA's array interface still refuses NPU memory."""
    check_masked_encoder(lambda m: m.cuda())
    assert not hasattr(torch.ones(2, device="cuda"), "__cuda_array_interface__")
    assert torch.ones(2, device="cuda").is_cuda and not torch.ones(2).is_cuda


def test_data_parallel_runs_the_module_on_its_npu(transfer):
    model = torch.nn.Linear(4, 2).cuda()
    _transfer._warned.discard("dp")
    with pytest.warns(UserWarning, match="DataParallel"):
        dp = torch.nn.DataParallel(model)
    x = torch.randn(3, 4).cuda()
    out = dp(x)
    assert _on_npu(out)
    torch.testing.assert_close(out.cpu(), model(x).cpu())
    assert dp.module is model


@pytest.mark.skipif(AUTOCAST, reason="torch has NPU autocast")
def test_cuda_amp_runs_disabled_without_npu_autocast(transfer):
    """torch 1.13: torch.cuda.amp's classes run in float32, as 1.13's do
    without CUDA, instead of failing."""
    model = torch.nn.Linear(4, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _transfer._warned.discard("amp")
    with pytest.warns(UserWarning, match="no NPU autocast"):
        scaler = torch.cuda.amp.GradScaler()
    x = torch.randn(8, 4).cuda()
    before = model.weight.detach().cpu().clone()
    with torch.cuda.amp.autocast():
        out = model(x)
    assert out.dtype == torch.float32
    scaler.scale(out.sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert not torch.equal(model.weight.detach().cpu(), before)
