"""The autoscaler's I/O side: watches, a debounced loop, annotation patches.

Watches the nodes and every pod of the cluster that has not terminated
(field selector status.phase!=Succeeded,status.phase!=Failed, so finished
pods of batch jobs never fill the cache). The pod cache keeps only what the
planner needs (autoscaler.cluster.Pod, about 1.3 KB) instead of whole pods
(~50 KB), which is most of the memory the all-pods watch would otherwise
cost; see bench/results/elastic.md for the measurement.

A pass runs shortly after a change (node or pod events, debounced so a burst
costs one pass) and at least every `period` seconds. It reads the elastic
jobs (PaddleJobs and PyTorchJobs, manifests.COUNTS) from the controller's
cache, plans with autoscaler.plan, and writes each change as a merge patch
of the job's count annotations, its kind's (dlk8s.io/trainers and
dlk8s.io/trainers-reason, dlk8s.io/workers and dlk8s.io/workers-reason),
guarded by the job's uid. The reconciler does the rest: creates or deletes
the pods, records the count in the status and emits the event (and for a
PaddleJob patches the live count into every pod). Each pass logs one line
with the cluster's nodes, CPU, memory and GPUs (total, requested, free).

While the plan keeps nodes for a job that has waited too long, the loop
closes the process's config.Admission: pods of the scaled role created
meanwhile wait behind a scheduling gate until a pass admits their job (a
change whose count may equal the old one), so that only the plan decides
who gets the room freed on the kept nodes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

from dlk8s.autoscaler.cluster import ElasticJob, Pod
from dlk8s.autoscaler.manifests import (
    COUNTS,
    job_from_manifest,
    node_from_manifest,
    pod_from_manifest,
)
from dlk8s.autoscaler.plan import DEFAULT_MAX_LOAD, DEFAULT_RESERVE_AFTER, Change, Plan, plan
from dlk8s.job.config import Admission
from dlk8s.job.vocabulary import API_VERSION
from dlk8s.runtime.apiresources import resource_for
from dlk8s.runtime.client import Kube, Selectors
from dlk8s.runtime.clock import seconds_left
from dlk8s.runtime.errors import ApiError
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Informer
from dlk8s.runtime.metrics import AUTOSCALER_CHANGES, AUTOSCALER_PASS_SECONDS
from dlk8s.runtime.ownwrites import OwnWrites

log = logging.getLogger(__name__)

NOT_TERMINATED: Final = "status.phase!=Succeeded,status.phase!=Failed"

# Seconds between passes when no watch event asks for one sooner (also
# `--autoscaler-period`'s default): free room that appears without an event
# of ours (a pod of another workload ends) is noticed within this.
DEFAULT_PERIOD = 5.0


class AutoscalerLoop:
    def __init__(
        self,
        kube: Kube,
        jobs: Callable[[], list[dict[str, Any]]],
        period: float = DEFAULT_PERIOD,
        debounce: float = 0.5,
        max_load: float = DEFAULT_MAX_LOAD,
        reserve_after: float = DEFAULT_RESERVE_AFTER,
        admission: Admission | None = None,
    ) -> None:
        self.kube = kube
        self.jobs = jobs
        self.period = period
        self.debounce = debounce
        self.max_load = max_load
        self.reserve_after = reserve_after
        # Shared with the controller of this process (its config's).
        self.admission = admission or Admission()
        self._nodes = Informer(kube, resource_for("v1", "Node"), transform=node_from_manifest)
        self._pods = Informer(
            kube,
            resource_for("v1", "Pod"),
            selectors=Selectors(field=NOT_TERMINATED),
            transform=pod_from_manifest,
        )
        for informer in (self._nodes, self._pods):
            for event in (ADDED, MODIFIED, DELETED):
                informer.add_event_handler(event, self._changed)
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Jobs as our own patches returned them, until the watch catches up.
        self._written = OwnWrites()
        self._last_outcome: tuple[int, str] | None = None

    def _changed(self, _obj: object) -> None:
        self._dirty.set()

    def start(self) -> None:
        for informer in (self._nodes, self._pods):
            informer.start()
        self._thread = threading.Thread(target=self._run, name="autoscaler", daemon=True)
        self._thread.start()
        log.info(
            "autoscaler started",
            extra={
                "action": f"period {self.period}s, max load {self.max_load:.2f}, "
                f"nodes kept for a job after {self.reserve_after:g}s"
            },
        )

    def stop(self, timeout: float = 5) -> None:
        """Stop the loop and its watches, all within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(seconds_left(deadline))
        for informer in (self._nodes, self._pods):
            informer.stop(seconds_left(deadline))

    def _synced(self) -> bool:
        return all(i.has_synced() for i in (self._nodes, self._pods))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait(self.period)
            if self._stop.is_set():
                return
            # Debounce: let a burst of events settle into one pass.
            self._stop.wait(self.debounce)
            self._dirty.clear()
            if not self._synced():
                continue
            try:
                self.run_once()
            except Exception as err:  # never let one bad pass end the loop
                log.warning("autoscaler pass failed", extra={"error": repr(err)}, exc_info=True)

    # -- one pass -------------------------------------------------------------------

    def current_jobs(self) -> list[dict[str, Any]]:
        listed = self.jobs()
        uids = {(job.get("metadata") or {}).get("uid", "") for job in listed}
        self._written.keep_only(uids)
        self.admission.given &= uids
        return [self._written.current(job) for job in listed]

    def elastic_jobs(self, pods: list[Pod]) -> list[ElasticJob]:
        """The elastic jobs as the planner sees them. A job whose pods wait
        behind our gate is admitted only if this process gave it its count:
        one written by anyone else (or before a restart) is no admission."""
        gated = {pod.owner_uid for pod in pods if pod.gated}
        jobs = [e for e in map(job_from_manifest, self.current_jobs()) if e is not None]
        return [
            replace(e, admitted=False)
            if e.uid in gated and not self.admission.admitted(e.uid)
            else e
            for e in jobs
        ]

    def run_once(self) -> Plan:
        started = time.monotonic()
        pods = self._pods.cache.list()
        elastic = self.elastic_jobs(pods)
        result = plan(
            self._nodes.cache.list(),
            pods,
            elastic,
            self.max_load,
            # Pods' times are the API server's: so is `now` (runtime.serverclock).
            now=self.kube.server_clock.timestamp(),
            reserve_after=self.reserve_after,
        )
        # Closed before the writes: a job admitted now was planned with the
        # kept nodes in mind, and one created after must wait for a pass.
        self.admission.closed = bool(result.kept)
        applied = [change for change in result.changes if self._apply(change)]
        duration = time.monotonic() - started
        AUTOSCALER_PASS_SECONDS.observe(duration)
        action = f"{len(applied)} change(s)" + (
            f", {len(result.unplaceable)} pending group(s) cannot fit" if result.unplaceable else ""
        )
        for job, nodes in result.kept.items():
            action += f"; nodes kept for {job}: {', '.join(nodes) or 'none needed'}"
        # A pass runs on every node or pod change: only one that scaled
        # something or ended differently from the last is worth a line.
        outcome = (len(elastic), action)
        level = logging.INFO if applied or outcome != self._last_outcome else logging.DEBUG
        self._last_outcome = outcome
        log.log(
            level,
            "autoscaler pass",
            extra={
                "cluster": result.cluster.as_log(),
                "changes": [f"{c.key}: {c.old} -> {c.new}" for c in applied],
                "action": action,
                "elasticJobs": len(elastic),
                "duration": round(duration, 4),
            },
        )
        return result

    def _apply(self, change: Change) -> bool:
        namespace, _, name = change.key.partition("/")
        names = COUNTS[change.kind]
        patch = {
            "metadata": {
                "uid": change.uid,
                "annotations": names.annotations(change.new, change.reason),
            }
        }
        # Given before the write: the reconciler's pass that the write sets
        # off must find the job admitted.
        self.admission.given.add(change.uid)
        try:
            updated = self.kube.patch(API_VERSION, change.kind, namespace, name, patch)
        except ApiError as err:
            # Gone or replaced since we looked: the next pass sees the new world.
            log.info("autoscaler patch skipped", extra={"job": change.key, "error": str(err)})
            return False
        self._written.wrote(change.uid, updated)
        AUTOSCALER_CHANGES.labels(_direction(change)).inc()
        log.info(
            f"scaling {names.noun}",
            extra={
                "job": f"{change.kind}/{change.key}",
                "action": f"{change.old} -> {change.new}",
                "target": change.reason,
            },
        )
        return True


def _direction(change: Change) -> str:
    if change.new == change.old:
        return "admitted"
    return "up" if change.new > change.old else "down"
