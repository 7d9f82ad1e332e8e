"""NPU tensors through torch.multiprocessing: shared, not copied, as CUDA
tensors are. The other process is conftest's helper (ipc_child), which
runs the functions sent to it over torch.multiprocessing queues."""
import multiprocessing.connection
import os
import pickle
import secrets
import socket
import struct
import subprocess
import threading
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch.multiprocessing.reductions as reductions

import ipc_child
import torch_npurt
from torch_npurt import _reductions, npu

from conftest import NOBODY, queue_slow_writes, slow_jobs


def limbo():
    return torch_npurt._C._ipc_limbo()


def test_a_shared_tensor_is_the_same_memory(ipc_helper, dev):
    x = torch.arange(1000, dtype=torch.float32, device=dev)
    got = ipc_helper.call(ipc_child.describe, x)
    assert got["device"] == str(dev)
    assert got["dtype"] == torch.float32 and got["shape"] == (1000,)
    assert got["values"] == list(range(1000))
    assert ipc_helper.call(ipc_child.add_, x, 1.5)
    assert x.cpu().tolist() == [v + 1.5 for v in range(1000)], "the child's write is seen here"
    ipc_helper.call(ipc_child.release)


def test_views_keep_their_shape_strides_and_offset(ipc_helper, dev):
    base = torch.arange(64, dtype=torch.int64, device=dev).reshape(8, 8)
    view = base[2:5, 1::2]
    for t in (view, base.t(), base[7], base[3:4, 5:6].squeeze()):
        got = ipc_helper.call(ipc_child.describe, t)
        assert (got["shape"], got["stride"], got["offset"]) == \
            (tuple(t.shape), t.stride(), t.storage_offset())
        assert got["values"] == t.cpu().tolist()
    assert ipc_helper.call(ipc_child.same_storage, view, base.t()), \
        "two views of one storage arrive on one storage"
    ipc_helper.call(ipc_child.release)


def test_a_tensor_made_in_the_other_process(ipc_helper, dev):
    y = ipc_helper.call(ipc_child.make, 4096, 2.0)
    assert y.device == dev and y.shape == (4096,)
    assert y.cpu().eq(2.0).all()
    y.mul_(3)
    npu.synchronize()
    assert ipc_helper.call(ipc_child.read_held) == [[6.0] * 4096], "our write is seen there"
    del y
    ipc_helper.call(ipc_child.release)


def test_the_sender_keeps_the_block_while_a_receiver_holds_it(ipc_helper, dev):
    npu.ipc_collect()
    before, parked = npu.memory_allocated(), limbo()
    n = 1 << 18  # 1 MiB of float32
    x = torch.full((n,), 7.0, device=dev)
    assert ipc_helper.call(ipc_child.hold, x) == 1
    del x
    assert limbo() == parked + 1, "dropped here, still used there"
    assert npu.memory_allocated() == before + 4 * n
    # Blocks of the same size now must not be the held one.
    others = [torch.full((n,), 3.0, device=dev) for _ in range(4)]
    npu.ipc_collect()
    assert limbo() == parked + 1
    assert ipc_helper.call(ipc_child.read_held) == [[7.0] * n]
    del others
    assert ipc_helper.call(ipc_child.release)
    npu.ipc_collect()
    assert limbo() == parked
    assert npu.memory_allocated() == before


def test_the_receiver_waits_for_the_work_queued_before_the_send(ipc_helper, dev):
    n = 1 << 16
    x = torch.zeros(n, device=dev)
    npu.synchronize()
    with slow_jobs(30000):
        # x's last write lands several job latencies after the send; the
        # child's copy, one job, would read an earlier value if it did not
        # wait for the work queued on x when it was sent.
        queue_slow_writes(x, dev)
        x.add_(3.0)
        done = ipc_helper.call(ipc_child.copy_with_event, x)
        done.synchronize()
    assert ipc_helper.call(ipc_child.read_held) == [[5.0] * n]
    ipc_helper.call(ipc_child.release)


