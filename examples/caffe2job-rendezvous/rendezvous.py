"""The redis rendezvous of a Caffe2Job's shards, as Caffe2 does it.

Caffe2's distributed trainers (resnet50_trainer.py) meet through a
RedisStoreHandler prefixed with the job's RUN_ID: every shard writes its
key, then waits until all NUM_SHARDS keys are there, and only then Gloo
connects them. This program does exactly that, with the variables the
operator sets in each `caffe2` container (SHARD_ID, NUM_SHARDS, RUN_ID,
REDIS_HOST, REDIS_PORT, and REDIS_PASSWORD where the operator runs the
server), and prints what it found in redis:

  1. SET {RUN_ID}/shard/{SHARD_ID} = this pod's host name, only if no other
     shard took that id (two shards with one id are an error, exit 1);
  2. wait until {RUN_ID}/shard/0 .. NUM_SHARDS-1 all exist, and print them;
  3. SET {RUN_ID}/done/{SHARD_ID}; shard 0 then waits for every shard's
     done key before it exits, so that the server in its pod (redis in the
     MASTER) outlives every shard's use of it.

Exits 0 once the rendezvous is complete, 1 on a conflict or a timeout.

    SHARD_ID=0 NUM_SHARDS=1 RUN_ID=run1 REDIS_HOST=localhost REDIS_PORT=6379 \
    python rendezvous.py
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time

import redis


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait in all")
    return parser.parse_args(argv)


def say(shard: int, message: str) -> None:
    print(f"shard {shard}: {message}", flush=True)


def connect(host: str, port: int, password: str | None, deadline: float) -> redis.Redis:
    """The server, once it answers: it may start after this shard does, and
    its Service's name and address may take a moment to work (a refused, a
    failed or a timed-out connection alike)."""
    client = redis.Redis(
        host=host, port=port, password=password, socket_timeout=5, socket_connect_timeout=2
    )
    while True:
        try:
            client.ping()
            return client
        except (redis.ConnectionError, redis.TimeoutError) as err:
            if time.monotonic() > deadline:
                raise
            print(f"waiting for redis at {host}:{port}: {err}", flush=True)
            time.sleep(0.5)


def wait_for(client: redis.Redis, keys: list[str], deadline: float) -> list[bytes | None]:
    while True:
        values = client.mget(keys)
        if all(v is not None for v in values) or time.monotonic() > deadline:
            return list(values)
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # PID 1 of its container ignores signals it has no handler for.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    shard, shards = int(os.environ["SHARD_ID"]), int(os.environ["NUM_SHARDS"])
    run, host, port = os.environ["RUN_ID"], os.environ["REDIS_HOST"], int(os.environ["REDIS_PORT"])
    deadline = time.monotonic() + args.timeout
    client = connect(host, port, os.environ.get("REDIS_PASSWORD"), deadline)
    me = socket.gethostname()
    say(shard, f"of {shards}, run {run}, redis {host}:{port}")
    mine = f"{run}/shard/{shard}"
    if not client.set(mine, me, nx=True) and client.get(mine) != me.encode():
        say(shard, f"FAILED: {mine} is taken by {client.get(mine)!r}")
        return 1
    keys = [f"{run}/shard/{i}" for i in range(shards)]
    found = wait_for(client, keys, deadline)
    missing = [k for k, v in zip(keys, found, strict=True) if v is None]
    if missing:
        say(shard, f"FAILED: timed out waiting for {missing}")
        return 1
    registered = sorted(k.decode() for k in client.scan_iter(f"{run}/shard/*"))
    say(shard, f"rendezvous complete: {len(registered)} shards registered: {' '.join(registered)}")
    for key, value in zip(keys, found, strict=True):
        say(shard, f"  {key} = {value.decode() if value else value}")
    client.set(f"{run}/done/{shard}", me)
    if shard == 0:
        done = wait_for(client, [f"{run}/done/{i}" for i in range(shards)], deadline)
        if any(v is None for v in done):
            say(shard, "FAILED: not every shard finished")
            return 1
        say(shard, f"all {shards} shards done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
