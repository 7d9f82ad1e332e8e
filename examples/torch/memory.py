# 内存管理示例 (seed: runtime-overview, 1.2): memory.
import torch  # not in the seed's snippet, which uses torch without importing it
import torch_npurt as torch_npu

# 分配NPU内存
x = torch.randn(1000, 1000, dtype=torch.float32).npu()
print(f"张量大小：{x.element_size() * x.nelement() / 1024 / 1024:.2f} MB")

# 查看NPU内存使用情况
memory_allocated = torch_npu.npu.memory_allocated()
memory_reserved = torch_npu.npu.memory_reserved()
print(f"已分配内存：{memory_allocated / 1024 / 1024:.2f} MB")
print(f"已预留内存：{memory_reserved / 1024 / 1024:.2f} MB")

# 清空缓存
torch_npu.npu.empty_cache()