def test_a_forked_child_dropping_a_received_tensor_gives_nothing_back(ipc_helper, dev):
    npu.ipc_collect()
    parked = limbo()
    x = torch.full((1000,), 4.0, device=dev)
    ipc_helper.call(ipc_child.hold, x)
    del x
    assert limbo() == parked + 1
    assert ipc_helper.call(ipc_child.fork_and_drop) == 0
    npu.ipc_collect()
    assert limbo() == parked + 1, "the fork's copy gave back the child's use"
    assert ipc_helper.call(ipc_child.read_held) == [[4.0] * 1000]
    ipc_helper.call(ipc_child.release)
    npu.ipc_collect()
    assert limbo() == parked


def test_parameters_and_requires_grad_arrive(ipc_helper, dev):
    p = torch.nn.Parameter(torch.ones(3, device=dev))
    got = ipc_helper.call(ipc_child.describe, p)
    assert got["type"] == "Parameter" and got["requires_grad"]
    leaf = torch.ones(2, device=dev, requires_grad=True)
    assert ipc_helper.call(ipc_child.describe, leaf)["requires_grad"]
    ints = torch.nn.Parameter(torch.arange(3, device=dev), requires_grad=False)
    got = ipc_helper.call(ipc_child.describe, ints)
    assert got["dtype"] == torch.int64 and got["values"] == [0, 1, 2]
    ipc_helper.call(ipc_child.release)


