"""NPU tensors through torch.multiprocessing, as CUDA tensors go.

Putting an NPU tensor on a ``torch.multiprocessing`` queue (or passing it to
a process it starts, or pickling it with ``ForkingPickler``) shares its
memory: the receiving process gets a tensor over the same device memory,
not a copy, and sees the sender's writes and the sender its own. As with
CUDA:

- the receiver's current stream waits for the work the sender had queued
  on the tensor when it sent it; later writes need their own ordering
  (an interprocess ``torch.npu.Event``, which pickles too, or a
  synchronize before the next message);
- the sender keeps the memory while any receiver holds the tensor, even
  after the sender dropped it: its block is freed (``ipc_collect``) once
  every receiver let go;
- ``reduce_tensor`` from ``torch.multiprocessing.reductions`` gives the
  same (rebuild function, arguments) pair, which rebuilds in another
  process of the same user after passing through any channel;
- tensors that require grad and are not leaves are refused, and storages
  are shared through their tensors.

The receiver takes the sender's descriptors with pidfd_getfd, which the
kernel allows to processes of the same user that may ptrace the sender
(under Yama's ptrace_scope=1 only the sender's ancestors, unless they have
CAP_SYS_PTRACE; a container's seccomp profile may refuse it too). Where it
is refused, a receiver of data that came through torch.multiprocessing (a
queue, a pipe, a process's arguments) asks the sender's broker, which
passes them over a Unix socket to processes holding the family's authkey,
as multiprocessing passes its own descriptors. reduce_tensor's pair, which
may travel through any channel, has only pidfd_getfd.
"""
import multiprocessing
import multiprocessing.connection
import multiprocessing.reduction
import errno
import os
import secrets
import socket
import struct
import threading
import time

import torch
import torch.multiprocessing.reductions as _torch_reductions

from . import _C, _patches, npu

_torch_reduce_tensor = _torch_reductions.reduce_tensor
_torch_reduce_storage = _torch_reductions.reduce_storage


# How long either end of a broker's connection waits for the other: for
# the challenge, and for each request after it.
_BROKER_HANDSHAKE_TIMEOUT = 10
_BROKER_TIMEOUT = 120
# Connections a broker serves at once (more are closed: a local process
# that opens many and stays silent costs it this many descriptors at most).
_BROKER_CLIENTS = 64


def _set_timeout(sock, seconds=_BROKER_TIMEOUT):
    """Blocking, with a kernel timeout on reads and writes: Connection uses
    the descriptor directly, so neither a Python socket timeout nor
    socket.setdefaulttimeout() (which would leave it non-blocking) may
    apply."""
    sock.setblocking(True)
    limit = struct.pack("ll", seconds, 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)


def _raw(conn):
    """A socket over a Connection's descriptor (a duplicate), blocking."""
    s = socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(True)
    return s


def _authkey():
    return bytes(multiprocessing.current_process().authkey)


