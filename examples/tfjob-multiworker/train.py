"""Train a small linear model with TensorFlow 2's MultiWorkerMirroredStrategy.

Synchronous data-parallel training in a TFJob whose TF_CONFIG names the
MASTER `chief` (spec.tfConfig.masterTaskType: chief): TensorFlow 2's
strategies accept only the task types chief, worker, evaluator and ps, and
refuse a cluster with a `master`. The strategy reads TF_CONFIG itself and
starts this task's TensorFlow server; every task holds a copy of the
variables, computes gradients on a batch of its own, and all tasks average
them (a collective all-reduce over gRPC) before each update, so they all
report the same loss at the same step.

The chief writes the loss as a TensorBoard scalar to --logdir (a volume it
shares with the job's TensorBoard), checks at the end that the model learned
the function that made the data, and exits 0 (the job succeeds) or 1 (it
fails). The data is made up: y = x . w_true + b_true + noise, with w_true and
b_true drawn from --seed (so every task agrees on them) and each task
drawing its own x.

    TF_CONFIG='{"cluster": {"chief": ["localhost:2222"]},
                "task": {"type": "chief", "index": 0}}' python train.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

import numpy as np
import tensorflow as tf


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="synchronous steps to train")
    parser.add_argument("--batch-size", type=int, default=64, help="per task")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--features", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7, help="of the true model")
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--log-every", type=int, default=25, help="steps between log lines")
    parser.add_argument("--logdir", default="", help="the chief's TensorBoard summaries")
    parser.add_argument(
        "--tolerance", type=float, default=0.05, help="largest error of a learned weight"
    )
    return parser.parse_args(argv)


def this_task() -> tuple[str, int]:
    """This task's type and index, as TF_CONFIG (set by the operator) says."""
    try:
        task = json.loads(os.environ["TF_CONFIG"])["task"]
        return str(task["type"]), int(task.get("index", 0))
    except (KeyError, ValueError) as err:
        sys.exit(f"train.py: TF_CONFIG is missing or malformed ({err!r})")


def say(role: str, index: int, message: str) -> None:
    print(f"{role}-{index}: {message}", flush=True)


def rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 3) for v in values.ravel()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    role, index = this_task()
    # PID 1 of its container ignores signals it has no handler for: stop at
    # once when the job is cleaned up, not when the grace period runs out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    # Reads TF_CONFIG, starts this task's server and waits for the others.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    chief = strategy.cluster_resolver.task_type == "chief"
    say(role, index, f"replicas in sync: {strategy.num_replicas_in_sync}")

    truth = np.random.default_rng(args.seed)
    w_true = truth.normal(size=(args.features, 1)).astype(np.float32)
    b_true = np.float32(truth.normal())
    data = np.random.default_rng([args.seed, len(role), index])

    with strategy.scope():
        w = tf.Variable(tf.zeros([args.features, 1]), name="w")
        b = tf.Variable(0.0, name="b")

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        return loss, tape.gradient(loss, [w, b])

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        loss, grads = strategy.run(replica_step, args=(x, y))
        # All-reduced over every task: each applies the same mean gradient.
        mean = tf.distribute.ReduceOp.MEAN
        loss = strategy.reduce(mean, loss, axis=None)
        grad_w, grad_b = (strategy.reduce(mean, g, axis=None) for g in grads)
        w.assign_sub(args.learning_rate * grad_w)
        b.assign_sub(args.learning_rate * grad_b)
        return loss

    # Only the chief writes summaries: the others would write the same values.
    writer = tf.summary.create_file_writer(args.logdir) if chief and args.logdir else None
    began = time.monotonic()
    for step in range(1, args.steps + 1):
        x = data.normal(size=(args.batch_size, args.features)).astype(np.float32)
        y = x @ w_true + b_true + data.normal(scale=args.noise, size=(args.batch_size, 1))
        loss = float(train_step(tf.constant(x), tf.constant(y.astype(np.float32))))
        if step == 1 or step % args.log_every == 0 or step == args.steps:
            say(role, index, f"step {step} loss {loss:.6f}")
            if writer is not None:
                with writer.as_default():
                    tf.summary.scalar("loss", loss, step=step)
    say(role, index, f"trained {args.steps} steps in {time.monotonic() - began:.1f}s")
    if writer is not None:
        writer.flush()
        say(role, index, f"wrote the loss to {args.logdir}")
    if not chief:
        return 0
    return judge(args.tolerance, (w.numpy(), b.numpy()), (w_true, b_true), f"{role}-{index}")


def judge(tolerance: float, learned: Any, truth: Any, who: str) -> int:
    """The chief's verdict: 0 if the model learned the true function."""
    (w_learned, b_learned), (w_true, b_true) = learned, truth
    error = float(max(np.abs(w_learned - w_true).max(), abs(b_learned - b_true)))
    print(f"{who}: learned w {rounded(w_learned)} b {b_learned:.3f}", flush=True)
    print(f"{who}: true    w {rounded(w_true)} b {b_true:.3f}", flush=True)
    if error > tolerance:
        print(f"{who}: FAILED: largest error {error:.4f} > {tolerance}", flush=True)
        return 1
    print(f"{who}: done: largest error {error:.4f} <= {tolerance}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