def test_what_cannot_be_shared_is_refused(dev):
    leaf = torch.ones(2, device=dev, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(leaf * 2)
    storage = leaf.untyped_storage() if hasattr(leaf, "untyped_storage") else leaf.storage()
    with pytest.raises(RuntimeError, match="Cannot pickle NPU storage"):
        ForkingPickler.dumps(storage)
    # A CPU tensor still goes torch's way (shared memory).
    cpu = pickle.loads(ForkingPickler.dumps(torch.ones(3)))
    assert cpu.is_shared() and cpu.tolist() == [1.0] * 3


def test_empty_tensors(ipc_helper, dev):
    for t in (torch.empty(0, device=dev), torch.empty(3, 0, device=dev)):
        got = ipc_helper.call(ipc_child.describe, t)
        assert got["shape"] == tuple(t.shape) and got["device"] == str(dev)


def test_an_interprocess_event_pickles(ipc_helper, dev):
    ev = npu.Event(interprocess=True)
    assert ev.device is None
    ev.record()
    assert ev.device == dev
    assert ipc_helper.call(ipc_child.wait_event, ev) is True
    with pytest.raises(RuntimeError, match="interprocess=True"):
        ForkingPickler.dumps(npu.Event())


def test_in_the_same_process_the_tensor_comes_back_on_its_storage(dev):
    npu.ipc_collect()
    parked = limbo()
    x = torch.arange(10.0, device=dev)
    y = pickle.loads(ForkingPickler.dumps(x[2:]))
    assert y.data_ptr() == x[2:].data_ptr() and y.tolist() == list(range(2, 10))
    del x
    assert y.tolist() == list(range(2, 10))
    del y
    npu.ipc_collect()
    assert limbo() == parked, "the same-process receive gave its use back"


def test_reduce_tensor_pairs_travel_as_bytes(ipc_helper, dev):
    # vLLM shares weights this way: torch.multiprocessing.reductions'
    # reduce_tensor, pickled, through any channel.
    x = torch.linspace(0, 1, 33, device=dev)
    data = pickle.dumps(reductions.reduce_tensor(x))
    got = ipc_helper.call(ipc_child.rebuild_pickled, data)
    assert got["values"] == x.cpu().tolist()
    ipc_helper.call(ipc_child.release)


def test_bad_sharing_data_is_a_clear_error(ipc_helper, dev):
    x = torch.ones(4, device=dev)
    fn, args = reductions.reduce_tensor(x)
    handle, nbytes, counter, event = args[-1]
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    pid = gone.pid.to_bytes(4, "little")
    dead = args[:-1] + ((handle[:24] + pid + handle[28:], nbytes, (gone.pid,) + counter[1:],
                         event[:4] + pid + event[8:]),)
    msg = ipc_helper.call(ipc_child.rebuild_error, fn, dead)
    assert msg and "has exited" in msg, msg
    short = args[:-1] + ((handle[:10], nbytes, counter, event),)
    msg = ipc_helper.call(ipc_child.rebuild_error, fn, short)
    assert msg and "malformed" in msg, msg
    junk = args[:-1] + ((bytes(64), nbytes, counter, event),)
    msg = ipc_helper.call(ipc_child.rebuild_error, fn, junk)
    assert msg and "malformed" in msg, msg
    # A storage larger than the memory shared, or a block past the end:
    # nothing beyond it may be reached.
    huge = args[:-1] + ((handle, 1 << 40, counter, event),)
    msg = ipc_helper.call(ipc_child.rebuild_error, fn, huge)
    assert msg and "malformed" in msg, msg
    h = bytearray(handle)
    h[8:16] = (1 << 40).to_bytes(8, "little")  # the block's offset in its segment
    msg = ipc_helper.call(ipc_child.rebuild_error, fn,
                          args[:-1] + ((bytes(h), nbytes, counter, event),))
    assert msg and "malformed" in msg, msg
    other = args[:-1] + ((handle, nbytes, (counter[0] + 1,) + counter[1:], event),)
    msg = ipc_helper.call(ipc_child.rebuild_error, fn, other)
    assert msg and "malformed" in msg, "the counters of another process: " + str(msg)
    # These were refused before anything was taken: the share's use stays
    # counted (x's block is kept until this process exits, as with CUDA
    # for a share never received). A receive that fails later gives its
    # use back: here the memory's descriptor is not the exporter's.
    npu.ipc_collect()
    parked = limbo()
    y = torch.ones(4, device=dev)
    fn, args = reductions.reduce_tensor(y)
    handle, nbytes, counter, event = args[-1]
    bogus = (1 << 20).to_bytes(4, "little") + handle[4:]  # no such descriptor
    msg = ipc_helper.call(ipc_child.rebuild_error, fn,
                          args[:-1] + ((bogus, nbytes, counter, event),))
    assert msg and "taking its memory" in msg and "(gone: freed since?)" in msg, msg
    del y
    npu.ipc_collect()
    assert limbo() == parked, "the failed receive kept the block"
    ipc_helper.call(ipc_child.release)


def test_modules_share_memory(ipc_helper, dev):
    model = torch.nn.Linear(4, 2).to(dev)
    assert model.share_memory() is model
    w = model.weight.detach().cpu()
    got = ipc_helper.call(ipc_child.describe, model.weight)
    assert got["type"] == "Parameter"
    torch.testing.assert_close(torch.tensor(got["values"]), w)
    ipc_helper.call(ipc_child.release)


def test_shares_from_several_threads(dev):
    xs = [torch.full((1000,), float(i), device=dev) for i in range(8)]
    out = [None] * len(xs)

    def send(i):
        out[i] = ForkingPickler.dumps(xs[i][i:])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, data in enumerate(out):
        y = pickle.loads(data)
        assert y.shape == (1000 - i,) and y.eq(float(i)).all()


@pytest.mark.skipif(npu.device_count() < 2, reason="one NPU")
def test_a_tensor_of_the_second_npu(ipc_helper):
    x = torch.arange(5.0, device=npu.torch_device(1))
    got = ipc_helper.call(ipc_child.describe, x)
    assert got["device"] == str(x.device) and got["values"] == list(range(5))
    y = ipc_helper.call(ipc_child.make, 3, 1.0, 1)
    assert y.device == x.device and y.tolist() == [1.0] * 3
    del y
    ipc_helper.call(ipc_child.release)


def test_a_spawned_worker(dev, capfd):
    # What users write (a fresh interpreter: one more `import torch`).
    ctx = torch.multiprocessing.get_context("spawn")
    requests, replies = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=ipc_child.spawned_worker, args=(requests, replies))
    worker.start()
    try:
        x = torch.zeros(100, device=dev)
        requests.put(x)
        assert replies.get(timeout=600) == (str(dev), 100.0)
        worker.join(120)
    finally:
        if worker.is_alive():
            worker.kill()
    assert worker.exitcode == 0
    assert x.cpu().eq(1).all()
    err = capfd.readouterr().err
    assert "torch_npurt" not in err and "Traceback" not in err, err


