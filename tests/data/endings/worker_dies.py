"""A TFJob whose WORKER fails for good while its MASTER succeeds (issue 30).

Both start a TensorFlow server from TF_CONFIG. The MASTER waits until the
WORKER's server answers and runs a step on the WORKER's device through the
cluster. Then it tells the WORKER so, on a connection of its own to the
WORKER's next port, and holds that connection open: the WORKER raises
(exit 1), the connection closes with its process, and the MASTER exits 0.
The deciding replica succeeds after another replica failed, as the seeds'
rule would call a success.

The WORKER fails only once the MASTER has run its step, and the MASTER
leaves only once that WORKER process is gone, however slowly either starts
on a loaded node: a WORKER that failed on a timer once died before a MASTER
slow to import TensorFlow could use it, and a MASTER that judged it gone by
failed connections once left while it still served (both seen in CI).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

import tensorflow as tf


def say(who: str, message: str) -> None:
    print(f"{who}: {message}", flush=True)


def answers(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:  # refused, unresolvable (no address yet) or silent
        return False


def wait_for_answer(address: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if answers(address):
            return True
        time.sleep(1)
    return False


def connect(address: tuple[str, int], seconds: float) -> socket.socket:
    """A connection to the address, tried once a second for ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return socket.create_connection(address, timeout=seconds)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def signal_address(address: str) -> tuple[str, int]:
    """Where a task hears that the MASTER is done with it: its TensorFlow port's next."""
    host, port = address.rsplit(":", 1)
    return host, int(port) + 1


def worker(who: str, address: str, seconds: float) -> None:
    with socket.create_server(("", signal_address(address)[1])) as server:
        server.settimeout(seconds)
        try:
            link, _ = server.accept()
        except TimeoutError:
            raise RuntimeError(f"{who}: no master came; the input shard is corrupt") from None
        link.settimeout(seconds)
        say(who, f"the master says {link.recv(64).decode().strip()!r}")
        # Raised with the connection open: it closes as the process ends.
        raise RuntimeError(f"{who}: the input shard is corrupt")


def master(who: str, server: tf.distribute.Server, worker: str, seconds: float) -> int:
    if not wait_for_answer(worker, seconds):
        say(who, f"FAILED: the worker at {worker} never answered")
        return 2
    tf.compat.v1.disable_eager_execution()
    with tf.device("/job:worker/task:0"):
        total = tf.reduce_sum(tf.range(10))
    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=20_000)
    with tf.compat.v1.Session(server.target, config=config) as session:
        say(who, f"worker-0 computed {session.run(total)}")
    with connect(signal_address(worker), seconds) as link:
        link.sendall(b"done\n")
        try:
            left = link.recv(64)  # b"": the worker's process closed it as it ended
        except ConnectionResetError:
            left = b""
    if left:
        say(who, f"FAILED: the worker answered {left!r} instead of ending")
        return 2
    say(who, "worker-0 is gone; done")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait-seconds", type=float, default=240)
    args = parser.parse_args()
    config = json.loads(os.environ["TF_CONFIG"])
    kind, index = config["task"]["type"], config["task"]["index"]
    cluster = tf.train.ClusterSpec(config["cluster"])
    server = tf.distribute.Server(cluster, job_name=kind, task_index=index, start=True)
    who = f"{kind}-{index}"
    address = cluster.task_address(kind, index)
    say(who, f"serving {address}")
    if kind == "worker":
        worker(who, address, args.wait_seconds)
    return master(who, server, cluster.task_address("worker", 0), args.wait_seconds)


if __name__ == "__main__":
    sys.exit(main())
