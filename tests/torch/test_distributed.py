"""torch.distributed with the hccl backend (torch_npurt._distributed): two
ranks, this process (rank 0) and conftest's helper process (rank 1), on
NPUs 0 and 1, over a TCP store and gloo's transport on the loopback."""
import os
import time

import pytest
import torch
import torch.distributed as dist

import dist_child
import torch_npurt
from torch_npurt import _distributed, npu

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch without distributed")


def _both(helper, body, *args):
    """Runs body on both ranks; returns (rank 0's result, rank 1's)."""
    store = dist_child.store()
    ident = helper.send(dist_child.run, 1, store.port, body, *args)
    try:
        mine = dist_child.run(0, store, body, *args)
    finally:
        theirs = helper.result(ident)
    return mine, theirs


def _trains_alike(helper, body):
    """Runs a data-parallel training body (which compares each rank with a
    CPU model itself) on both ranks: they end with the same parameters."""
    mine, theirs = _both(helper, body, 3)
    for p, q in zip(mine, theirs):
        assert torch.equal(p, q)


@pytest.mark.no_npu_ok
def test_the_backend_is_registered():
    # torch 1.13 spells a plugin's name in capitals.
    assert dist.Backend("hccl").lower() == "hccl"
    assert dist.Backend.HCCL.lower() == "hccl"
    if hasattr(dist.Backend, "default_device_backend_map"):
        assert dist.Backend.default_device_backend_map.get(npu._DEVICE_TYPE) == "hccl"


def test_collectives_on_npu_tensors(ipc_helper):
    assert _both(ipc_helper, dist_child.collectives) == ("ok", "ok")


def test_dtypes_gloo_lacks_leaves_and_short_forms(ipc_helper):
    assert _both(ipc_helper, dist_child.dtypes_and_forms) == ("ok", "ok")


def test_subgroups(ipc_helper):
    assert _both(ipc_helper, dist_child.subgroup) == ("ok", "ok")


def test_isend_before_irecv_of_large_tensors(ipc_helper):
    assert _both(ipc_helper, dist_child.exchange_large, 4 << 20) == ("ok", "ok")


def test_distributed_data_parallel_trains_as_one_model(ipc_helper):
    _trains_alike(ipc_helper, dist_child.ddp_training)


def _fsdp_importable():
    """Debian 12's torch 1.13 cannot import FSDP under Python 3.11 (a
    dataclass with a mutable default in torch's sharded tensors)."""
    try:
        import torch.distributed.fsdp  # noqa: F401
    except (ImportError, ValueError):
        return False
    return True


@pytest.mark.skipif(not _fsdp_importable(), reason="this torch cannot import FSDP")
def test_fully_sharded_data_parallel_trains_as_one_model(ipc_helper):
    _trains_alike(ipc_helper, dist_child.fsdp_training)


_TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def _fully_shard_importable():
    for where in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        try:
            if hasattr(__import__(where, fromlist=["fully_shard"]), "fully_shard"):
                return True
        except (ImportError, ValueError):  # ValueError: _fsdp_importable
            pass
    return False


@pytest.mark.skipif(not _fully_shard_importable(), reason="this torch has no fully_shard")
def test_fully_shard_trains_as_one_model(ipc_helper):
    _trains_alike(ipc_helper, dist_child.fsdp2_training)


@pytest.mark.skipif(not _TORCH2, reason="fully_shard is torch 2's")
def test_fully_shard_s_copy_ops_keep_the_npu_and_the_aliasing(dev):
    # fully_shard's own ops run their device-generic kernels on NPU tensors
    # (through the CPU fallback the all-gather input was a copy, not a view
    # of the output, and the output was on the CPU).
    try:
        import torch.distributed.fsdp._fully_shard._fsdp_collectives  # noqa: F401
    except ImportError:
        pytest.skip("this torch's fully_shard has other ops")
    before = torch_npurt.fallback_counts()
    parts = [torch.full((2,), 1.0, device=dev), torch.full((3,), 2.0, device=dev)]
    inp, out = torch.ops.fsdp.all_gather_copy_in(parts, [2, 3], 5, 2, 1, torch.float32, dev)
    assert out.device == dev and inp.device == dev and out.shape == (10,)
    assert inp.data_ptr() == out.data_ptr() + 5 * out.element_size(), "rank 1's part of out"
    assert inp.cpu().tolist() == [1.0, 1.0, 2.0, 2.0, 2.0]
    out[:5].fill_(7.0)
    a, b = torch.empty(2, 2, device=dev), torch.empty(2, 3, device=dev)
    torch.ops.fsdp.split_with_sizes_copy(out.view(2, -1), [2, 3], dim=1, out=[a, b])
    assert a.cpu().tolist() == [[7.0, 7.0], [1.0, 1.0]]
    assert b.cpu().tolist() == [[7.0] * 3, [2.0] * 3]
    assert (a._version, b._version) == (0, 0), "as CUDA's: FSDP2's saved parameters"
    after = torch_npurt.fallback_counts()
    assert not [k for k in after if "fsdp" in k and after[k] != before.get(k, 0)]


