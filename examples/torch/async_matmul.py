# 异步执行示例 (seed: runtime-overview, 2.2): async matmuls.
import torch  # not in the seed's snippet, which uses torch without importing it
import torch_npurt as torch_npu
import time

# 异步执行
stream = torch_npu.npu.Stream()
with torch_npu.npu.stream(stream):
    # The seed uses 10000 x 10000 (100 GEMMs of 2e12 flops each): the
    # emulated NPU computes on the host CPU, where that would run for hours.
    # 128 x 128 keeps the shape of the example (100 queued GEMMs, a few
    # seconds under emulation); scaled so that the repeated products shrink
    # towards zero rather than overflow.
    x = torch.randn(128, 128).npu() / 16
    for _ in range(100):
        x = torch.matmul(x, x)  # 提交100个矩阵乘法任务

# 提交后立即返回，CPU可以继续做其他事
start = time.time()
print("任务已提交")

# 做一些CPU计算
for _ in range(1000000):
    pass

# 等待NPU任务完成
stream.synchronize()
end = time.time()
print(f"总耗时：{(end - start) * 1000:.2f} ms")
