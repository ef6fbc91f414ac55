"""Scenario 4 of `make bench`: how long a job's status lags behind its pods.

--latency-jobs TFJobs x 4 replicas (MASTER, 2 WORKER, PS), on a fresh
operator; per job, two delays, both between watch events as the benchmark's
watcher process receives them (so the watch's own delivery is in neither):

- Running: from the event that makes the job Running by its own definition
  (status.py: every pod created and the MASTER Running) to the job's
  status.phase Running. The issue's wording, from the last pod of the job
  Running, is reported beside it; it can be negative, as a job is Running
  once its MASTER is, while a WORKER may still be starting.
- Succeeded: once every job is Running, each MASTER is told to exit 0 (the
  kwok exit-code annotation); from the MASTER pod's phase Succeeded to the
  job's status.state Succeeded.

Two variants: "paced" submits the jobs (and later ends the MASTERs)
--latency-rate a second, a cluster that is not saturated, where the goal
(p99 under 1 s) applies; "burst" does both at once, so the delays include
the queue of a saturated apiserver and operator. The operator's status
writes per job show what a lower latency costs.
"""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common.ceiling import EXIT_CODE
from bench.common.harness import (
    Context,
    create_namespace,
    delete_namespace,
    log,
    operator_reconciles,
    operator_requests,
    pct,
    requests_table,
    start_operator,
    submit_all,
    tfjob,
    wait_quiet,
)
from bench.common.measure import delta, proc_cpu
from bench.common.operator import pod_name
from bench.common.watcher import Watcher

POD = "/api/v1/namespaces/{ns}/pods/{name}"
MERGE_PATCH = "application/merge-patch+json"
STATUS_WRITE = "UPDATE tfjobs/status"


def run_latency(ctx: Context) -> dict[str, Any]:
    """Each variant --repeat times (and with --baseline-src, the operator
    before too), in a rotating order; each figure the median of its runs."""
    variants = [("paced", ctx.args.latency_rate), ("burst", 0.0)]
    modes = [("", "")]
    if ctx.args.baseline_src:
        modes.append((" (before)", ctx.args.baseline_src))
    plan = [(v, rate, label, src) for v, rate in variants for label, src in modes]
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(ctx.args.repeat):
        shift = r % len(plan)
        for variant, rate, label, src in plan[shift:] + plan[:shift]:
            runs.setdefault(variant + label, []).append(one_variant(ctx, variant, rate, src))
    return {name: median_run(rs) for name, rs in sorted(runs.items())}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose Succeeded p99 is the median, with every delay's figures
    replaced by their medians over the runs."""
    ordered = sorted(runs, key=lambda r: r["succeeded"]["p99_s"] or 0)
    out = dict(ordered[(len(ordered) - 1) // 2])
    for key in ("running", "running_from_last_pod", "succeeded"):
        out[key] = {
            stat: statistics.median(r[key][stat] for r in runs)
            if all(r[key][stat] is not None for r in runs)
            else None
            for stat in runs[0][key]
        }
    if len(runs) > 1:
        out["repeats"] = [{k: r[k]["p99_s"] for k in ("running", "succeeded")} for r in runs]
    return out


def one_variant(ctx: Context, variant: str, rate: float, src: str = "") -> dict[str, Any]:
    n = ctx.args.latency_jobs
    jobs = [tfjob(f"lat-{i:04d}", 2, 1) for i in range(n)]
    namespace = create_namespace(ctx, f"latency-{variant}")
    before = " (the operator before)" if src else ""
    log(f"latency/{variant}{before}: {n} jobs, {rate or 'all at once'} a second, in {namespace}")
    watcher = Watcher(ctx.endpoint, namespace, ctx.raw / f"watch-{namespace}.json").start()
    op = start_operator(ctx, f"operator-latency-{variant}{'-before' if src else ''}", src)
    wait_quiet(op)
    timeout = ctx.args.timeout
    marks = [(operator_requests(op), operator_reconciles(op), proc_cpu(op.pid))]
    submit_all(ctx, namespace, jobs, rate=rate)
    if not watcher.wait("jobs_running", n, timeout):
        log(f"only {watcher.value('jobs_running')}/{n} jobs Running after {timeout}s")
    wait_quiet(op)
    marks.append((operator_requests(op), operator_reconciles(op), proc_cpu(op.pid)))
    end_masters(ctx, namespace, [j["metadata"]["name"] for j in jobs], rate)
    if not watcher.wait("jobs_succeeded", n, timeout):
        log(f"only {watcher.value('jobs_succeeded')}/{n} jobs Succeeded after {timeout}s")
    wait_quiet(op)
    marks.append((operator_requests(op), operator_reconciles(op), proc_cpu(op.pid)))
    op.stop()
    seen = watcher.stop()["seen"]
    result = {"namespace": namespace, "jobs": n, "rate": rate} | delays(seen)
    result["operator"] = {
        stage: operator_cost(marks[i], marks[i + 1], n)
        for i, stage in enumerate(("start", "finish"))
    }
    result["cleanup_seconds"] = round(delete_namespace(ctx, namespace), 1)
    log(
        f"latency/{variant}: Running p50 {result['running']['p50_s']}s"
        f" p99 {result['running']['p99_s']}s; Succeeded p50 {result['succeeded']['p50_s']}s"
        f" p99 {result['succeeded']['p99_s']}s"
    )
    return result


def end_masters(ctx: Context, namespace: str, jobs: list[str], rate: float) -> None:
    """Tell each job's MASTER to exit 0 (kwok then moves its pod to Succeeded)."""
    body = json.dumps({"metadata": {"annotations": {EXIT_CODE: "0"}}}).encode()

    def one(job: str) -> None:
        path = POD.format(ns=namespace, name=pod_name(job, "MASTER", 0))
        status, data = ctx.api.request("PATCH", path, body, content_type=MERGE_PATCH)
        if status != 200:
            raise RuntimeError(f"PATCH {path}: {status} {data[:300]!r}")

    began = time.monotonic()
    with ThreadPoolExecutor(ctx.args.submit_parallelism, thread_name_prefix="end") as pool:
        futures = []
        for i, job in enumerate(jobs):
            if rate:
                time.sleep(max(0.0, began + i / rate - time.monotonic()))
            futures.append(pool.submit(one, job))
        for future in futures:
            future.result()


