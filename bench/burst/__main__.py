"""Benchmark of the dlk8s operator against the ceiling, on the local control plane.

    make bench                       # the full run (results in bench/results/)
    .tools/venv/bin/python -m bench.burst --jobs 20 --big-workers 50 \
        --finished 100 --running 10 --rest-seconds 20 --latency-jobs 20  # a quick one

One local control plane (4 kwok nodes x 1100 pods), the chart installed, the
operator run as a local process with the chart's ServiceAccount and its
environment, a fresh process per measured run (so its CPU seconds and peak
RSS, from /proc, belong to that run). The long scenarios at scale (history,
restart, memory, sustained arrival) are bench.scale's (`make bench-scale`).

1. burst: --jobs TFJobs x 4 replicas (MASTER, 2 WORKER, PS) submitted at once;
   then the same burst with Kubeflow's training-operator, stock and tuned
   (--peers; bench/common/training_operator.py), as kubeflow.org TFJobs of the
   same shape, and with Kubeflow Trainer v2 on JobSet, stock and tuned
   (bench/common/trainer.py), as TrainJobs on a ClusterTrainingRuntime of that shape
2. wide: one TFJob with a MASTER and --big-workers WORKERs
3. rest: --finished finished and --running running jobs, a fresh operator
   started on them, then --rest-seconds of nothing happening (and as long
   without the operator, to tell its requests from everyone else's; rest.py)
4. latency: how long the job's status lags behind its pods (latency.py)
profile: scenario 1's operator run again under py-spy.

For 1 and 2 the ceiling runs back to back with the operator on the same
cluster (bench/common/runs.py says how it is made and measured); for 1,
training-operator after them, measured the same way. Each of those runs
also records where the control plane's time goes (bench/common/servercosts.py):
kube-apiserver's CPU profile over the run's first --apiserver-profile-seconds,
its metrics and kube-controller-manager's, and what each of the operator's
status writes changed. A run is measured until kube-controller-manager has
given every Service its pod's address, the ceiling's as the operator's: a
window that ended with the last pod Running would leave out the Endpoints
updates a faster run only postpones.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.burst.latency import run_latency
from bench.burst.rest import run_rest
from bench.common.context import add_common_args, open_context
from bench.common.devtools import interrupt_on_termination
from bench.common.harness import tfjob
from bench.common.peers import PEERS, peers_of
from bench.common.runs import compare, run_burst
from bench.reports.burst import write_reports


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.burst",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--jobs", type=int, default=200, help="scenario 1: TFJobs of 4 replicas")
    p.add_argument("--big-workers", type=int, default=500, help="scenario 2: WORKERs of one job")
    p.add_argument("--finished", type=int, default=1000, help="scenario 3: finished jobs")
    p.add_argument("--running", type=int, default=50, help="scenario 3: running jobs")
    p.add_argument("--rest-seconds", type=float, default=60, help="scenario 3: the window")
    p.add_argument("--latency-jobs", type=int, default=100, help="scenario 4: TFJobs")
    p.add_argument(
        "--latency-rate",
        type=float,
        default=5.0,
        help="scenario 4: jobs (and MASTER exits) a second in the paced variant",
    )
    p.add_argument(
        "--scenarios",
        default="burst,wide,rest,latency,profile",
        help="which to run; profile: scenario 1's operator run again under py-spy",
    )
    p.add_argument(
        "--peers",
        default=",".join(PEERS),
        help="scenario 1: the peers to run it with: training-operator's settings (stock,"
        " tuned), Trainer's (trainer-stock, trainer-tuned); '' for none",
    )
    add_common_args(p)
    # The compared runs' first seconds cover a burst of 200 jobs (bench/common/servercosts.py).
    p.set_defaults(apiserver_profile_seconds=15)
    args = p.parse_args(argv)
    args.peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    try:
        peers_of(args.peers)
    except ValueError as e:
        p.error(f"--peers: {e}, comma-separated")
    return args


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    args = parse_args(argv)
    began = time.monotonic()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    results: dict[str, Any] = {}
    peers = peers_of(args.peers if "burst" in scenarios else [])
    kcm = sorted({c for peer in peers for c in peer.kcm_controllers()})
    with open_context(args, kcm_controllers=kcm) as (ctx, meta):
        results["meta"] = meta
        if "burst" in scenarios:
            jobs = [tfjob(f"burst-{i:04d}", 2, 1) for i in range(args.jobs)]
            results["burst"] = compare(ctx, "burst", jobs, peers=args.peers)
        if "profile" in scenarios:
            jobs = [tfjob(f"burst-{i:04d}", 2, 1) for i in range(args.jobs)]
            profiled = run_burst(ctx, "burst", "operator", jobs, profile=True)
            results["profile"] = {
                "py_spy": profiled.get("profile"),
                "total_created_s": profiled["total_created_s"],
                "total_running_s": profiled["total_running_s"],
                "operator": profiled["operator"],
            }
        if "wide" in scenarios:
            results["wide"] = compare(ctx, "wide", [tfjob("wide", args.big_workers, 0)])
        if "rest" in scenarios:
            results["rest"] = run_rest(ctx)
        if "latency" in scenarios:
            results["latency"] = run_latency(ctx)
    results["meta"]["wall_seconds"] = round(time.monotonic() - began, 1)
    table = write_reports(results, args.out)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
