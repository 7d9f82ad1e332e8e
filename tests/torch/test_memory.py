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


def test_per_process_memory_fraction(dev):
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError):
            npu.set_per_process_memory_fraction(bad)
    assert npu.get_per_process_memory_fraction() == 1.0
    npu.empty_cache()
    total = npu.get_device_properties(0).total_memory
    info = npu.process_memory_info()
    for k in ("free", "total", "process_reserved", "process_allocated", "process_device",
              "limit", "contexts"):
        assert k in info, info
    try:
        npu.set_per_process_memory_fraction(0.125)
        assert npu.process_memory_info()["limit"] == total // 8
        assert abs(npu.get_per_process_memory_fraction() - 0.125) < 1e-6
        keep = torch.empty(total // 16, dtype=torch.uint8, device=dev)
        with pytest.raises(npu.OutOfMemoryError) as err:
            torch.empty(total // 8, dtype=torch.uint8, device=dev)
        assert "per-process limit" in str(err.value), str(err.value)
        assert npu.process_memory_info()["process_reserved"] <= total // 8
        del keep
        npu.empty_cache()  # a cached block would serve the request below
        npu.set_per_process_memory_fraction(0.0)
        with pytest.raises(npu.OutOfMemoryError):
            torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    finally:
        npu._C._set_memory_limit(0, 0)
    x = torch.empty(total // 4, dtype=torch.uint8, device=dev)  # no limit: fits
    del x
    npu.empty_cache()


def test_memory_snapshot_names_the_line(dev):
    npu.empty_cache()
    x = torch.ones(3000, device=dev)  # 12000 bytes: the small pool
    y = torch.empty(12 << 20, dtype=torch.uint8, device=dev)
    snap = npu.memory_snapshot()
    assert snap, "no segments"
    found = None
    for seg in snap:
        for k in ("device", "address", "total_size", "allocated_size", "active_size",
                  "requested_size", "segment_type", "blocks"):
            assert k in seg, seg
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        for b in seg["blocks"]:
            assert b["state"] in ("active_allocated", "inactive", "active_pending_free")
            if b["address"] == x.data_ptr():
                found = (seg, b)
    assert found, "x's block is not in the snapshot"
    seg, b = found
    assert seg["segment_type"] == "small"
    assert b["state"] == "active_allocated"
    assert b["requested_size"] == 12000
    if npu.call_sites():
        assert b["frames"], b
        frame = b["frames"][0]
        assert frame["filename"].endswith("test_memory.py"), frame
        assert frame["line"] > 0
    assert sum(s["total_size"] for s in snap) == npu.memory_reserved()
    del x, y


def test_out_of_memory_observer(dev):
    seen = []
    npu._attach_out_of_memory_observer(lambda *a: seen.append(a))
    total = npu.get_device_properties(0).total_memory
    try:
        with pytest.raises(npu.OutOfMemoryError):
            torch.empty(total * 2, dtype=torch.uint8, device=dev)
        assert len(seen) == 1, seen
        device, requested, allocated, free = seen[0]
        assert device == 0 and requested == total * 2
        assert 0 <= free <= total
        with pytest.raises(TypeError):
            npu._attach_out_of_memory_observer(42)
    finally:
        npu._attach_out_of_memory_observer(None)
    with pytest.raises(npu.OutOfMemoryError):
        torch.empty(total * 2, dtype=torch.uint8, device=dev)
    assert len(seen) == 1


def test_allocator_settings_expandable_segments(dev):
    before = npu._get_allocator_settings()
    assert before.startswith("expandable_segments:False"), before
    with pytest.raises(RuntimeError, match="unknown key 'expandable'"):
        npu._set_allocator_settings("expandable:True")
    with pytest.raises(RuntimeError, match="garbage_collection_threshold"):
        npu._set_allocator_settings("garbage_collection_threshold:2")
    assert npu._get_allocator_settings() == before
    npu._set_allocator_settings("expandable_segments:True")
    try:
        npu.empty_cache()
        a = torch.arange(3 << 20, dtype=torch.float32, device=dev)  # 12 MiB
        b = a * 2 + 1
        assert torch.equal(b.cpu(), torch.arange(3 << 20, dtype=torch.float32) * 2 + 1)
        segs = [s for s in npu.memory_snapshot()
                if s["address"] <= a.data_ptr() < s["address"] + s["total_size"]]
        assert segs and segs[0]["is_expandable"], segs
        assert segs[0]["mapped_size"] >= 12 << 20
        assert segs[0]["mapped_size"] < segs[0]["total_size"]
        del a, b
    finally:
        npu._set_allocator_settings("")
        npu.empty_cache()


def test_dump_snapshot_for_memory_viz(dev, tmp_path):
    import pickle
    npu.memory._record_memory_history()
    try:
        keep = torch.empty(3 << 20, dtype=torch.uint8, device=dev)  # this line
        line = test_dump_snapshot_for_memory_viz.__code__.co_firstlineno + 4
        path = tmp_path / "snap.pickle"
        npu.memory._dump_snapshot(str(path))
        with open(path, "rb") as f:
            snap = pickle.load(f)
    finally:
        npu.memory._record_memory_history(enabled=None)
    assert not npu.call_sites()
    npu.set_call_sites(True)
    assert len(snap["device_traces"]) == npu.device_count()
    blocks = [b for seg in snap["segments"] for b in seg["blocks"]
              if b["state"] == "active_allocated" and b["address"] == keep.data_ptr()]
    assert len(blocks) == 1, blocks
    assert blocks[0]["size"] >= 3 << 20
    assert any(fr["filename"].endswith("test_memory.py") and fr["line"] == line
               for fr in blocks[0]["frames"]), blocks[0]["frames"]
    seg = next(s for s in snap["segments"] if blocks[0] in s["blocks"])
    for key in ("device", "address", "total_size", "allocated_size", "active_size",
                "stream", "segment_type"):
        assert key in seg


def test_memory_history_for_memory_viz_timelines(dev):
    npu.memory._record_memory_history(max_entries=10000)
    try:
        x = torch.empty(1 << 20, dtype=torch.uint8, device=dev)  # this line
        line = test_memory_history_for_memory_viz_timelines.__code__.co_firstlineno + 3
        addr = x.data_ptr()
        del x
        npu.synchronize()
        npu.empty_cache()
        snap = npu.memory._snapshot()
    finally:
        npu.memory._record_memory_history(enabled=None)
        npu.set_call_sites(True)
    assert len(snap["device_traces"]) == npu.device_count()
    trace = snap["device_traces"][npu.current_device()]
    mine = [e for e in trace if e["addr"] == addr and not e["action"].startswith("segment")]
    assert [e["action"] for e in mine] == ["alloc", "free_requested", "free_completed"], mine
    assert mine[0]["size"] >= 1 << 20
    assert any(fr["filename"].endswith("test_memory.py") and fr["line"] == line
               for fr in mine[0]["frames"]), mine[0]["frames"]
    assert any(e["action"] == "segment_free" for e in trace), trace
    for e in trace:
        for key in ("action", "addr", "size", "stream", "time_us", "frames"):
            assert key in e, e
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)
    # Stopped: the history was emptied and nothing more is kept.
    y = torch.empty(16, device=dev)
    del y
    assert npu.memory._snapshot()["device_traces"][npu.current_device()] == []


def test_memory_history_arguments(dev):
    try:
        for bad in ("everything", 1, 0.5):
            with pytest.raises(ValueError):
                npu.memory._record_memory_history(bad)
        with pytest.raises(TypeError):
            npu.memory._record_memory_history("all", bogus=1)
        with pytest.raises(ValueError):
            npu.memory._record_memory_history("all", max_entries=-1)
        # "state": the lines of live blocks, no history.
        npu.memory._record_memory_history("state")
        assert npu.call_sites()
        z = torch.empty(16, device=dev)
        del z
        assert npu.memory._snapshot()["device_traces"][npu.current_device()] == []
        # torch 1.13's form: a ring of trace_alloc_max_entries events.
        npu.memory._record_memory_history(True, trace_alloc_max_entries=2)
        for _ in range(3):
            z = torch.empty(16, device=dev)
            del z
        kept = npu.memory._snapshot()["device_traces"][npu.current_device()]
        assert len(kept) == 2, kept
    finally:
        npu.memory._record_memory_history(None)
        npu.set_call_sites(True)


def test_caching_allocator_alloc_and_delete(dev):
    base = npu.memory_allocated()
    ptr = npu.caching_allocator_alloc(1 << 20)
    assert isinstance(ptr, int) and ptr != 0
    assert npu.memory_allocated() >= base + (1 << 20)
    npu.caching_allocator_delete(ptr)
    assert npu.memory_allocated() == base
    with pytest.raises(RuntimeError, match="npurtFree"):
        npu.caching_allocator_delete(ptr)  # freed already
    with pytest.raises(ValueError, match="not on NPU"):
        if npu.device_count() > 1:
            npu.caching_allocator_alloc(16, 0, npu.Stream(device=1))
        else:
            raise ValueError("not on NPU (one NPU: nothing to mix)")
    assert npu.get_allocator_backend() == "native"


def test_nested_stats_and_deprecated_names(dev):
    x = torch.empty(1 << 20, device=dev)
    nested = npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == npu.memory_allocated()
    with pytest.warns(FutureWarning):
        assert npu.memory_cached() == npu.memory_reserved()
    with pytest.warns(FutureWarning):
        assert npu.max_memory_cached() == npu.max_memory_reserved()
    with pytest.warns(FutureWarning):
        npu.reset_max_memory_allocated()
    assert npu.max_memory_allocated() == npu.memory_allocated()
    del x


def test_reset_accumulated_memory_stats(dev):
    x = torch.empty(1 << 20, device=dev)
    del x
    s = npu.memory_stats()
    assert s["allocation.all.allocated"] > 0 and s["allocation.all.freed"] > 0
    peak = s["allocated_bytes.all.peak"]
    npu.reset_accumulated_memory_stats()
    s = npu.memory_stats()
    assert s["allocation.all.allocated"] == 0 and s["allocation.all.freed"] == 0
    assert s["segment.all.allocated"] == 0 and s["num_ooms"] == 0
    assert s["allocated_bytes.all.peak"] == peak, "peaks stay"
    y = torch.empty(16, device=dev)
    assert npu.memory_stats()["allocation.all.allocated"] == 1
    del y


def test_stats_keys_tools_read(dev):
    npu.empty_cache()
    x = torch.empty(1 << 20, device=dev)
    st = npu.memory_stats()
    for key in ("allocation.all.current", "allocation.all.peak", "active_bytes.all.current",
                "active_bytes.all.peak", "requested_bytes.all.current",
                "requested_bytes.all.peak", "num_device_alloc", "num_device_free"):
        assert key in st, key
    assert st["active_bytes.all.current"] == st["allocated_bytes.all.current"] >= 4 << 20
    assert st["allocation.all.current"] >= 1
    assert st["num_device_alloc"] == st["segment.all.allocated"]
    del x
