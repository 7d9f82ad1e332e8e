"""torch.npu.set_sync_debug_mode (torch.cuda's): which operations it flags,
and that the error mode refuses before anything is enqueued. Also the
resizes that copy on the current stream, which such a mode must not need."""
import warnings

import pytest
import torch

from torch_npurt import npu

from conftest import queue_slow_writes, slow_jobs

MESSAGE = "called a synchronizing NPU operation"
TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


@pytest.fixture(autouse=True)
def quiet_mode_after():
    yield
    npu.set_sync_debug_mode("default")


def sync_warnings(fn):
    """Runs fn; returns the sync-debug warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if MESSAGE in str(w.message)]


def test_modes_round_trip_and_bad_values_change_nothing():
    assert npu.get_sync_debug_mode() == 0
    for name, value in (("warn", 1), ("error", 2), ("default", 0)):
        npu.set_sync_debug_mode(name)
        assert npu.get_sync_debug_mode() == value
    npu.set_sync_debug_mode(1)
    assert npu.get_sync_debug_mode() == 1
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
        npu.set_sync_debug_mode("loud")
    with pytest.raises(RuntimeError, match="invalid value of debug_mode 3"):
        npu.set_sync_debug_mode(3)
    with pytest.raises(RuntimeError, match="invalid value of debug_mode -1"):
        npu.set_sync_debug_mode(-1)
    with pytest.raises(TypeError):
        npu.set_sync_debug_mode(1.0)
    with pytest.raises(TypeError):
        npu.set_sync_debug_mode(True)
    assert npu.get_sync_debug_mode() == 1


def test_default_mode_is_quiet(dev):
    x = torch.arange(8.0, device=dev)
    assert sync_warnings(lambda: (x.cpu(), x.sum().item())) == []


def test_warn_mode_flags_blocking_copies_and_stream_waits(dev):
    x = torch.arange(8.0, device=dev)
    npu.set_sync_debug_mode("warn")
    got = sync_warnings(lambda: x.cpu())
    assert got and "from NPU to CPU" in got[0], got
    assert sync_warnings(lambda: x.sum().item())
    assert any("from CPU to NPU" in m for m in sync_warnings(lambda: torch.ones(4).to(dev)))
    s = npu.Stream()
    assert any("Stream.synchronize" in m for m in sync_warnings(s.synchronize))


def test_warn_mode_leaves_device_work_and_named_waits_alone(dev):
    x = torch.arange(8.0, device=dev)
    y = torch.empty_like(x)
    npu.set_sync_debug_mode("warn")
    ev = npu.Event()

    def quiet():
        z = x * 2 + 1
        y.copy_(z)  # device to device
        ev.record()
        ev.synchronize()
        npu.synchronize()
    assert sync_warnings(quiet) == []
    npu.set_sync_debug_mode("default")
    assert y.cpu().tolist() == [2.0 * i + 1 for i in range(8)]


def test_error_mode_refuses_before_the_copy(dev):
    x = torch.arange(8.0, device=dev)
    npu.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match=MESSAGE):
        x.cpu()
    with pytest.raises(RuntimeError, match=MESSAGE):
        x.sum().item()
    dst = torch.zeros(8, device=dev)
    with pytest.raises(RuntimeError, match=MESSAGE):
        dst.copy_(torch.full((8,), 7.0))
    with pytest.raises(RuntimeError, match=MESSAGE):
        npu.current_stream().synchronize()
    npu.synchronize()  # asked for by name: allowed
    npu.set_sync_debug_mode("default")
    # Nothing was lost or half-done.
    assert dst.cpu().tolist() == [0.0] * 8
    assert x.cpu().tolist() == [float(i) for i in range(8)]


def test_tensor_resize_copies_behind_the_current_stream(dev):
    s = npu.Stream()
    with slow_jobs(30000), npu.stream(s):
        x = torch.empty(1024, device=dev)
        queue_slow_writes(x, dev)
        x.resize_(4096)
    s.synchronize()
    assert x[:1024].cpu().tolist() == [2.0] * 1024


# A copy on the legacy default stream (as Storage.resize_ made before)
# would read x at about one job latency, before its last write.
@pytest.mark.skipif(TORCH < (2, 2),
                    reason="Storage.resize_ reaches a PrivateUse1 backend from torch 2.2")
def test_storage_resize_copies_behind_the_current_stream(dev):
    s = npu.Stream()
    with slow_jobs(30000), npu.stream(s):
        x = torch.empty(1024, device=dev)
        queue_slow_writes(x, dev)
        x.untyped_storage().resize_(4096 * 4)
    s.synchronize()
    assert x.untyped_storage().nbytes() == 4096 * 4
    assert x.cpu().tolist() == [2.0] * 1024
