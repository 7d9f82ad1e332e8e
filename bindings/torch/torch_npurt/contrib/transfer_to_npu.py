"""Run code written for CUDA on the NPU: import this module once, at the top
of a script, after ``import torch``::

    import torch
    import torch_npurt
    from torch_npurt.contrib import transfer_to_npu  # noqa: F401

    model = Net().cuda()                      # on the NPU
    x = torch.randn(8, 3, device="cuda:0")    # on npu:0
    torch.cuda.synchronize()                  # torch_npurt.npu.synchronize

It is torch_npu's ``torch_npu.contrib.transfer_to_npu``: ``torch.cuda`` names
the NPU's calls, CUDA device spellings name NPUs, ``.cuda()`` is ``.npu()``.
What it translates, and what it cannot, is listed in
``torch_npurt._transfer``; it stays applied for the life of the process.
"""

import warnings

from .. import _transfer

if not _transfer.applied():
    _transfer.apply()
    warnings.warn("torch_npurt.contrib.transfer_to_npu: torch.cuda now means the NPU "
                  "(torch.cuda.* and .cuda() run on it, and 'cuda' devices name NPUs)",
                  ImportWarning, stacklevel=2)
