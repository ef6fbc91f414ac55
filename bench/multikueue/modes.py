"""One mode of the MultiKueue benchmark: its jobs submitted at once to the
first worker (direct) or to the manager (dispatched), and per job how long
its pods took to be created on the worker that runs them."""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common.api import Api
from bench.common.context import endpoint_of
from bench.common.devtools import MultiCluster
from bench.common.harness import log, pct
from bench.common.watcher import Watcher

PODS_PER_JOB = 2
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
TFJOBS = "/apis/dlk8s.io/v1alpha1/namespaces/{ns}/tfjobs"


def bench_job(name: str, dispatched: bool) -> dict[str, Any]:
    ask = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "tf:1", "resources": ask}]}}
    spec: dict[str, Any] = {
        "replicaSpecs": [
            {"tfReplicaType": role, "replicas": 1, "template": template}
            for role in ("MASTER", "WORKER")
        ]
    }
    if dispatched:
        spec["managedBy"] = MULTIKUEUE
    meta = {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team"}}
    return {"apiVersion": "dlk8s.io/v1alpha1", "kind": "TFJob", "metadata": meta, "spec": spec}


def run_mode(clusters: MultiCluster, mode: str, jobs: int, timeout: float) -> dict[str, Any]:
    namespace = f"mk-{mode}-{uuid.uuid4().hex[:6]}"
    for cluster in clusters.clusters.values():
        cluster.kubectl("create", "namespace", namespace)
        clusters.local_queue(cluster, namespace)
    target = clusters.manager if mode == "dispatched" else clusters.members["worker-1"]
    # The watchers' files live only as long as the run: their figures are returned.
    with tempfile.TemporaryDirectory(prefix=f"bench-multikueue-{mode}-") as scratch:
        raw = Path(scratch)
        watchers = {
            name: Watcher(endpoint_of(cluster), namespace, raw / f"{name}.json").start()
            for name, cluster in clusters.members.items()
        }
        log(f"{mode}: {jobs} TFJobs in {namespace}")
        submitted = submit(Api(endpoint_of(target)), namespace, jobs, mode == "dispatched")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(w.value("pods_added") for w in watchers.values()) >= jobs * PODS_PER_JOB:
                break
            time.sleep(0.2)
        seen = {name: watcher.stop() for name, watcher in watchers.items()}
    result = {"namespace": namespace} | figures(submitted, seen)
    for cluster in clusters.clusters.values():
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    log(f"{mode}: p50 {result['pods_created_p50_s']}s p99 {result['pods_created_p99_s']}s")
    return result


def submit(api: Api, namespace: str, jobs: int, dispatched: bool) -> dict[str, float]:
    """POST every job at once from a pool of threads; when each POST returned."""
    path = TFJOBS.format(ns=namespace)

    def one(i: int) -> tuple[str, float]:
        name = f"tf-{i:04d}"
        status, data = api.request("POST", path, json.dumps(bench_job(name, dispatched)).encode())
        if status != 201:
            raise RuntimeError(f"create {name}: {status} {data[:300]!r}")
        return name, time.monotonic()

    with ThreadPoolExecutor(32) as pool:
        return dict(pool.map(one, range(jobs)))


def figures(submitted: dict[str, float], seen: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per job, from its POST's return to its last pod created, on whichever
    worker; how the jobs spread over the workers; a job with pods on two
    workers is counted (it must be none)."""
    added: dict[str, list[float]] = defaultdict(list)
    where: dict[str, set[str]] = defaultdict(set)
    for worker, data in seen.items():
        for pod in data["seen"]["pods"].values():
            added[pod["job"]].append(pod["added"])
            where[pod["job"]].add(worker)
    delays = {
        name: sorted(added[name])[PODS_PER_JOB - 1] - at
        for name, at in submitted.items()
        if len(added[name]) >= PODS_PER_JOB
    }
    spread: dict[str, int] = defaultdict(int)
    for workers in where.values():
        for worker in workers:
            spread[worker] += 1
    values = list(delays.values())
    return {
        "jobs_measured": len(delays),
        "jobs_incomplete": sorted(set(submitted) - set(delays))[:20],
        "pods_created_p50_s": pct(values, 50),
        "pods_created_p99_s": pct(values, 99),
        "pods_created_max_s": pct(values, 100),
        "jobs_by_worker": dict(sorted(spread.items())),
        "jobs_on_two_workers": sum(1 for workers in where.values() if len(workers) > 1),
    }
