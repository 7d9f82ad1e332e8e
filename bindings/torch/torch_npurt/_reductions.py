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
CAP_SYS_PTRACE).
"""
import multiprocessing.reduction

import torch
import torch.multiprocessing.reductions as _torch_reductions

from . import _C, _patches, npu

_torch_reduce_tensor = _torch_reductions.reduce_tensor
_torch_reduce_storage = _torch_reductions.reduce_storage


def _is_npu(device):
    return device.type == npu._DEVICE_TYPE


def rebuild_npu_tensor(cls, size, stride, offset, dtype, requires_grad, device, shared):
    """The receiving side of reduce_tensor for an NPU tensor."""
    if shared is None:  # a storage without memory: nothing to share
        t = torch.empty_strided(size, stride, dtype=dtype, device=npu.torch_device(device))
    else:
        handle, nbytes, counter, event = shared
        t = _C._ipc_rebuild(device, handle, nbytes, counter, event, dtype, list(size),
                            list(stride), offset)
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


def reduce_storage(storage):
    if _is_npu(storage.device):
        raise RuntimeError("Cannot pickle NPU storage; try pickling an NPU tensor instead")
    return _torch_reduce_storage(storage)


def _rebuild_event(device, handle):
    return npu.Event.from_ipc_handle(device, handle)


def _reduce_event(event):
    device = event.device if event.device is not None else npu.current_device()
    return (_rebuild_event, (device, event.ipc_handle()))


def install():
    """Puts these reductions where torch's are: ForkingPickler's table (every
    class torch registered its function for) and the module's names."""
    table = multiprocessing.reduction.ForkingPickler._extra_reducers
    for cls, fn in list(table.items()):
        if fn is _torch_reduce_tensor:
            table[cls] = reduce_tensor
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
