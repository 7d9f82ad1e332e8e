"""What each rank of test_distributed runs: rank 0 in the suite's process,
rank 1 in the helper process conftest forked (ipc_child.Helper), both
importing this module. Each body checks its own results (an assertion
fails the rank that sees it) and returns what the other rank compares."""
import contextlib
import copy
import datetime
import io
import os
import runpy
import socket
import time

import torch
import torch.distributed as dist

from torch_npurt import npu

WORLD = 2
# Long enough for TCG, short enough that a rank left waiting by its peer's
# failure gives up within the test's time.
TIMEOUT = datetime.timedelta(seconds=90)


def device(rank):
    """Rank r works on NPU r (modulo the NPUs there are)."""
    d = npu.torch_device(rank % npu.device_count())
    npu.set_device(d)
    return d


STARTED = "test-rank1-started"


def store(port=0):
    """Rank 0's store (port 0: any free port, `store.port`), or rank 1's
    connection to it. Rank 0 does not wait in the constructor for rank 1:
    its process queued rank 1's call to the helper, and its queue's
    feeder thread needs the GIL, which TCPStore's constructor holds."""
    if port == 0:
        return _tcp_store("127.0.0.1", 0, WORLD, True, TIMEOUT, wait_for_workers=False)
    return _tcp_store("127.0.0.1", port, WORLD, False, TIMEOUT)


def _tcp_store(*args, **kwargs):
    """Debian's torch 2.6 is built without libuv, TCPStore's default from
    torch 2.4 (USE_LIBUV=0 in the environment does the same for
    init_process_group); torch before 2.3 has no such argument."""
    try:
        return dist.TCPStore(*args, use_libuv=False, **kwargs)
    except TypeError:
        return dist.TCPStore(*args, **kwargs)


def run(rank, port_or_store, body, *args):
    """Joins the 2-rank group of rank 0's store with the hccl backend, runs
    body(rank, *args) and leaves the group."""
    if rank == 0:
        st = port_or_store
        while st.add(STARTED, 0) == 0:  # sleeping: the feeder thread runs
            time.sleep(0.01)
    else:
        st = store(port_or_store)
        st.add(STARTED, 1)
    dist.init_process_group("hccl", store=st, rank=rank, world_size=WORLD, timeout=TIMEOUT)
    try:
        return body(rank, *args)
    finally:
        dist.destroy_process_group()


def _eq(t, want):
    assert t.device.type == npu._DEVICE_TYPE, t.device
    got = t.cpu().tolist()
    assert got == want, (got, want)


def _expect_error(fn, text):
    try:
        fn()
    except RuntimeError as e:
        assert text in str(e), str(e)
        return
    raise AssertionError("no RuntimeError (%r)" % text)


