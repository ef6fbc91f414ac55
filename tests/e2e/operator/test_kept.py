"""What the operator's caches keep (job.kept, runtime.informer), against a real
kube-apiserver: lists come in pages that add up to the whole, and a status
write from a job kept without its managedFields leaves the server's intact."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from dlk8s.runtime.apiresources import resource_for
from dlk8s.runtime.client import Kube, Selectors
from dlk8s.runtime.errors import ConflictError
from dlk8s.runtime.informer import ADDED, Informer
from dlk8s.runtime.kept import kept_job
from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.localdeploy import Install

from ..helpers import job_manifest

CONFIGMAPS = resource_for("v1", "ConfigMap")
LABEL = "dlk8s.io/kept-test"


def lists() -> float:
    labels = {"verb": "LIST", "resource": "configmaps"}
    return REGISTRY.get_sample_value("dlk8s_api_requests_total", labels) or 0.0


def test_a_list_in_pages_fills_the_cache_whole(cluster: LocalCluster, namespace: str) -> None:
    kube = Kube(cluster.api_client())
    for i in range(7):
        meta = {"name": f"cm-{i}", "namespace": namespace, "labels": {LABEL: "yes"}}
        kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    informer = Informer(kube, CONFIGMAPS, namespace, Selectors(LABEL), page_size=3)
    added: list[str] = []
    informer.add_event_handler(ADDED, lambda obj: added.append(obj["metadata"]["name"]))
    before = lists()
    informer.start()
    try:
        assert informer.wait_synced(30)
    finally:
        informer.stop()
    assert lists() - before == 3  # 3 + 3 + 1
    assert sorted(added) == [f"cm-{i}" for i in range(7)]
    assert len(informer.cache.list()) == 7


def managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (entry["manager"], entry.get("subresource", ""))
        for entry in obj["metadata"].get("managedFields") or []
    }


def test_a_status_write_without_managed_fields_keeps_the_servers(
    install: Install, namespace: str
) -> None:
    kube = Kube(install.cluster.api_client())
    job = job_manifest("TFJob", "kept", {"MASTER": 1}, "tensorflow")
    job["metadata"]["namespace"] = namespace
    created = kube.create(job)
    assert managers(created)
    current = created
    # The session's operator may write the job's status first: then the
    # write goes again from the job as it now is, as the operator's would.
    for _ in range(5):
        kept = kept_job(current)
        assert "managedFields" not in kept["metadata"]
        status = {"phase": "Creating", "state": "Running"}
        try:
            updated = kube.replace_status({**kept, "status": status})
            break
        except ConflictError:
            current = kube.get(job["apiVersion"], "TFJob", namespace, "kept")
    else:
        raise AssertionError("five status writes in a row met a newer job")
    assert updated["status"]["phase"] == "Creating"
    assert managers(created) < managers(updated)  # the create's, and now the status write's
