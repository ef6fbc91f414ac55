"""What every benchmark scenario shares: the jobs, the namespaces, the operator.

``tfjob`` is the benchmarks' TFJob; ``submit_all`` sends jobs (all at once,
or at a steady rate) from a pool of threads; ``start_operator`` starts a
fresh operator process, and ``operator_requests``, ``operator_reconciles``
and ``wait_quiet`` read it (or training-operator, training_operator.py, or
Trainer with JobSet, trainer.py) from its metrics; ``controller_cpu`` and
``controller_peak_rss`` from /proc (Trainer's: its two processes summed).
``Context`` is what a run needs of the cluster (context.py makes it); one
measured run of a burst is runs.py's.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.api import Api, Endpoint
from bench.common.ceiling import EXIT_CODE, RUN_DURATION
from bench.common.devtools import Install, LocalCluster, OperatorProcess
from bench.common.measure import proc_cpu, proc_peak_rss
from bench.common.operator import ControllerConfig
from bench.common.servercosts import Metrics
from bench.common.trainer import Trainer
from bench.common.trainer_manifests import queue_depth_of as trainer_queue_depth
from bench.common.trainer_manifests import reconciles_of as trainer_reconciles
from bench.common.training_operator import (
    TrainingOperator,
    queue_depth_of,
    reconciles_of,
    requests_of,
)

TFJOBS = "/apis/dlk8s.io/v1alpha1/namespaces/{ns}/tfjobs"
IMAGE = "tensorflow/tensorflow:2.15.0"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the jobs -------------------------------------------------------------------------------------


def tfjob(
    name: str,
    workers: int,
    ps: int,
    exit_code: int | None = None,
    master: int = 1,
    run_duration: str = "",
    clean_pod_policy: str = "",
) -> dict[str, Any]:
    """A TFJob; with `exit_code` every pod ends with it (kwok), after
    `run_duration` (a Go duration) Running."""

    def replica(role: str, n: int) -> dict[str, Any]:
        template: dict[str, Any] = {
            "spec": {"containers": [{"name": "tensorflow", "image": IMAGE}]}
        }
        if exit_code is not None:
            annotations = {EXIT_CODE: str(exit_code)}
            if run_duration:
                annotations[RUN_DURATION] = run_duration
            template["metadata"] = {"annotations": annotations}
        return {"tfReplicaType": role, "replicas": n, "template": template}

    specs = [replica("MASTER", master)]
    if workers:
        specs.append(replica("WORKER", workers))
    if ps:
        specs.append(replica("PS", ps))
    spec: dict[str, Any] = {"replicaSpecs": specs}
    if clean_pod_policy:
        spec["runPolicy"] = {"cleanPodPolicy": clean_pod_policy}
    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": spec,
    }


# --- the run of one scenario ----------------------------------------------------------------------


@dataclass
class Submission:
    name: str
    start: float = 0.0
    done: float = 0.0
    uid: str = ""


@dataclass
class Context:
    args: argparse.Namespace
    cluster: LocalCluster
    install: Install
    api: Api
    endpoint: Endpoint
    config: ControllerConfig
    control_plane: dict[str, int]
    server_metrics: Metrics  # what each run cost kube-apiserver and its controllers
    raw: Path
    operator_env: dict[str, str] = field(default_factory=dict)


def create_namespace(ctx: Context, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    ctx.api.json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    # Pods need the namespace's default ServiceAccount, made by the controller-manager.
    path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
    wait_for(lambda: ctx.api.request("GET", path)[0] == 200, 60, f"{name} default SA")
    return name


def delete_namespace(ctx: Context, name: str, timeout: float = 600) -> float:
    began = time.monotonic()
    ctx.api.json("DELETE", f"/api/v1/namespaces/{name}", ok=(404,))
    wait_for(
        lambda: ctx.api.request("GET", f"/api/v1/namespaces/{name}")[0] == 404,
        timeout,
        f"namespace {name} to be gone",
        step=0.5,
    )
    return time.monotonic() - began


def wait_for(pred: Callable[[], bool], timeout: float, what: str, step: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(step)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


_OP_REQUESTS = re.compile(
    r'^dlk8s_api_requests_total\{resource="([^"]*)",verb="([^"]*)"\} ([0-9.e+]+)$', re.M
)


# The operator, training-operator or Trainer with JobSet (whose metrics are
# controller-runtime's: each reads the others' as nothing).
Controller = OperatorProcess | TrainingOperator | Trainer


def _pids(op: Controller) -> list[int]:
    return op.pids if isinstance(op, Trainer) else [op.pid]


def controller_cpu(op: Controller) -> float:
    """CPU seconds of its process (Trainer: of JobSet's and Trainer's, summed)."""
    return sum(proc_cpu(pid) for pid in _pids(op))


def controller_peak_rss(op: Controller) -> int:
    """Peak RSS in bytes of its process (Trainer: both processes' peaks, summed)."""
    return sum(proc_peak_rss(pid) for pid in _pids(op))


def operator_requests(op: Controller) -> Counter[tuple[str, str]]:
    """The operator's own count of its API requests, by (verb, resource)."""
    text = op.metrics()
    counts = requests_of(text)
    for resource, verb, value in _OP_REQUESTS.findall(text):
        counts[(verb, resource)] += int(float(value))
    return counts


def operator_reconciles(op: Controller) -> int:
    """Reconcile passes the operator has run (all kinds)."""
    text = op.metrics()
    found = re.findall(r"^dlk8s_reconcile_duration_seconds_count\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    if isinstance(op, Trainer):
        return trainer_reconciles(text)
    return int(sum(float(v) for v in found)) + reconciles_of(text)


def operator_queue_depth(op: Controller) -> float:
    text = op.metrics()
    if isinstance(op, Trainer):
        return trainer_queue_depth(text)
    found = re.search(r"^dlk8s_workqueue_depth ([0-9.e+]+)$", text, re.M)
    return (float(found.group(1)) if found else 0.0) + queue_depth_of(text)


def start_operator(ctx: Context, name: str, src: str = "") -> OperatorProcess:
    """A fresh operator process; `src`: run the dlk8s package found there instead."""
    env = dict(ctx.operator_env)
    if src:
        env["PYTHONPATH"] = src
    op = OperatorProcess(ctx.install, workdir=ctx.raw, name=name, env=env)
    op.log_path.unlink(missing_ok=True)
    op.start()
    return op


def wait_quiet(op: Controller, quiet: float = 2.0, timeout: float = 120) -> None:
    """Until the operator has sent no request and run no pass for `quiet`
    seconds, and its queue is empty (passes that write nothing count: a
    restarted operator reconciling finished jobs is busy, not quiet)."""
    deadline = time.monotonic() + timeout
    last = operator_activity(op)
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = operator_activity(op)
        if now != last or operator_queue_depth(op) > 0:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    log("operator still busy; measuring anyway")


def operator_activity(op: Controller) -> tuple[int, int]:
    """(requests sent, passes run) so far."""
    return sum(operator_requests(op).values()), operator_reconciles(op)


def submit_all(
    ctx: Context,
    namespace: str,
    jobs: list[dict[str, Any]],
    then: Callable[[Submission], None] | None = None,
    rate: float = 0.0,
    path: str = TFJOBS,
) -> list[Submission]:
    """POST every job (to `path`) from a pool of threads, all at once or
    `rate` a second; `then` runs when a job's create returns."""
    path = path.format(ns=namespace)
    bodies = [(job["metadata"]["name"], json.dumps(job).encode()) for job in jobs]
    subs = [Submission(name) for name, _ in bodies]

    def one(i: int) -> None:
        sub = subs[i]
        sub.start = time.monotonic()
        status, data = ctx.api.request("POST", path, bodies[i][1])
        sub.done = time.monotonic()
        if status != 201:
            raise RuntimeError(f"create {sub.name}: {status} {data[:300]!r}")
        sub.uid = json.loads(data)["metadata"]["uid"]
        if then is not None:
            then(sub)

    futures = []
    began = time.monotonic()
    with ThreadPoolExecutor(ctx.args.submit_parallelism, thread_name_prefix="submit") as pool:
        for i in range(len(subs)):
            if rate:
                time.sleep(max(0.0, began + i / rate - time.monotonic()))
            futures.append(pool.submit(one, i))
        for future in futures:
            future.result()
    return subs


def pct(values: list[float], p: float) -> float | None:
    vals = sorted(v for v in values if v == v)
    if not vals:
        return None
    k = (len(vals) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(vals) - 1)
    return round(vals[lo] + (vals[hi] - vals[lo]) * (k - lo), 3)


def requests_table(counts: Counter[tuple[str, str]]) -> dict[str, int]:
    return {f"{verb} {resource}": n for (verb, resource), n in sorted(counts.items()) if n}
