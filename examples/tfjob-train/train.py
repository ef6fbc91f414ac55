"""Train a small linear model on synthetic data in a distributed TFJob.

One program for every role that runs it, told which one it is by TF_CONFIG
(the operator sets it in each `tensorflow` container):

- the PS replicas hold the model's variables; they run no code of ours but
  the chart's standard gRPC server (a PS without a `tensorflow` container);
- the MASTER and the WORKERs each start a TensorFlow server for their own
  task, build the same graph with the variables placed on the PSs
  (between-graph replication) and train asynchronously: every step reads the
  current weights from the PSs and sends its update back;
- the MASTER is the chief: it initialises the variables, stops when the
  shared step count reaches --steps, checks that the model learned the
  function that made the data, and exits 0 (the job succeeds) or 1 (it
  fails). The WORKERs wait for the chief's variables and train until the
  same step count (or until the job ends and they are stopped).
- a MASTER that finds the variables already initialised is a restarted one
  (the operator recreates a MASTER killed by a signal): the PS kept the
  model and the shared step, so it resumes where the job was.
  --kill-at-step=N shows it: a MASTER that initialised the variables itself
  kills itself with SIGKILL (exit code 137, as the OOM killer would) at
  shared step N; its replacement resumes and finishes the job. The kernel
  ignores a SIGKILL that PID 1 of a container sends itself, so the pod needs
  `shareProcessNamespace: true` (its pause process is then PID 1).
- a step that fails because a peer cannot be reached is tried again, for up
  to --retry-seconds, as tf.compat.v1.train.MonitoredTrainingSession does:
  a replaced replica has a new address behind the same name, and a peer's
  gRPC channel looks the name up again only every 30 seconds or so (the PS
  pulls each step's gradients from the trainer, so it must find the new
  MASTER before the MASTER can take a step).

The data is made up in each replica: y = x . w_true + b_true + noise, with
w_true and b_true drawn from --seed (so every replica agrees on them) and
each replica drawing its own x. Nothing is read from or written to disk.

    TF_CONFIG='{"cluster": {"master": ["localhost:2222"], "ps": ["localhost:2223"]},
                "task": {"type": "master", "index": 0}}' python train.py

Runs on TensorFlow 2.x through its tf.compat.v1 graph API, the one API with
which replicas share variables held by a PS's plain gRPC server.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

# The MASTER's task type: the seeds' `master`, or `chief` when the TFJob
# sets spec.tfConfig.masterTaskType: chief (as TF2's strategies need).
CHIEF_TYPES = ("master", "chief")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="shared steps to train")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--features", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7, help="of the true model")
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--log-every", type=int, default=250, help="steps between log lines")
    parser.add_argument(
        "--tolerance", type=float, default=0.05, help="largest error of a learned weight"
    )
    parser.add_argument(
        "--retry-seconds",
        type=float,
        default=120,
        help="how long a step may keep failing because a peer is unreachable",
    )
    parser.add_argument(
        "--kill-at-step",
        type=int,
        default=0,
        help="MASTER only: SIGKILL itself at this shared step, unless restarted (0: never)",
    )
    return parser.parse_args(argv)


def read_tf_config() -> tuple[dict[str, list[str]], str, int]:
    """The job's cluster and this replica's role and index, from TF_CONFIG."""
    try:
        config = json.loads(os.environ["TF_CONFIG"])
        cluster, task = config["cluster"], config["task"]
        return cluster, task["type"], int(task.get("index", 0))
    except (KeyError, ValueError) as err:
        sys.exit(f"train.py: TF_CONFIG is missing or malformed ({err!r})")


def say(role: str, index: int, message: str) -> None:
    print(f"{role}-{index}: {message}", flush=True)


def rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 3) for v in values.ravel()]


def kill_myself(role: str, index: int, step: int) -> None:
    if os.getpid() == 1:
        sys.exit(
            "train.py --kill-at-step: PID 1 of a container cannot SIGKILL itself "
            "(the kernel ignores it); give the pod shareProcessNamespace: true"
        )
    say(role, index, f"step {step}: killing myself with SIGKILL (--kill-at-step)")
    os.kill(os.getpid(), signal.SIGKILL)


def run_step(
    session: tf.compat.v1.Session,
    fetches: list[Any],
    feed: dict[Any, Any],
    retry_seconds: float,
    say_retry: Callable[[str], None],
) -> Any:
    """session.run, tried again while a peer is unreachable (a peer that was
    just replaced, or one that has not found us yet)."""
    deadline = time.monotonic() + retry_seconds
    while True:
        try:
            return session.run(fetches, feed)
        except (tf.errors.UnavailableError, tf.errors.AbortedError) as err:
            if time.monotonic() > deadline:
                raise
            say_retry(f"step failed ({type(err).__name__}: a peer is unreachable); retrying")
            time.sleep(2)


@dataclass
class Replica:
    """Who runs this program: its role and index in TF_CONFIG's cluster."""

    role: str
    index: int

    @property
    def chief(self) -> bool:
        return self.role in CHIEF_TYPES

    def say(self, message: str) -> None:
        say(self.role, self.index, message)


