# A script written for CUDA, run on the NPU by one added import
# (torch_npu's transfer_to_npu): nothing below the imports names the NPU.
import torch
import torch_npurt  # noqa: F401
from torch_npurt.contrib import transfer_to_npu  # noqa: F401

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 1)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 16, device=device)
y = x.sum(dim=1, keepdim=True).to(device)

start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)
losses = []
start.record()
for step in range(20):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
end.record()
torch.cuda.synchronize()

print("device:", next(model.parameters()).device, "is_cuda:", x.is_cuda)
print("loss: %.3f -> %.3f, decreasing: %s" %
      (losses[0].item(), losses[-1].item(), bool(losses[-1] < losses[0])))
print("20 steps in %.1f ms, %.1f MB allocated" %
      (start.elapsed_time(end), torch.cuda.memory_allocated() / 2 ** 20))
