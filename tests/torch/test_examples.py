"""examples/torch: each seed example runs in this process (runpy: no second
`import torch`, which takes most of a minute in the VM) and prints what it
should."""
import os
import runpy
import sys

import pytest
import torch

import torch_npurt
from torch_npurt import _transfer, npu

import dist_child

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "examples", "torch")

# script -> texts its output must contain
EXPECT = {
    "devices.py": ["可用NPU数量：%d" % 0, "张量所在设备：%s:0" % torch_npurt.DEVICE_TYPE],
    "memory.py": ["张量大小：3.81 MB", "已分配内存：", "已预留内存："],
    "streams_events.py": ["任务已完成"],
    "async_matmul.py": ["任务已提交", "总耗时："],
    "transfers.py": ["传输完成：True"],
    "pinned_memory.py": ["Pinned：True，传输正确：True"],
    "oom.py": ["NPU内存不足"],
    "ddp.py": ["ranks: 1,", "decreasing: True", "parameters equal on every rank: True"],
    "cuda_script.py": ["device: %s:0 is_cuda: True" % torch_npurt.DEVICE_TYPE,
                       "decreasing: True", "MB allocated"],
}


def test_every_example_is_listed():
    assert sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")) == sorted(EXPECT)


@pytest.mark.parametrize("script", sorted(EXPECT))
def test_example(script, capsys, monkeypatch):
    expect = list(EXPECT[script])
    if script == "ddp.py":
        # torchrun's environment for a group of one (test_distributed runs
        # it with two ranks).
        for k, v in dist_child.torchrun_env(0, 1, dist_child.free_port()).items():
            monkeypatch.setenv(k, v)
    if script == "devices.py":
        expect[0] = "可用NPU数量：%d" % npu.device_count()
    path = os.path.join(EXAMPLES, script)
    with open(path, encoding="utf-8") as f:
        src = f.read()
    # Only the import differs from the seed's torch_npu code (the CUDA
    # script's: one import added).
    if script == "cuda_script.py":
        assert "from torch_npurt.contrib import transfer_to_npu" in src
        assert "npu" not in src.split("transfer_to_npu  # noqa: F401", 1)[1]
    else:
        assert "import torch_npurt as torch_npu" in src and "\nimport torch_npu\n" not in src
    argv = sys.argv
    try:
        sys.argv = [path]
        runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = argv
        npu.set_device(0)
        # cuda_script.py's transfer_to_npu: the suite runs in one process.
        _transfer.restore()
        sys.modules.pop("torch_npurt.contrib.transfer_to_npu", None)
    npu.synchronize()
    out = capsys.readouterr().out
    for text in expect:
        assert text in out, (script, text, out)
