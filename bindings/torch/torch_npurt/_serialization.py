"""torch.save / torch.load and copy.deepcopy of NPU tensors on torch 1.13.

1.13 has no ``torch.UntypedStorage(n, device=...)`` for PrivateUse1, and its
serialization registry knows only cpu, cuda and mps. The package adds:

- a location tag: NPU storages are saved as ``"npu:N"`` (torch_npu's tag),
  their bytes copied to the host by torch itself (``storage.cpu()``);
- a deserializer for ``"npu"``, ``"npu:N"``, ``"privateuseone[:N]"``, so
  ``torch.load(f)``, ``map_location="npu:0"`` / ``torch_device(0)`` /
  ``{"npu:1": "npu:0"}`` / ``"cpu"`` all work (a missing device index
  means the current NPU; an index that does not exist raises);
- ``torch._utils._rebuild_tensor`` and ``Tensor.__deepcopy__`` for NPU
  storages (1.13's ``Tensor.set_`` rejects PrivateUse1 storages in its
  argument parser; ``_C._set_storage`` does it);
- ``cpu()`` (1.13's storage ``copy_`` rejects PrivateUse1), ``clone()`` (hence ``copy.deepcopy``, ``copy.copy``) and ``npu(device)``
  of NPU storages, through device tensors; ``deepcopy`` of a tensor or a
  module keeps views of one storage sharing one new storage, as on the CPU.

Not supported: the legacy (non-zip) format written with
``_use_new_zipfile_serialization=False`` loads only to the CPU
(``map_location="cpu"``), which says so.
"""

import copy
import functools

import torch

_TAGS = ("npu", "privateuseone")


def _is_npu_storage(storage):
    return storage.device.type in ("privateuseone", "npu")


def _npu_tag(obj):
    if _is_npu_storage(obj):
        return "npu:%d" % obj.device.index


def _location_index(location):
    kind, _, idx = location.partition(":")
    if kind not in _TAGS:
        return None
    from . import npu
    if idx and not idx.isdigit():
        raise RuntimeError("invalid NPU location %r in torch.load" % location)
    if not npu.is_available():
        raise RuntimeError(
            "Attempting to deserialize object on an NPU device but no NPU is available "
            "(%s). If you are running on a CPU-only machine, please use torch.load with "
            "map_location='cpu' to map your storages to the CPU." %
            npu._C._no_device_reason())
    index = int(idx) if idx else npu.current_device()
    if index >= npu.device_count():
        raise RuntimeError(
            "Attempting to deserialize object on NPU device %d but "
            "torch_npurt.npu.device_count() is %d. Please use torch.load with "
            "map_location to map your storages to an existing device." %
            (index, npu.device_count()))
    return index


