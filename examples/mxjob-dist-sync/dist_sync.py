"""Sum values over the workers of an MXJob through MXNet's dist_sync kvstore.

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

    DMLC_ROLE=worker DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=9091 \
    DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 python dist_sync.py   # plus a scheduler and a server
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pushes and pulls per worker")
    parser.add_argument("--size", type=int, default=4, help="length of the array summed")
    return parser.parse_args(argv)


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
    kv.init(0, mx.nd.zeros(shape))
    ok = True
    for round_ in range(1, args.rounds + 1):
        kv.push(0, mx.nd.ones(shape) * (kv.rank + 1) * round_)
        pulled = mx.nd.zeros(shape)
        kv.pull(0, out=pulled)
        values = sorted({float(v) for v in pulled.asnumpy()})
        expected = float(round_ * kv.num_workers * (kv.num_workers + 1) // 2)
        verdict = "ok" if values == [expected] else "WRONG"
        ok = ok and verdict == "ok"
        say(who, f"round {round_} pushed {(kv.rank + 1) * round_} pulled sum {values} "
            f"expected {expected} {verdict}")  # fmt: skip
    say(who, "done" if ok else "FAILED: a pulled sum was wrong")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
