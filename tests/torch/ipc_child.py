"""The other process of test_multiprocessing: forked by conftest before the
suite starts libnpurt (so it may use the NPUs; a child forked later could
not), it runs the functions the tests send it over torch.multiprocessing
queues, which share NPU tensors."""
import ctypes
import errno
import gc
import multiprocessing
import os
import pickle
import platform
import struct
import traceback
from multiprocessing.reduction import ForkingPickler

import torch

from torch_npurt import npu

_held = []


class Helper:
    """The parent's end: call(fn, *args) runs fn(*args) in the child and
    returns its result (raising RuntimeError with the child's traceback)."""

    def __init__(self, user=None, seccomp=False):
        ctx = torch.multiprocessing.get_context("fork")
        self.requests = ctx.Queue()
        self.replies = ctx.Queue()
        self.process = ctx.Process(target=_serve,
                                   args=(self.requests, self.replies, user, seccomp),
                                   daemon=True)
        self.process.start()
        self.sent = 0

    def send(self, fn, *args):
        """Starts fn(*args) in the child; returns the id result() takes."""
        self.sent += 1
        self.requests.put((self.sent, fn, args))
        return self.sent

    def result(self, ident, timeout=300):
        while True:  # replies to calls a failed test did not wait for go
            got, ok, value = self.replies.get(timeout=timeout)
            if got == ident:
                break
        if not ok:
            raise RuntimeError("in the child: " + value)
        return value

    def call(self, fn, *args):
        return self.result(self.send(fn, *args))

    def stop(self):
        self.requests.put(None)
        self.process.join(60)


def _become(user):
    """Opens the NPUs (their nodes are root's in the VM), then runs as
    `user`: a process that may not take root's descriptors."""
    for d in range(npu.device_count()):
        torch.zeros(1, device=npu.torch_device(d))
    npu.synchronize()
    os.setgroups([])
    os.setresgid(user, user, user)
    os.setresuid(user, user, user)


# x86-64's numbers: seccomp_data's fields, the filter's instructions.
_AUDIT_ARCH_X86_64 = 0xC000003E
_SYS_PIDFD_OPEN = 434
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _refuse_pidfd_open():
    """From now on pidfd_open fails with EPERM here, as it does under a
    container's seccomp profile that lacks it (pidfd_getfd is never
    reached)."""
    if platform.machine() != "x86_64":
        raise RuntimeError("the seccomp filter is written for x86-64")
    insns = [(_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
             (_BPF_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
             (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
             (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
             (_BPF_JEQ_K, 0, 1, _SYS_PIDFD_OPEN),
             (_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EPERM),
             (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)]
    code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in insns))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(insns), ctypes.addressof(code))
    libc = ctypes.CDLL(None, use_errno=True)
    if (libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or
            libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0)):
        raise OSError(ctypes.get_errno(), "installing the seccomp filter")


def pidfd_open_refused():
    """Whether this process's pidfd_open fails with EPERM (the filter's)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(_SYS_PIDFD_OPEN, os.getpid(), 0)
    if fd >= 0:
        os.close(fd)
        return False
    return ctypes.get_errno() == errno.EPERM


def _serve(requests, replies, user, seccomp):
    failed = None
    try:
        if user is not None:
            _become(user)
        if seccomp:
            _refuse_pidfd_open()
    except Exception:  # every call reports it
        failed = traceback.format_exc()
    while True:
        req = requests.get()
        if req is None:
            break
        ident, fn, args = req
        try:
            if failed:
                raise RuntimeError("the helper could not set itself up: " + failed)
            replies.put((ident, True, fn(*args)))
        except Exception:  # the parent raises it
            replies.put((ident, False, traceback.format_exc()))
        del req, fn, args


# --------------------------------------------- what the tests run there

def describe(t):
    """A received tensor as plain data."""
    return {"device": str(t.device), "dtype": t.dtype, "shape": tuple(t.shape),
            "stride": t.stride(), "offset": t.storage_offset(),
            "type": type(t).__name__, "requires_grad": t.requires_grad,
            "values": t.detach().cpu().tolist()}


def add_(t, value):
    t.add_(value)
    npu.synchronize()
    return True


def storage_id(t):
    """The StorageImpl behind t (two storages over one block differ)."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()._cdata
    return t.storage()._storage._cdata


def same_storage(a, b):
    return storage_id(a) == storage_id(b)


def copy_with_event(t):
    """Queues a copy of t on this process's stream and returns an
    interprocess event recorded after it, without waiting for either."""
    _held.append(t.clone())
    ev = npu.Event(interprocess=True)
    ev.record()
    _held.append(ev)  # alive until the parent opened it
    return ev


def fork_and_drop():
    """A fork of this process drops the tensors it inherited, and exits."""
    pid = os.fork()
    if pid == 0:
        try:
            del _held[:]
            gc.collect()
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def make(n, value, device=0):
    """A tensor made here, sent back (kept here too, for read_held)."""
    t = torch.full((n,), float(value), device=npu.torch_device(device))
    _held.append(t)
    return t


def hold(t):
    _held.append(t)
    return len(_held)


def read_held():
    return [h.cpu().tolist() for h in _held if isinstance(h, torch.Tensor)]


def release():
    del _held[:]
    gc.collect()
    return True


def rebuild_pickled(data):
    """vLLM's way: reduce_tensor's pair, pickled, sent as bytes."""
    fn, args = pickle.loads(data)
    return describe(fn(*args))


def rebuild_error(fn, args):
    try:
        fn(*args)
    except RuntimeError as e:
        return str(e)
    return None


def uid():
    return os.getuid()


def dumps(n, value, forking):
    """A tensor made here (and kept), as bytes: ForkingPickler's (with this
    process's broker) or reduce_tensor's pair pickled (pidfd_getfd only)."""
    t = make(n, value)
    if forking:
        return bytes(ForkingPickler.dumps(t))
    return pickle.dumps(torch.multiprocessing.reductions.reduce_tensor(t))


def loads(data, authkey=None):
    """Unpickles data (under another multiprocessing authkey if given; a
    reduce_tensor pair is called), keeps the tensor and describes it; a
    RuntimeError's message instead."""
    me = multiprocessing.current_process()
    mine = me.authkey
    if authkey is not None:
        me.authkey = authkey
    try:
        t = pickle.loads(data)
        if isinstance(t, tuple):
            t = t[0](*t[1])
    except RuntimeError as e:
        return str(e)
    finally:
        me.authkey = mine
    _held.append(t)
    return describe(t)


def wait_event(ev):
    ev.synchronize()
    return ev.query()


_kept = []


def spawned_worker(requests, replies):
    """A worker of the spawn start method (a fresh interpreter: the tensor's
    unpickling imports torch_npurt): adds 1 to what it gets, and exits
    still holding it."""
    t = requests.get()
    t.add_(1)
    npu.synchronize()
    _kept.append(t)
    replies.put((str(t.device), t.sum().item()))
