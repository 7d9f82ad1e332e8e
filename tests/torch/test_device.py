import copy
import gc
import os
import pickle
import warnings

import pytest
import torch

import torch_npurt
from torch_npurt import npu


def test_is_available_and_count():
    assert npu.is_available()
    assert npu.device_count() >= 1


def test_set_and_current_device():
    n = npu.device_count()
    prev = npu.current_device()
    for i in range(n):
        npu.set_device(i)
        assert npu.current_device() == i
        x = torch.ones(3, device="npu")
        assert x.device.index == i
    npu.set_device(prev)
    with pytest.raises(IndexError, match="NPU device 99 requested"):
        npu.set_device(99)
    with pytest.raises(ValueError):
        npu.set_device("cuda:0")


def test_device_context_manager():
    if npu.device_count() < 2:
        pytest.skip("needs 2 NPUs")
    npu.set_device(0)
    with npu.device(1):
        assert npu.current_device() == 1
        assert torch.empty(2, device="npu").device.index == 1
    assert npu.current_device() == 0


def test_properties():
    p = npu.get_device_properties(0)
    assert p.name == npu.get_device_name(0) == npu.get_device_name()
    assert p.total_memory > 0 and p.compute_engine_count >= 1
    assert "total_memory" in repr(p)


def test_synchronize():
    x = torch.randn(64, 64).npu()
    y = x @ x
    npu.synchronize()
    npu.synchronize(0)
    assert torch.allclose(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)


def test_device_strings(dev):
    assert npu.torch_device(0) == torch.device("privateuseone", 0)
    assert npu._index("npu:0") == 0 and npu._index("privateuseone:0") == 0
    assert npu._index(dev) == 0
    with pytest.raises(ValueError):
        npu._index("npu:x")
    with pytest.raises(TypeError):
        npu._index(1.5)


def test_tensor_on_missing_device():
    with pytest.raises(IndexError, match="NPU"):
        torch.empty(3, device="npu:%d" % npu.device_count())


def test_two_devices():
    if npu.device_count() < 2:
        pytest.skip("needs 2 NPUs")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a = x.npu(0)
    b = a.to("npu:1")
    assert b.device.index == 1
    assert torch.equal(b.cpu(), x)
    c = (b * 2).to("npu:0")
    assert torch.equal(c.cpu(), x * 2)
    # Casting across devices.
    assert torch.equal(a.to("npu:1", torch.float16).cpu(), x.half())
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b


def test_mixing_cpu_and_npu(dev):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device=dev) + torch.ones(3)
    # A CPU 0-dim tensor is a scalar, as for CUDA.
    r = torch.ones(3, device=dev) + torch.tensor(2.0)
    assert torch.equal(r.cpu(), torch.full((3,), 3.0))


def test_repr_and_item(dev):
    x = torch.tensor([1.5, 2.5], device=dev)
    # "npu" on torch >= 2.0 (renamed), "privateuseone" on 1.13.
    assert "device='%s:0'" % torch_npurt.DEVICE_TYPE in repr(x)
    assert x[1].item() == 2.5
    assert x.tolist() == [1.5, 2.5]


@pytest.mark.no_npu_ok
def test_api_names():
    for name in npu.__all__:
        assert hasattr(npu, name), name


def test_record_stream_is_accepted_silently(dev):
    # libnpurt keeps a freed block until the work queued before the free
    # has run, on every stream: outside a capture record_stream changes
    # nothing, and says nothing (test_graphs.py tests it in a capture).
    s = npu.Stream()
    x = torch.ones(1024, device=dev)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.record_stream(s)
        x.record_stream(npu.current_stream())
    assert not [w for w in caught if "torch_npurt" in str(w.message)]
    with pytest.raises(RuntimeError, match="cannot be recorded"):
        torch.ones(4).record_stream(s)
    del x


def test_manual_seed_seeds_npu_random_ops(dev):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(7)
    # torch 2.x seeds the device module too, if it can.
    assert not [w for w in caught if "does not take effect" in str(w.message)]
    a = torch.randn(5, device=dev).cpu()
    npu.manual_seed(7)
    b = torch.randn(5, device=dev).cpu()
    npu.manual_seed_all(8)
    c = torch.randn(5, device=dev).cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)


NPU_GENERATORS = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 1)


