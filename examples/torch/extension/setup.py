"""Builds the example C++ extension (scaled_residual.cpp) for the NPU:

    python3 setup.py build_ext --inplace     # then: import npurt_example_ext

with torch_npurt importable (PYTHONPATH=build/python in the tree, or the
python3-torch-npurt package with libnpurt-dev).
"""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from torch_npurt.utils.cpp_extension import NpuExtension

setup(name="npurt_example_ext",
      ext_modules=[NpuExtension("npurt_example_ext", ["scaled_residual.cpp"],
                                extra_compile_args=["-O2"])],
      cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)})
