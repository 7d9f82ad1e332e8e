"""CUDA code on the NPU without editing it: what
``torch_npurt.contrib.transfer_to_npu`` applies (torch_npu's
``torch_npu.contrib.transfer_to_npu``).

While applied:

- ``torch.cuda.<name>`` is ``torch_npurt.npu.<name>`` for every name both
  have (``is_available``, ``device_count``, ``set_device``, ``synchronize``,
  ``Stream``, ``Event``, ``current_stream``, the memory statistics, the
  seeds, the legacy ``FloatTensor`` types, ...), and ``CUDAGraph`` is
  ``NPUGraph``; the same in ``torch.cuda.amp``, ``.memory``, ``.random``,
  ``.streams`` and ``.graphs``;
- a CUDA device (``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", 1)``, an
  int where torch reads one as a CUDA index) names the NPU of that index in
  torch's factory functions (``device=``), ``Tensor.to`` / ``new_*``,
  ``Module.to`` / ``to_empty``, ``torch.load``'s ``map_location`` (and a
  checkpoint's CUDA storages load onto the NPUs without one),
  ``torch.autocast`` / ``torch.amp.GradScaler`` (whose default device then is
  the NPU), ``torch.set_default_device``, ``DataLoader(pin_memory_device=)``,
  ``torch.Generator`` and every ``torch.npu`` call that takes a device;
- ``Tensor.cuda`` / ``Module.cuda`` are ``npu``, and ``Tensor.is_cuda`` is
  ``is_npu``.

Not translated, so it still means CUDA: ``torch.device("cuda")`` itself (a
tensor's ``device.type`` is ``"npu"``: compare types, not devices), C++
extensions, ``torch.cuda``'s names the NPU has no counterpart for (NVTX,
NCCL, jiterator, ``torch.backends.cuda``), ``init_process_group("nccl")``
(there is no NPU collective backend).

``apply()`` is idempotent; ``restore()`` puts back every attribute it
replaced (for tests; a script applies it once, at the top).
"""

import functools
import sys

import torch

from . import npu

# Factory functions whose `device=` torch_npu's transfer translates, and
# more that take one (those the installed torch lacks are skipped).
_FACTORIES = (
    "empty", "empty_strided", "empty_like", "zeros", "zeros_like", "ones", "ones_like",
    "full", "full_like", "rand", "rand_like", "randn", "randn_like", "randint",
    "randint_like", "randperm", "arange", "range", "linspace", "logspace", "eye",
    "tensor", "as_tensor", "asarray", "scalar_tensor", "normal", "frombuffer",
    "from_file", "tril_indices", "triu_indices", "sparse_coo_tensor",
    "sparse_csr_tensor", "hann_window", "hamming_window", "bartlett_window",
    "blackman_window", "kaiser_window",
)
_TENSOR_METHODS = ("new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
                   "new_tensor")
_CUDA_SUBMODULES = ("amp", "memory", "random", "streams", "graphs")
# torch.cuda names whose meaning differs from npu's of the same name.
_NOT_ALIASED = {"profiler", "memory", "amp", "random", "streams", "graphs"}

_saved = []  # (owner, name, previous value or _ABSENT), in the order set
_ABSENT = object()


def _set(owner, name, value):
    _saved.append((owner, name, owner.__dict__.get(name, _ABSENT)))
    setattr(owner, name, value)


def applied():
    return bool(_saved)


def restore():
    """Puts back everything apply() replaced, last first."""
    while _saved:
        owner, name, old = _saved.pop()
        if old is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, old)
    npu._alias_device = None


# ----------------------------------------------------------- device names

def _cuda_index(device):
    """The index a CUDA device spelling names: (True, index or None) for one,
    (False, None) for anything else."""
    if isinstance(device, torch.device):
        return (True, device.index) if device.type == "cuda" else (False, None)
    if isinstance(device, str):
        kind, sep, idx = device.partition(":")
        if kind.strip() == "cuda":
            if sep and not idx.strip().isdigit():
                raise RuntimeError("Invalid device string: '%s'" % device)
            return True, int(idx) if sep else None
    return False, None


def to_npu(device, ints=False):
    """`device` with a CUDA spelling replaced by the NPU's (the same kind:
    a string stays a string, a torch.device a torch.device); with `ints`,
    a bare int (torch's CUDA index) too. Anything else is returned as is."""
    if ints and isinstance(device, int) and not isinstance(device, bool):
        return torch.device(npu._DEVICE_TYPE, device)
    is_cuda, index = _cuda_index(device)
    if not is_cuda:
        return device
    if isinstance(device, str):
        return npu._DEVICE_TYPE if index is None else "%s:%d" % (npu._DEVICE_TYPE, index)
    return torch.device(npu._DEVICE_TYPE, index) if index is not None \
        else torch.device(npu._DEVICE_TYPE)


def _restore_cuda_storage(storage, location):
    """torch.load's restore of one storage: a CUDA location goes to the NPU
    of the same index (torch's default restore for the rest)."""
    return torch.serialization.default_restore_location(storage, to_npu(location))


def _map_location(location):
    """torch.load's map_location while applied. None: the checkpoint's CUDA
    storages go to the NPUs. A dict maps the file's tags (its keys stay as
    written: they are what the file says), then CUDA targets are NPUs. A
    device spelling is translated; a callable is the caller's."""
    if location is None:
        return _restore_cuda_storage
    if isinstance(location, dict):
        return lambda storage, loc: _restore_cuda_storage(storage, location.get(loc, loc))
    if callable(location):
        return location
    return to_npu(location, ints=True)