@dataclass
class Model:
    """The graph every trainer builds alike, its variables on the PSs."""

    x: Any
    y: Any
    w: Any
    b: Any
    step: Any
    loss: Any
    train: Any
    initialize: Any
    uninitialized: Any


def build_model(args: argparse.Namespace, spec: Any, me: Replica) -> Model:
    # Variables go to the PSs (round robin), the computation stays here.
    placement = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:{me.role}/task:{me.index}", cluster=spec
    )
    with tf.compat.v1.device(placement):
        x = tf.compat.v1.placeholder(tf.float32, [None, args.features], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [None, 1], name="y")
        w = tf.compat.v1.get_variable("w", [args.features, 1], initializer=tf.zeros_initializer())
        b = tf.compat.v1.get_variable("b", [], initializer=tf.zeros_initializer())
        step = tf.compat.v1.train.get_or_create_global_step()
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate)
        train = optimizer.minimize(loss, global_step=step)
        initialize = tf.compat.v1.global_variables_initializer()
        uninitialized = tf.compat.v1.report_uninitialized_variables()
    return Model(x, y, w, b, step, loss, train, initialize, uninitialized)


def take_variables(session: Any, model: Model, me: Replica) -> bool:
    """Initialise the variables (a fresh chief) or wait for them; whether
    this replica initialised them."""
    # Only a chief that initialised the variables may kill itself: its
    # replacement finds them on the PS and must finish the job.
    fresh = me.chief and session.run(model.uninitialized).size > 0
    if fresh:
        session.run(model.initialize)
        me.say("initialised the variables on the PS")
    elif me.chief:
        me.say(f"found the variables on the PS at step {session.run(model.step)}: resuming")
    else:
        while session.run(model.uninitialized).size:
            time.sleep(0.5)  # the chief has not initialised them yet
        me.say("found the variables on the PS")
    return fresh


def train(args: argparse.Namespace, session: Any, model: Model, me: Replica, truth: Any) -> None:
    """Take steps until the shared step count reaches --steps."""
    w_true, b_true = truth
    fresh = take_variables(session, model, me)
    # A stream of its own for each replica: together they see more data.
    data = np.random.default_rng([args.seed, len(me.role), me.index])
    began, done, mine = time.monotonic(), int(session.run(model.step)), 0
    while done < args.steps:
        batch = data.normal(size=(args.batch_size, args.features)).astype(np.float32)
        labels = batch @ w_true + b_true
        labels += data.normal(scale=args.noise, size=labels.shape).astype(np.float32)
        _, current, done = run_step(
            session,
            [model.train, model.loss, model.step],
            {model.x: batch, model.y: labels},
            args.retry_seconds,
            me.say,
        )
        mine += 1
        # The first step too: the loss the model started from.
        if mine == 1 or mine % args.log_every == 0 or done >= args.steps:
            me.say(f"step {done} loss {current:.6f}")
        if fresh and 0 < args.kill_at_step <= done:
            kill_myself(me.role, me.index, done)
    me.say(f"trained {mine} of {done} shared steps in {time.monotonic() - began:.1f}s")


def judge(args: argparse.Namespace, learned: Any, truth: Any, me: Replica) -> int:
    """The chief's verdict: 0 if the model learned the true function."""
    (w_learned, b_learned), (w_true, b_true) = learned, truth
    error = float(max(np.abs(w_learned - w_true).max(), abs(b_learned - b_true)))
    me.say(f"learned w {rounded(w_learned)} b {b_learned:.3f}")
    me.say(f"true    w {rounded(w_true)} b {b_true:.3f}")
    if error > args.tolerance:
        me.say(f"FAILED: largest error {error:.4f} > {args.tolerance}")
        return 1
    me.say(f"done: largest error {error:.4f} <= {args.tolerance}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cluster, role, index = read_tf_config()
    if role not in (*CHIEF_TYPES, "worker"):
        sys.exit(f"train.py runs in the master and workers, not in a {role}")
    if "ps" not in cluster:
        sys.exit("train.py needs PS replicas to hold the variables")
    me = Replica(role, index)
    # PID 1 of its container ignores signals it has no handler for: stop at
    # once when the job is cleaned up, not when the grace period runs out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    tf.compat.v1.disable_eager_execution()
    spec = tf.train.ClusterSpec(cluster)
    server = tf.distribute.Server(spec, job_name=role, task_index=index, start=True)
    me.say(f"serving {cluster[role][index]}; cluster {json.dumps(cluster)}")

    rng = np.random.default_rng(args.seed)
    truth = (rng.normal(size=(args.features, 1)).astype(np.float32), np.float32(rng.normal()))
    model = build_model(args, spec, me)
    # Talk to the PSs and to ourselves only: a replica must not wait for, or
    # fail with, another replica (the master ends before the workers do).
    session_config = tf.compat.v1.ConfigProto(
        device_filters=["/job:ps", f"/job:{role}/task:{index}"]
    )
    with tf.compat.v1.Session(server.target, config=session_config) as session:
        train(args, session, model, me, truth)
        if not me.chief:
            return 0
        learned = session.run([model.w, model.b])
    return judge(args, learned, truth, me)


if __name__ == "__main__":
    sys.exit(main())
