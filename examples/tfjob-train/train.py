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

import numpy as np
import tensorflow as tf

CHIEF = "master"


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cluster, role, index = read_tf_config()
    if role not in (CHIEF, "worker"):
        sys.exit(f"train.py runs in the master and workers, not in a {role}")
    if "ps" not in cluster:
        sys.exit("train.py needs PS replicas to hold the variables")
    chief = role == CHIEF
    # PID 1 of its container ignores signals it has no handler for: stop at
    # once when the job is cleaned up, not when the grace period runs out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    tf.compat.v1.disable_eager_execution()
    cluster_spec = tf.train.ClusterSpec(cluster)
    server = tf.distribute.Server(cluster_spec, job_name=role, task_index=index, start=True)
    say(role, index, f"serving {cluster[role][index]}; cluster {json.dumps(cluster)}")

    truth = np.random.default_rng(args.seed)
    w_true = truth.normal(size=(args.features, 1)).astype(np.float32)
    b_true = np.float32(truth.normal())
    # A stream of its own for each replica: together they see more data.
    data = np.random.default_rng([args.seed, len(role), index])

    # Variables go to the PSs (round robin), the computation stays here.
    placement = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:{role}/task:{index}", cluster=cluster_spec
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
        if not chief:
            uninitialized = tf.compat.v1.report_uninitialized_variables()

    # Talk to the PSs and to ourselves only: a replica must not wait for, or
    # fail with, another replica (the master ends before the workers do).
    session_config = tf.compat.v1.ConfigProto(
        device_filters=["/job:ps", f"/job:{role}/task:{index}"]
    )
    with tf.compat.v1.Session(server.target, config=session_config) as session:
        if chief:
            session.run(initialize)
            say(role, index, "initialised the variables on the PS")
        else:
            while session.run(uninitialized).size:
                time.sleep(0.5)  # the chief has not initialised them yet
            say(role, index, "found the variables on the PS")

        began, done, mine = time.monotonic(), 0, 0
        while done < args.steps:
            batch = data.normal(size=(args.batch_size, args.features)).astype(np.float32)
            labels = batch @ w_true + b_true
            labels += data.normal(scale=args.noise, size=labels.shape).astype(np.float32)
            _, current, done = session.run([train, loss, step], {x: batch, y: labels})
            mine += 1
            if mine % args.log_every == 0 or done >= args.steps:
                say(role, index, f"step {done} loss {current:.6f}")
        took = time.monotonic() - began
        say(role, index, f"trained {mine} of {done} shared steps in {took:.1f}s")
        if not chief:
            return 0
        w_learned, b_learned = session.run([w, b])

    error = float(max(np.abs(w_learned - w_true).max(), abs(b_learned - b_true)))
    say(role, index, f"learned w {rounded(w_learned)} b {b_learned:.3f}")
    say(role, index, f"true    w {rounded(w_true)} b {b_true:.3f}")
    if error > args.tolerance:
        say(role, index, f"FAILED: largest error {error:.4f} > {args.tolerance}")
        return 1
    say(role, index, f"done: largest error {error:.4f} <= {args.tolerance}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
