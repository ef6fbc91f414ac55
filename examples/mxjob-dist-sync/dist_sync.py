"""Sum values, then train a model, over the workers of an MXJob through MXNet's dist_sync kvstore.

One program for every role, told which one it is by DMLC_ROLE (the operator
sets it, and the other DMLC_* variables, in each `mxnet` container):

- the SCHEDULER and the SERVERs run no code of ours: `import mxnet` starts
  ps-lite in their role, serves until every worker has finished, and exits
  the process (0 when all went well). The scheduler's exit decides the job.
- each WORKER joins the kvstore, and for every round pushes an array filled
  with (rank + 1) * round. In dist_sync mode the servers wait for the push of
  every worker, sum them (no optimizer is set: the sum replaces the stored
  value) and only then answer pulls, so every worker pulls
  round * (1 + 2 + ... + num_workers). A worker checks that, prints it, and
  exits 1 if the sum is wrong: a worker left out of the sum (wrong
  DMLC_NUM_WORKER) or counted twice shows here.
- then each WORKER trains a small Gluon network (a linear layer) on
  synthetic data of its own through the same kvstore: a gluon.Trainer on
  it sends each step's gradients to the servers, which sum them over the
  workers and run SGD, so every worker pulls the same weights. Each prints
  its loss after every epoch, and the weights' largest error against the
  ones the data came from; it exits 1 if that error is above --tolerance.

    DMLC_ROLE=worker DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=9091 \
    DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 python dist_sync.py   # plus a scheduler and a server
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pushes and pulls per worker")
    parser.add_argument("--size", type=int, default=4, help="length of the array summed")
    parser.add_argument("--epochs", type=int, default=10, help="passes over each worker's data")
    parser.add_argument("--tolerance", type=float, default=0.05, help="largest weight error")
    return parser.parse_args(argv)


# The weights and bias the synthetic data comes from: what training must find.
TRUE_WEIGHTS = (2.0, -3.4, 1.5, 0.7)
TRUE_BIAS = 4.2
SAMPLES, BATCH = 256, 32
# The kvstore key of the sums; the Trainer's parameters take keys 0 and 1.
SUM_KEY = 100


def train(mx: Any, kv: Any, who: str, epochs: int) -> float:
    """Train a linear layer through the kvstore; the weights' largest error."""
    from mxnet import autograd, gluon

    mx.random.seed(100 + kv.rank)  # each worker's data is its own
    truth = mx.nd.array([TRUE_WEIGHTS])
    features = mx.nd.random.normal(shape=(SAMPLES, len(TRUE_WEIGHTS)))
    labels = mx.nd.dot(features, truth.T) + TRUE_BIAS
    labels += mx.nd.random.normal(scale=0.01, shape=labels.shape)
    net = gluon.nn.Dense(1, in_units=len(TRUE_WEIGHTS))
    net.initialize(mx.init.Normal(0.1))
    # The servers run the optimizer on the gradients every worker pushed.
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    loss = gluon.loss.L2Loss()
    for epoch in range(1, epochs + 1):
        for start in range(0, SAMPLES, BATCH):
            batch = slice(start, start + BATCH)
            with autograd.record():
                out = loss(net(features[batch]), labels[batch])
            out.backward()
            trainer.step(BATCH)
        mean = loss(net(features), labels).mean().asscalar()
        say(who, f"epoch {epoch} loss {mean:.6f}")
    found = mx.nd.concat(net.weight.data().reshape((-1,)), net.bias.data(), dim=0)
    wanted = mx.nd.array([*TRUE_WEIGHTS, TRUE_BIAS])
    return float(mx.nd.abs(found - wanted).max().asscalar())


def say(who: str, message: str) -> None:
    print(f"{who}: {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    role = os.environ.get("DMLC_ROLE", "")
    if role not in ("scheduler", "server", "worker"):
        sys.exit(f"dist_sync.py: DMLC_ROLE is {role!r}, not scheduler, server or worker")
    # PID 1 of its container ignores signals it has no handler for. This
    # one runs only between Python steps, not while ps-lite blocks in C++
    # (a scheduler or server serving, a worker waiting for its peers): the
    # pods' short terminationGracePeriodSeconds bounds those stops.
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
    root = f"{os.environ.get('DMLC_PS_ROOT_URI')}:{os.environ.get('DMLC_PS_ROOT_PORT')}"
    say(role, f"joining the scheduler at {root}")
    began = time.monotonic()
    # A scheduler or server serves inside this import and exits the process
    # when the workers are done (mxnet.kvstore_server).
    import mxnet as mx

    kv = mx.kv.create("dist_sync")
    who = f"worker {kv.rank}"
    say(who, f"joined: {kv.num_workers} workers in {time.monotonic() - began:.1f}s")
    shape = (args.size,)
    kv.init(SUM_KEY, mx.nd.zeros(shape))
    ok = True
    for round_ in range(1, args.rounds + 1):
        kv.push(SUM_KEY, mx.nd.ones(shape) * (kv.rank + 1) * round_)
        pulled = mx.nd.zeros(shape)
        kv.pull(SUM_KEY, out=pulled)
        values = sorted({float(v) for v in pulled.asnumpy()})
        expected = float(round_ * kv.num_workers * (kv.num_workers + 1) // 2)
        verdict = "ok" if values == [expected] else "WRONG"
        ok = ok and verdict == "ok"
        say(who, f"round {round_} pushed {(kv.rank + 1) * round_} pulled sum {values} "
            f"expected {expected} {verdict}")  # fmt: skip
    if not ok:
        say(who, "FAILED: a pulled sum was wrong")
        return 1
    error = train(mx, kv, who, args.epochs)
    trained = error <= args.tolerance
    say(who, f"trained: largest weight error {error:.4f}, tolerance {args.tolerance}")
    say(who, "done" if trained else "FAILED: the weights were not learned")
    return 0 if trained else 1


if __name__ == "__main__":
    sys.exit(main())
