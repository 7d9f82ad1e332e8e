"""Pinned memory (npurtMallocHost) and non_blocking copies.

Asynchrony is shown without timing: a _StreamGate holds the stream (a host
function that waits), so a copy that returns while the gate is closed was
not waited for; query() is False until the gate opens. A safety timer opens
a forgotten gate so that a wrong implementation fails instead of hanging.
"""
import contextlib
import warnings

import pytest
import torch

import torch_npurt
from torch_npurt import npu


class Gate:
    """Holds `stream` (default: the current one) until release(). If
    something waits for the held work, the gate opens by itself after 60 s
    and release() fails the test."""

    def __init__(self, stream=None):
        s = stream or npu.current_stream()
        self.stream = s
        self.g = torch_npurt._C._StreamGate(s.device_index, s.stream_id, 60)

    def release(self):
        self.g.release()
        assert not self.g.expired(), "the gate opened by its timeout: something waited"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.g.release()


@contextlib.contextmanager
def device_argument():
    """pin_memory(device) / is_pinned(device) as users write them: torch >=
    2.5 warns that the argument is deprecated (its own warning, for every
    backend), and still honours it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*argument 'device' of Tensor")
        yield


def test_pin_memory_no_argument():
    x = torch.randn(1000, 100)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned()
    with device_argument():
        assert p.is_pinned("npu") and p.is_pinned(npu.torch_device(0))
    assert torch.equal(p, x) and p.data_ptr() != x.data_ptr()
    assert p.pin_memory() is p or p.pin_memory().data_ptr() == p.data_ptr()
    with device_argument():
        assert x.pin_memory("npu:0").is_pinned()
        assert x.pin_memory(npu.torch_device(0)).is_pinned()
    assert not x.npu().is_pinned()
    # Views share the pinned block.
    assert p[3:7].is_pinned()
    nc = torch.randn(8, 6).t()
    pn = nc.pin_memory()
    assert pn.is_pinned() and torch.equal(pn, nc) and pn.stride() == nc.stride()
    assert torch.empty(0).pin_memory().numel() == 0


def test_pin_memory_bad_input():
    with pytest.raises(RuntimeError, match="CPU tensors"):
        torch.ones(3, device="npu").pin_memory()
    if torch_npurt.DEVICE_TYPE == "privateuseone":
        # torch 1.13 dispatches on the device argument, to our kernel; 2.x
        # deprecates the argument and pins through the backend's hooks,
        # which are not told the index.
        with pytest.raises(IndexError, match="NPU device 99"), device_argument():
            torch.ones(3).pin_memory("npu:99")


def test_factories_pin_memory_true():
    for t in (torch.empty(4, 5, pin_memory=True), torch.zeros(3, pin_memory=True),
              torch.ones(2, 2, pin_memory=True), torch.full((3,), 2.0, pin_memory=True),
              torch.randn(4, pin_memory=True), torch.arange(6, pin_memory=True),
              torch.tensor([1.0, 2.0], pin_memory=True),
              torch.empty_like(torch.ones(3), pin_memory=True)):
        assert t.is_pinned() and t.device.type == "cpu"
    assert torch.ones(2, 2, pin_memory=True).tolist() == [[1, 1], [1, 1]]
    assert torch.arange(6, pin_memory=True).tolist() == list(range(6))
    assert not torch.zeros(3).is_pinned()


def test_pinned_stats_free():
    p = torch.empty(1 << 20, pin_memory=True)
    p.fill_(1)
    before = npu.host_memory_stats()
    del p  # no queued copy: cached for reuse at once
    after = npu.host_memory_stats()
    assert after["parked_blocks"] == 0
    assert after["cached_blocks"] == before["cached_blocks"] + 1
    q = torch.empty(1 << 20, pin_memory=True)  # the same block again
    assert npu.host_memory_stats()["cache_hits"] == after["cache_hits"] + 1
    assert q.is_pinned()


def test_nonblocking_h2d_from_pinned_is_async(dev):
    x = torch.randn(512, 1024)
    p = x.pin_memory()
    with Gate() as g:
        y = p.to(dev, non_blocking=True)
        # Returned with the stream held: nothing waited for the copy.
        assert not npu.current_stream().query()
        ev = npu.Event()
        ev.record()
        assert not ev.query()
        # The pinned source may go: the block is parked until the copy ran.
        del p
        assert npu.host_memory_stats()["parked_blocks"] >= 1
        # Its size again: not the parked block, which the copy still reads.
        q = torch.zeros(512, 1024, pin_memory=True)
        g.release()
    npu.current_stream().synchronize()
    assert torch.equal(y.cpu(), x)
    assert torch.count_nonzero(q) == 0
    assert npu.host_memory_stats()["parked_blocks"] == 0


def test_nonblocking_d2h_into_pinned_is_async(dev):
    x = torch.randn(256, 256)
    d = x.to(dev)
    out = torch.empty(256, 256, pin_memory=True)
    with Gate() as g:
        out.copy_(d, non_blocking=True)
        assert not npu.current_stream().query()
        g.release()
    npu.current_stream().synchronize()
    assert torch.equal(out, x)


def test_nonblocking_npu_method_and_side_stream(dev):
    s = npu.Stream()
    x = torch.randn(300, 70)
    p = x.pin_memory()
    with npu.stream(s), Gate(s) as g:
        y = p.npu(non_blocking=True)
        assert not s.query()
        g.release()
    s.synchronize()
    assert torch.equal(y.cpu(), x)


def test_nonblocking_from_pageable_stays_correct(dev):
    x = torch.randn(256, 256)  # 256 KiB, pageable
    keep = x.clone()
    with Gate() as g:
        y = x.to(dev, non_blocking=True)
        x.fill_(-1)  # staged before the call returned: may be reused
        g.release()
    npu.current_stream().synchronize()
    assert torch.equal(y.cpu(), keep)
    # Device to pageable host with non_blocking: complete on return.
    z = torch.empty(256, 256)
    z.copy_(y, non_blocking=True)
    assert torch.equal(z, keep)
    # Non-contiguous or converting sources go through a temporary.
    w = keep.pin_memory().t().to(dev, non_blocking=True)
    h = keep.pin_memory().to(dev, dtype=torch.float16, non_blocking=True)
    npu.synchronize()
    assert torch.equal(w.cpu(), keep.t()) and torch.equal(h.cpu(), keep.half())


def test_from_cpu_async_queues_on_the_current_stream(dev):
    """The seed docs' torch_npu.npu.from_cpu_async: a non_blocking copy on
    the current stream, pinned read later, pageable staged at once."""
    s = npu.Stream()
    x = torch.randn(64, 33)
    p = x.pin_memory()
    with npu.stream(s), Gate(s) as g:
        y = npu.from_cpu_async(p)
        assert not s.query(), "it waited for the held stream"
        z = npu.from_cpu_async(x.double())  # pageable: staged
        g.release()
    s.synchronize()
    assert y.device == dev and y.dtype == torch.float32 and y.shape == x.shape
    assert torch.equal(y.cpu(), x)
    assert z.dtype == torch.float64 and torch.equal(z.cpu(), x.double())
    assert npu.from_cpu_async(torch.tensor(7), device=dev).cpu().item() == 7


def test_from_cpu_async_bad_input(dev):
    with pytest.raises(ValueError, match="copies a CPU tensor; this one is on"):
        npu.from_cpu_async(torch.ones(2, device=dev))
    with pytest.raises(TypeError, match="expected a torch.Tensor"):
        npu.from_cpu_async([1.0, 2.0])
    with pytest.raises(ValueError, match="NPU device"):
        npu.from_cpu_async(torch.ones(2), device="cpu")


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.full((4,), float(i)), {"i": torch.tensor(i)}


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_pin_memory(dev, workers):
    dl = torch.utils.data.DataLoader(_Squares(), batch_size=4, pin_memory=True,
                                     num_workers=workers)
    seen = []
    for x, meta in dl:
        assert x.is_pinned() and meta["i"].is_pinned()
        y = x.to(dev, non_blocking=True)
        seen.extend(y.cpu()[:, 0].tolist())
    assert seen == [float(i) for i in range(10)]
    dl = torch.utils.data.DataLoader(_Squares(), batch_size=5, pin_memory=True,
                                     pin_memory_device="npu")
    with warnings.catch_warnings():
        # torch >= 2.5's loader would warn per batch (see _patches).
        warnings.filterwarnings("error", message=".*argument 'device' of Tensor")
        assert all(b[0].is_pinned() for b in dl)