@pytest.mark.skipif(not _TORCH2, reason="DTensor and the functional collectives are torch 2's")
def test_dtensors_and_functional_collectives(ipc_helper):
    assert _both(ipc_helper, dist_child.dtensors) == ("ok", "ok")


def test_a_collective_the_peer_never_makes_is_an_error(ipc_helper):
    """A rank whose peer left the group gets an error (gloo's: the
    connection closed, or the group's timeout), not a hang."""
    store = dist_child.store()
    ident = ipc_helper.send(dist_child.run, 1, store.port, dist_child.join_only)
    try:
        with pytest.raises(RuntimeError):
            dist_child.run(0, store, dist_child.all_reduce_alone)
    finally:
        assert ipc_helper.result(ident) == "ok"


def test_transfer_to_npu_makes_nccl_groups_hccl(dev):
    """A CUDA script's init_process_group("nccl") under transfer_to_npu: a
    group of one rank over a HashStore (no peer needed)."""
    from torch_npurt import _transfer
    assert _transfer._hccl_spelling("nccl") == "hccl"
    assert _transfer._hccl_spelling("cpu:gloo,cuda:nccl") == "cpu:gloo,%s:hccl" % npu._DEVICE_TYPE
    assert _transfer._hccl_spelling("gloo") == "gloo"
    torch_init, torch_new_group = dist.init_process_group, dist.new_group
    torch_nccl = dist.is_nccl_available
    _transfer.apply()
    try:
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        try:
            assert dist.get_backend().lower() == "hccl"
            x = torch.arange(3.0, device=dev)
            dist.all_reduce(x)
            assert x.cpu().tolist() == [0.0, 1.0, 2.0]
            group = dist.new_group([0], backend="nccl")
            assert dist.get_backend(group).lower() == "hccl"
            # new_group(ranks, timeout, backend)
            group = dist.new_group([0], dist_child.TIMEOUT, "nccl")
            assert dist.get_backend(group).lower() == "hccl"
            # Scripts pick "nccl" when it is available.
            assert dist.is_nccl_available()
        finally:
            dist.destroy_process_group()
    finally:
        _transfer.restore()
    assert dist.init_process_group is torch_init and dist.new_group is torch_new_group
    assert dist.is_nccl_available is torch_nccl
    assert dist.distributed_c10d.init_process_group is torch_init


def test_the_ddp_example_under_torchrun_s_environment(ipc_helper, tmp_path):
    """examples/torch/ddp.py as `torchrun --nproc_per_node=2` runs it
    (env:// initialisation): rank 1 in the helper."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                          "examples", "torch", "ddp.py")
    port = dist_child.free_port()
    started = str(tmp_path / "rank1")
    ident = ipc_helper.send(dist_child.run_script, script, 1, 2, port, started)
    try:
        while not os.path.exists(started):
            time.sleep(0.01)
        out = dist_child.run_script(script, 0, 2, port)
    finally:
        assert ipc_helper.result(ident) == ""  # only rank 0 prints
    assert "ranks: 2," in out and "decreasing: True" in out, out
    assert "parameters equal on every rank: True" in out, out


@pytest.mark.skipif(not hasattr(dist.Backend, "default_device_backend_map"),
                    reason="torch < 2.2 picks no backend by device")
def test_no_backend_named_is_hccl_for_npus(dev):
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        x = torch.ones(2, device=dev)
        dist.all_reduce(x)
        assert x.cpu().tolist() == [1.0, 1.0]
        assert isinstance(dist.distributed_c10d._get_default_group(),
                          _distributed.ProcessGroupHCCL)
    finally:
        dist.destroy_process_group()
