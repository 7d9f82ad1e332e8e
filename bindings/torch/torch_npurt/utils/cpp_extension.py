"""Building C++ extensions that run operators on NPU tensors, as
torch.utils.cpp_extension builds CUDA ones (torch_npu's names):

    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension
    from torch_npurt.utils.cpp_extension import NpuExtension

    setup(name="my_ops",
          ext_modules=[NpuExtension("my_ops", ["my_ops.cpp"])],
          cmdclass={"build_ext": BuildExtension})

or, compiled when first imported (needs ninja, as torch's load does):

    my_ops = torch_npurt.utils.cpp_extension.load("my_ops", ["my_ops.cpp"])

The sources include <torch_npurt/extension.h> (the current NPU stream,
NPURT_CHECK) and libnpurt's <npurt/npurt.h>, and link libnpurt; the
extension finds torch_npurt's own code through torch when it is loaded,
so `import torch_npurt` comes first.
"""
import os

from .. import _paths

__all__ = ["include_paths", "library_paths", "NpuExtension", "load", "load_inline"]


def _cpp_extension():
    try:
        import torch.utils.cpp_extension as cpp_extension
    except ImportError as e:  # Debian's torch without python3-setuptools
        raise ImportError("torch.utils.cpp_extension does not import (%s): install "
                          "python3-setuptools" % e) from e
    return cpp_extension


def include_paths():
    """The directories of torch_npurt/extension.h and npurt/npurt.h (add
    torch's own, torch.utils.cpp_extension.include_paths(), for torch's)."""
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "include")
    for d, header in ((here, "torch_npurt/extension.h"),
                      (_paths.NPURT_INCLUDE_DIR, "npurt/npurt.h")):
        if not os.path.isfile(os.path.join(d, header)):
            raise RuntimeError("torch_npurt: %s missing in %s (libnpurt's headers come "
                               "with libnpurt-dev when installed from packages)"
                               % (header, d))
    paths = [here, _paths.NPURT_INCLUDE_DIR]
    return paths


def library_paths():
    """The directory of libnpurt.so."""
    return [_paths.NPURT_LIBRARY_DIR]


def _add(kwargs, key, values):
    kwargs[key] = list(kwargs.get(key) or []) + [v for v in values
                                                  if v not in (kwargs.get(key) or [])]


def NpuExtension(name, sources, *args, **kwargs):
    """A setuptools Extension for C++ sources that use NPU tensors: torch's
    CppExtension with torch_npurt's and libnpurt's headers, and libnpurt
    linked (found at run time where it was at build time)."""
    _add(kwargs, "include_dirs", include_paths())
    _add(kwargs, "library_dirs", library_paths())
    _add(kwargs, "runtime_library_dirs", library_paths())
    _add(kwargs, "libraries", ["npurt"])
    return _cpp_extension().CppExtension(name, sources, *args, **kwargs)


def _jit_paths(kwargs):
    """torch's JIT builds' arguments with the headers and libnpurt added."""
    lib = library_paths()
    kwargs["extra_include_paths"] = list(kwargs.get("extra_include_paths") or []) + \
        include_paths()
    kwargs["extra_ldflags"] = list(kwargs.get("extra_ldflags") or []) + \
        ["-L%s" % d for d in lib] + ["-Wl,-rpath,%s" % d for d in lib] + ["-lnpurt"]
    return kwargs


def load(name, sources, **kwargs):
    """torch.utils.cpp_extension.load with torch_npurt's and libnpurt's
    headers and libnpurt added; the other arguments are torch's."""
    return _cpp_extension().load(name, sources, **_jit_paths(kwargs))


def load_inline(name, cpp_sources, **kwargs):
    """torch.utils.cpp_extension.load_inline, as load()."""
    return _cpp_extension().load_inline(name, cpp_sources, **_jit_paths(kwargs))
