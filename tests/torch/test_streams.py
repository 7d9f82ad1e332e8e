import copy
import ctypes
import pickle

import pytest
import torch

from torch_npurt import npu


def test_stream_basics(dev):
    s = npu.Stream()
    assert s.device == dev
    assert s != npu.default_stream()
    assert npu.current_stream() == npu.default_stream()
    hi = npu.Stream(priority=-1)
    assert hi.priority == -1
    with pytest.raises(RuntimeError, match="priority"):
        npu.Stream(priority=5)
    # Beyond the highest is the highest, as torch.cuda's.
    assert npu.Stream(priority=-7).priority == -1
    with npu.stream(s):
        assert npu.current_stream() == s
        x = torch.randn(128, 128, device=dev)
        y = x @ x
    assert npu.current_stream() == npu.default_stream()
    s.synchronize()
    assert s.query()
    assert torch.allclose(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)
    npu.set_stream(s)
    assert npu.current_stream() == s
    npu.set_stream(npu.default_stream())
    with pytest.raises(TypeError):
        npu.stream(42)


def test_stream_pool_hands_out_32_streams_in_turn(dev):
    # As torch.cuda's: 32 streams per priority before one comes again (4
    # did, so a fifth stream for overlap silently ran behind the first).
    got = [npu.Stream() for _ in range(33)]
    assert len({s.stream_id for s in got[:32]}) == 32
    assert got[32] == got[0]
    a = torch.ones(1000, device=dev)
    outs = []
    for s in got[:32]:
        s.wait_stream(npu.default_stream())
        with npu.stream(s):
            outs.append(a * 2)
    for s in got[:32]:
        s.synchronize()
    assert all(bool((o == 2).all()) for o in outs)


def test_stream_of_other_device():
    if npu.device_count() < 2:
        pytest.skip("needs 2 NPUs")
    s1 = npu.Stream(device=1)
    with npu.stream(s1):
        assert npu.current_device() == 1
        x = torch.ones(4, device="npu")
        assert x.device.index == 1
    assert npu.current_device() == 0


def test_events(dev):
    e = npu.Event()
    assert e.query()  # never recorded
    e.record()
    e.synchronize()
    assert e.query()
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    start.record()
    x = torch.randn(256, 256, device=dev)
    for _ in range(3):
        x = x @ x / 256
    end.record()
    end.synchronize()
    assert end.elapsed_time(start) <= 0 <= start.elapsed_time(end)
    with pytest.raises(RuntimeError, match="enable_timing"):
        npu.Event().elapsed_time(npu.Event())
    with pytest.raises(RuntimeError, match="cannot time"):
        npu.Event(enable_timing=True, interprocess=True)
    with pytest.raises(RuntimeError, match="interprocess=True"):
        npu.Event().ipc_handle()
    with pytest.raises(RuntimeError, match="64 bytes"):
        npu.Event.from_ipc_handle(0, b"short")


def test_interprocess_event_handle(dev):
    # The handle is 64 bytes; opened (here in this process: the crossing to
    # another process is libnpurt's, tested by Memory.IpcEvent* there, and a
    # second interpreter would import torch again) it sees the records.
    ev = npu.Event(interprocess=True)
    h = ev.ipc_handle()
    assert isinstance(h, bytes) and len(h) == 64
    opened = npu.Event.from_ipc_handle(dev, h)
    assert opened.query()
    x = torch.ones(1 << 16).to(dev)
    with npu.stream(npu.Stream()):
        y = x * 3
        ev.record()
    s2 = npu.Stream()
    opened.wait(s2)
    with npu.stream(s2):
        z = y + 1
    opened.synchronize()
    assert opened.query()
    s2.synchronize()
    assert torch.equal(z.cpu(), torch.full((1 << 16,), 4.0))


def test_cross_stream_ordering(dev):
    s1, s2 = npu.Stream(), npu.Stream()
    a = torch.randn(256, 256)
    with npu.stream(s1):
        x = a.to(dev)
        for _ in range(4):
            x = x @ x / 256
        ev = s1.record_event()
    with npu.stream(s2):
        s2.wait_event(ev)
        y = x * 2  # must see s1's result
    s2.synchronize()
    e = a
    for _ in range(4):
        e = e @ e / 256
    torch.testing.assert_close(y.cpu(), e * 2, rtol=1e-3, atol=1e-4)
    # wait_stream does the same.
    with npu.stream(s1):
        z = x + 1
    s2.wait_stream(s1)
    with npu.stream(s2):
        w = z - 1
    # .cpu() runs on the current (default) stream: order it after s2.
    npu.current_stream().wait_stream(s2)
    torch.testing.assert_close(w.cpu(), x.cpu(), rtol=1e-5, atol=1e-5)
    ev2 = npu.Event()
    ev2.record(s2)
    ev2.wait(npu.current_stream())
    npu.synchronize()


def test_streams_copy_and_pickle_as_handles(dev):
    s = npu.Stream()
    assert copy.copy(s) is s and copy.deepcopy({"s": s})["s"] is s
    back = pickle.loads(pickle.dumps(s))
    assert back == s and type(back) is npu.Stream
    assert pickle.loads(pickle.dumps(npu.default_stream())) == npu.default_stream()


