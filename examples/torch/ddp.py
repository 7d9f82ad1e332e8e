# DistributedDataParallel on NPUs as a torch_npu script writes it (only the
# import differs): one process per NPU, the hccl backend, launched by
#   torchrun --nproc_per_node=2 examples/torch/ddp.py
# or, where torchrun does not start (Debian's: see the README), one process
# per rank with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT; USE_LIBUV=0 for Debian 13's torch).
import os

import torch
import torch.distributed as dist
import torch_npurt as torch_npu  # noqa: F401  (import torch_npu)
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("hccl")  # RANK, WORLD_SIZE, MASTER_ADDR/PORT from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank)) % torch.npu.device_count()
    torch.npu.set_device(local_rank)

    torch.manual_seed(0)  # the same model everywhere (DDP also broadcasts rank 0's)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1)).npu()
    ddp = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)

    torch.manual_seed(1 + rank)  # each rank trains on its own shard
    x = torch.randn(64, 16).npu()
    y = x.sum(dim=1, keepdim=True)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # gradients averaged over the ranks
        optimizer.step()
        losses.append(loss.detach())

    # Every rank ends with the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    same = all(torch.equal(other.cpu(), flat.cpu()) for other in everyone)
    if rank == 0:
        print("ranks: %d, loss %.3f -> %.3f, decreasing: %s" %
              (world, losses[0].item(), losses[-1].item(), bool(losses[-1] < losses[0])))
        print("parameters equal on every rank: %s" % same)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
