"""Train a small linear model on synthetic data with PyTorch's DDP.

Launched by torchrun in every pod of a PyTorchJob: torchrun reads the
operator's PET_* variables (nodes, node rank, master address and port,
processes per node) and gives each process it starts its RANK, LOCAL_RANK
and WORLD_SIZE, so the program calls init_process_group() with no argument,
as programs written today do (PyTorch 2.x picks gloo on a CPU).

Every process draws its own batches of y = x . w_true + b_true + noise
(w_true and b_true from --seed, so all agree on them); DDP averages the
gradients in every step, so every process holds the same model. Each
--log-every steps every process prints the loss averaged over the world;
rank 0 checks at the end that the model learned w_true and exits 0, or 1.

--fail-at-step=N: rank 0 exits 1 at step N, a program's own failure.
--kill-at-step=N --kill-on=HOST: the first process on HOST (a pod's name
is its hostname) kills itself with SIGKILL at step N, as the OOM killer
would, unless its group was restarted already: in an elastic job torchrun
then restarts the group (one of maxRestarts) and the job goes on.
--pace=S: rest S seconds after each step, so that a job lives long enough
for its elastic WORKER count to move while it trains.

    torchrun --nproc-per-node=2 train.py
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

FEATURES = 8


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--fail-at-step", type=int, default=0)
    parser.add_argument("--kill-at-step", type=int, default=0)
    parser.add_argument("--kill-on", default="")
    parser.add_argument("--pace", type=float, default=0.0)
    return parser.parse_args()


def say(who: str, what: str) -> None:
    """One line in one write: the processes of a pod share its log."""
    sys.stdout.write(f"{who}: {what}\n")
    sys.stdout.flush()


def world_max(value: int) -> int:
    """The largest of every process's ``value``."""
    tensor = torch.tensor([value])
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def main() -> int:
    args = parse_args()
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    me = f"{socket.gethostname()} rank {rank}/{world}"
    # init_process_group() picked gloo for CPU tensors ("cpu:gloo").
    say(me, f"backend {dist.get_backend_config()}, world size {world}")
    # Restarts of this torchrun's group; a replaced pod's agent starts at 0.
    restarts = world_max(int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    killer = socket.gethostname() == args.kill_on and os.environ.get("LOCAL_RANK") == "0"
    torch.manual_seed(args.seed)
    w_true, b_true = torch.randn(FEATURES, 1), torch.randn(1)
    torch.manual_seed(args.seed + 1 + rank)  # each process's own data
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch, FEATURES)
        y = x @ w_true + b_true + 0.01 * torch.randn(args.batch, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over the world here
        optimizer.step()
        if step == 1 or step % args.log_every == 0:
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            say(me, f"step {step} loss {mean.item() / world:.6f}")
        if step == args.fail_at_step and rank == 0:
            say(me, f"step {step}: failing as asked")
            return 1
        if step == args.kill_at_step and killer and restarts == 0:
            say(me, f"step {step}: killing myself with SIGKILL")
            os.kill(os.getpid(), signal.SIGKILL)
        if args.pace:
            time.sleep(args.pace)
    error = (model.module.weight.detach().t() - w_true).abs().max().item()
    dist.destroy_process_group()
    ok = error <= 0.05
    say(me, f"done after {restarts} restarts: largest error {error:.4f} {'<=' if ok else '>'} 0.05")
    return 0 if ok or rank != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