# ------------------------------------------------------------ the wrappers

def _translating(fn, kw=("device",), positional=(), ints=False):
    """fn with CUDA devices in keywords `kw` and positions `positional`
    translated (bare ints too if `ints`). A method's positions count self."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if positional and args:
            args = list(args)
            for i in positional:
                if i < len(args):
                    args[i] = to_npu(args[i], ints)
        for k in kw:
            if kwargs.get(k) is not None:
                kwargs[k] = to_npu(kwargs[k], ints or k == "device")
        return fn(*args, **kwargs)
    return wrapper


def _wrap_to(fn):
    """Tensor.to / Module.to: the first positional argument may be a device
    (an int is a CUDA index there, as in x.to(0))."""
    return _translating(fn, kw=("device",), positional=(1,), ints=True)


def _load(fn):
    @functools.wraps(fn)
    def load(f, map_location=None, *args, **kwargs):
        return fn(f, _map_location(map_location), *args, **kwargs)
    return load


def _default_device(fn):
    """torch.autocast / torch.amp.GradScaler.__init__: the device comes
    first; GradScaler's default ("cuda") becomes the NPU."""
    @functools.wraps(fn)
    def init(self, *args, **kwargs):
        if args:
            args = (to_npu(args[0]),) + tuple(args[1:])
        else:
            key = "device_type" if "device_type" in kwargs or fn.__qualname__.startswith(
                "autocast") else "device"
            kwargs[key] = to_npu(kwargs.get(key, "cuda"))
        return fn(self, *args, **kwargs)
    return init


class _GeneratorMeta(type(torch.Generator)):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch._C.Generator)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, torch._C.Generator)


def _generator_class():
    """torch.Generator("cuda"): a torch.Generator (isinstance holds for every
    generator, torch's default ones too) made for the NPU."""
    base = torch._C.Generator

    class Generator(base, metaclass=_GeneratorMeta):
        def __new__(cls, device="cpu"):
            return base.__new__(base, to_npu(device, ints=True))

    Generator.__module__ = "torch"
    Generator.__doc__ = base.__doc__
    return Generator


def _cuda_method(fn):
    """Tensor.cuda / Module.cuda as npu(), with a CUDA device argument
    translated (torch's cuda() takes ints, strings and torch.device)."""
    @functools.wraps(fn)
    def cuda(self, device=None, *args, **kwargs):
        if device is not None:
            device = npu._index(device)
        return fn(self, device, *args, **kwargs)
    cuda.__name__ = "cuda"
    return cuda


# ----------------------------------------------------------------- apply

def _alias_cuda_module():
    cuda = torch.cuda
    for name in npu.__all__:
        if name in _NOT_ALIASED or not hasattr(cuda, name):
            continue
        _set(cuda, name, getattr(npu, name))
    _set(cuda, "CUDAGraph", npu.NPUGraph)
    for sub in _CUDA_SUBMODULES:
        theirs = sys.modules.get("torch.cuda." + sub)
        if theirs is None:
            try:
                theirs = __import__("torch.cuda." + sub, fromlist=["_"])
            except ImportError:
                continue
        ours = getattr(npu, sub)
        for name in npu._SUBMODULE_NAMES[sub]:  # with _record_memory_history & co
            _set(theirs, name, getattr(ours, name))
        if sub == "graphs":
            _set(theirs, "CUDAGraph", npu.NPUGraph)


def apply():
    """Applies the translation (once; later calls do nothing)."""
    if _saved:
        return
    npu._alias_device = to_npu
    _alias_cuda_module()

    for name in _FACTORIES:
        fn = torch.__dict__.get(name)
        if fn is not None:
            _set(torch, name, _translating(fn))
    _set(torch, "load", _load(torch.load))
    _set(torch, "Generator", _generator_class())
    if hasattr(torch, "set_default_device"):
        _set(torch, "set_default_device", _translating(
            torch.set_default_device, positional=(0,), ints=True))
    autocast = torch.amp.autocast_mode.autocast
    _set(autocast, "__init__", _default_device(autocast.__init__))
    scaler = getattr(torch.amp, "GradScaler", None)
    if scaler is not None:
        _set(scaler, "__init__", _default_device(scaler.__init__))

    tensor = torch.Tensor
    _set(tensor, "to", _wrap_to(tensor.to))
    for name in _TENSOR_METHODS:
        _set(tensor, name, _translating(getattr(tensor, name)))
    _set(tensor, "pin_memory", _translating(tensor.pin_memory, positional=(1,)))
    _set(tensor, "cuda", _cuda_method(tensor.npu))
    _set(tensor, "is_cuda", property(lambda self: self.device.type == npu._DEVICE_TYPE,
                                     doc="True for a tensor on an NPU (transfer_to_npu)."))

    module = torch.nn.Module
    _set(module, "to", _wrap_to(module.to))
    _set(module, "to_empty", _translating(module.to_empty))
    _set(module, "cuda", _cuda_method(module.npu))

    from torch.utils.data import dataloader as dl
    _set(dl.DataLoader, "__init__", _translating(dl.DataLoader.__init__,
                                                 kw=("pin_memory_device",)))
