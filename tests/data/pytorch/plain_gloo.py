"""A program written for Kubeflow's PyTorchJob, started with `python`, not
torchrun: it reads MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK from the
environment the operator gives each pod, as Kubeflow's own smoke test does.

Each rank sends its rank to the next around the ring and receives the
previous one's, then all of them sum their ranks with all_reduce.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]), (rank, os.environ["RANK"])
sent = dist.isend(torch.tensor([float(rank)]), (rank + 1) % world)
got = torch.zeros(1)
dist.recv(got, (rank - 1) % world)
sent.wait()
total = torch.tensor([float(rank)])
dist.all_reduce(total)
print(
    f"rank {rank}/{world}: received {int(got.item())} from the previous rank,"
    f" all_reduce of the ranks {int(total.item())}",
    flush=True,
)
dist.destroy_process_group()
