"""Scenario 3 of `make bench`: at rest.

--finished finished and --running running jobs, a fresh operator started on
them, then --rest-seconds of nothing happening (and as long without the
operator, to tell its requests from everyone else's)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
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


@dataclass(frozen=True)
class StartUp:
    """A fresh operator's start on the settled world."""

    ready: float  # seconds until /readyz
    requests: Counter[tuple[str, str]]  # its own, by then
    cpu: float  # its CPU seconds, by then
    api: Counter[tuple[str, str]]  # the apiserver's requests meanwhile


@dataclass(frozen=True)
class Window:
    """The window at rest: its seconds, the operator's requests and the
    apiserver's in it, the operator's CPU seconds at its start and end."""

    elapsed: float
    requests: Counter[tuple[str, str]]
    api: Counter[tuple[str, str]]
    cpu_before: float
    cpu_after: float


def run_rest(ctx: Context) -> dict[str, Any]:
    """The settled world, the window without the operator, a fresh operator's
    start-up on that world and then the same window with it."""
    namespace, watcher, result = _settled_world(ctx)
    baseline, base_min = _window_without_operator(ctx)
    op, startup = _start_up(ctx)
    window = _window_at_rest(ctx, op, startup)
    result |= _figures(ctx, op, startup, window, baseline, base_min)
    op.stop()
    watcher.stop()
    result["cleanup_seconds"] = round(delete_namespace(ctx, namespace), 1)
    cpu = window.cpu_after - window.cpu_before
    log(
        f"rest: ready in {startup.ready:.1f}s, {sum(window.requests.values())} requests "
        f"in {window.elapsed:.0f}s, CPU {cpu:.2f}s"
    )
    return result


def _settled_world(ctx: Context) -> tuple[str, Watcher, dict[str, Any]]:
    """--finished finished and --running running jobs in a namespace of their
    own, made by an operator that is stopped once they are."""
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
    return namespace, watcher, result


def _window_without_operator(ctx: Context) -> tuple[Counter[tuple[str, str]], float]:
    """The same window with no operator: what everything else asks of the
    apiserver, and the factor that makes its counts per minute."""
    base0 = apiserver_requests(ctx.api)
    b0 = time.monotonic()
    time.sleep(ctx.args.rest_seconds)
    baseline = delta(apiserver_requests(ctx.api), base0)
    base_min = 60 / (time.monotonic() - b0)
    return baseline, base_min


def _start_up(ctx: Context) -> tuple[OperatorProcess, StartUp]:
    """A fresh operator on the settled world, until it is ready and quiet."""
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
    return op, StartUp(ready, startup_requests, startup_cpu, startup_api)


def _window_at_rest(ctx: Context, op: OperatorProcess, startup: StartUp) -> Window:
    """--rest-seconds of nothing happening, the operator running."""
    api1 = apiserver_requests(ctx.api)
    cpu1 = proc_cpu(op.pid)
    w0 = time.monotonic()
    time.sleep(ctx.args.rest_seconds)
    elapsed = time.monotonic() - w0
    rest_requests = delta(operator_requests(op), startup.requests)
    rest_api = delta(apiserver_requests(ctx.api), api1)
    cpu2 = proc_cpu(op.pid)
    return Window(elapsed, rest_requests, rest_api, cpu1, cpu2)


def _figures(
    ctx: Context,
    op: OperatorProcess,
    startup: StartUp,
    window: Window,
    baseline: Counter[tuple[str, str]],
    base_min: float,
) -> dict[str, Any]:
    """Start-up's cost, and the window's requests and CPU per minute, with
    the operator and without."""
    rest_api, cpu1, cpu2 = window.api, window.cpu_before, window.cpu_after
    per_min = 60 / window.elapsed
    extra = delta(
        Counter({k: v * per_min for k, v in rest_api.items()}),
        Counter({k: v * base_min for k, v in baseline.items()}),
    )
    return {
        "startup": {
            "ready_seconds": round(startup.ready, 2),
            "cpu_seconds": round(startup.cpu, 2),
            "operator_requests": requests_table(startup.requests),
            "apiserver_requests_by_verb": by_verb(startup.api),
        },
        "window_seconds": round(window.elapsed, 1),
        "operator_requests_per_minute": {
            k: round(v * per_min, 1) for k, v in requests_table(window.requests).items()
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
