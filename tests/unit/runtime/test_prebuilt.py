"""The Workload MultiKueue makes for a job's copy on a worker cluster reaches
the job's pass before any job controls it (runtime.queueing.with_prebuilt):
no child index files a Workload without a controller, so the pass reads it
from the Workloads' cache by the name the job's label gives."""

from __future__ import annotations

from typing import Any

from dlk8s.job.jobmodel import Observed
from dlk8s.runtime.informer import Cache
from dlk8s.runtime.queueing import with_prebuilt

LABEL = "kueue.x-k8s.io/prebuilt-workload-name"


def job(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "u1", "labels": labels}}


def workload(name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {}}


def cache_of(*objs: dict[str, Any]) -> Cache:
    cache = Cache()
    for obj in objs:
        cache.put(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}", obj)
    return cache


def names(observed: Observed) -> list[str]:
    return [w["metadata"]["name"] for w in observed.workloads]


def test_the_workload_the_label_names_joins_the_jobs_children() -> None:
    cache = cache_of(workload("mk-1"), workload("mk-1", "other"), workload("mk-2"))
    found = with_prebuilt(job({LABEL: "mk-1"}), Observed(), cache)
    assert found.workloads == [workload("mk-1")]


def test_an_adopted_workload_is_not_read_twice() -> None:
    owned = Observed(workloads=[workload("mk-1")])
    assert names(with_prebuilt(job({LABEL: "mk-1"}), owned, cache_of(workload("mk-1")))) == ["mk-1"]


def test_without_the_label_or_the_workload_nothing_changes() -> None:
    cache = cache_of(workload("mk-1"))
    plain = Observed(workloads=[workload("own")])
    assert with_prebuilt(job({}), plain, cache) is plain
    assert with_prebuilt(job({LABEL: "mk-9"}), plain, cache) is plain
    assert with_prebuilt(job({LABEL: "mk-1"}), plain, None) is plain
