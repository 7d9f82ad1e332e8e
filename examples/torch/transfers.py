# 数据传输示例 (seed: runtime-overview, 3.1): host-device transfers.
import torch
import torch_npurt as torch_npu

# Host到Device传输
x_cpu = torch.randn(1000, 1000)
x_npu = x_cpu.npu()  # 同步传输

# Device到Host传输
x_cpu_back = x_npu.cpu()  # 同步传输

# 异步传输
stream = torch_npu.npu.Stream()
with torch_npu.npu.stream(stream):
    # The seed's call; torch spells it x_cpu.npu(non_blocking=True).
    x_npu_async = torch_npu.npu.from_cpu_async(x_cpu)

stream.synchronize()  # 等待传输完成
print(f"传输完成：{torch.equal(x_npu_async.cpu(), x_cpu) and torch.equal(x_cpu_back, x_cpu)}")
