"""Driving one controller pass by hand: a job submitted to the caches, the
watch catching up with what the fake API holds, one key through process_next."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import REGISTRY

from dlk8s.runtime.controller import Controller, JobKey
from dlk8s.runtime.informer import ADDED, MODIFIED, Cache

from .fakes import RecordingKube
from .worlds import CONFIGMAP, PODS, address, tfjob

KEY = JobKey("TFJob", "ns", "example-job")
# The result labels of dlk8s_reconcile_total: what a pass ends in.
RESULTS = ("success", "requeue_after", "error", "bug", "terminal")
# A replica's Service waits for its pod's address (reconcile.changes).
FIRST_PASS = sorted(
    [("create", "pods", "ns", p) for p in PODS]
    + [("create", "configmaps", "ns", CONFIGMAP), ("update", "tfjobs/status", "ns", "example-job")]
)


def submitted(job_caches: dict[str, Cache], **spec: Any) -> dict[str, Any]:
    """The seed's TFJob, as the job watch delivers it."""
    job = tfjob(**spec)
    job["metadata"]["resourceVersion"] = "1"
    job_caches["TFJob"].put("ns/example-job", job)
    return job


def watch_catches_up(
    controller: Controller, kube: RecordingKube, job_caches: dict[str, Cache]
) -> None:
    """Deliver what the fake API holds to the caches, as the watches would."""
    for (plural, _, name), obj in list(kube.objects.items()):
        if plural in ("pods", "services", "configmaps"):
            controller.on_child(plural, ADDED)(obj)
        elif plural == "tfjobs":
            job_caches["TFJob"].put(f"ns/{name}", obj)


def pod_starts(controller: Controller, kube: RecordingKube, name: str) -> None:
    """The pod `name` runs: the fake API holds it Running and its watch says
    so (a change that moves the job's counts, so its next pass writes)."""
    pod = kube.objects[("pods", "ns", name)]
    pod["status"] = {"phase": "Running", "podIP": address()}
    controller.on_child("pods", MODIFIED)(pod)


def drain(pool: ThreadPoolExecutor) -> None:
    """Wait for the events a pass sent in the background."""
    pool.submit(lambda: None).result()
    pool.shutdown(wait=True)


def count(metric: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(metric, labels) or 0.0


def run_one(controller: Controller) -> list[str]:
    """One pass of KEY through the queue; the results dlk8s_reconcile_total
    counted it under (one, or the count is wrong)."""
    before = [count("dlk8s_reconcile_total", kind="TFJob", result=r) for r in RESULTS]
    controller.queue.add(KEY)
    assert controller.process_next(timeout=1)
    after = [count("dlk8s_reconcile_total", kind="TFJob", result=r) for r in RESULTS]
    return [r for r, b, a in zip(RESULTS, before, after, strict=True) if a != b]


def retried(controller: Controller) -> bool:
    """Whether the key comes back after its (first, 50 ms) back-off."""
    try:
        key = controller.queue.get(timeout=0.5)
    except TimeoutError:
        return False
    controller.queue.done(key)
    return key == KEY
