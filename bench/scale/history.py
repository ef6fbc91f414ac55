"""Scenario 3 of `make bench-scale`: history, restart, memory.

Finished TFJobs x 4 replicas, their pods and Services kept (exit 0,
cleanPodPolicy None), and --running running ones, built in steps up to each
of --checkpoints. At 0 and at each checkpoint the operator is restarted on
what is there (``restart``); memory per thousand jobs is the slope of peak
RSS over the checkpoints (``memory_fit``)."""

from __future__ import annotations

import time
from typing import Any

import yaml

from bench.common.devtools import REPO_ROOT, OperatorProcess
from bench.common.harness import (
    Context,
    create_namespace,
    log,
    operator_reconciles,
    operator_requests,
    requests_table,
    start_operator,
    submit_all,
    tfjob,
    wait_quiet,
)
from bench.common.measure import (
    apiserver_requests,
    by_verb,
    delta,
    proc_cpu,
    proc_peak_rss,
    proc_rss,
)
from bench.common.watcher import Watcher

VALUES = REPO_ROOT / "charts" / "dlk8s" / "values.yaml"
MIB = 2**20
# What the benchmark's own read of /metrics makes the operator ask the API
# server (who the reader is, and whether it may read them: runtime/access.py);
# creates, but no write to any job.
REVIEWS = ("tokenreviews", "subjectaccessreviews")


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
            n
            for (verb, resource), n in requests.items()
            if verb not in ("GET", "LIST", "WATCH") and resource not in REVIEWS
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