class _Broker:
    """This process's end: passes the descriptors its shares named (and
    only those, while they name the same files) to a process that proves it
    holds the multiprocessing family's authkey. One thread per connection,
    _BROKER_CLIENTS at most: a client that stalls holds only its own."""

    def __init__(self):
        self.pid = os.getpid()
        # Abstract: no file to clean up, and reachable by a receiver of
        # another user (the authkey is the check; the receiver checks the
        # socket is this process's).
        self.address = "\0torch_npurt-ipc-%d-%s" % (self.pid, secrets.token_hex(8))
        self._slots = threading.BoundedSemaphore(_BROKER_CLIENTS)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.setblocking(True)
        self._socket.bind(self.address)
        self._socket.listen(64)
        threading.Thread(target=self._accept, name="torch_npurt-ipc-broker",
                         daemon=True).start()

    def close(self):
        """Stops serving (the accept loop ends)."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()

    def _accept(self):
        while True:
            try:
                sock, _ = self._socket.accept()
            except (ConnectionAbortedError, InterruptedError):
                continue
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    return  # the socket is gone
                # Out of descriptors or memory: the waiting client gets its
                # turn once some are back, not a busy loop meanwhile.
                time.sleep(0.1)
                continue
            if not self._slots.acquire(blocking=False):
                sock.close()
                continue
            try:
                threading.Thread(target=self._answer, args=(sock,), daemon=True).start()
            except RuntimeError:  # no thread to be had now
                sock.close()
                self._slots.release()

    def _answer(self, sock):
        try:
            self._serve(sock)
        finally:
            self._slots.release()

    @staticmethod
    def _serve(sock):
        try:
            _set_timeout(sock, _BROKER_HANDSHAKE_TIMEOUT)
            conn = multiprocessing.connection.Connection(sock.detach())
        except OSError:
            sock.close()
            return
        try:
            key = _authkey()
            multiprocessing.connection.deliver_challenge(conn, key)
            multiprocessing.connection.answer_challenge(conn, key)
            with _raw(conn) as raw:
                _set_timeout(raw)
                while True:
                    request = conn.recv_bytes(16)
                    if len(request) != 4:
                        return
                    fd, = struct.unpack("i", request)
                    local = _Broker._take(fd)
                    if local is None:
                        conn.send_bytes(b"refused")
                        continue
                    try:
                        conn.send_bytes(b"ok")
                        socket.send_fds(raw, [b"\x01"], [local])
                    finally:
                        os.close(local)
        except (OSError, EOFError, multiprocessing.AuthenticationError):
            pass  # the client went, stalled or failed the challenge
        finally:
            conn.close()

    @staticmethod
    def _take(fd):
        """A duplicate of fd if it names a file a share named, else None.
        Duplicated first and compared: a free may close fd and the number
        name another file meanwhile."""
        try:
            local = os.dup(fd)
        except OSError:
            return None
        try:
            if os.path.samestat(os.fstat(local), os.fstat(fd)) and _C._ipc_may_serve(fd):
                return local
        except OSError:
            pass
        os.close(local)
        return None


_broker = None
_broker_lock = threading.Lock()


def _broker_address():
    """This process's broker (started at the first share through
    torch.multiprocessing; a forked child starts its own)."""
    global _broker
    with _broker_lock:
        if _broker is None or _broker.pid != os.getpid():
            _broker = _Broker()
        return _broker.address


def _forget_broker_in_child():
    # The parent's listening socket has no thread here; the lock may have
    # been held by another of the parent's threads at the fork.
    global _broker, _broker_lock
    _broker_lock = threading.Lock()
    if _broker is not None:
        try:
            _broker._socket.close()
        except OSError:
            pass
        _broker = None


os.register_at_fork(after_in_child=_forget_broker_in_child)


class _Fetch:
    """A receiver's end of a sender's broker, connected at its first use:
    fetch(fd) returns this process's descriptor of the sender's fd."""

    def __init__(self, address):
        self._address = address
        self._conn = None

    def __call__(self, fd):
        try:
            if self._conn is None:
                self._conn = self._connect()
            self._conn.send_bytes(struct.pack("i", fd))
            if self._conn.recv_bytes(16) != b"ok":
                raise RuntimeError("receiving from another process: it refused to pass "
                                   "descriptor %d (not one it shared, or freed since)" % fd)
            with _raw(self._conn) as raw:
                # recvmsg itself: socket.recv_fds drops its flags argument.
                _, ancillary, flags, _ = raw.recvmsg(1, socket.CMSG_SPACE(4),
                                                     socket.MSG_CMSG_CLOEXEC)
            fds = []
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    count = len(data) // 4
                    fds += struct.unpack("%di" % count, data[:count * 4])
            if len(fds) != 1 or flags & socket.MSG_CTRUNC:
                for f in fds:
                    os.close(f)
                raise RuntimeError("receiving from another process: its broker sent no "
                                   "descriptor for %d" % fd)
            return fds[0]
        except (OSError, EOFError, multiprocessing.AuthenticationError) as e:
            reason = "no answer within %d s" % _BROKER_TIMEOUT if isinstance(
                e, BlockingIOError) else "%s: %s" % (type(e).__name__, e)
            raise RuntimeError("receiving from another process: asking it for its "
                               "descriptors failed (%s); it may have exited, or "
                               "not be of this multiprocessing family" % reason) from e

    def _connect(self):
        sender = int(self._address.split("-")[2])
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _set_timeout(sock, _BROKER_HANDSHAKE_TIMEOUT)
            sock.connect(self._address)
            # Abstract names are visible to every user: one that bound the
            # name of a sender gone (or relays another broker) is not the
            # sender.
            peer = struct.unpack("3i", sock.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
            if peer != sender:
                raise RuntimeError("receiving from another process: its broker's address "
                                   "is held by process %d, not by process %d that shared "
                                   "the tensor" % (peer, sender))
            conn = multiprocessing.connection.Connection(sock.detach())
        finally:
            sock.close()
        try:
            key = _authkey()
            multiprocessing.connection.answer_challenge(conn, key)
            multiprocessing.connection.deliver_challenge(conn, key)
            with _raw(conn) as raw:
                _set_timeout(raw)
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _is_npu(device):
    return device.type == npu._DEVICE_TYPE


def rebuild_npu_tensor(cls, size, stride, offset, dtype, requires_grad, device, shared):
    """The receiving side of reduce_tensor for an NPU tensor."""
    if shared is None:  # a storage without memory: nothing to share
        t = torch.empty_strided(size, stride, dtype=dtype, device=npu.torch_device(device))
    else:
        handle, nbytes, counter, event = shared[:4]
        # Sent through torch.multiprocessing: the sender's broker's address.
        fetch = _Fetch(shared[4]) if len(shared) > 4 else None
        try:
            t = _C._ipc_rebuild(device, handle, nbytes, counter, event, dtype, list(size),
                                list(stride), offset, fetch)
        finally:
            if fetch is not None:
                fetch.close()
    if cls is torch.nn.parameter.Parameter:
        # As torch's rebuild: integer parameters must get requires_grad
        # in the constructor.
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def reduce_tensor(tensor):
    """torch.multiprocessing's reduction of a tensor, NPU tensors shared."""
    if not _is_npu(tensor.device):
        return _torch_reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, "
            "since autograd does not support crossing process boundaries.  "
            "If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue).")
    from torch._namedtensor_internals import check_serializing_named_tensor
    check_serializing_named_tensor(tensor)
    if tensor.layout != torch.strided:
        raise RuntimeError("only strided NPU tensors can be shared between processes, "
                           "not %s ones" % tensor.layout)
    if npu._is_in_bad_fork():
        raise RuntimeError("cannot share an NPU tensor from a process forked after its "
                           "parent used the NPU")
    return (rebuild_npu_tensor,
            (type(tensor), tuple(tensor.size()), tuple(tensor.stride()),
             tensor.storage_offset(), tensor.dtype, tensor.requires_grad,
             tensor.device.index, _C._ipc_share(tensor)))


