"""The operator at scale, on the local control plane (`make bench-scale`).

    make bench-scale                  # the full run (results in bench/results/)
    .tools/venv/bin/python bench/scale.py --checkpoints 100,200 --running 10 \
        --burst-jobs 20 --rate 2 --duration 30 --out /tmp/scale   # a quick one

The shapes users live with, each beside its reference measured in the same
run (harness.py: the cluster, the ceiling, one measured run):

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

import yaml
from harness import (
    Context,
    add_common_args,
    compare,
    create_namespace,
    log,
    open_context,
    operator_reconciles,
    operator_requests,
    requests_table,
    run_burst,
    start_operator,
    submit_all,
    tfjob,
    wait_quiet,
)
from measure import (
    Watcher,
    apiserver_requests,
    by_verb,
    delta,
    proc_cpu,
    proc_peak_rss,
    proc_rss,
)

from dlk8s_dev.localcluster import REPO_ROOT
from dlk8s_dev.localdeploy import OperatorProcess
from dlk8s_dev.stopping import interrupt_on_termination

VALUES = REPO_ROOT / "charts" / "dlk8s" / "values.yaml"
MIB = 2**20


# --- 1. sustained arrival -----------------------------------------------------------------


def run_sustained(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    n = round(args.rate * args.duration)
    jobs = [
        tfjob(f"steady-{i:05d}", 2, 1, exit_code=0, run_duration=args.run_for) for i in range(n)
    ]
    return compare(ctx, "sustained", jobs, repeat=1, median_of="job_created_p99_s", rate=args.rate)


# --- 3. history, restart, memory ----------------------------------------------------------


class History:
    """Finished jobs (and some running) built up in one namespace, step by step."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.namespace = create_namespace(ctx, "history")
        self.watcher = Watcher(
            ctx.endpoint, self.namespace, ctx.raw / f"watch-{self.namespace}.json"
        ).start()
        self.finished = 0
        self.running = 0

    def grow(self, op: OperatorProcess, finished: int, running: int) -> float:
        """Submit jobs until `finished` have finished and `running` run; seconds taken."""
        began = time.monotonic()
        jobs = [tfjob(f"run-{i:04d}", 2, 1) for i in range(self.running, running)]
        jobs += [
            tfjob(f"done-{i:05d}", 2, 1, exit_code=0, clean_pod_policy="None")
            for i in range(self.finished, finished)
        ]
        submit_all(self.ctx, self.namespace, jobs)
        # A job takes ~0.1 s of this cluster's time: the wait scales with the step.
        timeout = self.ctx.args.timeout + 0.5 * len(jobs)
        for counter, target in (("jobs_finished", finished), ("jobs_running_now", running)):
            if not self.watcher.wait(counter, target, timeout, step=0.5):
                log(f"history: only {self.watcher.value(counter)}/{target} {counter}")
        wait_quiet(op, timeout=timeout)
        self.finished, self.running = finished, running
        return time.monotonic() - began

    def pods(self) -> int:
        return self.watcher.value("pods_added") - self.watcher.value("pods_gone")


def restart(
    ctx: Context, history: History, name: str, src: str = ""
) -> tuple[dict[str, Any], OperatorProcess]:
    """A fresh operator on the history (`src`: the dlk8s package found there):
    what its start-up costs, until settled."""
    jobs = history.finished + history.running
    api0 = apiserver_requests(ctx.api)
    modified0 = history.watcher.value("jobs_modified")
    env = dict(ctx.operator_env) | ({"PYTHONPATH": src} if src else {})
    op = OperatorProcess(ctx.install, workdir=ctx.raw, name=name, env=env)
    op.log_path.unlink(missing_ok=True)
    t0 = time.monotonic()
    op.start(wait_ready=False)
    op.wait_ready(timeout=ctx.args.timeout)
    ready = time.monotonic() - t0
    wait_quiet(op, quiet=3, timeout=ctx.args.timeout + jobs * 0.05)
    settled = time.monotonic() - t0 - 3  # the quiet time it waited is not start-up
    requests = operator_requests(op)
    result = {
        "finished_jobs": history.finished,
        "running_jobs": history.running,
        "pods": history.pods(),
        "ready_seconds": round(ready, 2),
        "settled_seconds": round(settled, 2),
        "cpu_seconds": round(proc_cpu(op.pid), 2),
        "passes": operator_reconciles(op),
        "peak_rss_mb": round(proc_peak_rss(op.pid) / MIB, 1),
        "rss_mb": round(proc_rss(op.pid) / MIB, 1),
        "operator_requests": requests_table(requests),
        "writes": sum(
            n for (verb, _), n in requests.items() if verb not in ("GET", "LIST", "WATCH")
        ),
        "job_modified_events": history.watcher.value("jobs_modified") - modified0,
        "apiserver_requests_by_verb": by_verb(delta(apiserver_requests(ctx.api), api0)),
    }
    log(
        f"restart on {jobs} jobs: ready {ready:.1f}s, settled {settled:.1f}s,"
        f" CPU {result['cpu_seconds']}s, peak RSS {result['peak_rss_mb']} MiB,"
        f" writes {result['writes']}, job events {result['job_modified_events']}"
    )
    return result, op


def run_history(ctx: Context) -> dict[str, Any]:
    """Restarts at 0 and at every checkpoint, the history growing in between
    (and with --baseline-src, the operator before restarted there too)."""
    args = ctx.args
    history = History(ctx)
    steps: list[dict[str, Any]] = []
    before: list[dict[str, Any]] = []
    op: OperatorProcess | None = None
    for finished in [0, *args.checkpoints]:
        if op is not None:
            took = history.grow(op, finished, args.running)
            log(f"history: {finished} finished, {history.pods()} pods, built in {took:.0f}s")
            op.stop()
        step, op = restart(ctx, history, f"operator-restart-{finished}")
        steps.append(step)
        if args.baseline_src:
            op.stop()
            step, op = restart(ctx, history, f"operator-before-{finished}", args.baseline_src)
            before.append(step)
            op.stop()
            op = start_operator(ctx, f"operator-builder-{finished}")
    if op is not None:
        op.stop()
    out = {"namespace": history.namespace, "restarts": steps, "memory": memory_fit(steps)}
    if before:
        out |= {"restarts_before": before, "memory_before": memory_fit(before)}
    return out


def memory_fit(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Peak RSS = a + b x jobs, by least squares; what 10,000 jobs would take."""
    xs = [(s["finished_jobs"] + s["running_jobs"]) / 1000 for s in steps]
    ys = [s["peak_rss_mb"] for s in steps]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    base = my - slope * mx
    limit = chart_memory_limit_mb()
    return {
        "base_mb": round(base, 1),
        "mb_per_1000_jobs": round(slope, 1),
        "at_10000_jobs_mb": round(base + 10 * slope, 1),
        "chart_limit_mb": limit,
        "chart_limit_jobs": round((limit - base) / slope * 1000) if slope > 0 and limit else None,
    }


def chart_memory_limit_mb() -> float | None:
    """The chart's default memory limit, in MiB."""
    values = yaml.safe_load(VALUES.read_text())
    text = str(((values.get("resources") or {}).get("limits") or {}).get("memory") or "")
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "M": 1e6 / MIB, "G": 1e9 / MIB}
    for unit, factor in sorted(units.items(), key=lambda u: -len(u[0])):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text) / MIB if text else None


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


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
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
    from report_scale import write_scale_reports

    print(write_scale_reports(results, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
