# 错误处理示例 (seed: runtime-overview, 4.1): out of memory.
import torch  # not in the seed's snippet, which uses torch without importing it
import torch_npurt as torch_npu

try:
    # The seed writes torch.randn(100000, 100000).npu(): that builds the
    # 40 GB tensor in host memory first, so the host runs out before the
    # NPU is asked. Allocating it on the NPU directly reaches the NPU's
    # out-of-memory error the example is about:
    x = torch.randn(100000, 100000, device="npu")  # 可能内存不足
except RuntimeError as e:
    if "out of memory" in str(e):
        print("NPU内存不足")
        torch_npu.npu.empty_cache()  # 尝试清理缓存
        # 可能需要减小批量大小
    else:
        raise