# ----------------------- a receiver that may not take the sender's descriptors
# (another user here; Yama's ptrace_scope=1 or a container's seccomp filter
# refuse pidfd_getfd the same way): data that came through
# torch.multiprocessing asks the sender's broker instead.

def test_another_users_process_receives_through_the_broker(ipc_other_user, dev):
    assert ipc_other_user.call(ipc_child.uid) == NOBODY
    npu.ipc_collect()
    parked = limbo()
    x = torch.arange(256, dtype=torch.float32, device=dev)
    got = ipc_other_user.call(ipc_child.describe, x)
    assert got["values"] == list(range(256))
    assert ipc_other_user.call(ipc_child.add_, x, 1.0)
    assert x.cpu().tolist() == [v + 1.0 for v in range(256)], "its write is seen here"
    assert ipc_other_user.call(ipc_child.hold, x) == 1
    del x
    assert limbo() == parked + 1
    ev = npu.Event(interprocess=True)
    ev.record()
    assert ipc_other_user.call(ipc_child.wait_event, ev) is True
    # And back: a tensor it made (root may take its descriptors).
    y = ipc_other_user.call(ipc_child.make, 8, 2.5)
    assert y.tolist() == [2.5] * 8
    del y
    assert ipc_other_user.call(ipc_child.release)
    npu.ipc_collect()
    assert limbo() == parked, "it gave its use back"


def test_only_torch_multiprocessing_data_has_the_broker(ipc_helper, ipc_other_user):
    # The sender is the root helper; its blocks a failed receive leaves
    # counted stay parked there, not here.
    data = ipc_helper.call(ipc_child.dumps, 64, 3.0, False)
    msg = ipc_other_user.call(ipc_child.loads, data)
    assert isinstance(msg, str) and "Operation not permitted" in msg and "ptrace" in msg, msg
    data = ipc_helper.call(ipc_child.dumps, 64, 4.0, True)
    got = ipc_other_user.call(ipc_child.loads, data)
    assert got["values"] == [4.0] * 64, "helper to helper, through the broker"


def test_a_process_that_may_not_open_the_sender_receives_through_the_broker(
        ipc_seccomp, ipc_helper, dev):
    # A container's seccomp profile that lacks pidfd_open refuses the
    # first of the two calls: that too asks the broker.
    assert ipc_seccomp.call(ipc_child.pidfd_open_refused) is True
    x = torch.arange(64, dtype=torch.float32, device=dev)
    assert ipc_seccomp.call(ipc_child.describe, x)["values"] == list(range(64))
    assert ipc_seccomp.call(ipc_child.add_, x, 2.0)
    assert x.cpu().tolist() == [v + 2.0 for v in range(64)], "its write is seen here"
    ev = npu.Event(interprocess=True)
    ev.record()
    assert ipc_seccomp.call(ipc_child.wait_event, ev) is True
    # Bytes from another channel have no broker: the error names the cause.
    data = ipc_helper.call(ipc_child.dumps, 16, 3.0, False)
    msg = ipc_seccomp.call(ipc_child.loads, data)
    assert isinstance(msg, str) and "pidfd_open refused" in msg and "seccomp" in msg, msg
    data = ipc_helper.call(ipc_child.dumps, 16, 4.0, True)
    assert ipc_seccomp.call(ipc_child.loads, data)["values"] == [4.0] * 16


