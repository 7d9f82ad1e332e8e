# 设备管理示例 (seed: runtime-overview, 1.1): devices.
import torch  # not in the seed's snippet, which uses torch without importing it
import torch_npurt as torch_npu

# 查看可用设备
device_count = torch_npu.npu.device_count()
print(f"可用NPU数量：{device_count}")

# 选择设备
torch_npu.npu.set_device(0)  # 使用第0号NPU

# 创建张量在NPU上
x = torch.randn(100, 100).npu()

# 查看张量所在设备
# (torch 1.13 cannot rename its PrivateUse1 device: this prints
# privateuseone:0 where torch_npu >= 2.1 prints npu:0)
print(f"张量所在设备：{x.device}")