@pytest.mark.skipif(not NPU_GENERATORS, reason="torch 1.13 makes generators for CPU and CUDA only")
def test_npu_generator_draws_its_own_numbers(dev):
    g = torch.Generator(device="npu")
    assert g.device == dev
    # A new generator starts from torch's default seed, as CUDA's does.
    assert g.initial_seed() == torch.Generator().initial_seed()
    cpu_state = torch.random.get_rng_state()
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    ref = torch.Generator().manual_seed(3)
    torch.testing.assert_close(torch.randn(4, 4, device=dev, generator=g).cpu(),
                               torch.randn(4, 4, generator=ref))
    x = torch.empty(100, device=dev)
    torch.testing.assert_close(x.uniform_(generator=g).cpu(), torch.empty(100).uniform_(generator=ref))
    assert torch.equal(torch.randint(0, 9, (20,), device=dev, generator=g).cpu(),
                       torch.randint(0, 9, (20,), generator=ref))
    assert torch.equal(torch.randperm(30, device=dev, generator=g).cpu(),
                       torch.randperm(30, generator=ref))
    probs = torch.tensor([0.1, 0.2, 0.7])
    assert torch.equal(torch.multinomial(probs.to(dev), 10, True, generator=g).cpu(),
                       torch.multinomial(probs, 10, True, generator=ref))
    # The default generator was not drawn from.
    assert torch.equal(torch.random.get_rng_state(), cpu_state)
    # State round trip, and a state is a CPU generator's.
    state = g.get_state()
    a = torch.rand(8, device=dev, generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.rand(8, device=dev, generator=g).cpu(), a)
    ref.set_state(state)
    assert torch.equal(torch.rand(8, generator=ref), a)
    with pytest.raises(RuntimeError):
        g.set_state(torch.zeros(3, dtype=torch.uint8))
    # Copies carry the device and the state (pickle reads the offset).
    for copied in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert copied.device == dev and copied.initial_seed() == g.initial_seed()
        assert torch.equal(copied.get_state(), g.get_state())
    assert g.get_offset() == 0
    with pytest.raises(RuntimeError, match="no offset"):
        g.set_offset(4)
    g.seed()
    assert g.initial_seed() != 3
    # Two generators with one seed give the same numbers: each has its own state.
    g1 = torch.Generator(device=dev).manual_seed(11)
    g2 = torch.Generator(device=dev).manual_seed(11)
    torch.rand(5, device=dev, generator=g1)
    assert torch.equal(torch.rand(5, device=dev, generator=g1).cpu(),
                       torch.rand(10, device=dev, generator=g2).cpu()[5:])


@pytest.mark.skipif(not NPU_GENERATORS, reason="torch 1.13 makes generators for CPU and CUDA only")
def test_npu_generator_refuses_what_cuda_refuses(dev):
    g = torch.Generator(device="npu")
    # A CPU tensor with an NPU generator, as CUDA's "found 'cuda'".
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator"):
        torch.randn(3, generator=g)
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator"):
        torch.empty(3).normal_(generator=g)
    with pytest.raises((RuntimeError, IndexError), match="NPU"):
        torch.Generator(device=torch.device("npu", npu.device_count() + 2))


@pytest.mark.no_npu_ok
def test_submodules_import_as_torch_cudas():
    import importlib

    from torch.npu.graphs import NPUGraph, make_graphed_callables  # noqa: F401
    from torch.npu.memory import _record_memory_history, memory_allocated  # noqa: F401
    from torch.npu.streams import Event, ExternalStream, Stream  # noqa: F401
    assert torch.npu is npu
    assert torch.npu.memory.memory_allocated is npu.memory_allocated
    assert torch.npu.memory._set_allocator_settings is npu._set_allocator_settings
    assert importlib.import_module("torch.npu.random").manual_seed is npu.manual_seed
    assert Stream is npu.Stream and NPUGraph is npu.NPUGraph
    for name in ("amp", "memory", "random", "streams", "graphs"):
        mod = getattr(npu, name)
        assert all(hasattr(mod, a) for a in mod.__all__), name


@pytest.mark.no_npu_ok
def test_torch_npus_knobs_are_taken():
    # Scripts written for torch_npu set these first.
    npu.set_compile_mode(jit_compile=False)
    npu.set_compile_mode(jit_compile=True)
    with pytest.raises(TypeError, match="bool"):
        npu.set_compile_mode(jit_compile="no")
    assert npu.config.allow_internal_format is False
    npu.config.allow_internal_format = True
    assert npu.config.allow_internal_format is True
    npu.config.allow_internal_format = False
    with pytest.raises(TypeError, match="bool"):
        npu.config.allow_internal_format = 1
    npu.ipc_collect()