def test_stream_as_context_manager(dev):
    a, b = npu.Stream(), npu.Stream()
    outer = npu.current_stream()
    with a:
        assert npu.current_stream() == a
        with b:
            assert npu.current_stream() == b
            x = torch.ones(4, device=dev) * 3
        assert npu.current_stream() == a
        with a:  # the same object again, nested
            assert npu.current_stream() == a
        assert npu.current_stream() == a
    assert npu.current_stream() == outer
    b.synchronize()
    assert x.cpu().eq(3).all()
    # An exception leaves the block with the stream restored.
    with pytest.raises(ValueError):
        with a:
            raise ValueError("inside")
    assert npu.current_stream() == outer


def test_stream_context_manager_per_thread(dev):
    # One Stream object entered by several threads at once: each thread
    # restores its own current stream.
    import threading
    s = npu.Stream()
    barrier = threading.Barrier(3)
    errors = []

    def worker():
        try:
            mine = npu.Stream()
            npu.set_stream(mine)
            with s:
                barrier.wait(timeout=60)
                assert npu.current_stream() == s
                barrier.wait(timeout=60)
            assert npu.current_stream() == mine
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)


def _libnpurt():
    # The libnpurt the extension loaded (another C library in this process
    # would call the same one).
    with open("/proc/self/maps") as maps:
        path = next(line.split()[-1] for line in maps if "libnpurt.so" in line)
    lib = ctypes.CDLL(path)
    lib.npurtStreamCreateWithFlags.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
    lib.npurtStreamDestroy.argtypes = [ctypes.c_void_p]
    return lib


TORCH_STREAM = hasattr(torch, "Stream") and hasattr(torch.Stream, "stream_id")


@pytest.mark.skipif(not TORCH_STREAM, reason="torch 1.13: no device-generic torch.Stream")
def test_npu_streams_are_torch_streams(dev):
    s = npu.Stream()
    assert isinstance(s, torch.Stream) and isinstance(npu.current_stream(), torch.Stream)
    assert s.device == dev and s.device_index == dev.index
    assert s.device_type == torch.Stream(device=dev).device_type
    x = torch.zeros(1000, device=dev)
    # torch's own stream of an NPU stream works wherever an NPU Stream does.
    generic = torch.Stream(stream_id=s.stream_id, device_index=s.device_index,
                           device_type=s.device_type)
    assert s == generic and generic == s and s != npu.default_stream()
    with npu.stream(generic):
        assert npu.current_stream() == s
        x.add_(5)
    assert npu.current_stream(generic) == npu.current_stream(dev)
    x.record_stream(generic)
    s.synchronize()
    assert x.sum().item() == 5000
    with pytest.raises(TypeError, match="expected an NPU stream"):
        npu.set_stream(object())
    with pytest.raises(TypeError, match="expected an NPU stream"):
        npu.stream(42)
    e = npu.Event()
    e.record(generic)
    e.wait(generic)
    with pytest.raises(TypeError, match="expected an NPU stream"):
        e.record("npu:0")
    assert isinstance(npu.ExternalStream(0), torch.Stream)


@pytest.mark.skipif(not hasattr(getattr(torch, "accelerator", None), "set_stream"),
                    reason="torch < 2.6: no torch.accelerator streams")
def test_torch_accelerator_takes_npu_streams(dev):
    s = npu.Stream()
    torch.accelerator.set_stream(s)
    try:
        assert npu.current_stream() == s
        cur = torch.accelerator.current_stream()
        assert cur == s and s == cur
        with npu.stream(cur):
            y = torch.ones(100, device=dev) * 2
        torch.accelerator.synchronize()
        assert y.sum().item() == 200
    finally:
        npu.set_stream(npu.default_stream())
    assert npu.current_stream() == npu.default_stream()


def test_external_stream_runs_torch_work(dev):
    lib = _libnpurt()
    handle = ctypes.c_void_p()
    assert lib.npurtStreamCreateWithFlags(ctypes.byref(handle), 1) == 0
    s = npu.ExternalStream(handle.value)
    assert s.npu_stream == handle.value
    assert npu.ExternalStream(handle.value) == s, "registered once"
    with npu.stream(s):
        assert npu.current_stream() == s
        x = torch.ones(1000, device=dev) * 3
    s.synchronize()
    assert x.sum().item() == 3000
    # Autograd orders its work against the external stream too.
    w = torch.ones(8, device=dev, requires_grad=True)
    with npu.stream(s):
        loss = (w * 2).sum()
    loss.backward()
    assert w.grad.tolist() == [2.0] * 8
    assert npu.default_stream().npu_stream == 0
    assert npu.ExternalStream(0) == npu.default_stream()
    assert npu.Stream().npu_stream != 0
    npu.synchronize()
    assert lib.npurtStreamDestroy(handle) == 0
    # Its owner destroyed it: torch's later backward passes skip it (w
    # itself is done with: its gradient accumulator ran on that stream, and
    # would run there again, as on CUDA).
    v = torch.ones(8, device=dev, requires_grad=True)
    (v * 3).sum().backward()
    assert v.grad.tolist() == [3.0] * 8


def test_external_stream_refuses_what_is_not_a_stream(dev):
    with pytest.raises(RuntimeError, match="npurtStreamGetDevice"):
        npu.ExternalStream(0xdead0000)
    with pytest.raises(RuntimeError, match="different stream in every thread"):
        npu.ExternalStream(2)  # npurtStreamPerThread
    if npu.device_count() > 1:
        lib = _libnpurt()
        handle = ctypes.c_void_p()
        assert lib.npurtStreamCreateWithFlags(ctypes.byref(handle), 1) == 0
        with pytest.raises(RuntimeError, match="belongs to NPU 0, not NPU 1"):
            npu.ExternalStream(handle.value, device=1)
        lib.npurtStreamDestroy(handle)
