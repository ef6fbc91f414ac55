"""Elastic data-parallel training with PaddlePaddle: a linear model learns
y = x . W + B from synthetic data, on as many trainers as the job has.

A program written for Paddle's own launcher: the operator starts it under
`python -m paddle.distributed.launch` in each trainer (docs/kinds.md,
PaddleJob), and the launcher starts it again, in every trainer, each time the
group re-forms because a trainer came or went. So each start prints the world
size Paddle gives it, takes the newest checkpoint any trainer of the group
holds, and trains on from there: a trainer taken away costs a re-formation,
not the progress. The group trains to the smallest trainer.passes its
trainers were started with: lower it on a running job and the job ends
sooner once a trainer started since joins the group.
"""

import os
import time

import numpy as np
import paddle
import paddle.distributed as dist

# trainer.passes in the PaddleJob: the epochs to train.
EPOCHS = int(os.environ.get("PADDLE_INIT_NUM_PASSES", "30"))
STEPS = 10  # per epoch
EPOCH_SECONDS = float(os.environ.get("EPOCH_SECONDS", "1"))  # paced, to watch it scale
# Each trainer's own copy: the container's, kept across re-formations.
CHECKPOINT = os.environ.get("CHECKPOINT_DIR", "/tmp/paddlejob-elastic")
W = np.array([[2.0], [-3.0], [0.5], [1.0]], dtype="float32")
B = 0.25
TOLERANCE = 0.05


def load(model):
    """The epoch this trainer's checkpoint reached (0: none), loaded into model."""
    try:
        with open(os.path.join(CHECKPOINT, "epoch")) as f:
            epoch = int(f.read())
        model.set_state_dict(paddle.load(os.path.join(CHECKPOINT, "model.pdparams")))
        return epoch
    except FileNotFoundError:
        return 0


def save(model, epoch):
    os.makedirs(CHECKPOINT, exist_ok=True)
    paddle.save(model.state_dict(), os.path.join(CHECKPOINT, "model.pdparams"))
    with open(os.path.join(CHECKPOINT, "epoch.new"), "w") as f:
        f.write(str(epoch))
    os.replace(os.path.join(CHECKPOINT, "epoch.new"), os.path.join(CHECKPOINT, "epoch"))


def smallest(value):
    """The smallest of the group's values: every trainer stops at one epoch."""
    found = paddle.to_tensor([value], dtype="int64")
    dist.all_reduce(found, op=dist.ReduceOp.MIN)
    return int(found.item())


def newest_everywhere(model, epoch, rank, world):
    """The newest checkpoint among the group's trainers, given to them all:
    a trainer that just joined has none, one that stayed has the latest."""
    if world == 1:  # Paddle makes no group of one: no collective may be called
        return epoch, rank
    newest = paddle.to_tensor([epoch], dtype="int64")
    dist.all_reduce(newest, op=dist.ReduceOp.MAX)
    holder = smallest(rank if epoch == int(newest.item()) else world)
    with paddle.no_grad():
        for parameter in model.parameters():
            dist.broadcast(parameter, src=holder)
    return int(newest.item()), holder


def main():
    paddle.set_device("cpu")
    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    paddle.seed(0)
    model = paddle.nn.Linear(4, 1)
    epoch, holder = newest_everywhere(model, load(model), rank, world)
    epochs = EPOCHS if world == 1 else smallest(EPOCHS)
    said = f"trainer {rank}: world size {world}, from epoch {epoch} (trainer {holder}'s)"
    print(said, flush=True)
    parallel = paddle.DataParallel(model)
    optimizer = paddle.optimizer.SGD(learning_rate=0.01, parameters=model.parameters())
    rng = np.random.default_rng(1000 * rank + epoch)
    while epoch < epochs:
        started = time.monotonic()
        for _ in range(STEPS):
            x = rng.standard_normal((32, 4)).astype("float32")
            y = paddle.to_tensor(x @ W + B)
            loss = paddle.nn.functional.mse_loss(parallel(paddle.to_tensor(x)), y)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean)
        epoch += 1
        save(model, epoch)
        if rank == 0:
            print(f"epoch {epoch}: world size {world}, loss {float(mean) / world:.6f}", flush=True)
        time.sleep(max(0.0, EPOCH_SECONDS - (time.monotonic() - started)))
    error = float(np.abs(model.weight.numpy() - W).max())
    print(f"trainer {rank}: trained: largest weight error {error:.4f}, tolerance {TOLERANCE}")
    if error > TOLERANCE:
        raise SystemExit(f"trainer {rank}: the model did not learn W")


if __name__ == "__main__":
    main()