def collectives(rank):
    dev = device(rank)
    other = 1 - rank
    assert dist.get_backend().lower() == "hccl"  # 1.13: "HCCL"
    assert dist.get_rank() == rank and dist.get_world_size() == WORLD

    x = torch.full((5,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    _eq(x, [3.0] * 5)
    for op, want in ((dist.ReduceOp.AVG, [1.5, 3.0]), (dist.ReduceOp.MAX, [2.0, 4.0]),
                     (dist.ReduceOp.MIN, [1.0, 2.0]), (dist.ReduceOp.PRODUCT, [2.0, 8.0])):
        x = torch.tensor([1.0, 2.0], device=dev) * (rank + 1)
        dist.all_reduce(x, op=op)
        _eq(x, want)
    i = torch.tensor([rank + 1, 1 << 40], dtype=torch.int64, device=dev)
    dist.all_reduce(i)
    _eq(i, [3, 2 << 40])
    h = torch.tensor([0.5, 1.5], dtype=torch.float16, device=dev)
    dist.all_reduce(h)
    _eq(h, [1.0, 3.0])

    # A view that is not contiguous: the result lands in its base.
    base = torch.arange(6.0, device=dev).view(2, 3)
    dist.all_reduce(base.t())
    _eq(base, [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]])

    # Ordered after the work queued on the current stream, as NCCL is.
    x = torch.zeros(1000, device=dev)
    for _ in range(40):
        x.add_(1.0)
    dist.all_reduce(x)
    _eq(x[:3], [80.0] * 3)
    assert x.sum().item() == 80000.0

    b = torch.full((3,), float(rank), device=dev)
    dist.broadcast(b, src=1)
    _eq(b, [1.0] * 3)

    outs = [torch.empty(2, device=dev) for _ in range(WORLD)]
    dist.all_gather(outs, torch.full((2,), float(rank), device=dev))
    _eq(outs[0], [0.0, 0.0])
    _eq(outs[1], [1.0, 1.0])

    gather_into = dist.all_gather_into_tensor
    out = torch.empty(2, 2, device=dev)
    gather_into(out, torch.full((2,), float(rank + 5), device=dev))
    _eq(out, [[5.0, 5.0], [6.0, 6.0]])

    scatter_from = dist.reduce_scatter_tensor
    part = torch.empty(2, device=dev)
    scatter_from(part, torch.arange(4.0, device=dev) + 10 * rank)
    _eq(part, [[10.0, 12.0], [14.0, 16.0]][rank])

    part = torch.empty(2, device=dev)
    dist.reduce_scatter(part, [torch.full((2,), float(10 * rank + j), device=dev)
                               for j in range(WORLD)])
    _eq(part, [[10.0, 10.0], [12.0, 12.0]][rank])

    got = torch.empty(2, device=dev)
    dist.all_to_all_single(got, torch.tensor([10.0 * rank, 10.0 * rank + 1], device=dev))
    _eq(got, [[0.0, 10.0], [1.0, 11.0]][rank])
    outs = [torch.empty(1 + j, device=dev) for j in range(WORLD)]
    dist.all_to_all(outs, [torch.full((1 + rank,), float(rank * 10 + j), device=dev)
                           for j in range(WORLD)])
    _eq(outs[0], [float(rank)])
    _eq(outs[1], [10.0 + rank] * 2)

    r = torch.full((2,), float(rank + 1), device=dev)
    dist.reduce(r, dst=0)
    _eq(r, [3.0, 3.0] if rank == 0 else [2.0, 2.0])

    g = [torch.empty(1, device=dev) for _ in range(WORLD)] if rank == 0 else None
    dist.gather(torch.tensor([rank + 7.0], device=dev), g, dst=0)
    if rank == 0:
        _eq(g[0], [7.0])
        _eq(g[1], [8.0])
    s = torch.empty(2, device=dev)
    pieces = [torch.full((2,), 20.0 + j, device=dev) for j in range(WORLD)]
    dist.scatter(s, pieces if rank == 1 else None, src=1)
    _eq(s, [20.0 + rank] * 2)

    if rank == 0:
        dist.send(torch.tensor([1.0, 2.0, 3.0], device=dev), dst=other)
        back = torch.empty(3, device=dev)
        dist.recv(back, src=other)
        _eq(back, [2.0, 4.0, 6.0])
    else:
        got = torch.empty(3, device=dev)
        assert dist.recv(got) == 0  # from any rank: the sender's rank
        dist.send(got * 2, dst=other)
    mine = torch.full((4,), float(rank), device=dev)
    theirs = torch.empty(4, device=dev)
    reqs = [dist.isend(mine, other), dist.irecv(theirs, other)]
    for req in reqs:
        req.wait()
    _eq(theirs, [float(other)] * 4)

    # async_op: a work whose future holds the NPU tensors.
    x = torch.full((2,), float(rank), device=dev)
    work = dist.all_reduce(x, async_op=True)
    assert work.wait()
    assert work.is_completed()
    res = work.get_future().wait()
    _eq(res[0], [1.0, 1.0])
    chained = work.get_future().then(lambda f: f.value()[0] * 3).wait()
    _eq(chained, [3.0, 3.0])

    # CPU tensors through the same group.
    c = torch.full((2,), float(rank + 1))
    dist.all_reduce(c)
    assert c.tolist() == [3.0, 3.0]

    objs = [None] * WORLD
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": 0}, {"rank": 1}], objs
    lst = ["from %d" % rank, rank]
    dist.broadcast_object_list(lst, src=1)
    assert lst == ["from 1", 1], lst
    dist.barrier()

    # Bad arguments are refused on each rank before anything is sent.
    _expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32, device=dev),
                                          op=dist.ReduceOp.AVG), "floating point")
    _expect_error(lambda: gather_into(torch.empty(3, device=dev), torch.ones(2, device=dev)),
                  "times the group's size")
    _expect_error(lambda: scatter_from(torch.empty(2, device=dev), torch.ones(3, device=dev)),
                  "times the group's size")
    x = torch.ones(2, device=dev)
    dist.all_reduce(x)  # the group still works
    _eq(x, [2.0, 2.0])
    return "ok"


