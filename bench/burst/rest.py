"""Scenario 3 of `make bench`: at rest.

--finished finished and --running running jobs, a fresh operator started on
them, then --rest-seconds of nothing happening (and as long without the
operator, to tell its requests from everyone else's)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from bench.common.devtools import OperatorProcess
from bench.common.harness import (
    Context,
    create_namespace,
    delete_namespace,
    log,
    operator_requests,
    requests_table,
    start_operator,
    submit_all,
    tfjob,
    wait_quiet,
)
from bench.common.measure import apiserver_requests, by_verb, delta, proc_cpu, proc_peak_rss
from bench.common.watcher import Watcher

# What the operator may ask the API server for (and leases, with leader election).
OPERATOR_RESOURCES = {"tfjobs", "mxjobs", "caffe2jobs", "paddlejobs", "pods", "services"}


def operator_resources(ctx: Context) -> set[str]:
    leader = ctx.install.operator_env().get("DLK8S_LEADER_ELECT", "false") == "true"
    return OPERATOR_RESOURCES | ({"leases"} if leader else set())


def run_rest(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    namespace = create_namespace(ctx, "rest")
    log(f"rest: {args.finished} finished + {args.running} running jobs in {namespace}")
    watcher = Watcher(ctx.endpoint, namespace, ctx.raw / f"watch-{namespace}.json").start()
    setup_op = start_operator(ctx, "operator-rest-setup")
    began = time.monotonic()
    finished = [tfjob(f"done-{i:04d}", 0, 0, exit_code=0) for i in range(args.finished)]
    running = [tfjob(f"run-{i:04d}", 2, 1) for i in range(args.running)]
    submit_all(ctx, namespace, finished + running)
    if not watcher.wait("jobs_finished", args.finished, args.timeout, step=0.5):
        log(f"only {watcher.value('jobs_finished')}/{args.finished} jobs finished")
    if not watcher.wait("jobs_running_now", args.running, args.timeout, step=0.5):
        log(f"only {watcher.value('jobs_running_now')}/{args.running} jobs running")
    wait_quiet(setup_op)
    setup_seconds = time.monotonic() - began
    setup_op.stop()
    result: dict[str, Any] = {
        "namespace": namespace,
        "finished_jobs": watcher.value("jobs_finished"),
        "running_jobs": watcher.value("jobs_running_now"),
        "pods": watcher.value("pods_added") - watcher.value("pods_gone"),
        "setup_seconds": round(setup_seconds, 1),
    }
    window = args.rest_seconds

    # The same window with no operator: what everything else asks of the apiserver.
    base0 = apiserver_requests(ctx.api)
    b0 = time.monotonic()
    time.sleep(window)
    baseline = delta(apiserver_requests(ctx.api), base0)
    base_min = 60 / (time.monotonic() - b0)
    # A fresh operator on the settled world: start-up, then at rest.
    op = OperatorProcess(
        ctx.install, workdir=ctx.raw, name="operator-rest", env=dict(ctx.operator_env)
    )
    op.log_path.unlink(missing_ok=True)
    api0 = apiserver_requests(ctx.api)
    op.start(wait_ready=False)
    t0 = time.monotonic()
    op.wait_ready()
    ready = time.monotonic() - t0
    wait_quiet(op)
    startup_requests = operator_requests(op)
    startup_cpu = proc_cpu(op.pid)
    startup_api = delta(apiserver_requests(ctx.api), api0)

    api1 = apiserver_requests(ctx.api)
    cpu1 = proc_cpu(op.pid)
    w0 = time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - w0
    rest_requests = delta(operator_requests(op), startup_requests)
    rest_api = delta(apiserver_requests(ctx.api), api1)
    cpu2 = proc_cpu(op.pid)
    per_min = 60 / elapsed
    extra = delta(
        Counter({k: v * per_min for k, v in rest_api.items()}),
        Counter({k: v * base_min for k, v in baseline.items()}),
    )
    result |= {
        "startup": {
            "ready_seconds": round(ready, 2),
            "cpu_seconds": round(startup_cpu, 2),
            "operator_requests": requests_table(startup_requests),
            "apiserver_requests_by_verb": by_verb(startup_api),
        },
        "window_seconds": round(elapsed, 1),
        "operator_requests_per_minute": {
            k: round(v * per_min, 1) for k, v in requests_table(rest_requests).items()
        },
        "operator_cpu_seconds_per_minute": round((cpu2 - cpu1) * per_min, 3),
        "apiserver_requests_per_minute_by_verb": {
            k: round(v * per_min, 1) for k, v in by_verb(rest_api).items()
        },
        "apiserver_requests_per_minute_without_operator": {
            k: round(v * base_min, 1) for k, v in by_verb(baseline).items()
        },
        # Only what the operator could have asked for: the rest (leases, node
        # status, endpoints) is the other components' timing between windows.
        "apiserver_extra_requests_per_minute_with_operator": {
            f"{verb} {res}": round(v, 1)
            for (verb, res), v in sorted(extra.items())
            if abs(v) >= 0.5 and res.split("/")[0] in operator_resources(ctx)
        },
        "operator": {
            "cpu_seconds": round(cpu2, 2),
            "peak_rss_mb": round(proc_peak_rss(op.pid) / 2**20, 1),
        },
    }
    op.stop()
    watcher.stop()
    result["cleanup_seconds"] = round(delete_namespace(ctx, namespace), 1)
    log(
        f"rest: ready in {ready:.1f}s, {sum(rest_requests.values())} requests "
        f"in {elapsed:.0f}s, CPU {cpu2 - cpu1:.2f}s"
    )
    return result