def _untyped(t):
    """The UntypedStorage under tensor `t` (torch 2.x's untyped_storage();
    there, Tensor.storage() warns that TypedStorage is deprecated)."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    return t.storage().untyped()


def _bytes_view(storage):
    """A uint8 tensor over all of `storage` (any device)."""
    t = torch.empty(0, dtype=torch.uint8, device=storage.device)
    if _is_npu_storage(storage):
        # 1.13's Tensor.set_ rejects PrivateUse1 storages in its argument
        # parser: the extension sets it.
        from . import _C
        return _C._set_storage(t, storage, 0, [storage.nbytes()], [1])
    return t.set_(storage)


def _rebuild_tensor(storage, storage_offset, size, stride):
    """torch._utils._rebuild_tensor, also for NPU storages."""
    # torch 2.x's TypedStorage.untyped() warns that TypedStorage is
    # deprecated; torch's own rebuild reads the attribute behind it.
    untyped = getattr(storage, "_untyped_storage", None)
    if untyped is None:
        untyped = storage.untyped()
    if not _is_npu_storage(untyped):
        return _rebuild_tensor_orig(storage, storage_offset, size, stride)
    from . import _C
    dtype = getattr(storage, "_dtype", None) or storage.dtype
    t = torch.empty(0, dtype=dtype, device=untyped.device)
    return _C._set_storage(t, untyped, storage_offset, list(size), list(stride))


def _tensor_deepcopy(self, memo):
    """Tensor.__deepcopy__, for plain NPU tensors: their storage is copied
    once per deepcopy (views keep sharing it), as for CPU tensors."""
    if (type(self) is not torch.Tensor or self.device.type != "privateuseone"
            or not torch._C._has_storage(self) or not self.is_leaf or id(self) in memo
            or self.is_conj() or self.is_neg()):
        return _deepcopy_orig(self, memo)
    from . import _C
    with torch.no_grad():
        new_storage = _untyped(self).__deepcopy__(memo)
        new = torch.empty(0, dtype=self.dtype, device=self.device)
        _C._set_storage(new, new_storage, self.storage_offset(), list(self.size()),
                        list(self.stride()))
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
    new.__dict__ = copy.deepcopy(self.__dict__, memo)
    memo[id(self)] = new
    return new


def _untyped_to_npu(storage, index):
    """A new NPU storage (UntypedStorage) with the bytes of `storage`."""
    src = _bytes_view(storage)
    dst = torch.empty(storage.nbytes(), dtype=torch.uint8,
                      device=torch.device("privateuseone", index))
    dst.copy_(src)
    return _untyped(dst)


def _npu_deserialize(obj, location):
    index = _location_index(location)
    if index is None:
        return None
    if getattr(obj, "_torch_load_uninitialized", False):
        raise RuntimeError(
            "torch_npurt: the legacy torch.save format (_use_new_zipfile_serialization="
            "False) cannot be loaded onto an NPU directly; load it with "
            "map_location='cpu' and move it with .npu()")
    return _untyped_to_npu(obj, index)


def _storage_cpu(self):
    """Returns a CPU copy of this storage if it's not already on the CPU
    (1.13's storage copy_ knows no PrivateUse1: through tensors)."""
    if _is_npu_storage(self):
        return _untyped(_bytes_view(self).cpu())
    return _cpu(self)


def _storage_clone(self):
    """Returns a copy of this storage (on the NPU for NPU storages)."""
    if _is_npu_storage(self):
        return _untyped_to_npu(self, self.device.index)
    return _clone(self)


def _storage_npu(self, device=None):
    """A copy of this storage on NPU `device` (the current one if None);
    itself if it is there already."""
    from . import npu
    index = npu._index(device)
    if _is_npu_storage(self) and self.device.index == index:
        return self
    return _untyped_to_npu(self, index)


_clone = None
_cpu = None
_rebuild_tensor_orig = None
_deepcopy_orig = None
_installed = False


def _sparse_reduce(reduce):
    """Pickling a sparse NPU tensor: torch sends every PrivateUse1 tensor
    without storage through numpy (which refuses sparse ones); it pickles
    as a sparse CPU or CUDA tensor does, from its indices and values (NPU
    tensors, saved with their device)."""
    from . import npu
    from ._patches import _torch_at_least

    @functools.wraps(reduce)
    def reduce_ex_internal(self, proto):
        if not (self.is_sparse and self.device.type == npu._DEVICE_TYPE):
            return reduce(self, proto)
        data = (self._indices(), self._values(), self.size())
        if _torch_at_least(2, 1):  # the flag, as torch's own pickles carry it since
            data += (self.is_coalesced(),)
        return torch._utils._rebuild_sparse_tensor, (self.layout, data)

    return reduce_ex_internal


def install():
    global _clone, _cpu, _rebuild_tensor_orig, _deepcopy_orig, _installed
    if _installed:
        return
    _installed = True
    base = torch.storage._StorageBase
    _clone = base.clone
    base.clone = _storage_clone
    _cpu = base.cpu
    base.cpu = _storage_cpu
    base.npu = _storage_npu
    base.is_npu = property(_is_npu_storage)
    torch.serialization.register_package(30, _npu_tag, _npu_deserialize)
    _rebuild_tensor_orig = torch._utils._rebuild_tensor
    torch._utils._rebuild_tensor = _rebuild_tensor
    _deepcopy_orig = torch.Tensor.__deepcopy__
    torch.Tensor.__deepcopy__ = _tensor_deepcopy
    torch.Tensor._reduce_ex_internal = _sparse_reduce(torch.Tensor._reduce_ex_internal)
