import pytest
import torch

from torch_npurt import npu


def test_allocated_and_reserved(dev):
    npu.empty_cache()
    base = npu.memory_allocated()
    x = torch.empty(1 << 20, device=dev)  # 4 MiB
    assert npu.memory_allocated() >= base + (4 << 20)
    assert npu.memory_reserved() >= npu.memory_allocated()
    assert npu.max_memory_allocated() >= npu.memory_allocated()
    assert npu.max_memory_reserved() >= npu.memory_reserved()
    del x
    assert npu.memory_allocated() == base
    # Freed memory stays cached until empty_cache.
    reserved = npu.memory_reserved()
    npu.empty_cache()
    assert npu.memory_reserved() <= reserved


def test_peak_reset(dev):
    x = torch.empty(2 << 20, device=dev)
    del x
    assert npu.max_memory_allocated() >= 8 << 20
    npu.reset_peak_memory_stats()
    assert npu.max_memory_allocated() == npu.memory_allocated()


def test_stats_summary_info(dev):
    s = npu.memory_stats()
    for k in ("allocated_bytes.all.current", "reserved_bytes.all.peak", "num_ooms"):
        assert k in s
    text = npu.memory_summary()
    assert "Allocated memory" in text and "Reserved memory" in text
    free, total = npu.mem_get_info()
    assert 0 < free <= total
    assert total == npu.get_device_properties(0).total_memory


def test_out_of_memory_and_recovery(dev):
    total = npu.get_device_properties(0).total_memory
    keep = torch.empty(16 << 20, dtype=torch.uint8, device=dev)
    with pytest.raises(npu.OutOfMemoryError) as info:
        torch.empty(total * 2, dtype=torch.uint8, device=dev)
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert msg.startswith("NPU out of memory. Tried to allocate ")
    for word in ("total capacity", "already allocated", "free", "reserved in total"):
        assert word in msg, msg
    assert npu.memory_stats()["num_ooms"] >= 1
    # Fill the device with cached blocks, fail, empty the cache, succeed.
    blocks = []
    with pytest.raises(npu.OutOfMemoryError):
        while True:
            blocks.append(torch.empty(64 << 20, dtype=torch.uint8, device=dev))
    n = len(blocks)
    assert n >= 1
    del blocks
    npu.empty_cache()
    big = torch.empty((n - 1) * (64 << 20) or (32 << 20), dtype=torch.uint8, device=dev)
    big.fill_(3)
    assert big[-1].item() == 3
    del big, keep
    npu.empty_cache()


def test_zero_sized(dev):
    x = torch.empty(0, device=dev)
    assert x.numel() == 0 and x.cpu().numel() == 0