def _reduce_tensor_forking(tensor):
    """ForkingPickler's: as reduce_tensor, with the address of this
    process's broker for receivers that may not take its descriptors."""
    fn, args = reduce_tensor(tensor)
    if fn is rebuild_npu_tensor and args[-1] is not None:
        args = args[:-1] + (args[-1] + (_broker_address(),),)
    return fn, args


def reduce_storage(storage):
    if _is_npu(storage.device):
        raise RuntimeError("Cannot pickle NPU storage; try pickling an NPU tensor instead")
    return _torch_reduce_storage(storage)


def _rebuild_event(device, handle, address=None):
    fetch = _Fetch(address) if address is not None else None
    try:
        local, fd = _C._ipc_localize_event(handle, fetch)
    finally:
        if fetch is not None:
            fetch.close()
    try:
        return npu.Event.from_ipc_handle(device, local)
    finally:
        if fd >= 0:
            os.close(fd)


def _reduce_event(event):
    device = event.device if event.device is not None else npu.current_device()
    handle = event.ipc_handle()
    _C._ipc_serve_event(handle)
    return (_rebuild_event, (device, handle, _broker_address()))


def install():
    """Puts these reductions where torch's are: ForkingPickler's table (every
    class torch registered its function for) and the module's names."""
    table = multiprocessing.reduction.ForkingPickler._extra_reducers
    for cls, fn in list(table.items()):
        if fn is _torch_reduce_tensor:
            table[cls] = _reduce_tensor_forking
        elif fn is _torch_reduce_storage:
            table[cls] = reduce_storage
    multiprocessing.reduction.ForkingPickler.register(npu.Event, _reduce_event)
    _torch_reductions.reduce_tensor = reduce_tensor
    _torch_reductions.reduce_storage = reduce_storage
    if not _patches._torch_at_least(2, 0):
        # torch 1.13 moves every non-CUDA storage to POSIX shared memory
        # (Module.share_memory(), Tensor.share_memory_()): device memory is
        # shared through its tensors, as CUDA's.
        # The same for a new storage that default_collate makes in a
        # DataLoader worker for a batch of NPU tensors.
        base = torch.storage._StorageBase
        torch_share_memory = base.share_memory_
        torch_new_shared = base._new_shared.__func__

        def share_memory_(self):
            if _is_npu(self.device):
                return self
            return torch_share_memory(self)

        def _new_shared(cls, size, *, device="cpu"):
            if _is_npu(torch.device(device)):
                return cls(size, device=device)
            return torch_new_shared(cls, size, device=device)
        base.share_memory_ = share_memory_
        base._new_shared = classmethod(_new_shared)
