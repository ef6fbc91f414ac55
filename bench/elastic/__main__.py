"""Elastic PyTorchJobs and PaddleJobs with and without the autoscaler, replayed on kwok.

    make bench-elastic                                   # every trace, both modes
    make bench-elastic ELASTIC_ARGS="--trace heavy"      # one trace
    make bench-elastic ELASTIC_ARGS="--replays 1"        # one replay of each trace
    make bench-elastic ELASTIC_ARGS="--paddle-only"      # every job a PaddleJob
    .tools/venv/bin/python -m bench.elastic generate     # rewrite the traces (deterministic)
    .tools/venv/bin/python -m bench.elastic report       # tables and plots from elastic.json

The traces (bench/elastic-trace*.json) list elastic jobs: arrival time,
minInstance / maxInstance trainers, GPUs per trainer, and the work to do in
trainer-seconds. They come from one generator and one seed, so they hold the
same 36 jobs and differ only in when the jobs arrive:

- committed: Poisson arrivals, a mean gap of 60 s (bench/elastic-trace.json);
- heavy: the same arrivals 1.5x as often (a mean gap of 40 s);
- burst: the committed trace with a third of the jobs (the 13th to the
  24th) arriving within one minute; the others keep their times.

The heavy trace is replayed three times in both modes (its targets are the
median of three ratios to static: bench/elastic/traces.py), the others once.

Every other job of a trace (job-01, job-03, ...) is replayed as an elastic
PyTorchJob, the others as PaddleJobs, as bench/elastic/model.py's mixed
replays do: one plan sizes both kinds. A PaddleJob has minInstance /
maxInstance trainers (plus its pserver and master); a PyTorchJob has no
MASTER and one WORKER entry whose elasticPolicy minReplicas / maxReplicas are
the trace's bounds (replicas: the minimum), each WORKER asking what a
trainer asks. --paddle-only replays every job as a PaddleJob.

Each mode of each trace gets a fresh local control plane of 8 kwok nodes
with 8 GPUs each, the chart installed, and the operator running as a local
process with the chart's ServiceAccount:

- autoscaler: the operator as shipped (autoscaler on);
- static: the same operator with --no-autoscaler, so every job keeps its
  minimum: minInstance trainers, minReplicas WORKERs (EDL without its
  controller).

The driver submits each job at its arrival time and plays the trainers and
WORKERs alike: it watches the pods, credits every job with one
trainer-second of work per second for each of its trainers (WORKERs) that is
Running, and once the work is done annotates them with
kwok.dlk8s.io/exit-code=0 so kwok ends them and the operator sees the job
succeed (a PyTorchJob without a MASTER succeeds when every WORKER has). The
driver does not model torchrun's new rendezvous after each change of a
PyTorchJob's count (the model does): a WORKER works from the moment it runs.
Time is compressed (one trace second = --scale wall seconds), the cluster,
the scheduler and the operator are not: their reaction times are real
wall-clock time and so weigh 1/scale times more in trace time than they
would in a real cluster. The one exception is kube-scheduler's back-off
before it retries a pod that did not fit: its longest (10 s by default) is
compressed with the trace, to the 1 s its config allows at the default
scale, for both modes alike; left at 10 s it would leave a pod pending up
to 125 trace seconds after its room appeared.

Measured per job: wait (submission to the first Running trainer or
WORKER) and completion time (submission to the work done); per run: the GPUs
held by Running trainers and WORKERs over time. Utilization is reported over
the whole run and over the window in which the jobs present could use the
whole cluster (the sum of their maximum x GPUs is at least the cluster's
GPUs); the target applies to the latter: when demand is below capacity, idle
GPUs are nobody's fault.

The sampler checks on every tick (every 50 ms of wall time) that no node
has more requested than it has (every pod of the cluster counts), that
every job's count (dlk8s.io/trainers and status.trainers of a PaddleJob,
dlk8s.io/workers and status.workers of a PyTorchJob) stays within its
bounds, that no job has more live trainers (WORKERs) than its maximum, and
that none below its minimum is ever deleted.

It also records why each waiting job waits, tick by tick (see causes.py),
and every count (trainers, WORKERs) the autoscaler writes, with its reason: the
replay's own account of where waiting time goes.

Results: bench/results/elastic.{json,md} and elastic-<trace>.png (--out puts
them elsewhere; bench/elastic/report.py writes them); operator logs and the
unthinned samples under <out>/raw/elastic/ (not committed).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from pathlib import Path

from bench.common.devtools import interrupt_on_termination
from bench.common.paths import RESULTS
from bench.elastic.replay import DEFAULT_RESERVE_AFTER, DEFAULT_SCALE, run
from bench.elastic.report import RESULTS_JSON, write_report
from bench.elastic.traces import TRACES, write_traces


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    parser = argparse.ArgumentParser(
        prog="python -m bench.elastic", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("generate", help="write the traces (or one custom trace with --out)")
    gen.add_argument("--seed", type=int, default=2026)
    gen.add_argument("--jobs", type=int, default=36)
    gen.add_argument("--gap", type=float, default=60.0, help="mean seconds between arrivals")
    gen.add_argument("--burst", type=float, default=0.0, help="share of jobs within one minute")
    gen.add_argument("--out", type=Path, help="a custom trace's file (default: every preset)")
    report = sub.add_parser("report", help="rewrite elastic.md and the plots from elastic.json")
    report.add_argument("--out", type=Path, default=RESULTS, help="the results' folder")
    replay = sub.add_parser("run", help="replay the traces (the default)")
    replay.add_argument("--trace", action="append", choices=list(TRACES), help="repeatable")
    replay.add_argument("--scale", type=float, default=DEFAULT_SCALE, help="wall s per trace s")
    replay.add_argument("--only", choices=["autoscaler", "static"])
    replay.add_argument(
        "--replays",
        type=int,
        help="replays of each trace (default: the trace's own, 3 for heavy, 1 for the others)",
    )
    replay.add_argument("--limit", type=float, default=600, help="wall seconds per replay at most")
    replay.add_argument(
        "--paddle-only",
        action="store_true",
        help="every job a PaddleJob (default: every other job a PyTorchJob)",
    )
    replay.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="the folder of elastic.{json,md}, the plots and raw/ (default: bench/results)",
    )
    replay.add_argument(
        "--reserve-after",
        type=float,
        default=DEFAULT_RESERVE_AFTER,
        help="trace seconds a job that cannot be placed waits before a node is kept"
        " for it (the operator's --autoscaler-reserve-after, scaled)",
    )
    args = parser.parse_args(argv)
    if args.command == "generate":
        return write_traces(args)
    if args.command == "report":
        print(write_report(json.loads((args.out / RESULTS_JSON.name).read_text()), args.out))
        return 0
    if args.command is None:
        args = parser.parse_args(["run", *(argv or sys.argv[1:])])
    return run(args)


if __name__ == "__main__":
    # The driver's watches end with the cluster; their farewells are noise.
    logging.getLogger("kubernetes").setLevel(logging.CRITICAL)
    threading.excepthook = lambda exc: print(f"thread failed: {exc.exc_value!r}", file=sys.stderr)
    raise SystemExit(main())