@pytest.mark.no_npu_ok
def test_torch_npus_environment_is_translated():
    from torch_npurt._environ import translate_torch_npu_environment
    env = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}
    translate_torch_npu_environment(env)
    assert env["NPURT_ALLOC_CONF"] == "expandable_segments:True"
    # libnpurt's own name wins; the visible devices libnpurt reads itself.
    env = {"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:64", "NPURT_ALLOC_CONF": "",
           "ASCEND_RT_VISIBLE_DEVICES": "1"}
    translate_torch_npu_environment(env)
    assert env["NPURT_ALLOC_CONF"] == "" and "NPURT_VISIBLE_DEVICES" not in env


def test_legacy_tensor_types(dev):
    t = npu.FloatTensor(2, 3)
    assert t.shape == (2, 3) and t.dtype == torch.float32 and t.device == dev
    assert isinstance(t, npu.FloatTensor) and not isinstance(t, npu.LongTensor)
    assert not isinstance(torch.ones(2), npu.FloatTensor)
    assert npu.LongTensor([1, 2]).cpu().tolist() == [1, 2]
    assert npu.HalfTensor(torch.Size([4])).dtype == torch.half
    assert npu.FloatTensor().numel() == 0
    assert npu.BoolTensor(torch.tensor([0, 2])).cpu().tolist() == [False, True]
    with pytest.raises(TypeError, match="expected sizes"):
        npu.FloatTensor(2, "a")
    # Tensor.type with them, as with torch.cuda's; torch's own forms stay.
    x = torch.arange(4)
    y = x.type(npu.FloatTensor)
    assert y.device == dev and y.dtype == torch.float32
    assert y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert y.type("torch.npu.LongTensor").dtype == torch.int64
    assert y.type(torch.float64).dtype == torch.float64
    assert x.type(dtype=npu.HalfTensor, non_blocking=True).dtype == torch.half
    assert x.type(torch.float64, True).dtype == torch.float64
    assert x.type(torch.FloatTensor).dtype == torch.float32
    assert isinstance(y.type(), str)


