"""What the operator watches of Kueue beside its jobs' Workloads (--kueue),
and the Workloads MultiKueue makes for the jobs it copies here.

The pure queued path (job.reconcile.queued) reads the cluster's Kueue
objects as one job.jobmodel.QueueFacts: the ResourceFlavors an admission names,
the priority classes a Workload's priority comes from, and the namespaces
with a LocalQueue "default". They are few and change rarely, so the facts
are built again only after one of their watches delivered a change.

Kueue may be missing although the operator was told to use it: the
operator then runs, and a job that names a queue waits with a condition
that says so (QueueFacts.problem), rather than the operator failing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from dlk8s.job.jobmodel import Observed, QueueFacts
from dlk8s.job.kueue.multikueue import prebuilt_workload
from dlk8s.job.objects import Obj, as_dict, dig, is_int
from dlk8s.job.vocabulary import DEFAULT_QUEUE, KUEUE_API_VERSION
from dlk8s.runtime.apiresources import resource_for
from dlk8s.runtime.client import Kube
from dlk8s.runtime.errors import NotFoundError
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Cache, Informer

log = logging.getLogger(__name__)

MISSING: Final = (
    f"Kueue's API ({KUEUE_API_VERSION}) is not served by this cluster: install Kueue,"
    " then restart the operator"
)


def _metadata_only(obj: Obj) -> Obj:
    """What the facts read of a LocalQueue or a priority class."""
    meta = as_dict(obj.get("metadata"))
    kept: Obj = {"metadata": {k: meta[k] for k in ("name", "namespace") if k in meta}}
    for key in ("value", "globalDefault"):
        if key in obj:
            kept[key] = obj[key]
    return kept


class KueueWatch:
    """The watches of Kueue's cluster objects, and the facts they give."""

    def __init__(self, kube: Kube, namespace: str | None) -> None:
        def informer(kind: str, transform: bool = True, api: str = KUEUE_API_VERSION) -> Informer:
            scope = namespace if kind == "LocalQueue" else None
            keep = _metadata_only if transform else None
            return Informer(kube, resource_for(api, kind), scope, transform=keep)

        self.flavors = informer("ResourceFlavor", transform=False)
        self.workload_priorities = informer("WorkloadPriorityClass")
        self.pod_priorities = informer("PriorityClass", api="scheduling.k8s.io/v1")
        self.local_queues = informer("LocalQueue")
        self._lock = threading.Lock()  # the informers' threads mark, the workers read
        self._facts: QueueFacts | None = None  # None: rebuilt on the next read
        for each in self.informers:
            for event in (ADDED, MODIFIED, DELETED):
                each.add_event_handler(event, self._changed)

    @property
    def informers(self) -> Sequence[Informer]:
        return (self.flavors, self.workload_priorities, self.pod_priorities, self.local_queues)

    def _changed(self, _: Obj) -> None:
        with self._lock:
            self._facts = None

    def facts(self) -> QueueFacts:
        with self._lock:
            if self._facts is None:
                self._facts = self._build()
            return self._facts

    def _build(self) -> QueueFacts:
        flavors = {dig(f, "metadata", "name"): f for f in self.flavors.cache.list()}
        workload = {
            dig(c, "metadata", "name"): c["value"]
            for c in self.workload_priorities.cache.list()
            if is_int(c.get("value"))
        }
        pods = {
            dig(c, "metadata", "name"): c["value"]
            for c in self.pod_priorities.cache.list()
            if is_int(c.get("value"))
        }
        default = next(
            (
                dig(c, "metadata", "name")
                for c in self.pod_priorities.cache.list()
                if c.get("globalDefault") is True
            ),
            None,
        )
        queues = frozenset(
            dig(q, "metadata", "namespace")
            for q in self.local_queues.cache.list()
            if dig(q, "metadata", "name") == DEFAULT_QUEUE
        )
        return QueueFacts("", flavors, workload, pods, default, queues)


def kueue_served(kube: Kube) -> bool:
    """Whether the API server serves Kueue's API (the operator asks once, at start)."""
    group, version = KUEUE_API_VERSION.split("/")
    try:
        kube.request("GET", f"/apis/{group}/{version}", resource="discovery")
    except NotFoundError:
        log.warning("Kueue is not installed", extra={"error": MISSING})
        return False
    return True


def with_prebuilt(job: Obj, observed: Observed, workloads: Cache | None) -> Observed:
    """The job's children with the Workload MultiKueue made for it, when the
    job is MultiKueue's copy on this (worker) cluster: no job controls that
    Workload until a pass adopts it (job.kueue.multikueue.adoption), so the
    child index does not file it; the pass reads it from the cache."""
    meta = as_dict(job.get("metadata"))
    name = prebuilt_workload(meta)
    if name is None or workloads is None:
        return observed
    if any(dig(w, "metadata", "name") == name for w in observed.workloads):
        return observed
    found = workloads.get_by_key(f"{meta.get('namespace')}/{name}")
    return observed if found is None else replace(observed, workloads=[*observed.workloads, found])