def delays(seen: dict[str, Any]) -> dict[str, Any]:
    """Per job: the status's lag behind the pods (see the module docstring)."""
    pods_by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in seen["pods"].values():
        pods_by_job.setdefault(pod["job"], []).append(pod)
    running, literal, succeeded, missing = [], [], [], 0
    for name, job in seen["tfjobs"].items():
        pods = pods_by_job.get(name, [])
        masters = [p for p in pods if p.get("role") == "master"]
        if not masters or "running" not in job or "running" not in masters[0]:
            missing += 1
            continue
        master = masters[0]
        ready = max([master["running"], *(p["added"] for p in pods)])
        running.append(job["running"] - ready)
        last_pod = max(p.get("running", float("inf")) for p in pods)
        literal.append(job["running"] - last_pod)
        if "finished" in master and "succeeded" in job:
            succeeded.append(job["succeeded"] - master["finished"])
    return {
        "running": summary(running),
        "running_from_last_pod": summary(literal),
        "succeeded": summary(succeeded),
        "jobs_not_measured": missing,
        "series": {"running": sorted(running), "succeeded": sorted(succeeded)},
    }


def summary(values: list[float]) -> dict[str, Any]:
    finite = [v for v in values if v == v and abs(v) != float("inf")]
    return {
        "n": len(finite),
        "p50_s": pct(finite, 50),
        "p90_s": pct(finite, 90),
        "p99_s": pct(finite, 99),
        "max_s": round(max(finite), 3) if finite else None,
    }


def operator_cost(
    before: tuple[Any, int, float], after: tuple[Any, int, float], jobs: int
) -> dict[str, Any]:
    """The operator's requests, passes and CPU between two marks."""
    requests = requests_table(delta(after[0], before[0]))
    return {
        "requests": requests,
        "status_writes_per_job": round(requests.get(STATUS_WRITE, 0) / jobs, 2),
        "passes_per_job": round((after[1] - before[1]) / jobs, 2),
        "cpu_seconds": round(after[2] - before[2], 2),
    }
