"""The operator at scale, on the local control plane (`make bench-scale`).

    make bench-scale                  # the full run (results in bench/results/)
    .tools/venv/bin/python -m bench.scale --checkpoints 100,200 --running 10 \
        --burst-jobs 20 --rate 2 --duration 30 --out /tmp/scale   # a quick one

The shapes users live with, each beside its reference measured in the same
run (bench/common/runs.py: the cluster, the ceiling, one measured run):

1. sustained: --rate TFJobs x 4 replicas a second for --duration seconds,
   each running --run-for and then ending (exit 0, cleanPodPolicy Running):
   per job, submission → all its pods created, p50/p99, operator against
   the ceiling at the same rate.
2. empty: a burst of --burst-jobs TFJobs x 4 on the empty cluster, operator
   and ceiling (the reference of 4).
3. history, restart, memory: finished TFJobs x 4 replicas, their pods and
   Services kept (exit 0, cleanPodPolicy None), and --running running ones,
   built in steps up to each of --checkpoints. At 0 and at each checkpoint
   the operator is restarted on what is there: seconds until ready (caches
   synced) and until settled (every job reconciled once, nothing left to
   do), its API requests, CPU seconds, peak and resident memory, and the
   writes to jobs (there must be none: every job's status is already
   right). Memory per thousand jobs is the slope of peak RSS over the
   checkpoints.
4. history burst: the burst of 2 again, among the history (a fresh operator
   that has settled on it first), operator and ceiling: the ratio to 2 is
   the figure (goal: at most 1.1).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common.context import add_common_args, open_context
from bench.common.devtools import interrupt_on_termination
from bench.common.harness import Context, tfjob
from bench.common.runs import compare, run_burst
from bench.reports.scale import write_scale_reports
from bench.scale.history import run_history

# --- 1. sustained arrival -------------------------------------------------------------------------


def run_sustained(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    n = round(args.rate * args.duration)
    jobs = [
        tfjob(f"steady-{i:05d}", 2, 1, exit_code=0, run_duration=args.run_for) for i in range(n)
    ]
    return compare(ctx, "sustained", jobs, repeat=1, median_of="job_created_p99_s", rate=args.rate)


# --- 4. the burst among the history, profiled -----------------------------------------------------


def profile_history_burst(
    ctx: Context, burst: list[dict[str, Any]], src: str = ""
) -> dict[str, Any]:
    """The burst among the history once more, its operator (`src`: the one
    found there) under py-spy from the submission on: its start-up on the
    history is not sampled."""
    run = run_burst(
        ctx, "history", "operator", burst, profile=True, src=src, settle=True, endpoints=False
    )
    return {
        "py_spy": run.get("profile"),
        "total_created_s": run["total_created_s"],
        "total_running_s": run["total_running_s"],
        "operator": run["operator"],
    }


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument(
        "--scenarios",
        default="sustained,history",
        help="sustained (1); history: 2, 3 and 4",
    )
    p.add_argument("--rate", type=float, default=5.0, help="1: jobs a second")
    p.add_argument("--duration", type=float, default=300.0, help="1: seconds of arrivals")
    p.add_argument("--run-for", default="60s", help="1: how long each job runs (Go duration)")
    p.add_argument(
        "--checkpoints",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        default=[1000, 2500, 5000],
        help="3: finished jobs at which the operator is restarted and measured",
    )
    p.add_argument("--running", type=int, default=50, help="3: running jobs among them")
    p.add_argument("--burst-jobs", type=int, default=100, help="2, 4: TFJobs x 4 replicas")
    p.add_argument(
        "--profile",
        action="store_true",
        help="4: one more operator run of the burst among the history, under py-spy",
    )
    add_common_args(p)
    # The history burst's ratio is the headline: a median of 3 against noise.
    # The history keeps every pod of its finished jobs: the pod GC's default
    # threshold (12,500 terminated pods) would delete them during the runs.
    p.set_defaults(timeout=600.0, repeat=3, pod_gc_threshold=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_termination()  # SIGTERM and SIGHUP stop the run and its cluster as Ctrl-C does
    args = parse_args(argv)
    began = time.monotonic()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    results: dict[str, Any] = {}
    with open_context(args) as (ctx, meta):
        results["meta"] = meta | {"rate": args.rate, "duration": args.duration}
        results["meta"]["run_for"] = args.run_for
        if "sustained" in scenarios:
            results["sustained"] = run_sustained(ctx)
        if "history" in scenarios:
            burst = [tfjob(f"burst-{i:04d}", 2, 1) for i in range(args.burst_jobs)]
            # Without waiting for Endpoints: among the history,
            # kube-controller-manager is still giving thousands of the
            # history's Services theirs, for many minutes.
            results["empty"] = compare(ctx, "empty", burst, settle=True, endpoints=False)
            results["history"] = run_history(ctx)
            results["history_burst"] = compare(ctx, "history", burst, settle=True, endpoints=False)
            if args.profile:
                results["profile"] = profile_history_burst(ctx, burst)
                if args.baseline_src:
                    before = profile_history_burst(ctx, burst, args.baseline_src)
                    results["profile_before"] = before
    results["meta"]["wall_seconds"] = round(time.monotonic() - began, 1)
    print(write_scale_reports(results, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
