# Pinned内存示例 (seed: runtime-overview, 3.2): pinned memory.
import torch
import torch_npurt as torch_npu

# 分配Pinned内存
x_pinned = torch.randn(1000, 1000).pin_memory()

# 从Pinned内存传输更快
x_npu = x_pinned.npu(non_blocking=True)  # 异步传输
torch_npu.npu.synchronize()  # (not in the seed: wait before reading the result)
print(f"Pinned：{x_pinned.is_pinned()}，传输正确：{torch.equal(x_npu.cpu(), x_pinned)}")