def subgroup(rank):
    dev = device(rank)
    group = dist.new_group([0, 1])
    x = torch.full((2,), float(rank + 1), device=dev)
    dist.all_reduce(x, group=group)
    _eq(x, [3.0, 3.0])
    # Every rank makes every group, in the same order.
    solos = [dist.new_group([r]) for r in range(WORLD)]
    y = torch.full((1,), float(rank + 1), device=dev)
    dist.all_reduce(y, group=solos[rank])
    _eq(y, [float(rank + 1)])
    return "ok"


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 8)
        self.b = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def ddp_training(rank, steps):
    """DistributedDataParallel over both ranks, each with half of every
    batch, against one CPU model trained on whole batches: the same
    parameters on both ranks, and the CPU's."""
    dev = device(rank)
    torch.manual_seed(0)
    model = _Net()
    ref = copy.deepcopy(model)
    data = torch.randn(steps, WORLD, 6, 4)
    target = torch.randn(steps, WORLD, 6, 2)
    if rank == 1:
        # DDP starts every rank from rank 0's parameters.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
    ddp = torch.nn.parallel.DistributedDataParallel(model.to(dev), device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    mse = torch.nn.functional.mse_loss
    for s in range(steps):
        opt.zero_grad()
        mse(ddp(data[s][rank].to(dev)), target[s][rank].to(dev)).backward()
        opt.step()
        ref_opt.zero_grad()
        (sum(mse(ref(data[s][r]), target[s][r]) for r in range(WORLD)) / WORLD).backward()
        ref_opt.step()
    got = [p.detach().cpu() for p in ddp.module.parameters()]
    for p, q in zip(got, ref.parameters()):
        torch.testing.assert_close(p, q.detach(), rtol=1e-4, atol=1e-5)
    return got


def _reference(steps, data, target, model):
    """`model` trained on CPU on the whole batches, as a data-parallel run
    over WORLD ranks (each with one part of every batch) trains."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mse = torch.nn.functional.mse_loss
    for s in range(steps):
        opt.zero_grad()
        (sum(mse(model(data[s][r]), target[s][r]) for r in range(WORLD)) / WORLD).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def _sharded_training(rank, steps, wrap):
    """Trains wrap(model on this rank's NPU) on this rank's parts of the
    batches; returns (the wrapped model, the CPU reference's parameters)."""
    dev = device(rank)
    torch.manual_seed(0)
    model = _Net()
    ref = _reference(steps, *_batches(steps), copy.deepcopy(model))
    data, target = _batches(steps)
    sharded = wrap(model, dev)
    opt = torch.optim.SGD(sharded.parameters(), lr=0.1)
    for s in range(steps):
        opt.zero_grad()
        out = sharded(data[s][rank].to(dev))
        torch.nn.functional.mse_loss(out, target[s][rank].to(dev)).backward()
        opt.step()
    return sharded, ref


def _batches(steps):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(steps, WORLD, 6, 4, generator=g),
            torch.randn(steps, WORLD, 6, 2, generator=g))


def fsdp_training(rank, steps):
    """FullyShardedDataParallel (FSDP1: a flat parameter sharded over both
    ranks, moved to the NPU by `param.data = param.to(device)`) against
    the CPU reference; returns the full parameters."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    def wrap(model, dev):
        return FSDP(model, device_id=dev, use_orig_params=True)
    sharded, ref = _sharded_training(rank, steps, wrap)
    with FSDP.summon_full_params(sharded):
        got = [p.detach().cpu().clone() for p in sharded.parameters()]
    assert all(p.device.type == npu._DEVICE_TYPE for p in sharded.parameters())
    for p, q in zip(got, ref):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    return got


def fsdp2_training(rank, steps):
    """fully_shard (FSDP2: DTensor parameters over a device mesh of NPUs,
    resharded after each forward and gathered again for the backward)
    against the CPU reference; returns the full parameters."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch 2.4 to 2.5
        from torch.distributed._composable.fsdp import fully_shard

    def wrap(model, dev):
        model.to(dev)
        fully_shard(model.a)
        fully_shard(model.b)
        return fully_shard(model)
    sharded, ref = _sharded_training(rank, steps, wrap)
    got = [p.full_tensor().detach().cpu() for p in sharded.parameters()]
    for p, q in zip(got, ref):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    return got


def dtensors(rank):
    """A device mesh of NPUs, DTensor placements moved between ranks, and
    the functional collectives under them."""
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    try:
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    except ImportError:  # torch before 2.5
        from torch.distributed._tensor import Replicate, Shard, distribute_tensor
    dev = device(rank)
    mesh = init_device_mesh(npu._DEVICE_TYPE, (WORLD,))
    assert mesh.get_group().group_name == dist.group.WORLD.group_name
    whole = torch.arange(8.0)
    d = distribute_tensor(whole.to(dev), mesh, [Shard(0)])
    _eq(d.to_local(), whole[4 * rank:4 * rank + 4].tolist())
    _eq(d.redistribute(mesh, [Replicate()]).to_local(), whole.tolist())
    _eq(d.full_tensor(), whole.tolist())
    assert (d * 2).sum().full_tensor().item() == 56.0
    x = torch.full((3,), float(rank + 1), device=dev)
    _eq(funcol.all_reduce(x, "sum", dist.group.WORLD), [3.0] * 3)
    _eq(x, [float(rank + 1)] * 3)  # functional: the input is not written
    _eq(funcol.all_gather_tensor(x, 0, dist.group.WORLD), [1.0] * 3 + [2.0] * 3)
    y = torch.arange(4.0, device=dev) + rank
    _eq(funcol.reduce_scatter_tensor(y, "sum", 0, dist.group.WORLD),
        [1.0, 3.0] if rank == 0 else [5.0, 7.0])
    return "ok"


def exchange_large(rank, n):
    """Both ranks isend `n` floats before they irecv (NCCL's pattern for a
    pipeline's neighbours): neither send may wait for the other's receive."""
    dev = device(rank)
    other = 1 - rank
    mine = torch.full((n,), float(rank + 1), device=dev)
    theirs = torch.zeros(n, device=dev)
    send = dist.isend(mine, other)
    recv = dist.irecv(theirs, other)
    recv.wait()
    send.wait()
    assert theirs[0].item() == other + 1 and theirs[-1].item() == other + 1
    assert theirs.sum().item() == float(n * (other + 1))
    return "ok"


def join_only(rank):
    device(rank)
    return "ok"


def all_reduce_alone(rank):
    """An all_reduce the other rank never makes (it left the group)."""
    x = torch.ones(1, device=device(rank))
    dist.all_reduce(x)
    return "no error"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env(rank, world, port):
    """What torchrun sets for a rank (env:// initialisation)."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "USE_LIBUV": "0"}


def run_script(path, rank, world, port, started=None):
    """Runs the script as torchrun's rank `rank` would, in this process;
    returns its output. `started`: a file made first, which tells rank 0
    this call arrived (rank 0's TCPStore waits for rank 1 holding the GIL,
    which the queue's feeder thread that sends this call needs)."""
    if started:
        open(started, "w").close()
    saved = dict(os.environ)
    os.environ.update(torchrun_env(rank, world, port))
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return out.getvalue()


def dtypes_and_forms(rank):
    """What gloo lacks or torch calls in other forms: bfloat16 and bool,
    float16 averages past float16's range while summing, parameters that
    require grad, pybind's single-tensor forms (DDP's unused-parameter
    all-reduce), all_gather_coalesced's [rank][i] layout."""
    dev = device(rank)
    b = torch.tensor([1.5, 2.5], dtype=torch.bfloat16, device=dev) * (rank + 1)
    dist.all_reduce(b)
    assert b.dtype == torch.bfloat16
    _eq(b, [4.5, 7.5])
    outs = [torch.empty(2, dtype=torch.bfloat16, device=dev) for _ in range(WORLD)]
    dist.all_gather(outs, torch.full((2,), 0.5 + rank, dtype=torch.bfloat16, device=dev))
    _eq(outs[1], [1.5, 1.5])
    z = torch.tensor([rank == 0, False, True], device=dev)
    dist.all_reduce(z)
    _eq(z, [True, False, True])
    h = torch.tensor([60000.0], dtype=torch.float16, device=dev)
    dist.all_reduce(h, op=dist.ReduceOp.AVG)  # the sum, 120000, is past fp16's max
    _eq(h, [60000.0])

    p = torch.nn.Parameter(torch.full((2,), float(rank), device=dev))
    dist.broadcast(p, 1)
    _eq(p.detach(), [1.0, 1.0])
    dist.all_reduce(p)
    _eq(p.detach(), [2.0, 2.0])
    dist.reduce(p, 0)
    assert p.requires_grad

    pg = dist.distributed_c10d._get_default_group()
    t = torch.ones(2, device=dev)
    pg.allreduce(t).wait()
    _eq(t, [2.0, 2.0])
    t = torch.full((1,), float(rank + 2), device=dev)
    pg.allreduce([t], dist.ReduceOp.MAX).wait()
    _eq(t, [3.0])

    outs = [[torch.empty(1, device=dev), torch.empty(2, device=dev)] for _ in range(WORLD)]
    dist.all_gather_coalesced(outs, [torch.full((1,), float(rank), device=dev),
                                     torch.full((2,), 10.0 + rank, device=dev)])
    _eq(outs[0][0], [0.0])
    _eq(outs[1][0], [1.0])
    _eq(outs[0][1], [10.0, 10.0])
    _eq(outs[1][1], [11.0, 11.0])
    return "ok"