def test_the_broker_answers_only_its_multiprocessing_family(ipc_helper, ipc_other_user):
    data = ipc_helper.call(ipc_child.dumps, 64, 5.0, True)
    msg = ipc_other_user.call(ipc_child.loads, data, b"not the family's key" * 2)
    assert isinstance(msg, str) and "multiprocessing family" in msg, msg
    got = ipc_other_user.call(ipc_child.loads, data)
    assert got["values"] == [5.0] * 64, "the failed attempt did not spend the data"


def test_the_broker_passes_only_what_was_shared(dev):
    t = torch.ones(16, device=dev)
    fn, args = _reductions._reduce_tensor_forking(t)
    shared = args[-1]
    counter_fd, address = shared[2][1], shared[4]
    fetch = _reductions._Fetch(address)
    try:
        local = fetch(counter_fd)
        try:
            mine, theirs = os.fstat(local), os.fstat(counter_fd)
            assert (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
        finally:
            os.close(local)
        with pytest.raises(RuntimeError, match="refused to pass descriptor 0"):
            fetch(0)
        with pytest.raises(RuntimeError, match="refused to pass descriptor -1"):
            fetch(-1)
    finally:
        fetch.close()
    # Clients that do not follow the protocol cost the broker nothing.
    for junk in (b"", b"\x00" * 4, b"x" * 4096):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(address)
            s.sendall(junk)
    fetch = _reductions._Fetch(address)
    try:
        os.close(fetch(counter_fd))
    finally:
        fetch.close()
    assert fn(*args).data_ptr() == t.data_ptr(), "the same-process receive balances the share"


def _shared_counter(t):
    """A share of t through torch.multiprocessing, its counter file's
    descriptor (one the broker may pass) and its broker's address."""
    fn, args = _reductions._reduce_tensor_forking(t)
    shared = args[-1]
    return fn, args, shared[2][1], shared[4]


def test_a_client_without_the_key_gets_nothing(dev):
    t = torch.ones(16, device=dev)
    fn, args, counter_fd, address = _shared_counter(t)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(address)
        conn = multiprocessing.connection.Connection(os.dup(s.fileno()))
    try:
        with pytest.raises(multiprocessing.AuthenticationError):
            multiprocessing.connection.answer_challenge(conn, b"not the family's key" * 2)
        # Asking anyway: the broker hung up without passing anything.
        with pytest.raises((EOFError, OSError)):
            conn.send_bytes(struct.pack("i", counter_fd))
            conn.recv_bytes()
    finally:
        conn.close()
    assert fn(*args).data_ptr() == t.data_ptr(), "the same-process receive balances the share"


def test_a_broker_address_held_by_another_process_is_refused():
    # Abstract names are every user's: this process binds one that names
    # process 1 as the sender, as a process that took a dead sender's name
    # (or relays another broker) would.
    address = "\0torch_npurt-ipc-1-%s" % secrets.token_hex(8)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as impostor:
        impostor.bind(address)
        impostor.listen(1)
        fetch = _reductions._Fetch(address)
        try:
            with pytest.raises(RuntimeError,
                               match="held by process %d, not by process 1" % os.getpid()):
                fetch(3)
        finally:
            fetch.close()


def test_the_broker_works_under_a_default_socket_timeout(dev):
    # socket.setdefaulttimeout() makes new sockets non-blocking; the
    # broker's and the receiver's Connections read their descriptors.
    t = torch.ones(16, device=dev)
    fn, args, counter_fd, _ = _shared_counter(t)
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(0.5)
    try:
        broker = _reductions._Broker()
        fetch = _reductions._Fetch(broker.address)
        try:
            for _ in range(2):
                local = fetch(counter_fd)
                try:
                    assert os.path.samestat(os.fstat(local), os.fstat(counter_fd))
                    assert not os.get_inheritable(local)
                finally:
                    os.close(local)
        finally:
            fetch.close()
            broker.close()
    finally:
        socket.setdefaulttimeout(old)
    assert fn(*args).data_ptr() == t.data_ptr()
