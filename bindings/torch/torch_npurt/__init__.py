"""torch_npurt: PyTorch on the NPU through libnpurt (the PrivateUse1 backend).

``import torch_npurt`` registers the backend; ``torch_npurt.npu`` is the
device module with torch_npu's names, so ``import torch_npurt as torch_npu``
runs torch_npu code.

Device naming: on torch >= 2.0 the device is called ``npu``
(``torch.utils.rename_privateuse1_backend``), as with torch_npu >= 2.1. On
torch 1.13 the device type is ``privateuseone`` and cannot be renamed; the
package makes the torch_npu spellings it can intercept work there
(``Tensor.npu()``, ``Module.npu()``, ``Tensor.is_npu``, ``.to("npu")``,
``device="npu"`` in torch's factory functions); see ``_patches``.
``torch.device("npu")`` itself raises on 1.13: write
``torch_npurt.npu.torch_device(0)`` or ``"privateuseone:0"`` there.
"""

import atexit
import os
import sys

import torch

from ._environ import translate_torch_npu_environment

translate_torch_npu_environment(os.environ)

from . import _C  # noqa: E402  registers the kernels, allocator and device guard
from . import npu
from . import _patches
from . import _serialization
from . import _reductions

__all__ = ["npu", "DEVICE_TYPE", "fallback_counts"]

_TORCH_2 = int(torch.__version__.split(".")[0]) >= 2

if _TORCH_2:
    # The names torch_npu >= 2.1 uses: torch.device("npu"), torch.npu,
    # Tensor.npu()/is_npu, Module.npu(), storage methods.
    torch.utils.rename_privateuse1_backend("npu")
    torch._register_device_module("npu", npu)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True
    )
    DEVICE_TYPE = "npu"
    _patches.install_torch2()
else:
    DEVICE_TYPE = "privateuseone"
    # torch.npu, as torch_npu gives it on 1.13 (torch has no device
    # module registry there).
    torch.npu = npu
    sys.modules["torch.npu"] = npu
    _patches.install()
npu._DEVICE_TYPE = DEVICE_TYPE
# `from torch.npu.amp import autocast` and the like.
for _name in npu._SUBMODULE_NAMES:
    sys.modules["torch.npu." + _name] = getattr(npu, _name)
_patches.install_common()
_serialization.install()
_reductions.install()
if torch.distributed.is_available():
    from . import _distributed
    _distributed.install()
_C._set_internal_prefixes([os.path.dirname(torch.__file__) + os.sep,
                           os.path.dirname(__file__) + os.sep])
if os.environ.get("NPURT_TORCH_CALL_SITES", "") == "0":
    _C._set_call_sites(False)


def fallback_counts():
    """Which ATen ops ran through the CPU fallback so far, and how often
    (also device copies that had to go through the host)."""
    return dict(_C._fallback_counts())


def _fallback_report():
    counts = fallback_counts()
    out = sys.stderr
    if not counts:
        print("torch_npurt: no op ran through the CPU fallback", file=out)
        return
    print("torch_npurt: ops run through the CPU fallback (calls):", file=out)
    for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  %8d  %s" % (n, name), file=out)


if os.environ.get("NPURT_TORCH_FALLBACK_REPORT", "") not in ("", "0"):
    atexit.register(_fallback_report)
