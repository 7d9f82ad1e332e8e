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
- ``Tensor.cuda`` / ``Module.cuda`` / ``storage.cuda`` are ``npu``, and
  ``Tensor.is_cuda`` is ``is_npu`` for the script's code (torch's own code,
  which gates CUDA-only paths on it, still reads False for NPU tensors);
- on torch 1.13, which has no NPU autocast, ``torch.cuda.amp.autocast`` and
  ``GradScaler`` run disabled (full precision), with a warning;
- ``nn.DataParallel`` runs its module unreplicated on the module's NPU, with
  a warning (its replication is CUDA's communication calls).

Not translated, so it still means CUDA: ``torch.device("cuda")`` itself (a
tensor's ``device.type`` is ``"npu"``: compare types, not devices), C++
extensions, ``torch.cuda``'s names the NPU has no counterpart for (NVTX,
NCCL's own module ``torch.cuda.nccl``, jiterator, ``torch.backends.cuda``),
``device="cuda"`` inside TorchScript. ``init_process_group("nccl")`` and
``new_group(backend="nccl")`` make hccl groups (``_distributed``), and
``is_nccl_available()`` says whether they can be made.

``apply()`` is idempotent; ``restore()`` undoes everything it did (for
tests; a script applies it once, at the top).
"""

import functools
import sys
import warnings

import torch

from . import _patches, npu

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
# torch.cuda names whose meaning differs from npu's of the same name (the
# submodules get npu's names one by one).
_NOT_ALIASED = {"profiler", *_CUDA_SUBMODULES}

_undo = []  # what restore() runs, last first
_ABSENT = object()


def _set(owner, name, value):
    old = owner.__dict__.get(name, _ABSENT)

    def undo():
        if old is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, old)
    _undo.append(undo)
    setattr(owner, name, value)


def _set_factory(name, fn):
    """torch.<name> = fn, known to TorchScript as the aten op it wraps (it
    finds builtins by identity: a wrapper it does not know fails to
    script)."""
    from torch.jit import _builtins
    _set(torch, name, fn)
    _builtins._register_builtin(fn, "aten::" + name)
    _undo.append(lambda: _builtins._get_builtin_table().pop(id(fn), None))


def applied():
    return bool(_undo)


def restore():
    """Puts back everything apply() changed, last first; a later import of
    torch_npurt.contrib.transfer_to_npu applies it again."""
    while _undo:
        _undo.pop()()
    sys.modules.pop("torch_npurt.contrib.transfer_to_npu", None)
    contrib = sys.modules.get("torch_npurt.contrib")
    if contrib is not None and "transfer_to_npu" in contrib.__dict__:
        delattr(contrib, "transfer_to_npu")


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


def _cuda_storage_to_npu(storage, location):
    """torch.serialization's restore step for a storage saved on CUDA
    ("cuda", "cuda:N", also what a map_location names): onto the NPU of
    that index. Registered before CUDA's own, which would look for CUDA."""
    is_cuda, _ = _cuda_index(location)
    if not is_cuda:
        return None
    return torch.serialization.default_restore_location(storage, to_npu(location))


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


def _register_cuda_storages():
    registry = torch.serialization._package_registry
    torch.serialization.register_package(15, lambda storage: None, _cuda_storage_to_npu)
    entry = next(e for e in registry if e[2] is _cuda_storage_to_npu)
    _undo.append(lambda: registry.remove(entry))


def _storage_cuda(self, device=None, non_blocking=False, **kwargs):
    """storage.cuda(device) (as in map_location=lambda s, loc: s.cuda(0)):
    a copy on the NPU."""
    return self.npu(npu._index(device))


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

_warned = set()


def _warn_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, UserWarning, stacklevel=3)


def _no_amp_classes():
    """torch 1.13 has no autocast for the NPU: torch.cuda.amp's classes run
    disabled (full precision), as 1.13's own do on a machine without CUDA,
    instead of failing."""
    msg = ("transfer_to_npu: torch %s has no NPU autocast; torch.cuda.amp runs disabled "
           "(float32)" % torch.__version__)
    cuda_amp = torch.cuda.amp

    class autocast(cuda_amp.autocast):
        def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
            _warn_once("amp", msg)
            super().__init__(False, dtype, cache_enabled)

    class GradScaler(cuda_amp.GradScaler):
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            _warn_once("amp", msg)
            super().__init__(init_scale, growth_factor, backoff_factor, growth_interval, False)

    return {"autocast": autocast, "GradScaler": GradScaler}


def _alias_cuda_module():
    cuda = torch.cuda
    for name in npu.__all__:
        if name in _NOT_ALIASED or not hasattr(cuda, name):
            continue
        _set(cuda, name, getattr(npu, name))
    _set(cuda, "CUDAGraph", npu.NPUGraph)
    amp = None if _npu_autocast() else _no_amp_classes()
    for sub in _CUDA_SUBMODULES:
        theirs = sys.modules.get("torch.cuda." + sub)
        if theirs is None:
            try:
                theirs = __import__("torch.cuda." + sub, fromlist=["_"])
            except ImportError:
                continue
        ours = getattr(npu, sub)
        for name in npu._SUBMODULE_NAMES[sub]:  # with _record_memory_history & co
            if sub == "amp" and amp is not None:
                if name in amp:
                    _set(theirs, name, amp[name])
                continue  # 1.13's custom_fwd/bwd pass through without autocast
            _set(theirs, name, getattr(ours, name))
        if sub == "graphs":
            _set(theirs, "CUDAGraph", npu.NPUGraph)


def _npu_autocast():
    return npu._C._autocast_registered()


def _data_parallel_init(fn):
    """nn.DataParallel replicates through CUDA's communication calls, which
    have no NPU counterpart: under the transfer it runs the module as it
    is, on its NPU (its forward's path for no devices), with a warning."""
    @functools.wraps(fn)
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        torch.nn.Module.__init__(self)
        _warn_once("dp", "transfer_to_npu: nn.DataParallel runs the module on its NPU "
                   "unreplicated (no multi-NPU DataParallel)")
        self.module = module
        self.device_ids = []
        self.dim = dim
        self.output_device = None
        self.src_device_obj = None
    return __init__


def _nccl_backend(fn, position):
    """init_process_group / new_group with NCCL named: the NPUs' backend,
    hccl (`"nccl"`, and `"cuda:nccl"` in torch 2.x's per-device form), as
    the argument at `position` or `backend=`. `device_id` (torch 2.x's eager
    connection of one CUDA device) is dropped: hccl connects when made."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = list(args)
        if len(args) > position and isinstance(args[position], str):
            args[position] = _hccl_spelling(args[position])
        elif isinstance(kwargs.get("backend"), str):
            kwargs["backend"] = _hccl_spelling(kwargs["backend"])
        kwargs.pop("device_id", None)
        return fn(*args, **kwargs)
    return wrapper


def _hccl_spelling(backend):
    parts = []
    for part in backend.split(","):
        dev, sep, name = part.rpartition(":")
        if name.strip().lower() == "nccl":
            name = "hccl"
            if dev.strip() == "cuda":
                dev = npu._DEVICE_TYPE
        parts.append(dev + sep + name)
    return ",".join(parts)


def _is_cuda(self):
    """Tensor.is_cuda: True for an NPU tensor when user code asks (scripts
    test it before CUDA-only steps), its real value when torch's own code
    does: torch gates CUDA-only paths on it (the transformer's nested-tensor
    fast path, __cuda_array_interface__), which NPU tensors cannot take."""
    if self.device.type != npu._DEVICE_TYPE:
        return self.device.type == "cuda"
    caller = sys._getframe(1).f_globals.get("__name__", "")
    return not (caller == "torch" or caller.startswith("torch."))


def apply():
    """Applies the translation (once; later calls do nothing)."""
    if _undo:
        return
    npu._alias_device = to_npu
    _undo.append(lambda: setattr(npu, "_alias_device", None))
    _alias_cuda_module()

    for name in _FACTORIES:
        fn = torch.__dict__.get(name)
        if fn is not None:
            _set_factory(name, _translating(fn))
    # A device map_location is translated (a TorchScript archive goes to
    # torch.jit.load, which needs a device it has); tags in a dict and a
    # checkpoint's own tags reach _cuda_storage_to_npu.
    _set(torch, "load", _translating(torch.load, kw=("map_location",), positional=(1,)))
    _register_cuda_storages()
    _set(torch.storage._StorageBase, "cuda", _storage_cuda)
    if _patches._torch_at_least(2, 1):  # NPU generators (npu_generator.cpp)
        _set(torch, "Generator", _generator_class())
    if hasattr(torch, "set_default_device"):
        _set(torch, "set_default_device", _translating(
            torch.set_default_device, positional=(0,), ints=True))
    if _npu_autocast():
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
    _set(tensor, "is_cuda", property(_is_cuda, doc=_is_cuda.__doc__))

    module = torch.nn.Module
    _set(module, "to", _wrap_to(module.to))
    _set(module, "to_empty", _translating(module.to_empty))
    _set(module, "cuda", _cuda_method(module.npu))
    dp = torch.nn.DataParallel
    _set(dp, "__init__", _data_parallel_init(dp.__init__))

    from torch.utils.data import dataloader as dl
    _set(dl.DataLoader, "__init__", _translating(dl.DataLoader.__init__,
                                                 kw=("pin_memory_device",)))
    if torch.distributed.is_available():
        import torch.distributed.distributed_c10d as c10d
        from . import _distributed
        # new_group(ranks, timeout, backend, ...)
        for name, position in (("init_process_group", 0), ("new_group", 2)):
            wrapped = _nccl_backend(getattr(c10d, name), position)
            _set(torch.distributed, name, wrapped)
            _set(c10d, name, wrapped)
        # Scripts choose "nccl" when it is available, gloo (no NPU tensors)
        # otherwise. torch's own code reads c10d's, before it touches NCCL's
        # classes: that one stays.
        _set(torch.distributed, "is_nccl_available", _distributed.is_hccl_available)
