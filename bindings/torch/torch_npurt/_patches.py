"""torch_npu's spellings on torch 1.13, where the device cannot be renamed.

torch 1.13 knows the backend only as ``privateuseone``; ``torch.device("npu")``
raises inside torch's C++ parser, which no Python code can reach. What the
package can intercept, it translates:

- ``Tensor.npu(device=None, non_blocking=False)``, ``Tensor.is_npu``,
  ``Module.npu(device=None)``;
- ``Tensor.to("npu")`` / ``to("npu:1")`` / ``to(device="npu")`` and the same
  for ``Module.to``;
- ``device="npu"`` (or ``"npu:N"``) in torch's factory functions (``torch.empty``,
  ``zeros``, ``ones``, ``full``, ``rand``, ``randn``, ``randint``, ``arange``,
  ``tensor``, ``as_tensor``, ``eye``, ``linspace``, ``*_like``, ...).

Not reachable, documented: ``torch.device("npu")``, ``device="npu"`` in
functions not listed above, "npu" inside TorchScript, and ``Tensor.device``
which prints ``privateuseone:0``.
"""

import functools

import torch

_FACTORIES = [
    "empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint",
    "randperm", "arange", "range", "linspace", "logspace", "eye", "tensor", "as_tensor",
    "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
    "randint_like", "scalar_tensor", "normal",
]

_installed = False


def translate(device):
    """'npu' / 'npu:N' -> the backend's device; anything else unchanged."""
    if isinstance(device, str):
        kind, sep, idx = device.partition(":")
        if kind == "npu":
            return "privateuseone" + sep + idx
    return device


def _wrap_device_kw(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = translate(kwargs["device"])
        return fn(*args, **kwargs)
    return wrapper


def _to_args(args, kwargs):
    args = tuple(translate(a) for a in args)
    if "device" in kwargs:
        kwargs["device"] = translate(kwargs["device"])
    return args, kwargs


def _npu_index(device):
    from . import npu
    return npu._index(device)


def install():
    global _installed
    if _installed:
        return
    _installed = True

    tensor_to = torch.Tensor.to

    @functools.wraps(tensor_to)
    def to(self, *args, **kwargs):
        args, kwargs = _to_args(args, kwargs)
        return tensor_to(self, *args, **kwargs)

    torch.Tensor.to = to

    def tensor_npu(self, device=None, non_blocking=False,
                   memory_format=torch.preserve_format):
        """Copy to NPU `device` (the current one if None), as torch_npu's."""
        dev = torch.device("privateuseone", _npu_index(device))
        return tensor_to(self, dev, non_blocking=non_blocking, memory_format=memory_format)

    torch.Tensor.npu = tensor_npu
    torch.Tensor.is_npu = property(lambda self: self.device.type == "privateuseone")

    module_to = torch.nn.Module.to

    @functools.wraps(module_to)
    def mod_to(self, *args, **kwargs):
        args, kwargs = _to_args(args, kwargs)
        return module_to(self, *args, **kwargs)

    torch.nn.Module.to = mod_to

    def module_npu(self, device=None):
        """Moves all parameters and buffers to NPU `device`, as torch_npu's."""
        dev = torch.device("privateuseone", _npu_index(device))
        return self._apply(lambda t: tensor_to(t, dev))

    torch.nn.Module.npu = module_npu

    for name in _FACTORIES:
        fn = getattr(torch, name, None)
        if fn is not None:
            setattr(torch, name, _wrap_device_kw(fn))
