# Stream和Event示例 (seed: runtime-overview, 2.1): streams and events.
import torch  # not in the seed's snippet, which uses torch without importing it
import torch_npurt as torch_npu

# 创建Stream
stream = torch_npu.npu.Stream()

# 在指定Stream上执行任务
with torch_npu.npu.stream(stream):
    x = torch.randn(1000, 1000).npu()
    y = x * 2  # 这个计算在stream上执行

# 创建Event
event = torch_npu.npu.Event()

# 在stream上记录event
with torch_npu.npu.stream(stream):
    event.record()

# 等待event完成
event.synchronize()

# 检查event是否完成
if event.query():
    print("任务已完成")
