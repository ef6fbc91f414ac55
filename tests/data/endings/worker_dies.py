"""A TFJob whose WORKER fails for good while its MASTER succeeds (issue 30).

Both start a TensorFlow server from TF_CONFIG. The WORKER serves for
--serve-seconds, then raises (exit 1). The MASTER waits until the WORKER's
server answers, runs a step on the WORKER's device through the cluster,
then waits until the WORKER is gone and exits 0: the deciding replica
succeeds after another replica failed, as the seeds' rule would call a
success.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

import tensorflow as tf

GONE_CHECKS = 5


def say(who: str, message: str) -> None:
    print(f"{who}: {message}", flush=True)


def answers(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:  # refused, unresolvable (its Service lost it) or silent
        return False


def wait_for(what: bool, address: str, seconds: float, times: int = 1) -> bool:
    """Whether the address answers (or not) `times` checks in a row, a second
    apart, within `seconds`."""
    deadline, row = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        row = row + 1 if answers(address) == what else 0
        if row >= times:
            return True
        time.sleep(1)
    return False


def master(who: str, server: tf.distribute.Server, worker: str, seconds: float) -> int:
    if not wait_for(True, worker, seconds):
        say(who, f"FAILED: the worker at {worker} never answered")
        return 2
    tf.compat.v1.disable_eager_execution()
    with tf.device("/job:worker/task:0"):
        total = tf.reduce_sum(tf.range(10))
    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=20_000)
    with tf.compat.v1.Session(server.target, config=config) as session:
        say(who, f"worker-0 computed {session.run(total)}")
    # Gone is silent for GONE_CHECKS checks in a row: on a loaded node one
    # lookup or connect can fail while the worker still serves, and a master
    # that left then would succeed before the worker failed (seen in CI).
    if not wait_for(False, worker, seconds, times=GONE_CHECKS):
        say(who, "FAILED: the worker never went away")
        return 2
    say(who, "worker-0 is gone; done")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve-seconds", type=float, default=60)
    parser.add_argument("--wait-seconds", type=float, default=240)
    args = parser.parse_args()
    config = json.loads(os.environ["TF_CONFIG"])
    kind, index = config["task"]["type"], config["task"]["index"]
    cluster = tf.train.ClusterSpec(config["cluster"])
    server = tf.distribute.Server(cluster, job_name=kind, task_index=index, start=True)
    who = f"{kind}-{index}"
    say(who, f"serving {cluster.task_address(kind, index)}")
    if kind == "worker":
        time.sleep(args.serve_seconds)
        raise RuntimeError(f"{who}: the input shard is corrupt")
    return master(who, server, cluster.task_address("worker", 0), args.wait_seconds)


if __name__ == "__main__":
    sys.exit(main())