def test_fork_after_start_is_a_bad_fork(dev):
    torch.ones(1, device=dev)  # the runtime is started
    assert not npu._is_in_bad_fork()
    r, w = os.pipe()
    with warnings.catch_warnings():
        # Python >= 3.12 warns that forking a threaded process is unsafe:
        # this test forks to see the child told so.
        warnings.filterwarnings("ignore", message=".*use of fork\\(\\) may lead to deadlocks")
        pid = os.fork()
    if pid == 0:
        os.write(w, b"1" if npu._is_in_bad_fork() else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"1"


def test_rng_state_round_trip(dev):
    # NPU random ops draw from torch's CPU generator (npu.manual_seed).
    state = npu.get_rng_state()
    a = torch.randn(8, device=dev).cpu()
    npu.set_rng_state(state)
    torch.testing.assert_close(torch.randn(8, device=dev).cpu(), a)
    states = npu.get_rng_state_all()
    assert len(states) == npu.device_count()
    npu.set_rng_state_all(states)
    npu.manual_seed(5)
    assert npu.initial_seed() == 5
    npu.seed()
    assert isinstance(npu.initial_seed(), int)
    with pytest.raises(IndexError, match="NPU device"):
        npu.get_rng_state(npu.device_count() + 3)


def test_init_and_is_initialized(dev):
    npu.init()
    assert npu.is_initialized()


def test_utilization_follows_the_work(dev):
    npu.utilization()  # ends the previous window
    a = torch.randn(128, 128, device=dev)
    for _ in range(20):
        a = torch.mm(a, a) / 128.0
    npu.synchronize()
    busy = npu.utilization()
    assert 0 < busy <= 100
    x = torch.empty(4 << 20, dtype=torch.uint8, device=dev)
    npu.memory_usage()
    for _ in range(4):
        x.copy_(torch.ones(4 << 20, dtype=torch.uint8))
    npu.synchronize()
    assert 0 < npu.memory_usage() <= 100
    with pytest.raises(IndexError, match="NPU device"):
        npu.utilization(npu.device_count())


def test_list_gpu_processes_names_this_process(dev):
    keep = torch.empty(8 << 20, dtype=torch.uint8, device=dev)
    text = npu.list_gpu_processes()
    lines = text.splitlines()
    assert lines[0] == "NPU:0"
    mine = [ln for ln in lines if ln.split()[1:2] == [str(os.getpid())]]
    assert len(mine) == 1, text
    mb = float(mine[0].split()[3])
    assert mb >= 8.0, text
    assert mine[0].endswith("MB NPU memory")
    del keep


def test_device_memory_used_and_clock_rate(dev):
    keep = torch.empty(16 << 20, dtype=torch.uint8, device=dev)
    free, total = npu.mem_get_info()
    assert npu.device_memory_used() >= 16 << 20
    assert npu.device_memory_used() <= total
    assert npu.clock_rate() == npu.get_device_properties(0).clock_rate_hz // 1000000
    del keep


def test_cuda_style_properties_and_capability(dev):
    p = npu.get_device_properties(0)
    assert npu.get_device_capability() == (p.major, p.minor)
    assert p.major >= 1
    assert p.multi_processor_count == p.compute_engine_count
    assert p.is_integrated == 0 and p.is_multi_gpu_board == 0
    assert p.pci_bus_id == "0000:00:%02x.0" % 0


def test_device_of_follows_the_tensor(dev):
    npu.set_device(0)
    t = torch.ones(2, device=dev)
    with npu.device_of(t):
        assert npu.current_device() == t.device.index
    with npu.device_of(torch.ones(2)):  # a CPU tensor changes nothing
        assert npu.current_device() == 0
    if npu.device_count() > 1:
        u = torch.ones(2, device=npu.torch_device(1))
        with npu.device_of(u):
            assert npu.current_device() == 1
        assert npu.current_device() == 0


def test_can_device_access_peer(dev):
    n = npu.device_count()
    for a in range(n):
        for b in range(n):
            assert npu.can_device_access_peer(a, b) == (n > 1 and a != b)
    with pytest.raises(IndexError):
        npu.can_device_access_peer(0, n)


def test_negative_index_is_a_no_op_as_in_torch_cuda():
    prev = npu.current_device()
    npu.set_device(-1)
    assert npu.current_device() == prev
    with npu.device(-1):
        assert npu.current_device() == prev
    assert npu.is_bf16_supported(including_emulation=False)


def test_set_stream_makes_its_device_current():
    if npu.device_count() < 2:
        pytest.skip("needs 2 NPUs")
    npu.set_device(0)
    s1 = npu.Stream(device=1)
    try:
        npu.set_stream(s1)
        assert npu.current_device() == 1
        assert npu.current_stream() == s1
        x = torch.ones(4, device="npu")
        assert x.device.index == 1
    finally:
        npu.set_stream(npu.default_stream(1))
        npu.set_device(0)
    assert npu.current_stream() == npu.default_stream(0)


def test_empty_cache_without_a_device_empties_every_npu():
    if npu.device_count() < 2:
        pytest.skip("needs 2 NPUs")
    npu.set_device(0)
    gc.collect()  # earlier tests' garbage cycles (compiled graphs) hold blocks
    for i in range(2):
        x = torch.empty(1 << 20, device="npu:%d" % i)
        del x
        assert npu.memory_reserved(i) > 0
    npu.empty_cache()
    assert npu.memory_reserved(0) == 0 and npu.memory_reserved(1) == 0
    assert npu.current_device() == 0


@pytest.mark.skipif(not hasattr(torch, "Event"), reason="torch 1.13: no torch.Event")
def test_torch_generic_events_and_streams(dev):
    """torch 2.x's device-generic torch.Event/torch.Stream and
    torch.accelerator go through the backend's guard."""
    s = torch.Stream(device=dev)
    assert s.device == dev
    a, b = torch.Event(dev, enable_timing=True), torch.Event(dev, enable_timing=True)
    x = torch.randn(256, 256, device=dev)
    a.record()
    y = x @ x
    b.record()
    b.synchronize()
    assert b.query()
    assert a.elapsed_time(b) >= 0.0
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)
    if hasattr(torch, "accelerator"):
        z = x * 2
        torch.accelerator.synchronize()
        assert npu.current_stream().query()
        assert torch.equal(z.cpu(), x.cpu() * 2)


def test_fallback_ops_check_devices_as_device_kernels_do(dev):
    """Ops that run through the CPU fallback refuse tensors of two devices,
    as CUDA's kernels do, instead of putting the result on the first one."""
    a = torch.ones(3, device=dev)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a.eq(torch.ones(3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.where(torch.ones(3, dtype=torch.bool), a, a)
    # A CPU 0-dim tensor is a scalar; CPU index tensors are fine, as on CUDA.
    assert a.eq(torch.tensor(1.0)).all().item()
    assert torch.equal(a[torch.tensor([0, 2])].cpu(), torch.ones(2))
    if npu.device_count() >= 2:
        b = torch.ones(3, device=npu.torch_device(1))
        with pytest.raises(RuntimeError, match="found at least two devices"):
            torch.cat([a, b])
