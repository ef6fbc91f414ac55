"""Prometheus metrics (runtime.serving serves them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

API_REQUESTS = Counter(
    "dlk8s_api_requests_total",
    "Requests the operator sent to the API server.",
    ["verb", "resource"],
)
API_ERRORS = Counter(
    "dlk8s_api_errors_total",
    "Requests that failed, by HTTP status or 'transport'.",
    ["verb", "resource", "code"],
)
RECONCILE_SECONDS = Histogram(
    "dlk8s_reconcile_duration_seconds",
    "Time to reconcile one job, API calls included.",
    ["kind"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RECONCILE_ERRORS = Counter(
    "dlk8s_reconcile_errors_total", "Reconciles that failed and were retried.", ["kind"]
)
RECONCILES = Counter(
    "dlk8s_reconcile_total",
    "Passes of the work queue by outcome: success, requeue_after (a timer or"
    " expectations pending), error (retried with back-off), bug (an exception"
    " in reconcile, retried with back-off), terminal (not retried).",
    ["kind", "result"],
)
QUEUE_DEPTH = Gauge(
    "dlk8s_workqueue_depth", "Job keys waiting for a worker, exact at every moment."
)
QUEUE_ADDS = Counter("dlk8s_workqueue_adds_total", "Keys added to the work queue.")
QUEUE_RETRIES = Counter(
    "dlk8s_workqueue_retries_total", "Keys queued again with back-off after a failed pass."
)
_QUEUE_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
QUEUE_WAIT = Histogram(
    "dlk8s_workqueue_queue_duration_seconds",
    "How long a key waited in the queue before a worker took it.",
    buckets=_QUEUE_BUCKETS,
)
QUEUE_WORK = Histogram(
    "dlk8s_workqueue_work_duration_seconds",
    "How long a worker held a key (one pass).",
    buckets=_QUEUE_BUCKETS,
)
QUEUE_LONGEST = Gauge(
    "dlk8s_workqueue_longest_running_processor_seconds",
    "How long the longest pass running now has been running.",
)
# The jobs' lifecycle, per kind and namespace, as training-operator exports
# it: counted on the transitions this operator writes, so a restart of the
# operator (which lists every job again) counts nothing twice.
_LIFECYCLE = ["kind", "namespace"]
JOBS_CREATED = Counter("dlk8s_jobs_created_total", "Jobs given their first status.", _LIFECYCLE)
JOBS_SUCCEEDED = Counter("dlk8s_jobs_succeeded_total", "Jobs that succeeded.", _LIFECYCLE)
JOBS_FAILED = Counter("dlk8s_jobs_failed_total", "Jobs that failed.", _LIFECYCLE)
JOBS_RESTARTED = Counter(
    "dlk8s_jobs_restarted_total", "Pods of jobs recreated (restartCount increases).", _LIFECYCLE
)
JOBS_DELETED = Counter("dlk8s_jobs_deleted_total", "Jobs deleted.", _LIFECYCLE)
IS_LEADER = Gauge("dlk8s_leader", "1 while this instance holds the leader lease.")
CLOCK_OFFSET = Gauge(
    "dlk8s_clock_offset_seconds",
    "The API server's clock minus this process's, as estimated from its answers"
    " (0 when under 2 s).",
)


class QueueMetrics:
    """The work queue's observer (workqueue.QueueObserver) in Prometheus terms."""

    def added(self) -> None:
        QUEUE_ADDS.inc()

    def retried(self) -> None:
        QUEUE_RETRIES.inc()

    def depth(self, ready: int) -> None:
        QUEUE_DEPTH.set(ready)

    def started(self, waited: float) -> None:
        QUEUE_WAIT.observe(waited)

    def finished(self, worked: float) -> None:
        QUEUE_WORK.observe(worked)


def count_transition(kind: str, namespace: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    """The lifecycle counters of one status write, from what it changed."""
    if not old.get("runtimeId") and new.get("runtimeId"):
        JOBS_CREATED.labels(kind, namespace).inc()
    finished = {"Succeeded": JOBS_SUCCEEDED, "Failed": JOBS_FAILED}
    if new.get("state") in finished and old.get("state") != new.get("state"):
        finished[new["state"]].labels(kind, namespace).inc()
    before, after = old.get("restartCount"), new.get("restartCount")
    if isinstance(before, int) and isinstance(after, int) and after > before:
        JOBS_RESTARTED.labels(kind, namespace).inc(after - before)
    elif before is None and isinstance(after, int) and after > 0:
        JOBS_RESTARTED.labels(kind, namespace).inc(after)


class JobsByState(Collector):
    """Counted at scrape time from the caches, so it can never drift."""

    def __init__(self, count: Callable[[], dict[tuple[str, str], int]]) -> None:
        self._count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "dlk8s_jobs", "Jobs by kind and state.", labels=["kind", "state"]
        )
        for (kind, state), n in sorted(self._count().items()):
            family.add_metric([kind, state], n)
        yield family


def register_jobs_collector(count: Callable[[], dict[tuple[str, str], int]]) -> None:
    REGISTRY.register(JobsByState(count))


# --- the autoscaler's (dlk8s.autoscaler.loop) ------------------------------------

AUTOSCALER_CHANGES = Counter(
    "dlk8s_autoscaler_changes_total",
    "Changes the autoscaler made to an elastic job's count (a PaddleJob's"
    " trainers, a PyTorchJob's workers), by direction (up, down, or admitted:"
    " a gated job given its count).",
    ["direction"],
)
AUTOSCALER_PASS_SECONDS = Histogram(
    "dlk8s_autoscaler_pass_seconds",
    "Time of one autoscaler pass (planning and patches).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
