"""One mode of the Kueue benchmark (kueue, gated, burst), on a fresh
operator in a namespace of its own."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.common.harness import (
    Context,
    Controller,
    controller_cpu,
    controller_peak_rss,
    create_namespace,
    delete_namespace,
    log,
    operator_requests,
    requests_table,
    start_operator,
    submit_all,
    wait_quiet,
)
from bench.common.measure import cpu_of, delta
from bench.common.watcher import Watcher
from bench.kueue.figures import figures
from bench.kueue.queue import KUEUE_API, bench_job, drained_queue, make_queue

MODES = ("kueue", "gated", "burst")  # and bench/kueue/trainer.py's


def submit_gated(
    ctx: Context, namespace: str, jobs: list[dict[str, Any]], watcher: Watcher, in_flight: int
) -> None:
    """`in_flight` jobs at once, then the next as each one succeeds (all at
    once when `in_flight` covers them all)."""
    sent = min(in_flight, len(jobs))
    submit_all(ctx, namespace, jobs[:sent])
    deadline = time.monotonic() + ctx.args.timeout
    while sent < len(jobs) and time.monotonic() < deadline:
        allowed = min(len(jobs), in_flight + watcher.value("jobs_succeeded"))
        if allowed > sent:
            submit_all(ctx, namespace, jobs[sent:allowed])
            sent = allowed
        else:
            time.sleep(0.05)


def wait_drained(watcher: Watcher, jobs: int, timeout: float, stall: float = 120) -> bool:
    """Until every job succeeded; gives up once none has for `stall` seconds
    (a queue that stopped draining is a finding, not a reason to wait on)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        done = watcher.value("jobs_succeeded")
        if done >= jobs:
            return True
        if done != last:
            last, since = done, time.monotonic()
        elif time.monotonic() - since > stall:
            return False
        time.sleep(0.2)
    return False


def run_mode(ctx: Context, mode: str) -> dict[str, Any]:
    args = ctx.args
    namespace = create_namespace(ctx, f"kueue-{mode}")
    queue = make_queue(ctx, namespace) if mode == "kueue" else ""
    jobs = [bench_job(f"tf-{i:04d}", queue, args) for i in range(args.jobs)]
    log(f"{mode}: {len(jobs)} TFJobs in {namespace}" + (f", queue {queue}" if queue else ""))
    raw = ctx.raw / f"watch-{namespace}.json"
    watcher = Watcher(ctx.endpoint, namespace, raw, workloads=mode == "kueue").start()
    op = start_operator(ctx, f"operator-kueue-{mode}")
    in_flight = args.quota_jobs if mode == "gated" else len(jobs)
    submit = partial(submit_gated, ctx, namespace, jobs, watcher, in_flight)
    result = drain(ctx, mode, watcher, op, len(jobs), submit)
    result = {"namespace": namespace, "jobs": len(jobs)} | result
    result["operator"]["log_problems"] = log_problems(op.log_path)
    if queue:
        result["cluster_queue_after"] = drained_queue(ctx, queue)
        save_evidence(ctx, namespace)
    op.stop()
    seen = watcher.stop()["seen"]
    result |= figures(seen, mode, 1 + args.job_workers, args.quota_jobs)
    result["cleanup_seconds"] = round(delete_namespace(ctx, namespace), 1)
    if queue:
        ctx.api.json("DELETE", f"{KUEUE_API}/clusterqueues/{queue}", ok=(404,))
    log(f"{mode}: per job p50 {result['pods_created_p50_s']}s p99 {result['pods_created_p99_s']}s")
    return result


def drain(
    ctx: Context,
    mode: str,
    watcher: Watcher,
    op: Controller,
    expected: int,
    submit: Callable[[], None],
) -> dict[str, Any]:
    """Submit a mode's `expected` jobs (`submit`) and wait until the watcher
    saw them all succeed: how long that took, what the controller (the operator, or a
    peer's processes) and the control plane spent meanwhile. Every mode
    measures the same way."""
    requests0, cpu0, cp0 = operator_requests(op), controller_cpu(op), cpu_of(ctx.control_plane)
    t0 = time.monotonic()
    submit()
    if not wait_drained(watcher, expected, ctx.args.timeout - (time.monotonic() - t0)):
        log(f"{mode}: only {watcher.value('jobs_succeeded')}/{expected} jobs succeeded")
    drained = time.monotonic() - t0
    wait_quiet(op)
    cp1 = cpu_of(ctx.control_plane)
    return {
        "jobs_succeeded": watcher.value("jobs_succeeded"),
        "drain_seconds": round(drained, 1),
        "operator": {
            "cpu_seconds": round(controller_cpu(op) - cpu0, 2),
            "peak_rss_mb": round(controller_peak_rss(op) / 2**20, 1),
            "requests": requests_table(delta(operator_requests(op), requests0)),
        },
        "control_plane_cpu_seconds": {k: round(cp1[k] - cp0[k], 2) for k in cp0},
    }


def save_evidence(ctx: Context, namespace: str) -> None:
    """The Workloads and jobs as they ended, and Kueue's log, into raw/: what
    to read when a check fails (the cluster's folder goes with it)."""
    state = {
        "workloads": ctx.api.json("GET", f"{KUEUE_API}/namespaces/{namespace}/workloads"),
        "tfjobs": ctx.api.json("GET", f"/apis/dlk8s.io/v1alpha1/namespaces/{namespace}/tfjobs"),
    }
    (ctx.raw / f"state-{namespace}.json").write_text(json.dumps(state))
    if ctx.cluster.kueue_process is not None and ctx.cluster.kueue_process.log_file.exists():
        shutil.copy(ctx.cluster.kueue_process.log_file, ctx.raw / f"kueue-{namespace}.log")


def log_problems(path: Path, keep: int = 5) -> dict[str, Any]:
    """The operator's log lines (JSON, logs.JsonFormatter) of warnings and errors."""
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    errors = [line for line in lines if '"level": "error"' in line or "Traceback" in line]
    warnings = [line for line in lines if '"level": "warning"' in line]
    return {
        "errors": len(errors),
        "warnings": len(warnings),
        "first": [line[:300] for line in (errors + warnings)[:keep]],
    }
