"""MXNet workers that crash after joining the dist_sync kvstore, as MXNet's
own distributed kvstore test did on the real node (issue 30).

One program for every role, told which one by DMLC_ROLE: the SCHEDULER and
the SERVER only `import mxnet`, which serves until every worker is gone and
exits the process. Each WORKER joins the kvstore, pushes and pulls one round
(so the kvstore surely works), then raises. Python's exit shuts the kvstore
down cleanly, so the scheduler, seeing every worker leave, exits 0: the
job's deciding replica succeeds while both workers failed (exit 1).
"""

from __future__ import annotations

import os
import signal
import sys

role = os.environ.get("DMLC_ROLE", "")
# PID 1 of its container ignores signals it has no handler for.
signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
print(f"{role}: joining the scheduler at {os.environ.get('DMLC_PS_ROOT_URI')}", flush=True)
# A scheduler or server serves inside this import and exits when the workers are gone.
import mxnet as mx  # noqa: E402

if role != "worker":
    sys.exit(f"{role}: mxnet returned from its import, which a {role} never does")
kv = mx.kv.create("dist_sync")
kv.init(0, mx.nd.zeros((2,)))
kv.push(0, mx.nd.ones((2,)))
pulled = mx.nd.zeros((2,))
kv.pull(0, out=pulled)
print(f"worker {kv.rank}: joined {kv.num_workers} workers, pulled {pulled.asnumpy().tolist()}")
raise RuntimeError(f"worker {kv.rank}: the input pipeline broke after joining the kvstore")
